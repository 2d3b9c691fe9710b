//! Zero-copy views and representations of IPv4, IPv6, UDP and TCP packets,
//! TCP options, IEEE 802.15.4 frames, 6LoWPAN, SLIP and pcap writing.
//!
//! Each protocol has two layers:
//!
//! * `Packet<T>`: a view over a byte buffer with one accessor per header
//!   field, reading and writing in place ([`ipv4::Packet`], [`tcp::Packet`],
//!   [`udp::Packet`]);
//! * a `Repr`: the fields as plain values, with `parse` (bytes → value,
//!   validating everything) and `emit` (value → bytes, checksums included)
//!   ([`ipv4::Ipv4Repr`], [`tcp::TcpRepr`], [`udp::UdpRepr`]).
//!
//! [`packet`] parses and emits whole datagrams in one call; [`pcap`] writes
//! them to capture files and [`capture`] reads pcap and pcapng files taken
//! anywhere, down to each frame's IP datagram.
//!
//! For the low-power mesh (docs/mesh.md): [`ipv6`] (whole IPv6 datagrams
//! with TCP, UDP or ICMPv6), [`icmpv6`] (echo, RPL control messages),
//! [`ieee802154`] (data and ACK frames, FCS, airtime) and [`sixlowpan`]
//! (IPHC compression, fragmentation, reassembly), built on the `smoltcp`
//! crate's wire module without exposing its types; [`slip`] (RFC 1055
//! framing and serial-line timing) for the border router's serial link.
//!
//! # Panic safety
//!
//! Nothing that parses bytes from outside panics, whatever the bytes:
//!
//! * every `Repr::parse` and [`packet::parse`] returns a [`WireError`] that
//!   names the field (`ipv4.total_len`, `tcp.options.sack`) and the byte
//!   offset instead;
//! * `Packet::new_checked` (equivalently `new_unchecked` then `check_len`)
//!   is the only length check: once it succeeds, no accessor of that view
//!   can panic. Accessors of a view made with `new_unchecked` alone may
//!   panic on a short buffer, as may setters on a buffer too short for the
//!   field.
//!
//! Emitting fails with an error when the output does not fit (options over
//! 40 bytes, a buffer that is too small). Only `Ipv4Repr::emit` and the
//! `fill_checksum` setters, whose signatures cannot return errors, panic on
//! impossible lengths, as their docs say.
//!
//! # Example
//!
//! ```
//! use rtolab_wire::packet::{self, Transport};
//! use rtolab_wire::ipv4::{protocol, Ipv4Repr};
//! use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
//! use rtolab_wire::Ipv4Addr;
//!
//! let ip = Ipv4Repr {
//!     src: Ipv4Addr::new(10, 0, 0, 1),
//!     dst: Ipv4Addr::new(10, 0, 0, 2),
//!     protocol: protocol::TCP,
//!     ttl: 64,
//!     ident: 1,
//!     dont_fragment: true,
//!     tos: 0,
//!     payload_len: 0, // filled in by emit_tcp
//! };
//! let syn = TcpRepr {
//!     src_port: 40000,
//!     dst_port: 80,
//!     seq: SeqNumber(1000),
//!     ack: SeqNumber(0),
//!     flags: TcpFlags::SYN,
//!     window: 64240,
//!     urgent: 0,
//!     options: TcpOptions { mss: Some(1460), sack_permitted: true, ..Default::default() },
//!     payload: &[],
//! };
//!
//! let mut bytes = Vec::new();
//! let len = packet::emit_tcp(&mut bytes, &ip, &syn)?;
//! assert_eq!(len, 20 + 28);
//!
//! let parsed = packet::parse(&bytes)?;
//! assert_eq!(parsed.ip.payload_len, 28);
//! assert_eq!(parsed.transport, Transport::Tcp(syn));
//!
//! // One flipped bit is caught and named.
//! bytes[30] ^= 0x01;
//! let err = packet::parse(&bytes).unwrap_err();
//! assert_eq!(err.to_string(), "tcp.checksum: bad checksum at byte 36");
//! # Ok::<(), rtolab_wire::WireError>(())
//! ```

#![warn(missing_docs)]

pub mod capture;
pub mod checksum;
mod error;
pub mod icmpv6;
pub mod ieee80211;
pub mod ieee802154;
pub mod ipv4;
pub mod ipv6;
pub mod packet;
pub mod pcap;
pub mod sixlowpan;
pub mod slip;
pub mod tcp;
pub mod timelost;
pub mod udp;

pub use error::{WireError, WireErrorKind};
pub use std::net::{Ipv4Addr, Ipv6Addr};

/// Result of every fallible function of this crate.
pub type Result<T> = core::result::Result<T, WireError>;
