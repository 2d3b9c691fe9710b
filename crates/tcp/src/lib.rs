//! Sans-IO TCP engine with pluggable RTO, congestion-control and ACK
//! policies.
//!
//! Read RFC 9293 (TCP), RFC 6298 (retransmission timer), RFC 5681 and 6582
//! (congestion control), RFC 7323 (window scale, timestamps, PAWS),
//! RFC 2018 and 6675 (SACK and SACK-based recovery) first; the code cites
//! them by clause.
//!
//! The crate is a pure state machine: it never reads a clock, sleeps or
//! touches a socket. The driver (simulator or emulator) hands it segments
//! and the current time and takes back datagrams to send, application
//! events and the next deadline.
//!
//! * [`rto`], [`cc`], [`ack`]: the policy plug-ins, each chosen by
//!   configuration and built per connection by a factory; [`policies`]
//!   registers them by name and lists them ([`policy_catalog`]).
//! * [`clock`]: timer granularity (fine or coarse ticks with a phase).
//! * [`Connection`]: one connection; [`Stack`]: a host's connections and
//!   listeners, demultiplexed by 4-tuple, over IPv4 or IPv6.
//! * [`ip`]: what TCP reads of the network layer ([`IpHeader`]), the
//!   default MSS of each family and the exact 4-tuple keys.
//! * [`Profile`] / [`Config`]: named bundles of settings (`lwip`, `uip`,
//!   `linux`, `rfc`) and the factories a connection is built from.
//! * [`trace`]: typed trace events delivered through `poll_event`.

#![forbid(unsafe_code)]

pub mod ack;
pub mod cc;
pub mod clock;
mod conn;
pub mod ip;
pub mod parsed;
pub mod policies;
pub mod profile;
pub mod rto;
mod send_buffer;
pub mod serde_duration;
pub mod serde_off;
mod stack;
mod state;
pub mod trace;

/// Shared, immutable byte chunks, for [`Connection::send_shared`].
pub use bytes::Bytes;
pub use conn::{reset_reply, ConnError, Connection, ConnectionStats, Event, TIMELOST_UNIT};
pub use ip::{
    tuple_key, IpHeader, TupleKey, TupleKey6, TupleMap, TupleMap6, Tuples, DEFAULT_MSS,
    DEFAULT_MSS_V6,
};
pub use parsed::{parse_tcp, IpRepr, ParsedIp};
pub use policies::{policy_catalog, AckChoice, CcChoice, PolicyFamily, PolicyInfo, RtoChoice};
pub use profile::{Config, Profile, ProfileError};
pub use stack::{ConnId, ConnectError, Stack, EPHEMERAL_PORTS, EPHEMERAL_START};
pub use state::State;
