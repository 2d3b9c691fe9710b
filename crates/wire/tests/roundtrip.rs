//! Property tests: any representable packet survives emit → parse, and no
//! byte string makes a parser panic.

use proptest::prelude::*;
use rtolab_wire::ipv4::{self, Ipv4Repr};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::{self, SackBlock, SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamps};
use rtolab_wire::udp::UdpRepr;
use rtolab_wire::Ipv4Addr;

fn addr() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}

fn ipv4_repr() -> impl Strategy<Value = Ipv4Repr> {
    (
        addr(),
        addr(),
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<bool>(),
        any::<u8>(),
        0usize..2000,
    )
        .prop_map(
            |(src, dst, protocol, ttl, ident, dont_fragment, tos, payload_len)| Ipv4Repr {
                src,
                dst,
                protocol,
                ttl,
                ident,
                dont_fragment,
                tos,
                payload_len,
            },
        )
}

fn sack_block() -> impl Strategy<Value = SackBlock> {
    (any::<u32>(), any::<u32>()).prop_map(|(l, r)| SackBlock {
        left: SeqNumber(l),
        right: SeqNumber(r),
    })
}

/// Any set of options that fits in 40 bytes: SACK blocks are dropped from
/// the end until it does, as a sender would.
fn tcp_options() -> impl Strategy<Value = TcpOptions> {
    (
        proptest::option::of(any::<u16>()),
        proptest::option::of(any::<u8>()),
        any::<bool>(),
        proptest::collection::vec(sack_block(), 0..=4),
        proptest::option::of((any::<u32>(), any::<u32>())),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(
            |(mss, window_scale, sack_permitted, blocks, ts, timelost)| {
                let mut options = TcpOptions {
                    mss,
                    window_scale,
                    sack_permitted,
                    sack_blocks: [None; 4],
                    timestamps: ts.map(|(tsval, tsecr)| Timestamps { tsval, tsecr }),
                    timelost,
                };
                for (slot, block) in options.sack_blocks.iter_mut().zip(blocks) {
                    *slot = Some(block);
                }
                let mut n = options.sack_block_count();
                while options.buffer_len() > tcp::MAX_OPTIONS_LEN {
                    n -= 1;
                    options.sack_blocks[n] = None;
                }
                options
            },
        )
}

prop_compose! {
    fn tcp_parts()(
        src_port in any::<u16>(),
        dst_port in any::<u16>(),
        seq in any::<u32>(),
        ack in any::<u32>(),
        flags in any::<u8>(),
        window in any::<u16>(),
        urgent in any::<u16>(),
        options in tcp_options(),
        payload in proptest::collection::vec(any::<u8>(), 0..1500),
    ) -> (TcpRepr<'static>, Vec<u8>) {
        let repr = TcpRepr {
            src_port,
            dst_port,
            seq: SeqNumber(seq),
            ack: SeqNumber(ack),
            flags: TcpFlags(flags),
            window,
            urgent,
            options,
            payload: &[],
        };
        (repr, payload)
    }
}

proptest! {
    #[test]
    fn ipv4_round_trip(repr in ipv4_repr()) {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ipv4::Packet::new_unchecked(&mut buf[..]));
        let view = ipv4::Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Ipv4Repr::parse(&view), Ok(repr));
    }

    #[test]
    fn tcp_round_trip((template, payload) in tcp_parts(), src in addr(), dst in addr()) {
        let repr = TcpRepr { payload: &payload, ..template };
        let mut buf = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(&mut buf, src, dst), Ok(buf.len()));
        prop_assert_eq!(TcpRepr::parse(&buf, src, dst, true), Ok(repr));
    }

    #[test]
    fn udp_round_trip(
        src_port in any::<u16>(),
        dst_port in any::<u16>(),
        payload in proptest::collection::vec(any::<u8>(), 0..1500),
        src in addr(),
        dst in addr(),
    ) {
        let repr = UdpRepr { src_port, dst_port, payload: &payload };
        let mut buf = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(&mut buf, src, dst), Ok(buf.len()));
        prop_assert_ne!(&buf[6..8], &[0, 0]);
        prop_assert_eq!(UdpRepr::parse(&buf, src, dst, true), Ok(repr));
    }

    #[test]
    fn whole_datagram_round_trip((template, payload) in tcp_parts(), ip in ipv4_repr()) {
        let segment = TcpRepr { payload: &payload, ..template };
        let mut out = Vec::new();
        let len = packet::emit_tcp(&mut out, &ip, &segment).unwrap();
        prop_assert_eq!(len, out.len());
        let parsed = packet::parse(&out).unwrap();
        prop_assert_eq!(parsed.ip, Ipv4Repr {
            protocol: ipv4::protocol::TCP,
            payload_len: segment.buffer_len(),
            ..ip
        });
        prop_assert_eq!(parsed.transport, Transport::Tcp(segment));
    }

    /// Buffers are reused packet after packet: what an earlier datagram
    /// left behind must never leak into the next one, and the datagram
    /// must equal the segment emitted into zeroed memory.
    #[test]
    fn emitting_into_a_dirty_buffer_writes_every_byte(
        (template, payload) in tcp_parts(),
        ip in ipv4_repr(),
        garbage in any::<u8>(),
    ) {
        let segment = TcpRepr { payload: &payload, ..template };
        let mut dirty = vec![garbage; 1600];
        packet::emit_tcp(&mut dirty, &ip, &segment).unwrap();
        let mut clean = vec![0u8; segment.buffer_len()];
        segment.emit(&mut clean, ip.src, ip.dst).unwrap();
        prop_assert_eq!(&dirty[ipv4::HEADER_LEN..], &clean[..]);

        let mut dirty_slice = vec![garbage; segment.buffer_len()];
        segment.emit(&mut dirty_slice, ip.src, ip.dst).unwrap();
        prop_assert_eq!(&dirty_slice, &clean);

        let datagram = UdpRepr { src_port: 1, dst_port: 2, payload: &payload };
        let mut dirty = vec![garbage; 1600];
        packet::emit_udp(&mut dirty, &ip, &datagram).unwrap();
        let mut clean = vec![0u8; datagram.buffer_len()];
        datagram.emit(&mut clean, ip.src, ip.dst).unwrap();
        prop_assert_eq!(&dirty[ipv4::HEADER_LEN..], &clean[..]);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let a = Ipv4Addr::new(10, 0, 0, 1);
        let b = Ipv4Addr::new(10, 0, 0, 2);
        let _ = packet::parse(&bytes);
        let _ = TcpRepr::parse(&bytes, a, b, true);
        let _ = TcpRepr::parse(&bytes, a, b, false);
        let _ = UdpRepr::parse(&bytes, a, b, false);
        let _ = TcpOptions::parse(&bytes);
        if let Ok(view) = ipv4::Packet::new_checked(&bytes[..]) {
            let _ = (view.version(), view.options(), view.payload(), view.verify_checksum());
            let _ = (view.src_addr(), view.dst_addr(), view.frag_offset(), view.ident());
        }
        if let Ok(view) = tcp::Packet::new_checked(&bytes[..]) {
            let _ = (view.options(), view.payload(), view.verify_checksum(a, b));
            let _ = (view.seq_number(), view.flags(), view.urgent_at());
        }
    }

    /// Random bytes rarely get past the IPv4 header; start from a valid
    /// datagram with options and overwrite a few bytes instead.
    #[test]
    fn mutated_datagrams_never_panic(
        (template, payload) in tcp_parts(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let segment = TcpRepr { payload: &payload, ..template };
        let ip = Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: ipv4::protocol::TCP,
            ttl: 64,
            ident: 7,
            dont_fragment: true,
            tos: 0,
            payload_len: 0,
        };
        let mut out = Vec::new();
        packet::emit_tcp(&mut out, &ip, &segment).unwrap();
        for (index, value) in edits {
            let at = index.index(out.len());
            out[at] = value;
        }
        let _ = packet::parse(&out);
        let _ = TcpRepr::parse(&out[ipv4::HEADER_LEN..], ip.src, ip.dst, false);
    }
}
