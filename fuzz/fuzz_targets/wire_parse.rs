//! The wire parser on arbitrary bytes.
//!
//! The input is one IPv4 datagram. Every parser must return a value or an
//! error, never panic; whatever parses must survive emit → parse unchanged
//! (up to what emit cannot express: IPv4 options, unknown TCP options and
//! the option layout, bytes past a UDP datagram's length).
//!
//! The same bytes are also a serial line for the SLIP decoder, and a
//! datagram for the SLIP encoder.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rtolab_wire::ipv4::{self, Ipv4Repr};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::slip;
use rtolab_wire::tcp::{self, TcpOptions, TcpRepr};
use rtolab_wire::udp::{self, UdpRepr};
use rtolab_wire::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    whole_datagram(data);
    pieces(data);
    serial_line(data);
});

/// SLIP: decoding any line yields frames within the limit and errors that
/// point into the line; every frame and the input itself survive encode
/// then decode.
fn serial_line(data: &[u8]) {
    for max_len in [16, 2048] {
        let mut decoder = slip::Decoder::new(max_len);
        let mut frames = Vec::new();
        for out in decoder.decode(data) {
            match out {
                Ok(frame) => {
                    assert!(!frame.is_empty() && frame.len() <= max_len);
                    frames.push(frame);
                }
                Err(e) => assert!(e.offset < data.len(), "{e}"),
            }
        }
        assert_eq!(decoder.offset(), data.len());
        let mut line = Vec::new();
        for frame in &frames {
            assert_eq!(slip::encode(frame, &mut line), slip::encoded_len(frame));
        }
        let again: Vec<_> = slip::Decoder::new(max_len).decode(&line).collect();
        assert_eq!(again, frames.into_iter().map(Ok).collect::<Vec<_>>());
    }
    if !data.is_empty() {
        let mut line = Vec::new();
        slip::encode(data, &mut line);
        let again: Vec<_> = slip::Decoder::new(data.len()).decode(&line).collect();
        assert_eq!(again, [Ok(data.to_vec())]);
    }
}

/// `packet::parse`, then emit what it parsed and parse that again.
fn whole_datagram(data: &[u8]) {
    let Ok(parsed) = packet::parse(data) else {
        return;
    };
    let mut out = Vec::new();
    match parsed.transport {
        Transport::Tcp(segment) => {
            // Parsed options may not fit Linux's layout in 40 bytes (it pads
            // each group); emit must then refuse, not truncate.
            if segment.header_len() > tcp::MAX_HEADER_LEN {
                assert!(packet::emit_tcp(&mut out, &parsed.ip, &segment).is_err());
                return;
            }
            let len = packet::emit_tcp(&mut out, &parsed.ip, &segment).expect("fits");
            assert_eq!(len, out.len());
            let again = packet::parse(&out).expect("emitted TCP datagram parses");
            // Options are re-laid out and unknown ones dropped: the
            // length may change, nothing else.
            let payload_len = segment.buffer_len();
            assert_eq!(
                again.ip,
                Ipv4Repr {
                    payload_len,
                    ..parsed.ip
                }
            );
            assert_eq!(again.transport, Transport::Tcp(segment));
        }
        Transport::Udp(datagram) => {
            let len = packet::emit_udp(&mut out, &parsed.ip, &datagram).expect("fits");
            assert_eq!(len, out.len());
            let again = packet::parse(&out).expect("emitted UDP datagram parses");
            // Bytes past the UDP length are dropped, so the IPv4 payload may shrink.
            let payload_len = datagram.buffer_len();
            assert_eq!(
                again.ip,
                Ipv4Repr {
                    payload_len,
                    ..parsed.ip
                }
            );
            assert_eq!(again.transport, Transport::Udp(datagram));
        }
        Transport::Other { protocol, payload } => {
            // No emit for other protocols: the header alone, then the payload.
            let mut buf = vec![0u8; ipv4::HEADER_LEN + payload.len()];
            parsed
                .ip
                .emit(&mut ipv4::Packet::new_unchecked(&mut buf[..]));
            buf[ipv4::HEADER_LEN..].copy_from_slice(payload);
            let again = packet::parse(&buf).expect("emitted datagram parses");
            assert_eq!(again.ip, parsed.ip);
            assert_eq!(again.transport, Transport::Other { protocol, payload });
        }
    }
}

/// The per-layer parsers and views on the same bytes, without the layers
/// below them (as a middlebox or a test would call them).
fn pieces(data: &[u8]) {
    let a = Ipv4Addr::new(10, 0, 0, 1);
    let b = Ipv4Addr::new(10, 0, 0, 2);
    for verify in [true, false] {
        if let Ok(segment) = TcpRepr::parse(data, a, b, verify) {
            tcp_round_trip(&segment, a, b);
        }
        if let Ok(datagram) = UdpRepr::parse(data, a, b, verify) {
            let mut buf = vec![0u8; datagram.buffer_len()];
            if datagram.emit(&mut buf, a, b).is_ok() {
                assert_eq!(UdpRepr::parse(&buf, a, b, true), Ok(datagram));
            }
        }
    }
    if let Ok(options) = TcpOptions::parse(data) {
        let mut buf = [0u8; tcp::MAX_OPTIONS_LEN];
        match options.emit(&mut buf) {
            Ok(len) => {
                assert_eq!(len, options.buffer_len());
                assert_eq!(TcpOptions::parse(&buf[..len]), Ok(options));
            }
            Err(_) => assert!(options.buffer_len() > tcp::MAX_OPTIONS_LEN),
        }
    }
    if let Ok(view) = ipv4::Packet::new_checked(data) {
        let _ = (view.version(), view.options(), view.payload());
        let _ = (view.verify_checksum(), view.frag_offset(), view.ttl());
        if let Ok(ip) = Ipv4Repr::parse(&view) {
            assert_eq!(ip.payload_len, view.payload().len());
        }
    }
    if let Ok(view) = tcp::Packet::new_checked(data) {
        let _ = (view.options(), view.payload(), view.verify_checksum(a, b));
        let _ = (view.seq_number(), view.flags(), view.urgent_at());
    }
    if let Ok(view) = udp::Packet::new_checked(data) {
        let _ = (view.payload(), view.verify_checksum(a, b), view.len());
    }
}

/// A segment parsed on its own: emit it and parse it back.
fn tcp_round_trip(segment: &TcpRepr, src: Ipv4Addr, dst: Ipv4Addr) {
    let mut buf = vec![0u8; segment.buffer_len()];
    match segment.emit(&mut buf, src, dst) {
        Ok(len) => {
            assert_eq!(len, buf.len());
            assert_eq!(TcpRepr::parse(&buf, src, dst, true), Ok(*segment));
        }
        Err(_) => assert!(segment.header_len() > tcp::MAX_HEADER_LEN),
    }
}
