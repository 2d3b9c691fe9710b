//! TCP counters read off the wire, the same for every kind of host.
//!
//! A Linux host's kernel keeps its own counters out of reach, so the
//! emulator counts what each host puts on its links instead: a segment
//! that carries sequence space (data, SYN or FIN) some of which the same
//! direction of the connection already sent is a retransmission.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use rtolab_wire::ipv4::Ipv4Repr;
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpRepr};
use serde::Serialize;

/// What one host sent, as seen on its links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WireCounts {
    /// IPv4 datagrams sent.
    pub packets_sent: u64,
    /// TCP segments sent.
    pub segments_sent: u64,
    /// TCP payload bytes sent, retransmissions included.
    pub payload_bytes_sent: u64,
    /// Segments that resent sequence space already sent.
    pub retransmissions: u64,
    /// Bare ACKs whose acknowledgment number did not move (duplicate ACKs).
    pub dup_acks_sent: u64,
}

#[derive(Clone, Copy, Debug)]
struct Direction {
    isn: SeqNumber,
    /// One past the highest sequence number sent.
    high: SeqNumber,
    last_ack: Option<SeqNumber>,
}

/// Per-connection-direction state, keyed by (source, destination).
#[derive(Debug, Default)]
pub struct WireTracker {
    flows: BTreeMap<(SocketAddrV4, SocketAddrV4), Direction>,
}

impl WireTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts a TCP segment sent by the host whose counters are `counts`.
    pub fn observe(&mut self, counts: &mut WireCounts, ip: &Ipv4Repr, tcp: &TcpRepr<'_>) {
        counts.segments_sent += 1;
        counts.payload_bytes_sent += tcp.payload.len() as u64;
        let key = (
            SocketAddrV4::new(ip.src, tcp.src_port),
            SocketAddrV4::new(ip.dst, tcp.dst_port),
        );
        let len = tcp.segment_len();
        let end = tcp.seq + len;
        if tcp.flags.contains(TcpFlags::SYN) {
            match self.flows.get(&key) {
                Some(d) if d.isn == tcp.seq => counts.retransmissions += 1,
                // A new connection on the same 4-tuple starts afresh.
                _ => {
                    self.flows.insert(
                        key,
                        Direction {
                            isn: tcp.seq,
                            high: end,
                            last_ack: None,
                        },
                    );
                }
            }
            return;
        }
        let Some(dir) = self.flows.get_mut(&key) else {
            // Joined mid-connection: take this segment as the baseline.
            self.flows.insert(
                key,
                Direction {
                    isn: tcp.seq,
                    high: end,
                    last_ack: tcp.flags.contains(TcpFlags::ACK).then_some(tcp.ack),
                },
            );
            return;
        };
        if len > 0 {
            if tcp.seq < dir.high {
                counts.retransmissions += 1;
            }
            if end > dir.high {
                dir.high = end;
            }
        } else if tcp.flags.contains(TcpFlags::ACK)
            && !tcp.flags.contains(TcpFlags::RST)
            && dir.last_ack == Some(tcp.ack)
        {
            counts.dup_acks_sent += 1;
        }
        if tcp.flags.contains(TcpFlags::ACK) {
            dir.last_ack = Some(tcp.ack);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtolab_wire::ipv4::protocol;
    use rtolab_wire::tcp::TcpOptions;
    use std::net::Ipv4Addr;

    const IP: Ipv4Repr = Ipv4Repr {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        protocol: protocol::TCP,
        ttl: 64,
        ident: 0,
        dont_fragment: true,
        tos: 0,
        payload_len: 0,
    };

    fn seg(seq: u32, flags: TcpFlags, payload: &[u8]) -> TcpRepr<'_> {
        TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq: SeqNumber(seq),
            ack: SeqNumber(7),
            flags,
            window: 1000,
            urgent: 0,
            options: TcpOptions::default(),
            payload,
        }
    }

    #[test]
    fn resent_syn_and_data_count_once_each() {
        let mut t = WireTracker::new();
        let mut c = WireCounts::default();
        let data = [0u8; 100];
        t.observe(&mut c, &IP, &seg(1000, TcpFlags::SYN, &[]));
        t.observe(&mut c, &IP, &seg(1000, TcpFlags::SYN, &[]));
        assert_eq!(c.retransmissions, 1);
        t.observe(&mut c, &IP, &seg(1001, TcpFlags::ACK, &data));
        t.observe(&mut c, &IP, &seg(1101, TcpFlags::ACK, &data));
        assert_eq!(c.retransmissions, 1);
        t.observe(&mut c, &IP, &seg(1001, TcpFlags::ACK, &data));
        assert_eq!(c.retransmissions, 2);
        // New data after the resend is not a retransmission.
        t.observe(
            &mut c,
            &IP,
            &seg(1201, TcpFlags::ACK | TcpFlags::FIN, &data),
        );
        assert_eq!(
            (c.retransmissions, c.segments_sent, c.payload_bytes_sent),
            (2, 6, 400)
        );
    }

    #[test]
    fn repeated_bare_acks_are_duplicates() {
        let mut t = WireTracker::new();
        let mut c = WireCounts::default();
        t.observe(&mut c, &IP, &seg(1, TcpFlags::ACK, &[]));
        t.observe(&mut c, &IP, &seg(1, TcpFlags::ACK, &[]));
        t.observe(&mut c, &IP, &seg(1, TcpFlags::ACK, &[]));
        assert_eq!((c.dup_acks_sent, c.retransmissions), (2, 0));
    }
}
