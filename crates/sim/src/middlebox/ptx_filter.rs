//! `kind = "ptx-filter"`: the bridge study's PTx filter (bridge spec §5, a
//! recommendation the study did not test). The PTx sees every segment on
//! its way onto the NFC link and drops those that would cross it for
//! nothing: a segment whose data the appliance has already acknowledged
//! (a spurious retransmission), and a duplicate ACK beyond the
//! `duplicate_acks` it lets through in a row (by default the third and
//! later, which would make the appliance retransmit fast what only waits
//! for the slow half-duplex link).
//!
//! ```toml
//! [[middlebox]]
//! kind = "ptx-filter"
//! host = "ptx"
//! appliance = "192.168.1.102"   # the address behind the NFC link
//! duplicate_acks = 2            # optional: duplicates let through in a row
//! ```
//!
//! It learns what the appliance acknowledged from the appliance's own
//! segments crossing the PTx the other way, per connection, so it needs no
//! state of either TCP.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::{SeqNumber, TcpFlags};
use serde::{Deserialize, Serialize};

use super::{Held, Middlebox, MiddleboxCheck, MiddleboxCx, ScenarioMiddlebox};
use crate::config::{required, ScenarioError};

/// The `[[middlebox]]` fields of a PTx filter.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPtxFilter {
    /// IPv4 address of the appliance behind the NFC link. Required.
    appliance: Option<Ipv4Addr>,
    /// Duplicate ACKs to the appliance let through in a row; later ones are dropped. Default:
    /// 2.
    duplicate_acks: Option<u32>,
}

/// A validated PTx filter.
#[derive(Clone, Debug, PartialEq)]
pub struct PtxFilterSpec {
    /// The address behind the NFC link: segments to it are filtered,
    /// segments from it tell what it acknowledged.
    pub appliance: Ipv4Addr,
    /// Duplicate ACKs in a row let through to the appliance.
    pub duplicate_acks: u32,
}

impl ScenarioMiddlebox for PtxFilterSpec {
    const KIND: &'static str = "ptx-filter";
    type Raw = RawPtxFilter;
    type Model = PtxFilter;

    fn validate(raw: RawPtxFilter, cx: &mut MiddleboxCheck<'_>) -> Result<Self, ScenarioError> {
        let appliance = required(&raw.appliance, cx.at("appliance"), &cx.what)?;
        cx.topology.address_exists(&cx.at("appliance"), appliance)?;
        Ok(PtxFilterSpec {
            appliance,
            duplicate_acks: raw.duplicate_acks.unwrap_or(2),
        })
    }

    fn build(&self) -> PtxFilter {
        PtxFilter {
            spec: self.clone(),
            flows: HashMap::new(),
            stats: PtxFilterStats::default(),
        }
    }
}

/// Counters of a [`PtxFilter`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PtxFilterStats {
    /// TCP segments on their way to the appliance.
    pub seen: u64,
    /// Segments dropped: all their data already acknowledged.
    pub dropped_acknowledged: u64,
    /// Duplicate ACKs dropped.
    pub dropped_duplicate_acks: u64,
}

/// What the filter knows of one connection, keyed by the appliance's
/// (port, peer address, peer port).
#[derive(Clone, Copy, Debug, Default)]
struct Flow {
    /// The highest acknowledgement the appliance sent.
    acked: Option<SeqNumber>,
    /// The last ACK number and window the peer sent, and how many
    /// duplicates of it followed in a row.
    last_ack: Option<(SeqNumber, u16)>,
    duplicates: u32,
}

/// Drops segments to the appliance that would cross the NFC link for
/// nothing.
#[derive(Debug)]
pub struct PtxFilter {
    spec: PtxFilterSpec,
    flows: HashMap<(u16, Ipv4Addr, u16), Flow>,
    stats: PtxFilterStats,
}

/// What to do with a segment to the appliance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Pass,
    Acknowledged,
    DuplicateAck,
}

impl PtxFilter {
    fn judge(&mut self, datagram: &[u8]) -> Verdict {
        let Ok(parsed) = packet::parse(datagram) else {
            return Verdict::Pass;
        };
        let Transport::Tcp(tcp) = parsed.transport else {
            return Verdict::Pass;
        };
        let appliance = self.spec.appliance;
        if parsed.ip.src == appliance {
            if tcp.flags.contains(TcpFlags::ACK) {
                let flow = self
                    .flows
                    .entry((tcp.src_port, parsed.ip.dst, tcp.dst_port))
                    .or_default();
                flow.acked = Some(flow.acked.map_or(tcp.ack, |a| a.max(tcp.ack)));
            }
            return Verdict::Pass;
        }
        if parsed.ip.dst != appliance {
            return Verdict::Pass;
        }
        self.stats.seen += 1;
        let flow = self
            .flows
            .entry((tcp.dst_port, parsed.ip.src, tcp.src_port))
            .or_default();
        let flags = tcp.flags;
        if flags.contains(TcpFlags::SYN) || flags.contains(TcpFlags::RST) {
            return Verdict::Pass;
        }
        let length = tcp.payload.len() + usize::from(flags.contains(TcpFlags::FIN));
        if length > 0 {
            flow.last_ack = None;
            flow.duplicates = 0;
            let end = tcp.seq + length;
            return match flow.acked {
                Some(acked) if end <= acked => Verdict::Acknowledged,
                _ => Verdict::Pass,
            };
        }
        if !flags.contains(TcpFlags::ACK) {
            return Verdict::Pass;
        }
        // A bare ACK: a duplicate repeats the last ACK number and window.
        let this = (tcp.ack, tcp.window);
        if flow.last_ack == Some(this) {
            flow.duplicates += 1;
            if flow.duplicates > self.spec.duplicate_acks {
                return Verdict::DuplicateAck;
            }
        } else {
            flow.last_ack = Some(this);
            flow.duplicates = 0;
        }
        Verdict::Pass
    }
}

impl Middlebox for PtxFilter {
    type Stats = PtxFilterStats;

    fn on_packet(&mut self, cx: &mut MiddleboxCx<'_>, packet: Held) -> Option<Held> {
        match self.judge(cx.datagram(&packet)) {
            Verdict::Pass => return Some(packet),
            Verdict::Acknowledged => self.stats.dropped_acknowledged += 1,
            Verdict::DuplicateAck => self.stats.dropped_duplicate_acks += 1,
        }
        cx.drop(packet);
        None
    }

    fn stats(&self) -> PtxFilterStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use rtolab_wire::ipv4::Ipv4Repr;
    use rtolab_wire::tcp::{TcpOptions, TcpRepr};

    use super::*;

    const APPLIANCE: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 102);
    const USER: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 202);

    fn filter() -> PtxFilter {
        PtxFilterSpec {
            appliance: APPLIANCE,
            duplicate_acks: 2,
        }
        .build()
    }

    /// A segment with `len` bytes of payload.
    fn segment(from_appliance: bool, seq: u32, ack: u32, flags: TcpFlags, len: usize) -> Vec<u8> {
        let (src, dst, sport, dport) = if from_appliance {
            (APPLIANCE, USER, 49153, 7891)
        } else {
            (USER, APPLIANCE, 7891, 49153)
        };
        let ip = Ipv4Repr {
            src,
            dst,
            protocol: 0,
            ttl: 64,
            ident: 1,
            dont_fragment: true,
            tos: 0,
            payload_len: 0,
        };
        let payload = vec![0; len];
        let tcp = TcpRepr {
            src_port: sport,
            dst_port: dport,
            seq: SeqNumber(seq),
            ack: SeqNumber(ack),
            flags,
            window: 8096,
            urgent: 0,
            options: TcpOptions::default(),
            payload: &payload,
        };
        let mut out = Vec::new();
        packet::emit_tcp(&mut out, &ip, &tcp).expect("fits");
        out
    }

    const ACK: TcpFlags = TcpFlags::ACK;

    #[test]
    fn drops_data_the_appliance_already_acknowledged_and_passes_the_rest() {
        let mut f = filter();
        // The response, not yet acknowledged, passes.
        assert_eq!(f.judge(&segment(false, 1000, 1, ACK, 100)), Verdict::Pass);
        // The appliance acknowledges up to 1100.
        assert_eq!(f.judge(&segment(true, 1, 1100, ACK, 0)), Verdict::Pass);
        // A resend of the same bytes is dropped; one reaching past 1100 is not.
        assert_eq!(
            f.judge(&segment(false, 1000, 1, ACK, 100)),
            Verdict::Acknowledged
        );
        assert_eq!(f.judge(&segment(false, 1050, 1, ACK, 51)), Verdict::Pass);
        // A FIN counts one: at 1100 it is new.
        let fin = TcpFlags(TcpFlags::FIN.0 | ACK.0);
        assert_eq!(f.judge(&segment(false, 1100, 1, fin, 0)), Verdict::Pass);
        assert_eq!(f.stats.seen, 4, "segments to the appliance");
    }

    #[test]
    fn lets_two_duplicate_acks_through_and_drops_the_third() {
        let mut f = filter();
        let ack = segment(false, 1, 500, ACK, 0);
        let verdicts: Vec<Verdict> = (0..5).map(|_| f.judge(&ack)).collect();
        use Verdict::*;
        assert_eq!(
            verdicts,
            [Pass, Pass, Pass, DuplicateAck, DuplicateAck],
            "the first is no duplicate"
        );
        // A new ACK number starts over.
        assert_eq!(f.judge(&segment(false, 1, 600, ACK, 0)), Pass);
        assert_eq!(f.judge(&segment(false, 1, 600, ACK, 0)), Pass);
    }

    #[test]
    fn leaves_segments_from_the_appliance_and_other_hosts_alone() {
        let mut f = filter();
        assert_eq!(f.judge(&segment(true, 1, 1, ACK, 10)), Verdict::Pass);
        assert_eq!(f.judge(&segment(true, 1, 1, ACK, 10)), Verdict::Pass);
        assert_eq!(f.judge(b"not a packet"), Verdict::Pass);
        assert_eq!(f.stats.seen, 0);
    }
}
