//! ICMPv6 (RFC 4443) echo messages and RPL control messages (RFC 6550 §6).
//!
//! Written here rather than taken from smoltcp: smoltcp 0.12 (the newest
//! release that builds with our minimum Rust) has no switch to enable its
//! RPL messages, and its ICMPv6 parser needs its own checksum settings
//! type. The checksum is filled and verified by [`crate::ipv6`], which
//! knows the addresses of the pseudo header.
//!
//! RPL options are validated as a type-length-value sequence and kept as
//! bytes; [`RplOptions::iter`] walks them, [`push_rpl_option`] writes one.

use std::net::Ipv6Addr;

use crate::{Result, WireError, WireErrorKind};

/// ICMPv6 message types this crate understands.
pub mod msg_type {
    /// Echo Request (RFC 4443 §4.1).
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo Reply (RFC 4443 §4.2).
    pub const ECHO_REPLY: u8 = 129;
    /// RPL Control Message (RFC 6550 §6).
    pub const RPL_CONTROL: u8 = 155;
}

/// RPL control message codes (RFC 6550 §6, without security).
pub mod rpl_code {
    /// DODAG Information Solicitation.
    pub const DIS: u8 = 0x00;
    /// DODAG Information Object.
    pub const DIO: u8 = 0x01;
    /// Destination Advertisement Object.
    pub const DAO: u8 = 0x02;
    /// DAO acknowledgment.
    pub const DAO_ACK: u8 = 0x03;
}

/// RPL control message option types (RFC 6550 §6.7).
pub mod rpl_option {
    /// One byte of padding, with no length field.
    pub const PAD1: u8 = 0x00;
    /// N bytes of padding.
    pub const PADN: u8 = 0x01;
    /// DAG Metric Container.
    pub const DAG_METRIC_CONTAINER: u8 = 0x02;
    /// Route Information.
    pub const ROUTE_INFORMATION: u8 = 0x03;
    /// DODAG Configuration.
    pub const DODAG_CONFIGURATION: u8 = 0x04;
    /// RPL Target.
    pub const RPL_TARGET: u8 = 0x05;
    /// Transit Information.
    pub const TRANSIT_INFORMATION: u8 = 0x06;
    /// Solicited Information.
    pub const SOLICITED_INFORMATION: u8 = 0x07;
    /// Prefix Information.
    pub const PREFIX_INFORMATION: u8 = 0x08;
}

/// Length of the ICMPv6 header: type, code, checksum.
pub const HEADER_LEN: usize = 4;

/// An ICMPv6 message as plain values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Echo Request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// Data echoed back.
        data: &'a [u8],
    },
    /// Echo Reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// The request's data.
        data: &'a [u8],
    },
    /// An RPL control message.
    Rpl(RplRepr<'a>),
    /// Any other message, its body (after the 4-byte header) unparsed.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// Message body.
        body: &'a [u8],
    },
}

/// An RPL control message without security (RFC 6550 §6.2–6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RplRepr<'a> {
    /// DODAG Information Solicitation (§6.2).
    Dis {
        /// Options (Solicited Information, PadN).
        options: RplOptions<'a>,
    },
    /// DODAG Information Object (§6.3).
    Dio {
        /// RPLInstanceID.
        instance_id: u8,
        /// DODAG version number.
        version: u8,
        /// Rank of the sender.
        rank: u16,
        /// Grounded flag.
        grounded: bool,
        /// Mode of operation (3 bits; 2 is storing mode without multicast).
        mode_of_operation: u8,
        /// DODAG preference (3 bits).
        preference: u8,
        /// Destination Advertisement Trigger Sequence Number.
        dtsn: u8,
        /// DODAGID.
        dodag_id: Ipv6Addr,
        /// Options (DODAG Configuration, Prefix Information, ...).
        options: RplOptions<'a>,
    },
    /// Destination Advertisement Object (§6.4).
    Dao {
        /// RPLInstanceID.
        instance_id: u8,
        /// K flag: the sender expects a DAO-ACK.
        expect_ack: bool,
        /// DAOSequence.
        sequence: u8,
        /// DODAGID, present when the D flag is set.
        dodag_id: Option<Ipv6Addr>,
        /// Options (RPL Target, Transit Information, ...).
        options: RplOptions<'a>,
    },
    /// DAO acknowledgment (§6.5).
    DaoAck {
        /// RPLInstanceID.
        instance_id: u8,
        /// DAOSequence being acknowledged.
        sequence: u8,
        /// Status (0 is unqualified acceptance).
        status: u8,
        /// DODAGID, present when the D flag is set.
        dodag_id: Option<Ipv6Addr>,
        /// Options.
        options: RplOptions<'a>,
    },
}

/// RPL options: bytes known to be a well-formed option sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RplOptions<'a>(&'a [u8]);

/// One RPL option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RplOption<'a> {
    /// Option type (see [`rpl_option`]).
    pub kind: u8,
    /// Option data, after the type and length bytes (empty for Pad1).
    pub data: &'a [u8],
}

impl<'a> RplOptions<'a> {
    /// Checks that `bytes` is a sequence of whole options (Pad1 is one byte,
    /// every other option is type, length, then `length` bytes).
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let mut at = 0;
        while at < bytes.len() {
            if bytes[at] == rpl_option::PAD1 {
                at += 1;
                continue;
            }
            let Some(&len) = bytes.get(at + 1) else {
                return Err(WireError::new(
                    "rpl.option.length",
                    at + 1,
                    WireErrorKind::Truncated,
                ));
            };
            let end = at + 2 + usize::from(len);
            if end > bytes.len() {
                return Err(WireError::new(
                    "rpl.option.length",
                    at + 1,
                    WireErrorKind::Truncated,
                ));
            }
            at = end;
        }
        Ok(RplOptions(bytes))
    }

    /// The options' bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The options in order.
    pub fn iter(&self) -> impl Iterator<Item = RplOption<'a>> + 'a {
        let bytes = self.0;
        let mut at = 0;
        std::iter::from_fn(move || {
            let kind = *bytes.get(at)?;
            if kind == rpl_option::PAD1 {
                at += 1;
                return Some(RplOption { kind, data: &[] });
            }
            // Well-formed by construction (parse).
            let len = usize::from(bytes[at + 1]);
            let data = &bytes[at + 2..at + 2 + len];
            at += 2 + len;
            Some(RplOption { kind, data })
        })
    }
}

/// Appends one option (type, length, data) to `out`; Pad1 takes no data.
pub fn push_rpl_option(out: &mut Vec<u8>, kind: u8, data: &[u8]) -> Result<()> {
    if kind == rpl_option::PAD1 {
        if !data.is_empty() {
            return Err(WireError::new(
                "rpl.option.pad1",
                out.len(),
                WireErrorKind::BadLength,
            ));
        }
        out.push(kind);
        return Ok(());
    }
    let len = u8::try_from(data.len())
        .map_err(|_| WireError::new("rpl.option.length", out.len() + 1, WireErrorKind::TooLong))?;
    out.push(kind);
    out.push(len);
    out.extend_from_slice(data);
    Ok(())
}

const DIO_BASE_LEN: usize = 24;
const DIS_BASE_LEN: usize = 2;
const DAO_BASE_LEN: usize = 4;
const DAO_ACK_BASE_LEN: usize = 4;
const DIO_GROUNDED: u8 = 0x80;
const DAO_K: u8 = 0x80;
const DAO_D: u8 = 0x40;
const DAO_ACK_D: u8 = 0x80;

fn addr_at(bytes: &[u8], at: usize) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&bytes[at..at + 16]);
    Ipv6Addr::from(octets)
}

impl<'a> Icmpv6Repr<'a> {
    /// Parses an ICMPv6 message (the IPv6 payload). The checksum is not
    /// checked here (see [`crate::ipv6::parse`]). Offsets count from the
    /// start of the message.
    pub fn parse(message: &'a [u8]) -> Result<Self> {
        if message.len() < HEADER_LEN {
            return Err(WireError::new(
                "icmpv6.header",
                message.len(),
                WireErrorKind::Truncated,
            ));
        }
        let (msg_type, code, body) = (message[0], message[1], &message[HEADER_LEN..]);
        let truncated = |field| {
            Err(WireError::new(
                field,
                message.len(),
                WireErrorKind::Truncated,
            ))
        };
        let options_at = |base: usize| {
            RplOptions::parse(&body[base..]).map_err(|e| e.shifted(HEADER_LEN + base))
        };
        match msg_type {
            msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY => {
                if body.len() < 4 {
                    return truncated("icmpv6.echo");
                }
                let ident = u16::from_be_bytes([body[0], body[1]]);
                let seq = u16::from_be_bytes([body[2], body[3]]);
                let data = &body[4..];
                Ok(if msg_type == msg_type::ECHO_REQUEST {
                    Icmpv6Repr::EchoRequest { ident, seq, data }
                } else {
                    Icmpv6Repr::EchoReply { ident, seq, data }
                })
            }
            msg_type::RPL_CONTROL => {
                let rpl = match code {
                    rpl_code::DIS => {
                        if body.len() < DIS_BASE_LEN {
                            return truncated("rpl.dis");
                        }
                        RplRepr::Dis {
                            options: options_at(DIS_BASE_LEN)?,
                        }
                    }
                    rpl_code::DIO => {
                        if body.len() < DIO_BASE_LEN {
                            return truncated("rpl.dio");
                        }
                        RplRepr::Dio {
                            instance_id: body[0],
                            version: body[1],
                            rank: u16::from_be_bytes([body[2], body[3]]),
                            grounded: body[4] & DIO_GROUNDED != 0,
                            mode_of_operation: (body[4] >> 3) & 0b111,
                            preference: body[4] & 0b111,
                            dtsn: body[5],
                            dodag_id: addr_at(body, 8),
                            options: options_at(DIO_BASE_LEN)?,
                        }
                    }
                    rpl_code::DAO => {
                        if body.len() < DAO_BASE_LEN {
                            return truncated("rpl.dao");
                        }
                        let has_id = body[1] & DAO_D != 0;
                        let base = DAO_BASE_LEN + if has_id { 16 } else { 0 };
                        if body.len() < base {
                            return truncated("rpl.dao.dodag_id");
                        }
                        RplRepr::Dao {
                            instance_id: body[0],
                            expect_ack: body[1] & DAO_K != 0,
                            sequence: body[3],
                            dodag_id: has_id.then(|| addr_at(body, DAO_BASE_LEN)),
                            options: options_at(base)?,
                        }
                    }
                    rpl_code::DAO_ACK => {
                        if body.len() < DAO_ACK_BASE_LEN {
                            return truncated("rpl.dao_ack");
                        }
                        let has_id = body[1] & DAO_ACK_D != 0;
                        let base = DAO_ACK_BASE_LEN + if has_id { 16 } else { 0 };
                        if body.len() < base {
                            return truncated("rpl.dao_ack.dodag_id");
                        }
                        RplRepr::DaoAck {
                            instance_id: body[0],
                            sequence: body[2],
                            status: body[3],
                            dodag_id: has_id.then(|| addr_at(body, DAO_ACK_BASE_LEN)),
                            options: options_at(base)?,
                        }
                    }
                    _ => {
                        return Ok(Icmpv6Repr::Other {
                            msg_type,
                            code,
                            body,
                        })
                    }
                };
                Ok(Icmpv6Repr::Rpl(rpl))
            }
            _ => Ok(Icmpv6Repr::Other {
                msg_type,
                code,
                body,
            }),
        }
    }

    fn type_code(&self) -> (u8, u8) {
        match self {
            Icmpv6Repr::EchoRequest { .. } => (msg_type::ECHO_REQUEST, 0),
            Icmpv6Repr::EchoReply { .. } => (msg_type::ECHO_REPLY, 0),
            Icmpv6Repr::Rpl(rpl) => (
                msg_type::RPL_CONTROL,
                match rpl {
                    RplRepr::Dis { .. } => rpl_code::DIS,
                    RplRepr::Dio { .. } => rpl_code::DIO,
                    RplRepr::Dao { .. } => rpl_code::DAO,
                    RplRepr::DaoAck { .. } => rpl_code::DAO_ACK,
                },
            ),
            Icmpv6Repr::Other { msg_type, code, .. } => (*msg_type, *code),
        }
    }

    /// Length of the message.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => {
                    4 + data.len()
                }
                Icmpv6Repr::Rpl(RplRepr::Dis { options }) => DIS_BASE_LEN + options.0.len(),
                Icmpv6Repr::Rpl(RplRepr::Dio { options, .. }) => DIO_BASE_LEN + options.0.len(),
                Icmpv6Repr::Rpl(RplRepr::Dao {
                    dodag_id, options, ..
                }) => DAO_BASE_LEN + dodag_id.map_or(0, |_| 16) + options.0.len(),
                Icmpv6Repr::Rpl(RplRepr::DaoAck {
                    dodag_id, options, ..
                }) => DAO_ACK_BASE_LEN + dodag_id.map_or(0, |_| 16) + options.0.len(),
                Icmpv6Repr::Other { body, .. } => body.len(),
            }
    }

    /// Writes the message into `buf[..buffer_len()]` with a zero checksum
    /// (the pseudo header's addresses are needed to fill it: see
    /// [`crate::ipv6::emit_icmpv6`]).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(WireError::new(
                "icmpv6",
                buf.len(),
                WireErrorKind::BufferTooSmall,
            ));
        }
        let buf = &mut buf[..len];
        buf.fill(0);
        let (t, c) = self.type_code();
        buf[0] = t;
        buf[1] = c;
        let body = &mut buf[HEADER_LEN..];
        let bad = |field| {
            Err(WireError::new(
                field,
                HEADER_LEN + 4,
                WireErrorKind::BadValue,
            ))
        };
        match *self {
            Icmpv6Repr::EchoRequest { ident, seq, data }
            | Icmpv6Repr::EchoReply { ident, seq, data } => {
                body[0..2].copy_from_slice(&ident.to_be_bytes());
                body[2..4].copy_from_slice(&seq.to_be_bytes());
                body[4..].copy_from_slice(data);
            }
            Icmpv6Repr::Rpl(RplRepr::Dis { options }) => {
                body[DIS_BASE_LEN..].copy_from_slice(options.0);
            }
            Icmpv6Repr::Rpl(RplRepr::Dio {
                instance_id,
                version,
                rank,
                grounded,
                mode_of_operation,
                preference,
                dtsn,
                dodag_id,
                options,
            }) => {
                if mode_of_operation > 0b111 {
                    return bad("rpl.dio.mode_of_operation");
                }
                if preference > 0b111 {
                    return bad("rpl.dio.preference");
                }
                body[0] = instance_id;
                body[1] = version;
                body[2..4].copy_from_slice(&rank.to_be_bytes());
                body[4] =
                    if grounded { DIO_GROUNDED } else { 0 } | (mode_of_operation << 3) | preference;
                body[5] = dtsn;
                body[8..24].copy_from_slice(&dodag_id.octets());
                body[DIO_BASE_LEN..].copy_from_slice(options.0);
            }
            Icmpv6Repr::Rpl(RplRepr::Dao {
                instance_id,
                expect_ack,
                sequence,
                dodag_id,
                options,
            }) => {
                body[0] = instance_id;
                body[1] =
                    if expect_ack { DAO_K } else { 0 } | if dodag_id.is_some() { DAO_D } else { 0 };
                body[3] = sequence;
                let mut at = DAO_BASE_LEN;
                if let Some(id) = dodag_id {
                    body[at..at + 16].copy_from_slice(&id.octets());
                    at += 16;
                }
                body[at..].copy_from_slice(options.0);
            }
            Icmpv6Repr::Rpl(RplRepr::DaoAck {
                instance_id,
                sequence,
                status,
                dodag_id,
                options,
            }) => {
                body[0] = instance_id;
                body[1] = if dodag_id.is_some() { DAO_ACK_D } else { 0 };
                body[2] = sequence;
                body[3] = status;
                let mut at = DAO_ACK_BASE_LEN;
                if let Some(id) = dodag_id {
                    body[at..at + 16].copy_from_slice(&id.octets());
                    at += 16;
                }
                body[at..].copy_from_slice(options.0);
            }
            Icmpv6Repr::Other { body: data, .. } => body.copy_from_slice(data),
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::{self, Ipv6Repr, Transport6};

    fn ip() -> Ipv6Repr {
        Ipv6Repr {
            src: "fe80::212:4b00:0:1".parse().unwrap(),
            dst: "ff02::1a".parse().unwrap(),
            next_header: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 0,
        }
    }

    fn round_trip(msg: Icmpv6Repr) -> Vec<u8> {
        let mut out = Vec::new();
        ipv6::emit_icmpv6(&mut out, &ip(), &msg).unwrap();
        let parsed = ipv6::parse(&out).unwrap();
        assert_eq!(parsed.transport, Transport6::Icmpv6(msg));
        out
    }

    #[test]
    fn echo_round_trip_and_checksum_against_smoltcp() {
        let out = round_trip(Icmpv6Repr::EchoRequest {
            ident: 0x1234,
            seq: 7,
            data: b"ping",
        });
        let packet = smoltcp::wire::Ipv6Packet::new_checked(&out[..]).unwrap();
        let icmp = smoltcp::wire::Icmpv6Packet::new_checked(packet.payload()).unwrap();
        assert!(icmp.verify_checksum(&packet.src_addr(), &packet.dst_addr()));
        assert_eq!((icmp.echo_ident(), icmp.echo_seq_no()), (0x1234, 7));
        round_trip(Icmpv6Repr::EchoReply {
            ident: 1,
            seq: 2,
            data: &[],
        });
    }

    #[test]
    fn rpl_messages_round_trip() {
        // A DODAG Configuration option with Contiki's defaults would be
        // built by the RPL layer; here any well-formed bytes will do.
        let mut opts = Vec::new();
        push_rpl_option(&mut opts, rpl_option::DODAG_CONFIGURATION, &[0; 14]).unwrap();
        push_rpl_option(&mut opts, rpl_option::PAD1, &[]).unwrap();
        let options = RplOptions::parse(&opts).unwrap();
        let kinds: Vec<u8> = options.iter().map(|o| o.kind).collect();
        assert_eq!(kinds, [rpl_option::DODAG_CONFIGURATION, rpl_option::PAD1]);
        let dodag_id: Ipv6Addr = "fd00::212:4b00:0:1".parse().unwrap();
        let dio = Icmpv6Repr::Rpl(RplRepr::Dio {
            instance_id: 30,
            version: 240,
            rank: 256,
            grounded: true,
            mode_of_operation: 2,
            preference: 0,
            dtsn: 240,
            dodag_id,
            options,
        });
        let out = round_trip(dio);
        assert_eq!(out.len(), 40 + 4 + 24 + 16 + 1);
        assert_eq!(out[44 + 4], 0x80 | 2 << 3);
        round_trip(Icmpv6Repr::Rpl(RplRepr::Dis {
            options: RplOptions::default(),
        }));
        let mut target = Vec::new();
        let mut target_data = vec![0, 128];
        target_data.extend_from_slice(&dodag_id.octets());
        push_rpl_option(&mut target, rpl_option::RPL_TARGET, &target_data).unwrap();
        for id in [None, Some(dodag_id)] {
            round_trip(Icmpv6Repr::Rpl(RplRepr::Dao {
                instance_id: 30,
                expect_ack: true,
                sequence: 9,
                dodag_id: id,
                options: RplOptions::parse(&target).unwrap(),
            }));
            round_trip(Icmpv6Repr::Rpl(RplRepr::DaoAck {
                instance_id: 30,
                sequence: 9,
                status: 0,
                dodag_id: id,
                options: RplOptions::default(),
            }));
        }
    }

    #[test]
    fn malformed_options_are_named() {
        let e = RplOptions::parse(&[rpl_option::PADN, 3, 0, 0]).unwrap_err();
        assert_eq!((e.field, e.offset), ("rpl.option.length", 1));
        let e = RplOptions::parse(&[0, 0, rpl_option::PADN]).unwrap_err();
        assert_eq!(e.offset, 3);
        // In a DIS, the option offset is counted from the message start.
        let e = Icmpv6Repr::parse(&[155, 0, 0, 0, 0, 0, 1, 5]).unwrap_err();
        assert_eq!((e.field, e.offset), ("rpl.option.length", 7));
        assert_eq!(
            Icmpv6Repr::parse(&[155, 1, 0, 0, 1, 2]).unwrap_err().field,
            "rpl.dio"
        );
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            if let Ok(repr) = Icmpv6Repr::parse(&bytes) {
                // What parses re-emits to the same length.
                let mut buf = vec![0; repr.buffer_len()];
                if repr.emit(&mut buf).is_ok() {
                    proptest::prop_assert_eq!(buf.len(), bytes.len());
                }
            }
        }
    }
}
