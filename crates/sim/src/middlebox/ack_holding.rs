//! `kind = "ack-holding"`: a base station that keeps a fixed host from
//! timing out while its mobile is out of reach (docs/spec/ack-holding.md).
//!
//! Per TCP connection between a fixed host and the `mobile`:
//!
//! * in normal operation it passes everything on and estimates the fixed
//!   host's round trip from TCP timestamps (below);
//! * from the link layer's `going_down` it holds the mobile's ACKs and
//!   caches data for the mobile, up to the largest window the held ACKs
//!   advertise;
//! * at `gone` it computes the release schedule of the held ACKs over the
//!   predicted outage ([`super::ack_schedule`]) and releases them on it;
//! * at `up` it sends the ACKs still held and delivers the cache.
//!
//! It never lets the fixed host see a third duplicate of an ACK (three
//! would trigger a fast retransmit): a held ACK that would be one is
//! dropped instead.
//!
//! **The fixed host's round trip from timestamps.** The base station sees
//! both halves of every round trip: data from the fixed host carries its
//! clock (TSval) and the mobile's ACK echoes it (TSecr), so the time from
//! the first data segment with a TSval to the first ACK echoing it is the
//! wireless half; the mobile's ACK carries the mobile's clock and the fixed
//! host's next data segment echoes it, so the time from forwarding the
//! first ACK with a TSval to the first data segment echoing it is the wired
//! half. Their sum is one sample of what the fixed host measures; the
//! samples feed Jacobson's estimator (gains 1/8 and 1/4, as the spec's
//! model of the fixed host). Without samples (no timestamps, or an outage
//! before the first round trip) the link's round trip from `going_down`
//! stands in, with half of it as deviation, as RFC 6298 starts.
//!
//! **Safety margin.** The first `n` ACKs of the schedule are each released
//! when the fixed host's timer would fire by the model; the fixed host's
//! real timer is only estimated, so they go `safety` (a fraction) earlier,
//! and the constant-gap part is stretched to end at the predicted return.
//!
//! ```toml
//! [[middlebox]]
//! kind = "ack-holding"
//! host = "base-station"
//! mobile = "10.0.1.2"
//! search = "global-minimum"   # optional; or "step-forward" (the study's),
//!                             # or "timeout-free"
//! safety = 0.1                # optional
//! ```

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::TcpFlags;
use serde::{Deserialize, Serialize};

use super::ack_schedule::{self, PacingProblem, Search};
use super::{Held, Middlebox, MiddleboxCheck, MiddleboxCx, ScenarioMiddlebox};
use crate::config::{required, ScenarioError};
use crate::link::LinkIndication;

/// Default `safety`: releases come 10 % before the modelled timeout, more
/// than the error of an estimate from a few dozen samples of a steady path.
pub const DEFAULT_SAFETY: f64 = 0.1;

/// Most timestamps remembered per direction and connection; older ones can
/// no longer be echoed by anything in flight.
const TIMESTAMP_MEMORY: usize = 1024;

/// Duplicates of one ACK the fixed host may see: a third would trigger
/// its fast retransmit.
const MAX_DUPLICATES: u8 = 2;

/// The `[[middlebox]]` fields of an ACK-holding base station.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAckHolding {
    mobile: Option<Ipv4Addr>,
    search: Option<Search>,
    safety: Option<f64>,
}

/// A validated ACK-holding base station.
#[derive(Clone, Debug, PartialEq)]
pub struct AckHoldingSpec {
    /// The mobile's address: its ACKs are held, data for it cached.
    pub mobile: Ipv4Addr,
    /// How the number of stretching ACKs is chosen.
    pub search: Search,
    /// Fraction by which stretching releases come early.
    pub safety: f64,
}

impl ScenarioMiddlebox for AckHoldingSpec {
    const KIND: &'static str = "ack-holding";
    type Raw = RawAckHolding;
    type Model = AckHolding;

    fn validate(raw: RawAckHolding, cx: &mut MiddleboxCheck<'_>) -> Result<Self, ScenarioError> {
        let mobile = required(&raw.mobile, cx.at("mobile"), &cx.what)?;
        let safety = raw.safety.unwrap_or(DEFAULT_SAFETY);
        if !(0.0..0.5).contains(&safety) {
            return Err(ScenarioError::new(
                cx.at("safety"),
                format!("must be at least 0 and below 0.5, got {safety}"),
            ));
        }
        Ok(AckHoldingSpec {
            mobile,
            search: raw.search.unwrap_or_default(),
            safety,
        })
    }

    fn build(&self) -> AckHolding {
        AckHolding {
            spec: self.clone(),
            phase: Phase::Normal,
            conns: Vec::new(),
            link_rtt: None,
            stats: AckHoldingStats::default(),
        }
    }
}

/// One outage's schedule, as reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScheduleRecord {
    /// When the outage began (`gone`), ns.
    pub at_ns: u64,
    /// ACKs held (N).
    pub acks: u32,
    /// Time from the fixed host's last ACK to the predicted return (T), s.
    pub outage_s: f64,
    /// Estimated mean and deviation of the fixed host's round trip, s.
    pub mean_s: f64,
    /// See `mean_s`.
    pub deviation_s: f64,
    /// Stretching ACKs the study's step-forward search chooses.
    pub n_step_forward: Option<u32>,
    /// Stretching ACKs the global minimum chooses.
    pub n_global_minimum: Option<u32>,
    /// Stretching ACKs of the lowest final RTO among the schedules that
    /// keep the fixed host from timing out by the model (none: no such
    /// schedule).
    pub n_timeout_free: Option<u32>,
    /// The one used (per `search`).
    pub n: u32,
    /// The modelled fixed-host RTO when the mobile returns, s.
    pub final_rto_s: f64,
}

/// Counters of an [`AckHolding`] base station.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AckHoldingStats {
    /// ACKs from the mobile held.
    pub acks_held: u64,
    /// Held ACKs released on the schedule.
    pub acks_paced: u64,
    /// Held ACKs released when the link came back.
    pub acks_released_at_up: u64,
    /// Held ACKs dropped because the fixed host would have seen a third
    /// duplicate.
    pub duplicates_dropped: u64,
    /// Data segments for the mobile cached during outages.
    pub segments_cached: u64,
    /// Data segments that did not fit in the cache (dropped).
    pub cache_overflows: u64,
    /// Round-trip samples of the fixed host taken.
    pub rtt_samples: u64,
    /// Outages that found no ACK to hold.
    pub outages_without_acks: u64,
    /// Every outage's schedule.
    pub schedules: Vec<ScheduleRecord>,
}

/// Where the base station is in an outage.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Normal,
    /// Warned: holding, expecting an outage of this length.
    Holding {
        expected: SimDuration,
    },
    /// The link is out; the held ACKs go out on their schedules.
    Gone,
}

/// Jacobson's estimator as the spec models the fixed host.
#[derive(Clone, Copy, Debug)]
struct Estimator {
    mean: f64,
    deviation: f64,
}

impl Estimator {
    fn first(sample: f64) -> Self {
        Estimator {
            mean: sample,
            deviation: sample / 2.0,
        }
    }

    fn update(&mut self, sample: f64) {
        let delta = sample - self.mean;
        self.mean += delta / 8.0;
        self.deviation += (delta.abs() - self.deviation) / 4.0;
    }
}

/// A connection between a fixed host and the mobile.
#[derive(Debug)]
struct Conn {
    /// Fixed host's address and port, mobile's port.
    fixed: (Ipv4Addr, u16),
    mobile_port: u16,
    /// Fixed host's TSvals and when each was first seen.
    data_stamps: VecDeque<(u32, SimTime)>,
    /// Mobile's TSvals and when each was first forwarded.
    ack_stamps: VecDeque<(u32, SimTime)>,
    /// Last wired half sampled.
    wired: Option<SimDuration>,
    estimator: Option<Estimator>,
    /// TSecr values already sampled, per direction, so only the first
    /// echo of each counts.
    last_echo: (Option<u32>, Option<u32>),
    /// Window scale the mobile announced in its SYN, if seen.
    mobile_wscale: u8,
    /// When an ACK last went to the fixed host.
    last_ack_out: Option<SimTime>,
    /// The last ACK the fixed host was sent: (ack number, window, copies).
    last_ack_key: Option<(u32, u16, u8)>,
    /// Held ACKs with their ack number and window, read when each was
    /// held.
    held: VecDeque<(Held, u32, u16)>,
    /// Largest window (bytes) among the held ACKs.
    reserve: u64,
    cache: VecDeque<Held>,
    cached_bytes: u64,
    /// Release times of the held ACKs, in order.
    releases: VecDeque<SimTime>,
}

impl Conn {
    fn new(fixed: (Ipv4Addr, u16), mobile_port: u16) -> Self {
        Conn {
            fixed,
            mobile_port,
            data_stamps: VecDeque::new(),
            ack_stamps: VecDeque::new(),
            wired: None,
            estimator: None,
            last_echo: (None, None),
            mobile_wscale: 0,
            last_ack_out: None,
            last_ack_key: None,
            held: VecDeque::new(),
            reserve: 0,
            cache: VecDeque::new(),
            cached_bytes: 0,
            releases: VecDeque::new(),
        }
    }
}

/// Remembers `stamp` as first seen at `now` unless it is the newest
/// already.
fn remember(stamps: &mut VecDeque<(u32, SimTime)>, stamp: u32, now: SimTime) {
    if stamps.back().is_some_and(|&(s, _)| s == stamp) {
        return;
    }
    if stamps.len() == TIMESTAMP_MEMORY {
        stamps.pop_front();
    }
    stamps.push_back((stamp, now));
}

/// When `stamp` was first seen; forgets it and everything older.
fn first_seen(stamps: &mut VecDeque<(u32, SimTime)>, stamp: u32) -> Option<SimTime> {
    let index = stamps.iter().position(|&(s, _)| s == stamp)?;
    let at = stamps[index].1;
    stamps.drain(..=index);
    Some(at)
}

/// What the base station learnt of a TCP segment.
struct Segment {
    from_mobile: bool,
    fixed: (Ipv4Addr, u16),
    mobile_port: u16,
    payload: usize,
    pure_ack: bool,
    ack: u32,
    window: u16,
    syn_wscale: Option<u8>,
    stamps: Option<(u32, u32)>,
}

/// The ACK-holding base station.
#[derive(Debug)]
pub struct AckHolding {
    spec: AckHoldingSpec,
    phase: Phase,
    conns: Vec<Conn>,
    /// The link round trip `going_down` reported.
    link_rtt: Option<SimDuration>,
    stats: AckHoldingStats,
}

impl AckHolding {
    fn classify(&self, datagram: &[u8]) -> Option<Segment> {
        let parsed = packet::parse(datagram).ok()?;
        let Transport::Tcp(tcp) = &parsed.transport else {
            return None;
        };
        let from_mobile = parsed.ip.src == self.spec.mobile;
        if !from_mobile && parsed.ip.dst != self.spec.mobile {
            return None;
        }
        let (fixed, mobile_port) = if from_mobile {
            ((parsed.ip.dst, tcp.dst_port), tcp.src_port)
        } else {
            ((parsed.ip.src, tcp.src_port), tcp.dst_port)
        };
        Some(Segment {
            from_mobile,
            fixed,
            mobile_port,
            payload: tcp.payload.len(),
            pure_ack: tcp.payload.is_empty()
                && tcp.flags.contains(TcpFlags::ACK)
                && ![TcpFlags::SYN, TcpFlags::FIN, TcpFlags::RST]
                    .iter()
                    .any(|&f| tcp.flags.contains(f)),
            ack: tcp.ack.0,
            window: tcp.window,
            syn_wscale: tcp
                .flags
                .contains(TcpFlags::SYN)
                .then_some(tcp.options.window_scale.unwrap_or(0)),
            stamps: tcp.options.timestamps.map(|t| (t.tsval, t.tsecr)),
        })
    }

    fn conn_index(&mut self, segment: &Segment) -> usize {
        if let Some(i) = self
            .conns
            .iter()
            .position(|c| c.fixed == segment.fixed && c.mobile_port == segment.mobile_port)
        {
            return i;
        }
        self.conns
            .push(Conn::new(segment.fixed, segment.mobile_port));
        self.conns.len() - 1
    }

    /// Learns from a segment that is passed on now.
    fn observe(&mut self, i: usize, segment: &Segment, now: SimTime) {
        let conn = &mut self.conns[i];
        let Some((tsval, tsecr)) = segment.stamps else {
            return;
        };
        if segment.from_mobile {
            remember(&mut conn.ack_stamps, tsval, now);
            if conn.last_echo.0 == Some(tsecr) {
                return;
            }
            conn.last_echo.0 = Some(tsecr);
            let (Some(sent), Some(wired)) = (first_seen(&mut conn.data_stamps, tsecr), conn.wired)
            else {
                return;
            };
            let sample = (now.saturating_since(sent) + wired).as_secs_f64();
            match &mut conn.estimator {
                Some(e) => e.update(sample),
                None => conn.estimator = Some(Estimator::first(sample)),
            }
            self.stats.rtt_samples += 1;
        } else {
            if segment.payload > 0 {
                remember(&mut conn.data_stamps, tsval, now);
            }
            if conn.last_echo.1 == Some(tsecr) {
                return;
            }
            conn.last_echo.1 = Some(tsecr);
            if let Some(forwarded) = first_seen(&mut conn.ack_stamps, tsecr) {
                conn.wired = Some(now.saturating_since(forwarded));
            }
        }
    }

    /// Whether an ACK may go to the fixed host (it would not be a third
    /// duplicate); records it as sent if so.
    fn may_send_ack(conn: &mut Conn, ack: u32, window: u16, now: SimTime) -> bool {
        let copies = match conn.last_ack_key {
            Some((a, w, c)) if a == ack && w == window => c + 1,
            _ => 0,
        };
        if copies > MAX_DUPLICATES {
            return false;
        }
        conn.last_ack_key = Some((ack, window, copies));
        conn.last_ack_out = Some(now);
        true
    }

    /// Computes each connection's schedule at `gone`.
    fn schedule(&mut self, now: SimTime, expected: SimDuration) {
        let back = now + expected;
        let link_rtt = self.link_rtt.unwrap_or(SimDuration::from_millis(100));
        for conn in &mut self.conns {
            if conn.held.is_empty() {
                if conn.last_ack_out.is_some() {
                    self.stats.outages_without_acks += 1;
                }
                continue;
            }
            let start = conn.last_ack_out.unwrap_or(now);
            let estimate = conn
                .estimator
                .unwrap_or(Estimator::first(link_rtt.as_secs_f64()));
            let problem = PacingProblem {
                outage: back.saturating_since(start).as_secs_f64(),
                acks: conn.held.len() as u32,
                mean: estimate.mean,
                deviation: estimate.deviation,
            };
            let record = ScheduleRecord {
                at_ns: now.as_nanos(),
                acks: problem.acks,
                outage_s: problem.outage,
                mean_s: problem.mean,
                deviation_s: problem.deviation,
                n_step_forward: ack_schedule::step_forward(&problem),
                n_global_minimum: ack_schedule::global_minimum(&problem),
                n_timeout_free: ack_schedule::timeout_free_minimum(&problem),
                ..ScheduleRecord::default()
            };
            // With no schedule the model deems on time, the timeout-free
            // search falls back on the global minimum.
            let plan = ack_schedule::schedule(&problem, self.spec.search)
                .or_else(|_| ack_schedule::schedule(&problem, Search::GlobalMinimum));
            let Ok(plan) = plan else {
                // Only degenerate estimates fail (validated inputs cannot):
                // keep holding; `up` releases everything.
                self.stats.schedules.push(record);
                continue;
            };
            let n = plan.n as usize;
            let stretched: Vec<f64> = plan.gaps[..n]
                .iter()
                .map(|g| g * (1.0 - self.spec.safety))
                .collect();
            let rest = plan.gaps.len() - n;
            let used: f64 = stretched.iter().sum();
            let theta = if rest > 0 {
                ((problem.outage - used) / rest as f64).max(0.0)
            } else {
                0.0
            };
            let mut at = start;
            conn.releases.clear();
            for gap in stretched
                .into_iter()
                .chain(std::iter::repeat(theta).take(rest))
            {
                at += SimDuration::from_secs_f64(gap);
                conn.releases.push_back(at.max(now));
            }
            self.stats.schedules.push(ScheduleRecord {
                n: plan.n,
                final_rto_s: plan.rto_after.last().copied().unwrap_or(0.0),
                ..record
            });
        }
    }

    /// Releases an ACK held by `conn` unless it would be a third duplicate.
    fn release_ack(
        conn: &mut Conn,
        cx: &mut MiddleboxCx<'_>,
        stats: &mut AckHoldingStats,
        paced: bool,
    ) {
        let Some((ack, number, window)) = conn.held.pop_front() else {
            return;
        };
        if Self::may_send_ack(conn, number, window, cx.now()) {
            if paced {
                stats.acks_paced += 1;
            } else {
                stats.acks_released_at_up += 1;
            }
            cx.release(ack);
        } else {
            stats.duplicates_dropped += 1;
            cx.drop(ack);
        }
    }
}

impl Middlebox for AckHolding {
    type Stats = AckHoldingStats;

    fn on_packet(&mut self, cx: &mut MiddleboxCx<'_>, packet: Held) -> Option<Held> {
        let Some(segment) = self.classify(cx.datagram(&packet)) else {
            return Some(packet);
        };
        let now = cx.now();
        let i = self.conn_index(&segment);
        if let (true, Some(scale)) = (segment.from_mobile, segment.syn_wscale) {
            self.conns[i].mobile_wscale = scale.min(14);
        }
        if self.phase == Phase::Normal {
            self.observe(i, &segment, now);
            if segment.from_mobile {
                // The mobile's own duplicates are never held back in
                // normal operation; they count towards what the fixed host
                // has seen.
                let conn = &mut self.conns[i];
                conn.last_ack_out = Some(now);
                conn.last_ack_key = match conn.last_ack_key {
                    Some((a, w, c)) if a == segment.ack && w == segment.window => {
                        Some((a, w, c.saturating_add(1)))
                    }
                    _ => Some((segment.ack, segment.window, 0)),
                };
            }
            return Some(packet);
        }
        let conn = &mut self.conns[i];
        if segment.from_mobile {
            if !segment.pure_ack {
                return Some(packet);
            }
            let window = u64::from(segment.window) << conn.mobile_wscale;
            conn.reserve = conn.reserve.max(window);
            conn.held.push_back((packet, segment.ack, segment.window));
            self.stats.acks_held += 1;
            return None;
        }
        let len = cx.datagram(&packet).len() as u64;
        if segment.payload > 0 && conn.cached_bytes + segment.payload as u64 > conn.reserve.max(len)
        {
            self.stats.cache_overflows += 1;
            cx.drop(packet);
            return None;
        }
        conn.cached_bytes += segment.payload as u64;
        conn.cache.push_back(packet);
        self.stats.segments_cached += 1;
        None
    }

    fn on_link_indication(
        &mut self,
        cx: &mut MiddleboxCx<'_>,
        _iface: u32,
        indication: LinkIndication,
    ) {
        match (indication, self.phase) {
            (
                LinkIndication::GoingDown {
                    rtt,
                    expected_outage,
                },
                Phase::Normal,
            ) => {
                self.link_rtt = Some(rtt);
                self.phase = Phase::Holding {
                    expected: expected_outage,
                };
                // Data may arrive before the first ACK is held: the window
                // the fixed host last saw bounds what it can send.
                for conn in &mut self.conns {
                    let window = conn.last_ack_key.map_or(0, |(_, w, _)| w);
                    conn.reserve = u64::from(window) << conn.mobile_wscale;
                }
            }
            (LinkIndication::Gone, Phase::Holding { expected }) => {
                self.phase = Phase::Gone;
                self.schedule(cx.now(), expected);
                self.handle_timeout(cx);
            }
            (LinkIndication::Up, Phase::Holding { .. } | Phase::Gone) => {
                self.phase = Phase::Normal;
                for conn in &mut self.conns {
                    conn.releases.clear();
                    while !conn.held.is_empty() {
                        Self::release_ack(conn, cx, &mut self.stats, false);
                    }
                    for data in conn.cache.drain(..) {
                        cx.release(data);
                    }
                    conn.cached_bytes = 0;
                    conn.reserve = 0;
                }
            }
            _ => {}
        }
    }

    fn handle_timeout(&mut self, cx: &mut MiddleboxCx<'_>) {
        let now = cx.now();
        for conn in &mut self.conns {
            while conn.releases.front().is_some_and(|&at| at <= now) {
                conn.releases.pop_front();
                Self::release_ack(conn, cx, &mut self.stats, true);
            }
        }
    }

    fn poll_timeout(&self) -> Option<SimTime> {
        self.conns
            .iter()
            .filter_map(|c| c.releases.front().copied())
            .min()
    }

    fn stats(&self) -> AckHoldingStats {
        self.stats.clone()
    }
}
