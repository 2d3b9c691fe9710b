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
//! **The fixed host beyond the spec.** By default the schedule is the
//! spec's (§3): an estimator with no bound whose samples are the gaps
//! between ACKs. `min_rto` gives it the fixed host's lower bound, either
//! configured or `"infer"`red from the timeouts the base station has
//! seen: the time from the last ACK of new data it forwarded (duplicates
//! do not restart the fixed host's timer) to the retransmission of the
//! first unacknowledged segment, less the wired round trip, is the RTO the
//! fixed host had armed, and the shortest such is the best bound; one
//! sooner than the fixed host's round trip is not a timeout.
//! `samples = "hold"` plans for a fixed host that times the segment each
//! ACK acknowledges, as real senders do: every held ACK acknowledges data
//! sent before the outage, so its sample is how long it was held plus a
//! round trip ([`super::ack_schedule::Samples`]).
//!
//! `fixed_host = "linux"` plans for Linux's form of the RTO, the floor
//! added to the smoothed round trip rather than bounding the sum
//! ([`super::ack_schedule::FixedHost`]).
//!
//! **Duplicates.** With `duplicates = 1` or `2` each held ACK goes out
//! once more or twice more on the schedule (the spec allows the original
//! and two duplicates). A duplicate does not restart a standard fixed
//! host's timer (RFC 6298 §5.3: only an ACK of new data does), and the
//! schedule knows it: only the gaps between ACKs of new data count
//! against the modelled RTO, and the duplicates go out between them.
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
//! min_rto = "1s"              # optional; or "infer"
//! samples = "gaps"            # optional; or "hold"
//! duplicates = 0              # optional; 0, 1 or 2
//! fixed_host = "rfc6298"      # optional; or "linux"
//! ```

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::TcpFlags;
use serde::{Deserialize, Serialize};

use super::ack_schedule::{self, FixedHost, HostModel, PacingProblem, Samples, Search};
use super::{Held, Middlebox, MiddleboxCheck, MiddleboxCx, ScenarioMiddlebox};
use crate::config::{required, ScenarioError};
use crate::link::LinkIndication;
use crate::units::parse_duration;

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
    /// IPv4 address of the mobile whose ACKs it holds through an outage. Required.
    mobile: Option<Ipv4Addr>,
    /// How the number of stretching ACKs is chosen: `"global-minimum"`, `"step-forward"` (the
    /// study's rule) or `"timeout-free"`. Default: `"global-minimum"`.
    search: Option<Search>,
    /// Fraction by which stretching releases come early. Default: 0.1.
    safety: Option<f64>,
    /// The fixed host's lower bound on its RTO as the schedule models it: a duration, or
    /// `"infer"` (from the shortest timeout seen). Default: none (the spec's model).
    min_rto: Option<String>,
    /// What the schedule takes each released ACK to sample: `"gaps"` (the gap before it, the
    /// spec's model) or `"hold"` (the age of the acknowledged segment). Default: `"gaps"`.
    samples: Option<Samples>,
    /// Copies of each held ACK released besides the original, 0 to 2. Default: 0.
    duplicates: Option<u8>,
    /// How the fixed host's RTO follows from its estimator and `min_rto`: `"rfc6298"`
    /// (max(srtt + 4 rttvar, min_rto)) or `"linux"` (srtt + max(4 rttvar, min_rto)). Default:
    /// `"rfc6298"`.
    fixed_host: Option<FixedHost>,
}

/// Where the schedule's bound on the fixed host's RTO comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MinRto {
    /// None: the spec's model.
    None,
    /// A configured value.
    Given(SimDuration),
    /// The shortest RTO seen armed, from the fixed host's timeouts.
    Infer,
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
    /// The fixed host's lower bound on its RTO, as the schedule knows it.
    pub min_rto: MinRto,
    /// What the schedule takes each ACK to sample.
    pub samples: Samples,
    /// Copies of each held ACK released besides the original (0 to 2).
    pub duplicates: u8,
    /// How the fixed host's RTO follows from its estimator and floor.
    pub fixed_host: FixedHost,
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
        let min_rto = match raw.min_rto.as_deref() {
            None => MinRto::None,
            Some("infer") => MinRto::Infer,
            Some(text) => MinRto::Given(parse_duration(text).map_err(|e| {
                ScenarioError::new(
                    cx.at("min_rto"),
                    format!("a duration like \"1s\" or \"infer\": {e}"),
                )
            })?),
        };
        let duplicates = raw.duplicates.unwrap_or(0);
        if duplicates > MAX_DUPLICATES {
            return Err(ScenarioError::new(
                cx.at("duplicates"),
                format!(
                    "must be 0, 1 or 2 (a third would set off a fast retransmit), got {duplicates}"
                ),
            ));
        }
        Ok(AckHoldingSpec {
            mobile,
            search: raw.search.unwrap_or_default(),
            safety,
            min_rto,
            samples: raw.samples.unwrap_or_default(),
            duplicates,
            fixed_host: raw.fixed_host.unwrap_or_default(),
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
    /// The bound on the fixed host's RTO the schedule used, s (none: the
    /// spec's model).
    pub min_rto_s: Option<f64>,
    /// Releases planned (N, times 1 + `duplicates`).
    pub releases: u32,
    /// When the fixed host got its last ACK before the outage (the
    /// schedule's start), ns.
    pub start_ns: u64,
    /// The gap before each release as used (safety applied), s.
    pub gaps_s: Vec<f64>,
    /// The modelled fixed host's RTO after each release, s.
    pub model_rto_s: Vec<f64>,
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
    /// Duplicates of held ACKs sent on the schedule.
    pub duplicates_sent: u64,
    /// The fixed host's smallest RTO inferred from its timeouts, s.
    pub inferred_min_rto_s: Option<f64>,
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
    /// Releases done on the current schedule.
    released: usize,
    /// The last held ACK released (datagram, ack number, window), to send
    /// duplicates of.
    last_released: Option<(Vec<u8>, u32, u16)>,
    /// End of the highest data from the fixed host seen.
    data_end: Option<u32>,
    /// Whether the fixed host's current unacknowledged segment was already
    /// judged a retransmission.
    retransmission_seen: bool,
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
            released: 0,
            last_released: None,
            data_end: None,
            retransmission_seen: false,
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
    seq: u32,
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
            seq: tcp.seq.0,
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
        Self::forwarded_ack(conn, ack, window, now);
        true
    }

    /// Records an ACK as gone to the fixed host. Only an ACK of new data
    /// restarts the fixed host's retransmission timer (RFC 6298 5.3), so
    /// only such an ACK moves `last_ack_out`: a duplicate or a window
    /// update does not.
    fn forwarded_ack(conn: &mut Conn, ack: u32, window: u16, now: SimTime) {
        conn.last_ack_key = match conn.last_ack_key {
            Some((a, w, c)) if a == ack && w == window => Some((a, w, c.saturating_add(1))),
            Some((a, ..)) if a == ack => Some((ack, window, 0)),
            _ => {
                conn.retransmission_seen = false;
                conn.last_ack_out = Some(now);
                Some((ack, window, 0))
            }
        };
    }

    /// Learns from the fixed host's data segment `segment`: the first
    /// retransmission of the segment the last ACK asked for, with fewer
    /// than three duplicates sent (so not a fast retransmit), came when
    /// its timer fired; the time since that ACK went out, less the wired
    /// round trip, is the RTO it had armed.
    fn note_data(conn: &mut Conn, segment: &Segment, now: SimTime, stats: &mut AckHoldingStats) {
        if segment.payload == 0 {
            return;
        }
        let end = segment.seq.wrapping_add(segment.payload as u32);
        let old = conn
            .data_end
            .is_some_and(|e| (segment.seq.wrapping_sub(e) as i32) < 0);
        if !old {
            conn.data_end = Some(end);
            return;
        }
        let (Some((ack, _, copies)), Some(out)) = (conn.last_ack_key, conn.last_ack_out) else {
            return;
        };
        if segment.seq != ack || copies >= 3 || conn.retransmission_seen {
            return;
        }
        let wired = conn.wired.unwrap_or(SimDuration::ZERO);
        let armed = now
            .saturating_since(out)
            .saturating_sub(wired)
            .as_secs_f64();
        // An RTO is the smoothed round trip plus a variance term (RFC 6298
        // 2.3): a retransmission sooner than the round trip after the last
        // ACK is not the RTO the FH arms after an ACK. Linux's timer,
        // counted from its oldest unacknowledged segment while a loss
        // probe is pending, fires that soon after a paced ACK (about 0.1 s
        // in the emulator); it says nothing of the floor.
        let srtt = conn.estimator.as_ref().map_or(0.0, |e| e.mean);
        if armed > srtt {
            conn.retransmission_seen = true;
            let least = stats.inferred_min_rto_s.map_or(armed, |s| s.min(armed));
            stats.inferred_min_rto_s = Some(least);
        }
    }

    /// The bound on the fixed host's RTO the schedule uses, seconds.
    fn min_rto(&self) -> Option<f64> {
        match self.spec.min_rto {
            MinRto::None => None,
            MinRto::Given(d) => Some(d.as_secs_f64()),
            MinRto::Infer => self.stats.inferred_min_rto_s,
        }
    }

    /// Computes each connection's schedule at `gone`.
    fn schedule(&mut self, now: SimTime, expected: SimDuration) {
        let back = now + expected;
        let link_rtt = self.link_rtt.unwrap_or(SimDuration::from_millis(100));
        let min_rto = self.min_rto();
        let copies = 1 + usize::from(self.spec.duplicates);
        for conn in &mut self.conns {
            conn.releases.clear();
            conn.released = 0;
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
            let held_at: Vec<f64> = conn
                .held
                .iter()
                .flat_map(|(held, ..)| {
                    let at = held.since().saturating_since(start).as_secs_f64();
                    std::iter::repeat(at).take(copies)
                })
                .collect();
            let problem = PacingProblem {
                outage: back.saturating_since(start).as_secs_f64(),
                acks: held_at.len() as u32,
                mean: estimate.mean,
                deviation: estimate.deviation,
            };
            let model = HostModel {
                min_rto: min_rto.unwrap_or(0.0),
                fixed_host: self.spec.fixed_host,
                samples: self.spec.samples,
                held_at,
                copies: copies as u32,
            };
            let plans = ack_schedule::plans(&problem, &model);
            let record = ScheduleRecord {
                at_ns: now.as_nanos(),
                acks: conn.held.len() as u32,
                outage_s: problem.outage,
                mean_s: problem.mean,
                deviation_s: problem.deviation,
                n_step_forward: ack_schedule::choose(&plans, Search::StepForward),
                n_global_minimum: ack_schedule::choose(&plans, Search::GlobalMinimum),
                n_timeout_free: ack_schedule::choose(&plans, Search::TimeoutFree),
                min_rto_s: min_rto,
                releases: problem.acks,
                start_ns: start.as_nanos(),
                ..ScheduleRecord::default()
            };
            // With no schedule the model deems on time, the timeout-free
            // search falls back on the global minimum.
            let chosen = ack_schedule::choose(&plans, self.spec.search)
                .or(record.n_global_minimum)
                .and_then(|n| plans.get(n as usize));
            let Some(plan) = chosen else {
                // Only degenerate estimates fail (validated inputs cannot):
                // keep holding; `up` releases everything.
                self.stats.schedules.push(record);
                continue;
            };
            let n = plan.stretched as usize;
            let mut gaps: Vec<f64> = plan.gaps[..n]
                .iter()
                .map(|g| g * (1.0 - self.spec.safety))
                .collect();
            let rest = plan.gaps.len() - n;
            let used: f64 = gaps.iter().sum();
            let theta = if rest > 0 {
                ((problem.outage - used) / rest as f64).max(0.0)
            } else {
                0.0
            };
            gaps.resize(plan.gaps.len(), theta);
            let mut at = start;
            for gap in &gaps {
                at += SimDuration::from_secs_f64(*gap);
                conn.releases.push_back(at.max(now));
            }
            let (model_rto_s, _) = ack_schedule::evaluate(&problem, &model, &gaps);
            self.stats.schedules.push(ScheduleRecord {
                n: plan.n,
                final_rto_s: plan.final_rto(),
                gaps_s: gaps,
                model_rto_s,
                ..record
            });
        }
    }

    /// The next release of `conn`'s schedule: a held ACK, or a duplicate
    /// of the last one when `copies` (1 + duplicates) says so.
    fn release_slot(
        conn: &mut Conn,
        cx: &mut MiddleboxCx<'_>,
        stats: &mut AckHoldingStats,
        copies: usize,
    ) {
        let slot = conn.released;
        conn.released += 1;
        if slot % copies == 0 {
            Self::release_ack(conn, cx, stats, true);
            return;
        }
        let Some((bytes, number, window)) = conn.last_released.clone() else {
            return;
        };
        if !Self::may_send_ack(conn, number, window, cx.now()) {
            return;
        }
        let sent = cx.inject(|buf| {
            buf.extend_from_slice(&bytes);
            Ok::<usize, std::convert::Infallible>(bytes.len())
        });
        if sent.is_ok() {
            stats.duplicates_sent += 1;
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
            conn.last_released = Some((cx.datagram(&ack).to_vec(), number, window));
            if paced {
                stats.acks_paced += 1;
            } else {
                stats.acks_released_at_up += 1;
            }
            cx.release(ack);
        } else {
            stats.duplicates_dropped += 1;
            conn.last_released = None;
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
            let conn = &mut self.conns[i];
            if segment.from_mobile {
                // The mobile's own duplicates are never held back in
                // normal operation; they count towards what the fixed host
                // has seen.
                Self::forwarded_ack(conn, segment.ack, segment.window, now);
            } else {
                Self::note_data(conn, &segment, now, &mut self.stats);
            }
            return Some(packet);
        }
        let conn = &mut self.conns[i];
        if !segment.from_mobile {
            Self::note_data(conn, &segment, now, &mut self.stats);
        }
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
        let copies = 1 + usize::from(self.spec.duplicates);
        for conn in &mut self.conns {
            while conn.releases.front().is_some_and(|&at| at <= now) {
                conn.releases.pop_front();
                Self::release_slot(conn, cx, &mut self.stats, copies);
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

#[cfg(test)]
mod tests {
    use super::*;

    const FIXED: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 0, 0, 1), 5000);

    fn data(seq: u32) -> Segment {
        Segment {
            from_mobile: false,
            fixed: FIXED,
            mobile_port: 5001,
            payload: 1000,
            seq,
            pure_ack: false,
            ack: 0,
            window: 0,
            syn_wscale: None,
            stamps: None,
        }
    }

    fn at(ms: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_millis(ms)
    }

    #[test]
    fn the_floor_is_timed_from_the_last_new_ack_and_skips_early_retransmissions() {
        let mut conn = Conn::new(FIXED, 5001);
        conn.estimator = Some(Estimator::first(0.145));
        conn.wired = Some(SimDuration::from_millis(80));
        let mut stats = AckHoldingStats::default();
        for seq in [1000, 2000, 3000, 4000] {
            AckHolding::note_data(&mut conn, &data(seq), at(0), &mut stats);
        }
        AckHolding::forwarded_ack(&mut conn, 2000, 100, at(100));
        // A retransmission 0.1 s after the ACK reached the fixed host
        // (Linux's loss detection): sooner than its round trip.
        AckHolding::note_data(&mut conn, &data(2000), at(100 + 180), &mut stats);
        assert_eq!(stats.inferred_min_rto_s, None);
        // A duplicate does not restart the fixed host's timer...
        AckHolding::forwarded_ack(&mut conn, 2000, 100, at(600));
        // ...which fires 0.6 s after the ACK of new data.
        AckHolding::note_data(&mut conn, &data(2000), at(100 + 680), &mut stats);
        let inferred = stats.inferred_min_rto_s.expect("a timeout");
        assert!((inferred - 0.6).abs() < 1e-9, "{inferred}");
    }
}
