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
//! The options RPL's storing mode needs have typed forms that read an
//! option's data and push a whole option: [`DodagConfiguration`],
//! [`PrefixInformation`], [`RplTarget`] and [`TransitInformation`].

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

/// Reads the data of a fixed-length option, naming `field` when the length
/// is wrong. Offsets count from the start of the option data.
fn fixed<'a, const N: usize>(data: &'a [u8], field: &'static str) -> Result<&'a [u8; N]> {
    data.try_into().map_err(|_| {
        WireError::new(
            field,
            data.len().min(N),
            if data.len() < N {
                WireErrorKind::Truncated
            } else {
                WireErrorKind::BadLength
            },
        )
    })
}

/// The DODAG Configuration option (RFC 6550 §6.7.6): the DODAG's Trickle
/// parameters, rank increments, objective function and route lifetimes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DodagConfiguration {
    /// A flag: authentication is enabled (never, without security).
    pub authentication: bool,
    /// Path Control Size (3 bits).
    pub path_control_size: u8,
    /// DIOIntervalDoublings.
    pub dio_interval_doublings: u8,
    /// DIOIntervalMin: the smallest Trickle interval is 2^this ms.
    pub dio_interval_min: u8,
    /// DIORedundancyConstant (0 disables suppression).
    pub dio_redundancy: u8,
    /// MaxRankIncrease (0 disables the limit).
    pub max_rank_increase: u16,
    /// MinHopRankIncrease.
    pub min_hop_rank_increase: u16,
    /// Objective Code Point (1 is MRHOF, RFC 6719).
    pub objective_code_point: u16,
    /// Default route lifetime, in lifetime units.
    pub default_lifetime: u8,
    /// Lifetime unit, in seconds.
    pub lifetime_unit: u16,
}

impl DodagConfiguration {
    /// Length of the option data.
    pub const LEN: usize = 14;

    /// Reads the option data (after type and length).
    pub fn parse(data: &[u8]) -> Result<Self> {
        let d = fixed::<{ Self::LEN }>(data, "rpl.dodag_configuration")?;
        let be = |at: usize| u16::from_be_bytes([d[at], d[at + 1]]);
        Ok(DodagConfiguration {
            authentication: d[0] & 0x08 != 0,
            path_control_size: d[0] & 0x07,
            dio_interval_doublings: d[1],
            dio_interval_min: d[2],
            dio_redundancy: d[3],
            max_rank_increase: be(4),
            min_hop_rank_increase: be(6),
            objective_code_point: be(8),
            default_lifetime: d[11],
            lifetime_unit: be(12),
        })
    }

    /// Appends the whole option (type, length, data) to `out`.
    pub fn push(&self, out: &mut Vec<u8>) -> Result<()> {
        if self.path_control_size > 0b111 {
            return Err(WireError::new(
                "rpl.dodag_configuration.path_control_size",
                out.len() + 2,
                WireErrorKind::BadValue,
            ));
        }
        let mut d = [0u8; Self::LEN];
        d[0] = if self.authentication { 0x08 } else { 0 } | self.path_control_size;
        d[1] = self.dio_interval_doublings;
        d[2] = self.dio_interval_min;
        d[3] = self.dio_redundancy;
        d[4..6].copy_from_slice(&self.max_rank_increase.to_be_bytes());
        d[6..8].copy_from_slice(&self.min_hop_rank_increase.to_be_bytes());
        d[8..10].copy_from_slice(&self.objective_code_point.to_be_bytes());
        d[11] = self.default_lifetime;
        d[12..14].copy_from_slice(&self.lifetime_unit.to_be_bytes());
        push_rpl_option(out, rpl_option::DODAG_CONFIGURATION, &d)
    }
}

/// The Prefix Information option (RFC 6550 §6.7.10, laid out as RFC 4861
/// §4.6.2's): the prefix nodes configure their global address from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixInformation {
    /// Prefix length in bits (at most 128).
    pub prefix_len: u8,
    /// L flag: the prefix is on-link.
    pub on_link: bool,
    /// A flag: the prefix may be used for address autoconfiguration.
    pub autonomous: bool,
    /// R flag: the prefix field carries the sender's whole address.
    pub router_address: bool,
    /// Valid lifetime in seconds (all ones is infinity).
    pub valid_lifetime: u32,
    /// Preferred lifetime in seconds (all ones is infinity).
    pub preferred_lifetime: u32,
    /// The prefix (or the router's address when `router_address`).
    pub prefix: Ipv6Addr,
}

impl PrefixInformation {
    /// Length of the option data.
    pub const LEN: usize = 30;

    /// Reads the option data (after type and length).
    pub fn parse(data: &[u8]) -> Result<Self> {
        let d = fixed::<{ Self::LEN }>(data, "rpl.prefix_information")?;
        if d[0] > 128 {
            return Err(WireError::new(
                "rpl.prefix_information.prefix_len",
                0,
                WireErrorKind::BadValue,
            ));
        }
        let be32 = |at: usize| u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
        Ok(PrefixInformation {
            prefix_len: d[0],
            on_link: d[1] & 0x80 != 0,
            autonomous: d[1] & 0x40 != 0,
            router_address: d[1] & 0x20 != 0,
            valid_lifetime: be32(2),
            preferred_lifetime: be32(6),
            prefix: addr_at(d, 14),
        })
    }

    /// Appends the whole option (type, length, data) to `out`.
    pub fn push(&self, out: &mut Vec<u8>) -> Result<()> {
        if self.prefix_len > 128 {
            return Err(WireError::new(
                "rpl.prefix_information.prefix_len",
                out.len() + 2,
                WireErrorKind::BadValue,
            ));
        }
        let mut d = [0u8; Self::LEN];
        d[0] = self.prefix_len;
        d[1] = if self.on_link { 0x80 } else { 0 }
            | if self.autonomous { 0x40 } else { 0 }
            | if self.router_address { 0x20 } else { 0 };
        d[2..6].copy_from_slice(&self.valid_lifetime.to_be_bytes());
        d[6..10].copy_from_slice(&self.preferred_lifetime.to_be_bytes());
        d[14..30].copy_from_slice(&self.prefix.octets());
        push_rpl_option(out, rpl_option::PREFIX_INFORMATION, &d)
    }
}

/// The RPL Target option (RFC 6550 §6.7.7): an address or prefix reachable
/// through the DAO's sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RplTarget {
    /// Prefix length in bits (128 for one address).
    pub prefix_len: u8,
    /// The target; bits past `prefix_len` are zero.
    pub prefix: Ipv6Addr,
}

impl RplTarget {
    /// Reads the option data (after type and length): flags, prefix length,
    /// then the prefix in as few bytes as hold `prefix_len` bits.
    pub fn parse(data: &[u8]) -> Result<Self> {
        if data.len() < 2 {
            return Err(WireError::new(
                "rpl.target",
                data.len(),
                WireErrorKind::Truncated,
            ));
        }
        let prefix_len = data[1];
        if prefix_len > 128 {
            return Err(WireError::new(
                "rpl.target.prefix_len",
                1,
                WireErrorKind::BadValue,
            ));
        }
        let bytes = usize::from(prefix_len).div_ceil(8);
        if data.len() < 2 + bytes {
            return Err(WireError::new(
                "rpl.target.prefix",
                data.len(),
                WireErrorKind::Truncated,
            ));
        }
        let mut octets = [0u8; 16];
        octets[..bytes].copy_from_slice(&data[2..2 + bytes]);
        Ok(RplTarget {
            prefix_len,
            prefix: Ipv6Addr::from(mask(octets, prefix_len)),
        })
    }

    /// Appends the whole option (type, length, data) to `out`, the prefix
    /// in as few bytes as hold `prefix_len` bits.
    pub fn push(&self, out: &mut Vec<u8>) -> Result<()> {
        if self.prefix_len > 128 {
            return Err(WireError::new(
                "rpl.target.prefix_len",
                out.len() + 3,
                WireErrorKind::BadValue,
            ));
        }
        let bytes = usize::from(self.prefix_len).div_ceil(8);
        let octets = mask(self.prefix.octets(), self.prefix_len);
        let mut d = vec![0, self.prefix_len];
        d.extend_from_slice(&octets[..bytes]);
        push_rpl_option(out, rpl_option::RPL_TARGET, &d)
    }
}

/// Zeroes the bits of `octets` past the first `len`.
fn mask(mut octets: [u8; 16], len: u8) -> [u8; 16] {
    for (i, byte) in octets.iter_mut().enumerate() {
        let keep = usize::from(len).saturating_sub(i * 8).min(8);
        *byte &= !(0xffu8.checked_shr(keep as u32).unwrap_or(0));
    }
    octets
}

/// The Transit Information option (RFC 6550 §6.7.8): the lifetime of the
/// targets before it in a DAO, and optionally the sender's parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransitInformation {
    /// E flag: the parent is an external (non-RPL) one.
    pub external: bool,
    /// Path Control.
    pub path_control: u8,
    /// Path Sequence.
    pub path_sequence: u8,
    /// Path Lifetime, in lifetime units (0 is a No-Path: the route is gone).
    pub path_lifetime: u8,
    /// Parent Address (needed in non-storing mode only).
    pub parent: Option<Ipv6Addr>,
}

impl TransitInformation {
    /// Reads the option data (after type and length): 4 bytes, or 20 with
    /// a parent address.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let parent = match data.len() {
            4 => None,
            20 => Some(addr_at(data, 4)),
            n => {
                return Err(WireError::new(
                    "rpl.transit_information",
                    n.min(4),
                    if n < 4 {
                        WireErrorKind::Truncated
                    } else {
                        WireErrorKind::BadLength
                    },
                ))
            }
        };
        Ok(TransitInformation {
            external: data[0] & 0x80 != 0,
            path_control: data[1],
            path_sequence: data[2],
            path_lifetime: data[3],
            parent,
        })
    }

    /// Appends the whole option (type, length, data) to `out`.
    pub fn push(&self, out: &mut Vec<u8>) -> Result<()> {
        let mut d = vec![
            if self.external { 0x80 } else { 0 },
            self.path_control,
            self.path_sequence,
            self.path_lifetime,
        ];
        if let Some(parent) = self.parent {
            d.extend_from_slice(&parent.octets());
        }
        push_rpl_option(out, rpl_option::TRANSIT_INFORMATION, &d)
    }
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
    fn typed_options_round_trip() {
        let conf = DodagConfiguration {
            authentication: false,
            path_control_size: 0,
            dio_interval_doublings: 8,
            dio_interval_min: 12,
            dio_redundancy: 10,
            max_rank_increase: 1792,
            min_hop_rank_increase: 256,
            objective_code_point: 1,
            default_lifetime: 0xff,
            lifetime_unit: 0xffff,
        };
        let prefix = PrefixInformation {
            prefix_len: 64,
            on_link: false,
            autonomous: true,
            router_address: false,
            valid_lifetime: u32::MAX,
            preferred_lifetime: 3600,
            prefix: "fd00::".parse().unwrap(),
        };
        let target = RplTarget {
            prefix_len: 128,
            prefix: "fd00::212:7402:2:202".parse().unwrap(),
        };
        let transit = TransitInformation {
            external: false,
            path_control: 0,
            path_sequence: 3,
            path_lifetime: 0x1e,
            parent: None,
        };
        let with_parent = TransitInformation {
            external: true,
            parent: Some("fd00::1".parse().unwrap()),
            ..transit
        };
        let mut out = Vec::new();
        conf.push(&mut out).unwrap();
        prefix.push(&mut out).unwrap();
        target.push(&mut out).unwrap();
        transit.push(&mut out).unwrap();
        with_parent.push(&mut out).unwrap();
        // Lengths from RFC 6550 §6.7: 14, 30, 2 + 16, 4, 20.
        assert_eq!(out.len(), 16 + 32 + 20 + 6 + 22);
        let opts: Vec<RplOption> = RplOptions::parse(&out).unwrap().iter().collect();
        assert_eq!(DodagConfiguration::parse(opts[0].data).unwrap(), conf);
        assert_eq!(PrefixInformation::parse(opts[1].data).unwrap(), prefix);
        assert_eq!(RplTarget::parse(opts[2].data).unwrap(), target);
        assert_eq!(TransitInformation::parse(opts[3].data).unwrap(), transit);
        assert_eq!(
            TransitInformation::parse(opts[4].data).unwrap(),
            with_parent
        );
        // The A flag is bit 6 of the flags byte, as tshark reads it.
        assert_eq!(opts[1].data[1], 0x40);
        // A shorter target takes only the bytes its length needs, and bits
        // past the length are cleared.
        let short = RplTarget {
            prefix_len: 60,
            prefix: "fd00:0:0:ffff::".parse().unwrap(),
        };
        let mut out = Vec::new();
        short.push(&mut out).unwrap();
        assert_eq!(out.len(), 2 + 2 + 8);
        let back = RplTarget::parse(&out[2..]).unwrap();
        assert_eq!(back.prefix, "fd00:0:0:fff0::".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn malformed_typed_options_are_named() {
        let e = DodagConfiguration::parse(&[0; 13]).unwrap_err();
        assert_eq!(
            (e.field, e.kind),
            ("rpl.dodag_configuration", WireErrorKind::Truncated)
        );
        let e = DodagConfiguration::parse(&[0; 15]).unwrap_err();
        assert_eq!(e.kind, WireErrorKind::BadLength);
        let mut d = [0u8; 30];
        d[0] = 129;
        let e = PrefixInformation::parse(&d).unwrap_err();
        assert_eq!(e.field, "rpl.prefix_information.prefix_len");
        assert_eq!(
            RplTarget::parse(&[0, 128, 1]).unwrap_err().field,
            "rpl.target.prefix"
        );
        assert_eq!(
            RplTarget::parse(&[0, 200]).unwrap_err().field,
            "rpl.target.prefix_len"
        );
        assert_eq!(
            TransitInformation::parse(&[0; 5]).unwrap_err().field,
            "rpl.transit_information"
        );
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
