//! `kind = "snoop"`: a TCP-aware base station that hides the losses of a
//! wireless hop from a fixed sender by retransmitting locally, from a cache
//! of the segments it forwarded to the mobile (the Snoop protocol of
//! Balakrishnan, Seshan, Amir and Katz, 1995).
//!
//! ```toml
//! [[middlebox]]
//! kind = "snoop"
//! host = "base-station"
//! mobile = "10.0.1.2"            # data to it is cached, ACKs from it snooped
//! cache_segments = 256           # optional: segments cached, all connections
//! cache_bytes = 393216           # optional: bytes (whole datagrams) cached
//! min_local_rto = "50ms"         # optional: floor of the local timer
//! max_local_rto = "1s"           # optional: its ceiling
//! max_local_retransmissions = 4  # optional: per segment, and timer expiries
//!                                # in a row before the cache is given up
//! ```
//!
//! Per TCP connection carrying data to the mobile, it:
//!
//! * caches a copy of every data segment (payload or FIN) it forwards to the
//!   mobile until the mobile acknowledges it; a segment that does not fit in
//!   the cache passes uncached (`cache_overflows`);
//! * on an ACK from the mobile for new data frees the cache up to it and
//!   takes a sample of the wireless round trip (from forwarding the segment
//!   to its acknowledgment), except when the ACK covers a retransmitted
//!   segment (Karn's rule);
//! * on a duplicate ACK (RFC 5681 §2) for a segment it holds, retransmits
//!   that segment at once and drops the duplicate, and the further ones the
//!   segments in flight behind it will cause, so the sender neither
//!   retransmits nor halves its window. A duplicate caused by a segment sent
//!   after the local retransmission (named by the first SACK block, or
//!   counted without SACK) means that one was lost too, and repeats it.
//!   Duplicates for a segment it does not hold (lost before the base
//!   station), or that the sender itself has resent, pass on, and the
//!   sender recovers end to end;
//! * on a new ACK that stops at a segment sent before one now acknowledged
//!   (a partial ACK after a local retransmission), resends that segment at
//!   once rather than wait for duplicates;
//! * retransmits the oldest unacknowledged segment when no ACK progress was
//!   seen for one local timeout: `srtt + 4·rttvar` of the wireless hop
//!   (RFC 6298's formula) clamped to `[min_local_rto, max_local_rto]`, and
//!   doubled per expiry in a row, up to `max_local_rto`. Before the first
//!   sample (the SYN's round trip is one) it is `max_local_rto`.
//!
//! A segment retransmitted locally `max_local_retransmissions` times is left
//! to the sender (its duplicates pass on), and after that many timer
//! expiries in a row plus one the connection's cache is emptied: the mobile
//! is unreachable for now, and holding its data would starve other
//! connections of cache.
//!
//! Limits: the wireless hop must deliver in order (a
//! point-to-point link does), since a segment still missing after a later
//! one arrived is taken as lost; losses in the base station's own queue look
//! like wireless ones, so they are repaired too and the sender does not see
//! that congestion (keep the queue larger than the receiver's window). The
//! paper's priority for local retransmissions has no counterpart here: they
//! join the link's queue like any packet.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::Ipv4Addr;

use rtolab_time::units::format_duration;
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv4;
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::{SackBlock, SeqNumber, TcpFlags};
use serde::{Deserialize, Serialize};

use super::{Held, Middlebox, MiddleboxCheck, MiddleboxCx, ScenarioMiddlebox};
use crate::config::{required, Duration, ScenarioError};

/// The `[[middlebox]]` fields of a snoop middlebox.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSnoop {
    /// IPv4 address of the mobile: data to it is cached, its ACKs snooped. Required.
    mobile: Option<Ipv4Addr>,
    /// Segments cached, all connections together. Unit: segments. Default: 256.
    cache_segments: Option<u64>,
    /// Bytes (whole datagrams) cached. Unit: bytes. Default: 393216.
    cache_bytes: Option<u64>,
    /// Floor of the local retransmission timer, above 0. Default: `"50ms"`.
    min_local_rto: Option<Duration>,
    /// Ceiling of the local timer, at least `min_local_rto`. Default: `"1s"`.
    max_local_rto: Option<Duration>,
    /// Local resends of one segment, and timer expiries in a row, before the cache gives it up;
    /// at least 1. Default: 4.
    max_local_retransmissions: Option<u32>,
}

/// A validated snoop middlebox.
#[derive(Clone, Debug, PartialEq)]
pub struct SnoopSpec {
    /// The mobile's address: data to it is cached, ACKs from it snooped.
    pub mobile: Ipv4Addr,
    /// Segments the cache holds at most, over all connections.
    pub cache_segments: usize,
    /// Bytes (whole datagrams) the cache holds at most.
    pub cache_bytes: usize,
    /// Floor of the local retransmission timeout; positive.
    pub min_local_rto: SimDuration,
    /// Ceiling of the local retransmission timeout, also its value before
    /// the first RTT sample; at least `min_local_rto`.
    pub max_local_rto: SimDuration,
    /// Local retransmissions of one segment, and timer expiries in a row,
    /// before the sender is left to recover; at least 1.
    pub max_local_retransmissions: u32,
}

impl Default for SnoopSpec {
    /// The mobile is unspecified; the rest are the scenario defaults.
    fn default() -> Self {
        SnoopSpec {
            mobile: Ipv4Addr::UNSPECIFIED,
            // A 256 KiB window of 1500-byte datagrams fits in either bound.
            cache_segments: 256,
            cache_bytes: 393_216,
            // Above the 40 ms delayed-ACK timer of a Linux-like mobile, so
            // a lone segment waiting for its ACK is not resent; well below
            // the 200 ms minimum RTO of a Linux-like sender, so the local
            // timer fires first.
            min_local_rto: SimDuration::from_millis(50),
            max_local_rto: SimDuration::from_secs(1),
            max_local_retransmissions: 4,
        }
    }
}

impl ScenarioMiddlebox for SnoopSpec {
    const KIND: &'static str = "snoop";
    type Raw = RawSnoop;
    type Model = Snoop;

    fn validate(raw: RawSnoop, cx: &mut MiddleboxCheck<'_>) -> Result<Self, ScenarioError> {
        let defaults = SnoopSpec::default();
        if cx.topology.is_bridge(cx.host) {
            return Err(ScenarioError::new(
                cx.at("host"),
                format!(
                    "{:?} is a bridge; snoop needs a host that routes its retransmissions",
                    cx.host
                ),
            ));
        }
        let mobile = required(&raw.mobile, cx.at("mobile"), &cx.what)?;
        cx.topology.address_exists(&cx.at("mobile"), mobile)?;
        if cx.topology.owner(mobile).is_some_and(|(h, _)| h == cx.host) {
            return Err(ScenarioError::new(
                cx.at("mobile"),
                format!("{mobile} is an address of {:?} itself", cx.host),
            ));
        }
        let positive = |value: Option<u64>, field: &str, default: usize| match value {
            None => Ok(default),
            Some(0) => Err(ScenarioError::new(cx.at(field), "must be at least 1")),
            Some(n) => usize::try_from(n)
                .map_err(|_| ScenarioError::new(cx.at(field), format!("{n} is too large"))),
        };
        let cache_segments = positive(
            raw.cache_segments,
            "cache_segments",
            defaults.cache_segments,
        )?;
        let cache_bytes = positive(raw.cache_bytes, "cache_bytes", defaults.cache_bytes)?;
        let min_local_rto = raw.min_local_rto.map_or(defaults.min_local_rto, |d| d.0);
        if min_local_rto.is_zero() {
            return Err(ScenarioError::new(
                cx.at("min_local_rto"),
                "must be positive",
            ));
        }
        let max_local_rto = match raw.max_local_rto {
            Some(d) => d.0,
            // A floor above the default ceiling raises the ceiling.
            None => defaults.max_local_rto.max(min_local_rto),
        };
        if max_local_rto < min_local_rto {
            return Err(ScenarioError::new(
                cx.at("max_local_rto"),
                format!(
                    "must be at least min_local_rto ({}), got {}",
                    format_duration(min_local_rto),
                    format_duration(max_local_rto)
                ),
            ));
        }
        let max_local_retransmissions = raw
            .max_local_retransmissions
            .unwrap_or(defaults.max_local_retransmissions);
        if max_local_retransmissions == 0 {
            return Err(ScenarioError::new(
                cx.at("max_local_retransmissions"),
                "must be at least 1",
            ));
        }
        Ok(SnoopSpec {
            mobile,
            cache_segments,
            cache_bytes,
            min_local_rto,
            max_local_rto,
            max_local_retransmissions,
        })
    }

    fn build(&self) -> Snoop {
        Snoop::new(self.clone())
    }
}

/// Counters of a [`Snoop`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SnoopStats {
    /// Connections to the mobile it tracked.
    pub connections: u64,
    /// Data segments it put in the cache.
    pub segments_cached: u64,
    /// Data segments that passed uncached because the cache was full.
    pub cache_overflows: u64,
    /// Most segments the cache held at once.
    pub peak_cached_segments: u64,
    /// Data segments the sender resent that crossed the base station.
    pub sender_retransmissions: u64,
    /// Segments it retransmitted itself (after a duplicate ACK or a
    /// timeout).
    pub local_retransmissions: u64,
    /// Expiries of the local timer that retransmitted a segment.
    pub local_timeouts: u64,
    /// Duplicate ACKs from the mobile it dropped.
    pub dupacks_suppressed: u64,
    /// Duplicate ACKs from the mobile it passed on to the sender.
    pub dupacks_passed: u64,
    /// Connections whose cache it emptied after the mobile stopped
    /// acknowledging.
    pub cache_flushes: u64,
    /// Samples of the wireless round trip.
    pub rtt_samples: u64,
    /// Smoothed wireless round trip of the connection sampled last, ns.
    pub srtt_ns: Option<u64>,
}

/// A TCP connection through the base station: the fixed end's address and
/// port, and the mobile's port.
type Key = (Ipv4Addr, u16, u16);

/// A segment in the cache.
#[derive(Debug)]
struct Cached {
    seq: SeqNumber,
    /// Sequence number after it.
    end: SeqNumber,
    /// The datagram as the node forwards it (TTL already decremented).
    bytes: Vec<u8>,
    /// When it was last sent towards the mobile.
    sent_at: SimTime,
    /// Position of that sending among the connection's.
    index: u64,
    /// Position of the sending that arrived, if it is acknowledged: the
    /// latest one sent once the earlier ones were known to be lost, else
    /// the first (a timeout does not prove a loss).
    known: u64,
    /// Local retransmissions of it.
    local_retx: u32,
    /// Whether the sender resent it.
    sender_retx: bool,
}

/// What the middlebox knows of one connection.
#[derive(Debug, Default)]
struct Conn {
    /// Sorted by `seq` (wrap-safe).
    cache: VecDeque<Cached>,
    /// The mobile's highest cumulative ACK.
    last_ack: Option<SeqNumber>,
    /// Window field of the mobile's latest ACK.
    window: u16,
    /// End of the highest data sent towards the mobile.
    high: Option<SeqNumber>,
    /// Data segments sent towards the mobile, retransmissions included.
    sent: u64,
    /// Duplicate ACKs still to come from segments already in flight.
    expected_dupacks: u64,
    /// The ACK that acknowledges the sender's SYN.
    syn_ack: Option<SeqNumber>,
    /// When that SYN went, for the first RTT sample; `None` once it was
    /// resent (Karn) or sampled.
    syn_sent: Option<SimTime>,
    /// Sequence number after the sender's FIN.
    fin_end: Option<SeqNumber>,
    srtt: Option<SimDuration>,
    rttvar: SimDuration,
    /// Timer expiries since the last ACK progress.
    expiries: u32,
    deadline: Option<SimTime>,
}

impl Conn {
    /// Index of the cached segment holding the next byte the mobile
    /// expects (the first segment before any ACK was seen).
    fn head(&self) -> Option<usize> {
        match self.last_ack {
            None => (!self.cache.is_empty()).then_some(0),
            Some(ack) => self
                .cache
                .iter()
                .take_while(|e| e.seq <= ack)
                .position(|e| ack < e.end),
        }
    }

    /// RFC 6298 §2 with the usual gains (1/8, 1/4).
    fn sample(&mut self, rtt: SimDuration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = SimDuration::from_nanos(rtt.as_nanos() / 2);
            }
            Some(srtt) => {
                let delta = srtt.as_nanos().abs_diff(rtt.as_nanos());
                self.rttvar = SimDuration::from_nanos((3 * self.rttvar.as_nanos() + delta) / 4);
                self.srtt = Some(SimDuration::from_nanos(
                    (7 * srtt.as_nanos() + rtt.as_nanos()) / 8,
                ));
            }
        }
    }

    /// The local timeout: positive whatever the samples, so the timer
    /// always re-arms in the future.
    fn rto(&self, spec: &SnoopSpec) -> SimDuration {
        let base = self
            .srtt
            .map_or(spec.max_local_rto, |s| s + self.rttvar * 4)
            .max(spec.min_local_rto)
            .min(spec.max_local_rto);
        let factor = 1u64.checked_shl(self.expiries).unwrap_or(u64::MAX);
        // The floor also holds for a spec built in code, unvalidated.
        base.saturating_mul(factor)
            .min(spec.max_local_rto)
            .max(SimDuration::from_micros(1))
    }
}

/// Cache occupancy over all connections.
#[derive(Debug, Default)]
struct Occupancy {
    segments: usize,
    bytes: usize,
}

impl Occupancy {
    fn free(&mut self, e: &Cached) {
        self.segments -= 1;
        self.bytes -= e.bytes.len();
    }
}

/// The fields of a TCP segment the middlebox reads.
#[derive(Clone, Copy, Debug)]
struct Segment {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    src_port: u16,
    dst_port: u16,
    seq: SeqNumber,
    ack: SeqNumber,
    flags: TcpFlags,
    window: u16,
    payload_len: usize,
    /// The first SACK block: it holds the segment that arrived last
    /// (RFC 2018 §4), or a duplicate (RFC 2883).
    sack: Option<SackBlock>,
}

impl Segment {
    fn read(datagram: &[u8]) -> Option<Segment> {
        // Corrupted or non-TCP datagrams pass untouched.
        let parsed = packet::parse(datagram).ok()?;
        let Transport::Tcp(tcp) = parsed.transport else {
            return None;
        };
        Some(Segment {
            src: parsed.ip.src,
            dst: parsed.ip.dst,
            ttl: parsed.ip.ttl,
            src_port: tcp.src_port,
            dst_port: tcp.dst_port,
            seq: tcp.seq,
            ack: tcp.ack,
            flags: tcp.flags,
            window: tcp.window,
            payload_len: tcp.payload.len(),
            sack: tcp.options.sack_blocks[0],
        })
    }

    fn has(&self, flag: TcpFlags) -> bool {
        self.flags.contains(flag)
    }

    /// Sequence space after the SYN: payload and FIN.
    fn data_len(&self) -> usize {
        self.payload_len + usize::from(self.has(TcpFlags::FIN))
    }
}

/// The snoop middlebox.
#[derive(Debug)]
pub struct Snoop {
    spec: SnoopSpec,
    /// Ordered, so timers due together fire in the same order every run.
    conns: BTreeMap<Key, Conn>,
    occupancy: Occupancy,
    stats: SnoopStats,
}

impl Snoop {
    /// A snoop middlebox with an empty cache.
    pub fn new(spec: SnoopSpec) -> Self {
        Snoop {
            spec,
            conns: BTreeMap::new(),
            occupancy: Occupancy::default(),
            stats: SnoopStats::default(),
        }
    }

    fn forget(&mut self, key: &Key) {
        if let Some(conn) = self.conns.remove(key) {
            for e in &conn.cache {
                self.occupancy.free(e);
            }
        }
    }

    /// A segment from the fixed side to the mobile; it always passes.
    fn on_data(&mut self, now: SimTime, seg: &Segment, datagram: &[u8]) {
        let key = (seg.src, seg.src_port, seg.dst_port);
        if seg.has(TcpFlags::RST) {
            self.forget(&key);
            return;
        }
        if seg.has(TcpFlags::SYN) {
            let syn_ack = seg.seq + 1u32;
            if let Some(conn) = self.conns.get_mut(&key) {
                if conn.syn_ack == Some(syn_ack) {
                    // The same SYN again: whichever copy the ACK answers,
                    // it is no sample (Karn).
                    conn.syn_sent = None;
                    return;
                }
            }
            // A new connection, possibly reusing the ports of an old one.
            self.forget(&key);
            self.stats.connections += 1;
            let conn = self.conns.entry(key).or_default();
            conn.syn_ack = Some(syn_ack);
            conn.syn_sent = Some(now);
            return;
        }
        let len = seg.data_len();
        if len == 0 {
            return;
        }
        let conn = self.conns.entry(key).or_insert_with(|| {
            // Picked up in the middle (the SYN went before the run or by
            // another path).
            self.stats.connections += 1;
            Conn::default()
        });
        let end = seg.seq + len;
        if seg.has(TcpFlags::FIN) {
            conn.fin_end = Some(end);
        }
        if conn.last_ack.is_some_and(|ack| end <= ack) {
            // The mobile has it all: it will answer with a duplicate ACK
            // that reports no loss.
            self.stats.sender_retransmissions += 1;
            conn.expected_dupacks += 1;
            return;
        }
        let index = conn.sent;
        conn.sent += 1;
        let resent = conn.high.is_some_and(|h| seg.seq < h);
        if resent {
            self.stats.sender_retransmissions += 1;
        }
        conn.high = Some(conn.high.map_or(end, |h| h.max(end)));
        // The cache is sorted by `seq`: a copy of this segment, if cached,
        // is among those starting where it would be inserted.
        let at = conn.cache.partition_point(|e| e.seq < seg.seq);
        if let Some(e) = conn
            .cache
            .range_mut(at..)
            .take_while(|e| e.seq == seg.seq)
            .find(|e| e.end == end)
        {
            e.sent_at = now;
            e.index = index;
            e.sender_retx = true;
            return;
        }
        if seg.ttl <= 1 {
            // The node drops it rather than forwarding it.
            return;
        }
        if self.occupancy.segments >= self.spec.cache_segments
            || self.occupancy.bytes + datagram.len() > self.spec.cache_bytes
        {
            self.stats.cache_overflows += 1;
            return;
        }
        let mut bytes = datagram.to_vec();
        let mut view = ipv4::Packet::new_unchecked(&mut bytes[..]);
        view.set_ttl(seg.ttl - 1);
        view.fill_checksum();
        self.occupancy.segments += 1;
        self.occupancy.bytes += bytes.len();
        self.stats.segments_cached += 1;
        self.stats.peak_cached_segments = self
            .stats
            .peak_cached_segments
            .max(self.occupancy.segments as u64);
        conn.cache.insert(
            at,
            Cached {
                seq: seg.seq,
                end,
                bytes,
                sent_at: now,
                index,
                known: index,
                local_retx: 0,
                sender_retx: resent,
            },
        );
        if conn.deadline.is_none() {
            conn.deadline = Some(now + conn.rto(&self.spec));
        }
    }

    /// A segment from the mobile to the fixed side; returns whether it
    /// passes.
    fn on_ack(&mut self, cx: &mut MiddleboxCx<'_>, seg: &Segment) -> bool {
        let key = (seg.dst, seg.dst_port, seg.src_port);
        let now = cx.now();
        let Some(conn) = self.conns.get_mut(&key) else {
            return true;
        };
        if seg.has(TcpFlags::RST) {
            self.forget(&key);
            return true;
        }
        if !seg.has(TcpFlags::ACK) {
            return true;
        }
        let ack = seg.ack;
        match conn.last_ack {
            Some(last) if ack == last => return self.on_same_ack(cx, key, seg),
            // Older than one already seen: reordered on the way.
            Some(last) if ack < last => return true,
            _ => {}
        }
        conn.last_ack = Some(ack);
        conn.window = seg.window;
        conn.expected_dupacks = 0;
        conn.expiries = 0;
        if let Some(sent) = conn.syn_sent.take() {
            if conn.syn_ack == Some(ack) {
                conn.sample(now.saturating_since(sent));
                self.stats.rtt_samples += 1;
            }
        }
        // The newest segment acknowledged, if none of them was resent.
        let mut newest: Option<(SeqNumber, SimTime)> = None;
        let mut clean = true;
        // The latest sending among them: it arrived.
        let mut arrived: Option<u64> = None;
        let occupancy = &mut self.occupancy;
        conn.cache.retain(|e| {
            if e.end > ack {
                return true;
            }
            clean &= e.local_retx == 0 && !e.sender_retx;
            arrived = arrived.max(Some(e.known));
            if newest.map_or(true, |(end, _)| e.end > end) {
                newest = Some((e.end, e.sent_at));
            }
            occupancy.free(e);
            false
        });
        if let (true, Some((_, sent))) = (clean, newest) {
            conn.sample(now.saturating_since(sent));
            self.stats.rtt_samples += 1;
        }
        if conn.srtt.is_some() {
            self.stats.srtt_ns = conn.srtt.map(SimDuration::as_nanos);
        }
        if conn.fin_end.is_some_and(|fin| fin <= ack) {
            self.forget(&key);
            return true;
        }
        conn.deadline = (!conn.cache.is_empty()).then(|| now + conn.rto(&self.spec));
        // The link delivers in order, so a segment sent before one that
        // arrived, and still missing, is lost: resend it now rather than
        // wait for duplicates the sender's window may never allow (the
        // partial acknowledgment of RFC 6582, by sending order).
        if let (Some(arrived), Some(i)) = (arrived, conn.head()) {
            let e = &conn.cache[i];
            if e.index < arrived
                && !e.sender_retx
                && e.local_retx < self.spec.max_local_retransmissions
            {
                conn.expected_dupacks = conn.sent.saturating_sub(arrived + 1);
                retransmit(cx, conn, i, true, &mut self.stats);
                conn.deadline = Some(now + conn.rto(&self.spec));
            }
        }
        true
    }

    /// An ACK that acknowledges nothing new: a duplicate, or a window
    /// update or data from the mobile.
    fn on_same_ack(&mut self, cx: &mut MiddleboxCx<'_>, key: Key, seg: &Segment) -> bool {
        let now = cx.now();
        let Some(conn) = self.conns.get_mut(&key) else {
            return true;
        };
        let window_changed = seg.window != conn.window;
        conn.window = seg.window;
        // RFC 5681 §2, as the sender will judge it.
        let duplicate = seg.payload_len == 0
            && !seg.has(TcpFlags::SYN)
            && !seg.has(TcpFlags::FIN)
            && !window_changed
            && conn.high.is_some_and(|h| h > seg.ack);
        if !duplicate {
            return true;
        }
        let Some(i) = conn.head() else {
            // Lost before it reached us: the sender must resend it.
            self.stats.dupacks_passed += 1;
            return true;
        };
        let e = &conn.cache[i];
        if e.sender_retx || e.local_retx >= self.spec.max_local_retransmissions {
            self.stats.dupacks_passed += 1;
            return true;
        }
        // Whether the segment's last transmission is lost: a duplicate
        // caused by a segment sent after it says so, as the link delivers
        // in order. The first SACK block names the cause; without one,
        // count the duplicates the segments sent before it will cause.
        let cause = match seg.sack {
            // A duplicate arrived: no news of a loss.
            Some(b) if b.right <= seg.ack => Cause::Duplicate,
            Some(b) => conn
                .cache
                .iter()
                .find(|c| c.end == b.right)
                .map_or(Cause::Unknown, |c| Cause::Sent(c.known)),
            None => Cause::Unknown,
        };
        let lost = match cause {
            Cause::Duplicate => false,
            Cause::Sent(index) => e.local_retx == 0 || index > e.index,
            Cause::Unknown => conn.expected_dupacks == 0,
        };
        if !lost {
            conn.expected_dupacks = conn.expected_dupacks.saturating_sub(1);
            self.stats.dupacks_suppressed += 1;
            return false;
        }
        // Every segment sent after it causes a duplicate (this one among
        // them) until the retransmission arrives.
        conn.expected_dupacks = conn.sent.saturating_sub(e.index + 2);
        retransmit(cx, conn, i, true, &mut self.stats);
        conn.deadline = Some(now + conn.rto(&self.spec));
        self.stats.dupacks_suppressed += 1;
        false
    }
}

/// What made the mobile send a duplicate ACK.
enum Cause {
    /// A segment it already had.
    Duplicate,
    /// The cached segment sent in this position.
    Sent(u64),
    /// No SACK block, or one that matches no cached segment.
    Unknown,
}

/// Sends a copy of the cached segment `i` again; `lost` when its earlier
/// sendings are known to be lost.
fn retransmit(
    cx: &mut MiddleboxCx<'_>,
    conn: &mut Conn,
    i: usize,
    lost: bool,
    stats: &mut SnoopStats,
) {
    let now = cx.now();
    let e = &mut conn.cache[i];
    let bytes = &e.bytes;
    let _ = cx.inject(|buf| {
        buf.extend_from_slice(bytes);
        Ok::<_, Infallible>(bytes.len())
    });
    e.local_retx += 1;
    e.sent_at = now;
    e.index = conn.sent;
    if lost {
        e.known = e.index;
    }
    conn.sent += 1;
    stats.local_retransmissions += 1;
}

impl Middlebox for Snoop {
    type Stats = SnoopStats;

    fn on_packet(&mut self, cx: &mut MiddleboxCx<'_>, packet: Held) -> Option<Held> {
        let datagram = cx.datagram(&packet);
        let Some(seg) = Segment::read(datagram) else {
            return Some(packet);
        };
        let mobile = self.spec.mobile;
        if seg.dst == mobile && seg.src != mobile {
            self.on_data(cx.now(), &seg, datagram);
        } else if seg.src == mobile && seg.dst != mobile && !self.on_ack(cx, &seg) {
            cx.drop(packet);
            return None;
        }
        Some(packet)
    }

    fn handle_timeout(&mut self, cx: &mut MiddleboxCx<'_>) {
        let now = cx.now();
        let spec = &self.spec;
        for conn in self.conns.values_mut() {
            if conn.deadline.map_or(true, |d| d > now) {
                continue;
            }
            conn.expiries += 1;
            if conn.expiries > spec.max_local_retransmissions {
                // No progress for that many timeouts: give the cache up.
                for e in conn.cache.drain(..) {
                    self.occupancy.free(&e);
                }
                conn.expiries = 0;
                conn.deadline = None;
                self.stats.cache_flushes += 1;
                continue;
            }
            if let Some(i) = conn.head() {
                if conn.cache[i].local_retx < spec.max_local_retransmissions {
                    retransmit(cx, conn, i, false, &mut self.stats);
                    self.stats.local_timeouts += 1;
                }
            }
            // Re-armed even with nothing to resend (the next byte was lost
            // before the base station), so a dead connection is given up.
            conn.deadline = Some(now + conn.rto(spec));
        }
    }

    fn poll_timeout(&self) -> Option<SimTime> {
        self.conns.values().filter_map(|c| c.deadline).min()
    }

    fn stats(&self) -> SnoopStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::middlebox::Action;
    use crate::node::{IfaceId, NodeId};
    use crate::pool::PacketPool;
    use crate::rng::{component_stream, SimRng};
    use rtolab_wire::ipv4::Ipv4Repr;
    use rtolab_wire::tcp::{TcpOptions, TcpRepr};

    const FIXED: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const MOBILE: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
    const MSS: u32 = 1000;

    fn spec() -> SnoopSpec {
        SnoopSpec {
            mobile: MOBILE,
            ..SnoopSpec::default()
        }
    }

    fn segment(from_mobile: bool, seq: u32, ack: u32, flags: TcpFlags, payload: &[u8]) -> Vec<u8> {
        segment_with(from_mobile, seq, ack, flags, payload, None)
    }

    fn segment_with(
        from_mobile: bool,
        seq: u32,
        ack: u32,
        flags: TcpFlags,
        payload: &[u8],
        sack: Option<(u32, u32)>,
    ) -> Vec<u8> {
        let (src, dst, src_port, dst_port) = if from_mobile {
            (MOBILE, FIXED, 5001, 40000)
        } else {
            (FIXED, MOBILE, 40000, 5001)
        };
        let mut options = TcpOptions::default();
        if let Some((left, right)) = sack {
            options.sack_blocks[0] = Some(SackBlock {
                left: SeqNumber(left),
                right: SeqNumber(right),
            });
        }
        let ip = Ipv4Repr {
            src,
            dst,
            protocol: 0,
            ttl: 64,
            ident: 7,
            dont_fragment: true,
            tos: 0,
            payload_len: 0,
        };
        let tcp = TcpRepr {
            src_port,
            dst_port,
            seq: SeqNumber(seq),
            ack: SeqNumber(ack),
            flags,
            window: 512,
            urgent: 0,
            options,
            payload,
        };
        let mut out = Vec::new();
        packet::emit_tcp(&mut out, &ip, &tcp).expect("fits");
        out
    }

    /// Data segment `n` (from 0) of a connection whose first data byte is
    /// `base`.
    fn data(base: u32, n: u32) -> Vec<u8> {
        let payload = vec![n as u8; MSS as usize];
        segment(
            false,
            base.wrapping_add(n * MSS),
            1,
            TcpFlags::ACK,
            &payload,
        )
    }

    fn ack(value: u32) -> Vec<u8> {
        segment(true, 1, value, TcpFlags::ACK, &[])
    }

    fn ack_sack(value: u32, left: u32, right: u32) -> Vec<u8> {
        segment_with(true, 1, value, TcpFlags::ACK, &[], Some((left, right)))
    }

    /// A snoop middlebox fed by hand.
    struct Bench {
        snoop: Snoop,
        pool: PacketPool,
        actions: Vec<Action>,
        rng: SimRng,
        now: SimTime,
        /// Whether the last call dropped a packet.
        dropped: bool,
    }

    /// What one call did: whether the packet went on, and the datagrams
    /// injected.
    #[derive(Debug)]
    struct Outcome {
        passed: bool,
        injected: Vec<Vec<u8>>,
    }

    impl Bench {
        fn new(spec: SnoopSpec) -> Self {
            Bench {
                snoop: Snoop::new(spec),
                pool: PacketPool::new(),
                actions: Vec::new(),
                rng: component_stream(1, "middlebox/test"),
                now: SimTime::ZERO,
                dropped: false,
            }
        }

        fn at(&mut self, ms: u64) -> &mut Self {
            self.now = SimTime::from_millis(ms);
            self
        }

        fn feed(&mut self, datagram: &[u8]) -> Outcome {
            let id = self.pool.alloc();
            self.pool.buf_mut(id).extend_from_slice(datagram);
            let held = Held {
                packet: id,
                iface: IfaceId {
                    node: NodeId(0),
                    index: 0,
                },
                next: 0,
                since: self.now,
            };
            let mut cx = MiddleboxCx {
                now: self.now,
                pool: &mut self.pool,
                actions: &mut self.actions,
                rng: &mut self.rng,
            };
            let passed = self.snoop.on_packet(&mut cx, held).is_some();
            let outcome = self.outcome(passed);
            assert_eq!(
                passed, !self.dropped,
                "a packet is either passed on or dropped"
            );
            outcome
        }

        /// Runs the timer if it is due at `ms`.
        fn tick(&mut self, ms: u64) -> Outcome {
            self.now = SimTime::from_millis(ms);
            let mut cx = MiddleboxCx {
                now: self.now,
                pool: &mut self.pool,
                actions: &mut self.actions,
                rng: &mut self.rng,
            };
            self.snoop.handle_timeout(&mut cx);
            self.outcome(false)
        }

        fn outcome(&mut self, passed: bool) -> Outcome {
            let mut injected = Vec::new();
            self.dropped = false;
            for action in std::mem::take(&mut self.actions) {
                match action {
                    Action::Inject(id) => injected.push(self.pool.bytes(id).to_vec()),
                    Action::Drop(_) => self.dropped = true,
                    Action::Release(_) => panic!("snoop holds nothing"),
                }
            }
            Outcome { passed, injected }
        }

        fn stats(&self) -> SnoopStats {
            self.snoop.stats()
        }

        /// A connection set up through the middlebox: SYN at 0 ms, the mobile's
        /// ACK of it at `rtt_ms`; returns the first data byte.
        fn connect(&mut self, isn: u32, rtt_ms: u64) -> u32 {
            self.at(0);
            assert!(
                self.feed(&segment(false, isn, 0, TcpFlags::SYN, &[]))
                    .passed
            );
            self.at(rtt_ms);
            let syn_ack = TcpFlags::SYN | TcpFlags::ACK;
            assert!(
                self.feed(&segment(true, 0, isn.wrapping_add(1), syn_ack, &[]))
                    .passed
            );
            isn.wrapping_add(1)
        }
    }

    /// The datagram the node would forward: TTL one less, checksums valid.
    fn forwarded(datagram: &[u8]) -> Vec<u8> {
        let mut bytes = datagram.to_vec();
        let mut view = ipv4::Packet::new_unchecked(&mut bytes[..]);
        view.set_ttl(view.ttl() - 1);
        view.fill_checksum();
        bytes
    }

    #[test]
    fn caches_data_and_frees_it_on_acks_with_rtt_samples() {
        let mut b = Bench::new(spec());
        let base = b.connect(1000, 10);
        assert_eq!(b.stats().rtt_samples, 1, "the handshake gives a sample");
        b.at(20);
        for n in 0..3 {
            assert!(b.feed(&data(base, n)).passed);
        }
        assert_eq!(b.stats().segments_cached, 3);
        assert_eq!(b.snoop.occupancy.segments, 3);
        b.at(50);
        let out = b.feed(&ack(base + 2 * MSS));
        assert!(out.passed && out.injected.is_empty());
        assert_eq!(b.snoop.occupancy.segments, 1);
        assert_eq!(b.stats().rtt_samples, 2);
        // RFC 6298: 10 ms, then 7/8 of it plus 1/8 of 30 ms.
        assert_eq!(b.stats().srtt_ns, Some(12_500_000));
        b.at(60);
        assert!(b.feed(&ack(base + 3 * MSS)).passed);
        assert_eq!(b.snoop.occupancy.segments, 0);
        assert_eq!(b.snoop.occupancy.bytes, 0);
        assert_eq!(b.snoop.poll_timeout(), None, "nothing left to guard");
    }

    #[test]
    fn a_duplicate_for_a_cached_segment_resends_it_and_is_dropped() {
        let mut b = Bench::new(spec());
        let base = b.connect(1000, 10);
        b.at(20);
        for n in 0..5 {
            b.feed(&data(base, n));
        }
        b.at(40);
        assert!(b.feed(&ack(base + MSS)).passed);
        // Segment 1 was lost: 2, 3 and 4 each cause a duplicate.
        let out = b.feed(&ack(base + MSS));
        assert!(!out.passed);
        assert_eq!(out.injected, vec![forwarded(&data(base, 1))]);
        for _ in 0..2 {
            let out = b.feed(&ack(base + MSS));
            assert!(!out.passed && out.injected.is_empty());
        }
        assert_eq!(b.stats().dupacks_suppressed, 3);
        // One more than the segments in flight could cause: the
        // retransmission was lost too.
        let out = b.feed(&ack(base + MSS));
        assert!(!out.passed);
        assert_eq!(out.injected.len(), 1);
        assert_eq!(b.stats().local_retransmissions, 2);
        assert_eq!(b.stats().dupacks_passed, 0);
        // Its ACK takes no RTT sample (Karn).
        let samples = b.stats().rtt_samples;
        assert!(b.feed(&ack(base + 5 * MSS)).passed);
        assert_eq!(b.stats().rtt_samples, samples);
    }

    #[test]
    fn sack_blocks_tell_which_duplicates_the_retransmission_will_answer() {
        let mut b = Bench::new(spec());
        let base = b.connect(1000, 10);
        b.at(20);
        for n in 0..4 {
            b.feed(&data(base, n));
        }
        b.at(40);
        b.feed(&ack(base + MSS));
        // Segment 1 lost; 2 arrives.
        let out = b.feed(&ack_sack(base + MSS, base + 2 * MSS, base + 3 * MSS));
        assert_eq!(out.injected.len(), 1);
        // Segment 4 goes after the retransmission.
        b.at(41);
        b.feed(&data(base, 4));
        // 3 was sent before the retransmission: no news.
        let out = b.feed(&ack_sack(base + MSS, base + 2 * MSS, base + 4 * MSS));
        assert!(!out.passed && out.injected.is_empty());
        // A duplicate of something it already had: no news either.
        let out = b.feed(&ack_sack(base + MSS, base, base + MSS));
        assert!(!out.passed && out.injected.is_empty());
        // 4 arrived but 1 still missing: the retransmission was lost.
        let out = b.feed(&ack_sack(base + MSS, base + 2 * MSS, base + 5 * MSS));
        assert!(!out.passed);
        assert_eq!(out.injected, vec![forwarded(&data(base, 1))]);
    }

    #[test]
    fn a_partial_ack_after_a_resend_resends_the_next_hole_at_once() {
        let mut b = Bench::new(spec());
        let base = b.connect(1000, 10);
        b.at(20);
        for n in 0..6 {
            b.feed(&data(base, n));
        }
        b.at(40);
        b.feed(&ack(base + MSS));
        // 1 and 3 lost: the duplicate from 2 resends 1.
        let out = b.feed(&ack_sack(base + MSS, base + 2 * MSS, base + 3 * MSS));
        assert_eq!(out.injected.len(), 1);
        // The resent 1 arrives behind 4 and 5: the ACK stops at 3, which
        // was sent before it and is therefore lost.
        b.at(60);
        let out = b.feed(&ack_sack(base + 3 * MSS, base + 4 * MSS, base + 6 * MSS));
        assert!(out.passed, "new data acknowledged goes to the sender");
        assert_eq!(out.injected, vec![forwarded(&data(base, 3))]);
    }

    #[test]
    fn duplicates_for_data_it_does_not_hold_go_to_the_sender() {
        let mut b = Bench::new(spec());
        let base = b.connect(1000, 10);
        b.at(20);
        // Segment 0 never reached the base station.
        for n in 1..4 {
            b.feed(&data(base, n));
        }
        for _ in 0..3 {
            let out = b.feed(&ack(base));
            assert!(out.passed && out.injected.is_empty());
        }
        assert_eq!(b.stats().dupacks_passed, 3);
        // The sender resends it: cached, but its duplicates still pass, as
        // the sender is recovering it.
        b.at(80);
        b.feed(&data(base, 0));
        assert_eq!(b.stats().sender_retransmissions, 1);
        assert!(b.feed(&ack(base)).passed);
        assert_eq!(b.stats().local_retransmissions, 0);
    }

    #[test]
    fn the_timer_resends_backs_off_and_gives_the_cache_up() {
        let mut b = Bench::new(SnoopSpec {
            min_local_rto: SimDuration::from_millis(50),
            max_local_rto: SimDuration::from_millis(150),
            max_local_retransmissions: 2,
            ..spec()
        });
        // A 10 ms sample: srtt + 4 rttvar = 30 ms, raised to the floor.
        let base = b.connect(1000, 10);
        b.at(20);
        b.feed(&data(base, 0));
        assert_eq!(b.snoop.poll_timeout(), Some(SimTime::from_millis(70)));
        assert!(b.tick(69).injected.is_empty(), "not due yet");
        assert_eq!(b.tick(70).injected, vec![forwarded(&data(base, 0))]);
        // Doubled.
        assert_eq!(b.snoop.poll_timeout(), Some(SimTime::from_millis(170)));
        assert_eq!(b.tick(170).injected.len(), 1);
        // Doubled again, but capped.
        assert_eq!(b.snoop.poll_timeout(), Some(SimTime::from_millis(320)));
        assert!(b.tick(320).injected.is_empty());
        let s = b.stats();
        assert_eq!((s.local_timeouts, s.local_retransmissions), (2, 2));
        assert_eq!(s.cache_flushes, 1);
        assert_eq!(b.snoop.occupancy.segments, 0);
        assert_eq!(b.snoop.poll_timeout(), None);
        // Its duplicates now go to the sender.
        assert!(b.feed(&ack(base)).passed);
    }

    #[test]
    fn ack_progress_restarts_the_timer_and_its_backoff() {
        let mut b = Bench::new(spec());
        let base = b.connect(1000, 10);
        b.at(20);
        b.feed(&data(base, 0));
        b.feed(&data(base, 1));
        // Default floor 50 ms.
        assert_eq!(b.snoop.poll_timeout(), Some(SimTime::from_millis(70)));
        b.tick(70);
        assert_eq!(b.snoop.poll_timeout(), Some(SimTime::from_millis(170)));
        b.at(100);
        b.feed(&ack(base + MSS));
        let deadline = b.snoop.poll_timeout().expect("segment 1 still cached");
        let rto = deadline.saturating_since(SimTime::from_millis(100));
        assert!(rto >= SimDuration::from_millis(50) && rto < SimDuration::from_millis(100));
    }

    #[test]
    fn rto_is_srtt_plus_four_rttvar_within_the_bounds() {
        let spec = SnoopSpec {
            min_local_rto: SimDuration::from_millis(20),
            max_local_rto: SimDuration::from_millis(500),
            ..spec()
        };
        let mut conn = Conn::default();
        assert_eq!(conn.rto(&spec), spec.max_local_rto, "no sample yet");
        conn.sample(SimDuration::from_millis(40));
        // 40 + 4 * 20.
        assert_eq!(conn.rto(&spec), SimDuration::from_millis(120));
        conn.expiries = 2;
        assert_eq!(conn.rto(&spec), SimDuration::from_millis(480));
        conn.expiries = 3;
        assert_eq!(conn.rto(&spec), spec.max_local_rto);
        conn.expiries = 200;
        assert_eq!(conn.rto(&spec), spec.max_local_rto, "no overflow");
        let mut steady = Conn::default();
        for _ in 0..100 {
            steady.sample(SimDuration::from_millis(2));
        }
        assert_eq!(steady.rto(&spec), spec.min_local_rto);
        // Even an unvalidated zero floor re-arms in the future.
        let zero = SnoopSpec {
            min_local_rto: SimDuration::ZERO,
            max_local_rto: SimDuration::ZERO,
            ..spec
        };
        assert!(steady.rto(&zero) > SimDuration::ZERO);
    }

    #[test]
    fn segments_that_do_not_fit_pass_uncached() {
        let mut b = Bench::new(SnoopSpec {
            cache_segments: 2,
            ..spec()
        });
        let base = b.connect(1000, 10);
        b.at(20);
        for n in 0..3 {
            assert!(b.feed(&data(base, n)).passed);
        }
        let s = b.stats();
        assert_eq!((s.segments_cached, s.cache_overflows), (2, 1));
        assert_eq!(s.peak_cached_segments, 2);

        let size = data(0, 0).len();
        let mut b = Bench::new(SnoopSpec {
            cache_bytes: 2 * size + 10,
            ..spec()
        });
        let base = b.connect(1000, 10);
        for n in 0..3 {
            b.feed(&data(base, n));
        }
        assert_eq!(b.stats().cache_overflows, 1);
        assert_eq!(b.snoop.occupancy.bytes, 2 * size);
        // Freed space is used again.
        b.feed(&ack(base + MSS));
        b.feed(&data(base, 3));
        assert_eq!(b.stats().segments_cached, 3);
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut b = Bench::new(spec());
        // The third segment crosses 2^32.
        let base = b.connect(u32::MAX - 2 * MSS - 500, 10);
        b.at(20);
        for n in 0..5 {
            b.feed(&data(base, n));
        }
        b.at(40);
        b.feed(&ack(base.wrapping_add(2 * MSS)));
        assert_eq!(b.snoop.occupancy.segments, 3);
        let out = b.feed(&ack(base.wrapping_add(2 * MSS)));
        assert_eq!(out.injected, vec![forwarded(&data(base, 2))]);
        b.feed(&ack(base.wrapping_add(5 * MSS)));
        assert_eq!(b.snoop.occupancy.segments, 0);
        // An ACK from before the wrap is old, not new.
        let out = b.feed(&ack(base.wrapping_add(MSS)));
        assert!(out.passed && out.injected.is_empty());
        assert_eq!(b.stats().dupacks_suppressed, 1);
    }

    #[test]
    fn a_fin_acknowledged_or_a_reset_ends_the_connection() {
        let mut b = Bench::new(spec());
        let base = b.connect(1000, 10);
        b.at(20);
        b.feed(&data(base, 0));
        let fin = segment(false, base + MSS, 1, TcpFlags::FIN | TcpFlags::ACK, &[]);
        b.feed(&fin);
        assert_eq!(b.snoop.occupancy.segments, 2, "the FIN is cached too");
        b.feed(&ack(base + MSS + 1));
        assert!(b.snoop.conns.is_empty());
        assert_eq!(b.snoop.occupancy.segments, 0);

        let base = b.connect(5000, 10);
        b.feed(&data(base, 0));
        b.feed(&segment(true, 1, 0, TcpFlags::RST, &[]));
        assert!(b.snoop.conns.is_empty());
        assert_eq!(b.snoop.occupancy.segments, 0);
        assert_eq!(b.stats().connections, 2);
    }

    #[test]
    fn other_traffic_passes_untouched() {
        let mut b = Bench::new(spec());
        let base = b.connect(1000, 10);
        b.feed(&data(base, 0));
        // A corrupted copy: not parsed, passed as is.
        let mut bad = data(base, 1);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(b.feed(&bad).passed);
        // Duplicate-looking ACKs from another port of the mobile: another
        // connection, unknown.
        let mut other = ack(base);
        other[20..22].copy_from_slice(&5002u16.to_be_bytes());
        rtolab_wire::tcp::Packet::new_unchecked(&mut other[20..]).fill_checksum(MOBILE, FIXED);
        for _ in 0..3 {
            assert!(b.feed(&other).passed);
        }
        assert_eq!(b.stats().segments_cached, 1);
        assert_eq!(b.stats().dupacks_suppressed, 0);
    }
}
