//! The simulator: event loop, IP layer and the glue between nodes, links,
//! apps, captures and traces.
//!
//! One event pops at a time. Handling it may make links emit outputs
//! (deliveries, drops, notifications) and apps send datagrams; these are
//! worked off in FIFO order before the next event pops, so everything that
//! happens at one instant happens in a fixed order. Link models are asked
//! for their next deadline after every call and woken by a single pending
//! event per link; a stale wakeup is recognised by its generation number and
//! skipped.
//!
//! One [`Simulator`], its methods in one file per layer:
//!
//! * `setup`: building a simulation and reading its state;
//! * `events`: the event loop and the glue to link models;
//! * `middlebox`: the middleboxes in a node's forwarding path;
//! * `ip`: bridging, IPv4/IPv6 input, forwarding and routing;
//! * `transport`: delivery to apps and the hosts' TCP stacks.

use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use rtolab_time::SimTime;

use crate::app::{AnyApp, Demux};
use crate::capture::Tap;
use crate::event::Event;
use crate::limits::{RunLimits, Stop};
use crate::link::{LinkOut, LinkOutput, LinkTrace};
use crate::link_slot::LinkSlot;
use crate::middlebox::MiddleboxChain;
use crate::node::{Node, NodeId};
use crate::pool::{PacketId, PacketPool};
use crate::queue::EventQueue;
use crate::rng::LazyStream;
use crate::tcp_layer::{TcpConfigId, TcpLayer};
use crate::trace::Tracer;

/// Work generated while handling an event, done before the next one.
enum Work {
    Link {
        link: u32,
        output: LinkOutput<PacketId>,
    },
    /// A link's record for traces (queued only while a trace listens, in
    /// its place among the link's outputs).
    LinkTrace {
        link: u32,
        trace: LinkTrace<PacketId>,
    },
    /// A datagram a node sent to one of its own addresses.
    Loopback { node: NodeId, packet: PacketId },
    /// A packet a middlebox of the node released continues through the
    /// node's chain.
    Released(NodeId),
}

/// A mistake in building a simulation programmatically.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A smoltcp host needs an IPv4 address on its first interface.
    #[error("smoltcp host {node:?} has no IPv4 address on its first interface")]
    SmoltcpAddress {
        /// Node name.
        node: String,
    },
    /// smoltcp refused a setting.
    #[error("smoltcp host {node:?}: {source}")]
    Smoltcp {
        /// Node name.
        node: String,
        /// What smoltcp cannot take.
        source: rtolab_smoltcp::SettingsError,
    },
    /// A point-to-point or half-duplex link already has both ends.
    #[error("link {link:?} takes at most {max} interfaces")]
    LinkFull {
        /// Link name.
        link: String,
        /// Its number of ends.
        max: usize,
    },
    /// Attaching to a broadcast medium needs a position.
    #[error("node {node:?} has no position for broadcast link {link:?}")]
    NoPosition {
        /// Node name.
        node: String,
        /// Link name.
        link: String,
    },
    /// The address is already on another interface.
    #[error("address {addr} is already assigned to node {node:?}")]
    DuplicateAddress {
        /// The address.
        addr: IpAddr,
        /// Its owner.
        node: String,
    },
    /// No interface of the node is on the gateway's subnet.
    #[error("gateway {gateway} is not on a subnet of node {node:?}")]
    GatewayNotOnLink {
        /// The gateway.
        gateway: IpAddr,
        /// Node name.
        node: String,
    },
}

/// A failure while running: an output could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// Writing to a capture failed.
    #[error("capture {name}: {source}")]
    Capture {
        /// The capture's name (its file path when created from a scenario).
        name: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Writing the trace failed.
    #[error("trace: {0}")]
    Trace(#[source] io::Error),
    /// A limit stopped the run at simulated time `at`.
    #[error("{}", .stop.message_at(*.at))]
    Stopped {
        /// Which limit.
        stop: Stop,
        /// When.
        at: SimTime,
    },
}

/// A middlebox as the simulator numbers it: where it sits in which node's
/// chain, and its pending wakeup.
struct MiddleboxSlot {
    node: NodeId,
    /// Its position in the node's chain.
    index: u32,
    /// The instant of the pending wakeup event, if any.
    wakeup: Option<SimTime>,
    generation: u32,
}

struct AppSlot {
    name: String,
    node: NodeId,
    app: AnyApp,
    rng: LazyStream,
    tcp_config: Option<TcpConfigId>,
}

/// Records a trace event, built only when a sink listens.
macro_rules! trace {
    ($sim:expr, $event:expr) => {
        if $sim.tracer.enabled() {
            let event = $event;
            $sim.tracer.record($sim.now, event);
        }
    };
}

mod events;
mod ip;
#[cfg(test)]
pub(crate) use ip::parse_count;
mod middlebox;
#[cfg(test)]
mod parse_once;
mod setup;
mod transport;

/// A deterministic discrete-event network simulation.
///
/// Build it with `add_node`, the `add_*` link constructors, `attach`,
/// `add_route` and `add_app`, optionally install a trace sink and captures,
/// then `run_until` and `finish`. Identical construction and seed give
/// identical runs.
pub struct Simulator {
    seed: u64,
    now: SimTime,
    queue: EventQueue<Event>,
    nodes: Vec<Node>,
    demux: Vec<Demux>,
    links: Vec<LinkSlot>,
    apps: Vec<AppSlot>,
    middleboxes: Vec<MiddleboxSlot>,
    /// Per node, its middleboxes in the order packets meet them.
    chains: Vec<MiddleboxChain>,
    /// Per node, the simulator's number of each middlebox of its chain.
    node_middleboxes: Vec<Vec<u32>>,
    pool: PacketPool,
    tracer: Tracer,
    taps: Vec<Tap>,
    /// Every node's host stack and the run's shared TCP state.
    tcp: TcpLayer,
    link_out: LinkOut<PacketId>,
    work: VecDeque<Work>,
    outbox: Vec<PacketId>,
    events_processed: u64,
    error: Option<SimError>,
    limits: RunLimits,
    /// Bytes written to output files, by writers wrapped in a
    /// [`crate::limits::CountingWriter`] on [`Simulator::output_counter`].
    output_bytes: Arc<AtomicU64>,
    /// Events popped in a row at the current instant.
    same_instant: u64,
}
