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

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rtolab_tcp::trace::TraceLevel;
use rtolab_tcp::{Config, Connection};
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv4::{self, protocol};
use rtolab_wire::ipv6::{self, Ipv6Repr, Transport6};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::pcap::{LinkType, PcapWriter};

use crate::app::{AnyApp, App, AppContext, AppId, AppStats, Demux};
use crate::capture::{CaptureDirection, Tap};
use crate::cidr::{Ipv4Cidr, Ipv6Cidr};
use crate::event::Event;
use crate::limits::{RunLimits, Stop, StopFlag, CHECK_EVERY};
use crate::link::{
    BroadcastConfig, BroadcastMedium, Frame, HalfDuplexConfig, HalfDuplexLink, Link,
    LinkIndication, LinkModel, LinkModelSpec, LinkOutput, LinkStats, NfcConfig, NfcLink, P2pConfig,
    P2pLink, Port, Position, RateDelay,
};
use crate::link_slot::LinkSlot;
use crate::middlebox::{call_hook, Action as MiddleboxAction, AnyMiddlebox, Held, MiddleboxCx};
use crate::node::{IfaceId, Interface, LinkId, MiddleboxId, Node, NodeId, Route};
use crate::pool::{PacketId, PacketPool};
use crate::queue::EventQueue;
use crate::rng::{component_stream, LazyStream, SimRng};
use crate::smol::{is_smoltcp_flow, SmolHost};
use crate::tcp::{Drained, FlowId, FlowInfo, TcpAppMetrics, TcpConfigId, TcpLayer};
use crate::trace::{DropReason, TcpTrace, TraceEvent, TraceSink, Tracer};

/// Work generated while handling an event, done before the next one.
enum Work {
    Link {
        link: u32,
        output: LinkOutput<PacketId>,
    },
    /// A datagram a node sent to one of its own addresses.
    Loopback { node: NodeId, packet: PacketId },
    /// A packet a middlebox released continues through its node.
    Released(Held),
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

struct MiddleboxSlot {
    name: String,
    node: NodeId,
    middlebox: AnyMiddlebox,
    rng: SimRng,
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

macro_rules! trace {
    ($sim:expr, $event:expr) => {
        if $sim.tracer.enabled() {
            let event = $event;
            $sim.tracer.record($sim.now, event);
        }
    };
}

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
    node_middleboxes: Vec<Vec<u32>>,
    /// Scratch list of what a middlebox call asked for.
    middlebox_actions: Vec<MiddleboxAction>,
    pool: PacketPool,
    tracer: Tracer,
    taps: Vec<Tap>,
    tcp: TcpLayer,
    /// Per node, its smoltcp stack when it runs smoltcp instead of ours.
    smol: Vec<Option<Box<SmolHost>>>,
    link_out: Vec<LinkOutput<PacketId>>,
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

impl Simulator {
    /// An empty simulation at time zero whose random streams derive from
    /// `seed`.
    pub fn new(seed: u64) -> Self {
        Simulator {
            seed,
            now: SimTime::ZERO,
            queue: EventQueue::with_capacity(1024),
            nodes: Vec::new(),
            demux: Vec::new(),
            links: Vec::new(),
            apps: Vec::new(),
            middleboxes: Vec::new(),
            node_middleboxes: Vec::new(),
            middlebox_actions: Vec::new(),
            pool: PacketPool::new(),
            tracer: Tracer::default(),
            taps: Vec::new(),
            tcp: TcpLayer::new(seed),
            smol: Vec::new(),
            link_out: Vec::with_capacity(64),
            work: VecDeque::with_capacity(64),
            outbox: Vec::with_capacity(16),
            events_processed: 0,
            error: None,
            limits: RunLimits::default(),
            output_bytes: Arc::new(AtomicU64::new(0)),
            same_instant: 0,
        }
    }

    /// The run seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The current simulated time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Events handled so far (stale link wakeups and cancelled timers are
    /// not counted).
    pub fn events_processed(&self) -> u64 {
        self.events_processed
    }

    /// The random stream of the component called `name` in this run.
    pub fn rng_stream(&self, name: &str) -> SimRng {
        component_stream(self.seed, name)
    }

    /// Installs the sink that receives every trace event.
    pub fn set_trace_sink(&mut self, sink: Box<dyn TraceSink>) {
        self.tracer.set(sink);
        for slot in &mut self.links {
            slot.link.set_start_notices(true);
        }
        // Without a sink the engine records only what the counters need.
        self.tcp.set_trace_level(TraceLevel::All);
    }

    /// Adds a node.
    pub fn add_node(&mut self, name: &str) -> NodeId {
        self.nodes.push(Node::new(name));
        self.demux.push(Demux::default());
        self.node_middleboxes.push(Vec::new());
        self.tcp.add_node();
        self.smol.push(None);
        NodeId((self.nodes.len() - 1) as u32)
    }

    /// Places a node, for broadcast media it attaches to afterwards.
    pub fn set_position(&mut self, node: NodeId, position: Position) {
        self.nodes[node.0 as usize].position = Some(position);
    }

    /// Adds a link model.
    pub fn add_link(&mut self, name: &str, mut link: Link) -> LinkId {
        // Start notices feed only captures and traces; a capture turns them
        // back on for its link.
        link.set_start_notices(self.tracer.enabled());
        self.links.push(LinkSlot {
            name: name.to_string(),
            link,
            ports: Vec::new(),
            wakeup: None,
            generation: 0,
        });
        let id = (self.links.len() - 1) as u32;
        // A link with work of its own from the start (a mesh whose members
        // boot, form their routes and beacon; a fading link's first
        // indication) is woken for it, not only once something is sent.
        self.after_link_call(id);
        LinkId(id)
    }

    /// Adds a full-duplex point-to-point link; its loss draws from the
    /// stream `link/<name>`.
    pub fn add_point_to_point(&mut self, name: &str, config: P2pConfig) -> LinkId {
        let rng = self.rng_stream(&format!("link/{name}"));
        self.add_link(name, Link::PointToPoint(P2pLink::new(config, rng)))
    }

    /// Adds a half-duplex link with rate-and-delay timing.
    pub fn add_half_duplex(
        &mut self,
        name: &str,
        timing: RateDelay,
        config: HalfDuplexConfig,
    ) -> LinkId {
        let rng = self.rng_stream(&format!("link/{name}"));
        self.add_link(
            name,
            Link::HalfDuplex(HalfDuplexLink::new(timing, config, rng)),
        )
    }

    /// Adds a time-slotted NFC link; its slot phase draws from the stream
    /// `link/<name>` unless the configuration fixes it.
    pub fn add_nfc(&mut self, name: &str, config: NfcConfig) -> LinkId {
        let rng = self.rng_stream(&format!("link/{name}"));
        self.add_link(name, Link::Nfc(Box::new(NfcLink::new(config, rng))))
    }

    /// Adds a link a scenario describes, randomised from the stream
    /// `link/<name>`, and attaches its interfaces (by host name through
    /// `node`).
    pub fn add_link_spec(
        &mut self,
        name: &str,
        spec: &LinkModelSpec,
        node: impl Fn(&str) -> NodeId,
    ) -> Result<LinkId, BuildError> {
        let rng = self.rng_stream(&format!("link/{name}"));
        let id = self.add_link(name, spec.build(rng));
        let attachments = spec.attachments();
        for attachment in &attachments {
            let node = node(&attachment.host);
            match (attachment.address, attachment.ipv6, attachment.position) {
                (None, None, _) => self.attach_port(node, id)?,
                (v4, v6, position) => {
                    let position = position.or(self.nodes[node.0 as usize].position);
                    self.attach_inner(node, id, v4, v6, position)?
                }
            };
        }
        for (port, gateway) in spec.default_routes() {
            let node = node(&attachments[port as usize].host);
            match gateway {
                IpAddr::V4(via) => {
                    let default = Ipv4Cidr {
                        addr: Ipv4Addr::UNSPECIFIED,
                        prefix_len: 0,
                    };
                    self.add_route(node, default, via)?
                }
                IpAddr::V6(via) => {
                    let default = Ipv6Cidr {
                        addr: Ipv6Addr::UNSPECIFIED,
                        prefix_len: 0,
                    };
                    self.add_route6(node, default, via)?
                }
            }
        }
        Ok(id)
    }

    /// Adds a shared broadcast medium.
    pub fn add_broadcast(&mut self, name: &str, config: BroadcastConfig) -> LinkId {
        self.add_link(name, Link::Broadcast(BroadcastMedium::new(config)))
    }

    /// Attaches a new interface of `node` with address `cidr` to `link`
    /// (at the node's position, for a broadcast medium), and adds the route
    /// to its subnet.
    pub fn attach(
        &mut self,
        node: NodeId,
        link: LinkId,
        cidr: Ipv4Cidr,
    ) -> Result<IfaceId, BuildError> {
        let position = self.nodes[node.0 as usize].position;
        self.attach_inner(node, link, Some(cidr), None, position)
    }

    /// Attaches a new interface of `node` with an IPv6 address (and,
    /// optionally, an IPv4 one too) to `link`, at `position` or the node's,
    /// and adds the routes to its prefixes.
    pub fn attach_ipv6(
        &mut self,
        node: NodeId,
        link: LinkId,
        ipv6: Ipv6Cidr,
        ipv4: Option<Ipv4Cidr>,
        position: Option<Position>,
    ) -> Result<IfaceId, BuildError> {
        let position = position.or(self.nodes[node.0 as usize].position);
        self.attach_inner(node, link, ipv4, Some(ipv6), position)
    }

    /// Like [`Simulator::attach`], placing the interface at `position` on a
    /// broadcast medium.
    pub fn attach_at(
        &mut self,
        node: NodeId,
        link: LinkId,
        cidr: Ipv4Cidr,
        position: Position,
    ) -> Result<IfaceId, BuildError> {
        self.attach_inner(node, link, Some(cidr), None, Some(position))
    }

    fn attach_inner(
        &mut self,
        node: NodeId,
        link: LinkId,
        ipv4: Option<Ipv4Cidr>,
        ipv6: Option<Ipv6Cidr>,
        position: Option<Position>,
    ) -> Result<IfaceId, BuildError> {
        if let Some(cidr) = ipv4 {
            if let Some(owner) = self.nodes.iter().find(|n| n.owns(cidr.addr)) {
                return Err(BuildError::DuplicateAddress {
                    addr: cidr.addr.into(),
                    node: owner.name.clone(),
                });
            }
        }
        if let Some(cidr) = ipv6 {
            if let Some(owner) = self.nodes.iter().find(|n| n.owns6(cidr.addr)) {
                return Err(BuildError::DuplicateAddress {
                    addr: cidr.addr.into(),
                    node: owner.name.clone(),
                });
            }
        }
        // Interfaces without IPv4 carry the unspecified /32, as bridge
        // ports do: it matches no datagram's destination.
        let cidr = ipv4.unwrap_or(Ipv4Cidr {
            addr: Ipv4Addr::UNSPECIFIED,
            prefix_len: 32,
        });
        let node_ref = &mut self.nodes[node.0 as usize];
        let slot = &mut self.links[link.0 as usize];
        if let Some(max) = slot.link.max_ports() {
            if slot.ports.len() >= max {
                return Err(BuildError::LinkFull {
                    link: slot.name.clone(),
                    max,
                });
            }
        }
        let port = slot
            .link
            .add_port(slot.ports.len() as u32, position)
            .ok_or_else(|| BuildError::NoPosition {
                node: node_ref.name.clone(),
                link: slot.name.clone(),
            })?;
        let index = node_ref.interfaces.len() as u32;
        let iface = IfaceId { node, index };
        slot.ports.push(iface);
        node_ref.interfaces.push(Interface {
            cidr,
            ipv6,
            link,
            port,
            medium_busy: false,
            tapped: false,
        });
        if ipv4.is_some() {
            node_ref.routes.add(Route {
                destination: Ipv4Cidr {
                    addr: cidr.network(),
                    prefix_len: cidr.prefix_len,
                },
                gateway: None,
                iface: index,
            });
        }
        if let Some(v6) = ipv6 {
            node_ref.routes6.add(Route {
                destination: Ipv6Cidr {
                    addr: v6.network(),
                    prefix_len: v6.prefix_len,
                },
                gateway: None,
                iface: index,
            });
        }
        Ok(iface)
    }

    /// Makes `node` a link-layer bridge between its two interfaces (see
    /// [`Node::bridge`]); attach them with [`Simulator::attach_port`].
    pub fn set_bridge(&mut self, node: NodeId) {
        self.nodes[node.0 as usize].bridge = true;
    }

    /// Attaches a new interface without an address to `link`: a bridge
    /// port. It owns no address and adds no route.
    pub fn attach_port(&mut self, node: NodeId, link: LinkId) -> Result<IfaceId, BuildError> {
        let node_ref = &mut self.nodes[node.0 as usize];
        let slot = &mut self.links[link.0 as usize];
        let max = slot.link.max_ports();
        if slot.link.addressed() || max.is_some_and(|m| slot.ports.len() >= m) {
            return Err(BuildError::LinkFull {
                link: slot.name.clone(),
                max: max.unwrap_or(0),
            });
        }
        let index = node_ref.interfaces.len() as u32;
        let iface = IfaceId { node, index };
        let port = slot.ports.len() as u32;
        slot.ports.push(iface);
        node_ref.interfaces.push(Interface {
            cidr: Ipv4Cidr {
                addr: Ipv4Addr::UNSPECIFIED,
                prefix_len: 32,
            },
            ipv6: None,
            link,
            port,
            medium_busy: false,
            tapped: false,
        });
        Ok(iface)
    }

    /// Adds a static route to `destination` through the neighbour `via`,
    /// which must be on one of the node's subnets.
    pub fn add_route(
        &mut self,
        node: NodeId,
        destination: Ipv4Cidr,
        via: Ipv4Addr,
    ) -> Result<(), BuildError> {
        let node_ref = &mut self.nodes[node.0 as usize];
        let iface = node_ref
            .interfaces
            .iter()
            .position(|i| i.cidr.contains(via))
            .ok_or_else(|| BuildError::GatewayNotOnLink {
                gateway: via.into(),
                node: node_ref.name.clone(),
            })?;
        node_ref.routes.add(Route {
            destination: Ipv4Cidr {
                addr: destination.network(),
                prefix_len: destination.prefix_len,
            },
            gateway: Some(via),
            iface: iface as u32,
        });
        Ok(())
    }

    /// Adds a static IPv6 route to `destination` through the neighbour
    /// `via`, which must be on one of the node's on-link prefixes.
    pub fn add_route6(
        &mut self,
        node: NodeId,
        destination: Ipv6Cidr,
        via: Ipv6Addr,
    ) -> Result<(), BuildError> {
        let node_ref = &mut self.nodes[node.0 as usize];
        let iface = node_ref
            .interfaces
            .iter()
            .position(|i| i.ipv6.is_some_and(|c| c.contains(via)))
            .ok_or_else(|| BuildError::GatewayNotOnLink {
                gateway: via.into(),
                node: node_ref.name.clone(),
            })?;
        node_ref.routes6.add(Route {
            destination: Ipv6Cidr {
                addr: destination.network(),
                prefix_len: destination.prefix_len,
            },
            gateway: Some(via),
            iface: iface as u32,
        });
        Ok(())
    }

    /// Adds a middlebox at `node`, after those already there: it sees every
    /// packet the node receives from a link. Its random stream is
    /// `middlebox/<name>`.
    pub fn add_middlebox(
        &mut self,
        node: NodeId,
        name: &str,
        middlebox: AnyMiddlebox,
    ) -> MiddleboxId {
        let id = self.middleboxes.len() as u32;
        self.middleboxes.push(MiddleboxSlot {
            name: name.to_string(),
            node,
            middlebox,
            rng: self.rng_stream(&format!("middlebox/{name}")),
            wakeup: None,
            generation: 0,
        });
        self.node_middleboxes[node.0 as usize].push(id);
        self.after_middlebox_call(id);
        MiddleboxId(id)
    }

    /// Number of middleboxes.
    pub fn middlebox_count(&self) -> usize {
        self.middleboxes.len()
    }

    /// A middlebox's name, node, kind and counters.
    pub fn middlebox_report(
        &self,
        id: MiddleboxId,
    ) -> (&str, NodeId, &'static str, serde_json::Value) {
        let slot = &self.middleboxes[id.0 as usize];
        (
            &slot.name,
            slot.node,
            slot.middlebox.kind(),
            slot.middlebox.stats(),
        )
    }

    /// Adds an app on `node`, started at the current time. Its random
    /// stream is `app/<name>`.
    pub fn add_app(&mut self, node: NodeId, name: &str, app: AnyApp) -> AppId {
        let id = self.apps.len() as u32;
        self.apps.push(AppSlot {
            name: name.to_string(),
            node,
            app,
            rng: LazyStream::new(self.seed, &format!("app/{name}")),
            tcp_config: None,
        });
        self.queue.push(self.now, Event::AppStart { app: id });
        AppId(id)
    }

    /// Registers a TCP configuration (profile and policy factories) for
    /// hosts and apps to use.
    pub fn add_tcp_config(&mut self, config: Config) -> TcpConfigId {
        self.tcp.add_config(config)
    }

    /// A registered TCP configuration.
    pub fn tcp_config(&self, id: TcpConfigId) -> &Config {
        self.tcp.config(id)
    }

    /// Sets the TCP configuration of `node`'s apps that have none of their
    /// own, and of the resets it sends. Without one, hosts use the `linux`
    /// profile.
    pub fn set_host_tcp_config(&mut self, node: NodeId, config: TcpConfigId) {
        self.tcp.set_host_config(node, config);
    }

    /// Makes `node` run smoltcp instead of our engine, with `settings`, on
    /// the address of its first interface and its default route's gateway
    /// (so call it after adding its links and routes). Its apps' TCP calls
    /// then go to smoltcp.
    pub fn set_host_smoltcp(
        &mut self,
        node: NodeId,
        settings: rtolab_smoltcp::Settings,
    ) -> Result<(), BuildError> {
        let n = &self.nodes[node.0 as usize];
        let Some((address, prefix_len)) = n
            .interfaces
            .first()
            .map(|i| (i.cidr.addr, i.cidr.prefix_len))
            .filter(|(a, _)| !a.is_unspecified())
        else {
            return Err(BuildError::SmoltcpAddress {
                node: n.name.clone(),
            });
        };
        let gateway = n
            .routes
            .routes()
            .iter()
            .find(|r| r.destination.prefix_len == 0)
            .and_then(|r| r.gateway);
        let seed = self.seed ^ u64::from(node.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let host =
            SmolHost::new(address, prefix_len, gateway, settings, seed).map_err(|source| {
                BuildError::Smoltcp {
                    node: n.name.clone(),
                    source,
                }
            })?;
        self.smol[node.0 as usize] = Some(Box::new(host));
        self.tcp.set_host_smoltcp(node);
        Ok(())
    }

    /// The smoltcp stack of `node`, if it runs one.
    pub fn smoltcp_host(&self, node: NodeId) -> Option<&SmolHost> {
        self.smol[node.0 as usize].as_deref()
    }

    /// Sets the TCP configuration of the connections `app` opens or
    /// accepts; call it before the run reaches the app's start.
    pub fn set_app_tcp_config(&mut self, app: AppId, config: TcpConfigId) {
        self.apps[app.0 as usize].tcp_config = Some(config);
    }

    /// TCP timer events handled so far, over all hosts. Each host keeps one
    /// pending timer event at its earliest deadline, so this stays at most
    /// the number of engine timers that fired.
    pub fn tcp_timer_wakeups(&self) -> u64 {
        self.tcp.timer_wakeups()
    }

    /// Number of TCP connections so far.
    pub fn flow_count(&self) -> usize {
        self.tcp.flow_count()
    }

    /// A TCP connection's identity, state and counters.
    pub fn flow(&self, id: FlowId) -> FlowInfo {
        self.tcp.flow_info(id)
    }

    /// The engine's connection behind a flow, while it is open.
    pub fn tcp_connection(&self, id: FlowId) -> Option<&Connection> {
        self.tcp.connection(id)
    }

    /// The summed TCP counters of an app's connections; `None` for apps
    /// that are not built-in TCP apps and never opened a connection.
    pub fn app_tcp_metrics(&self, id: AppId) -> Option<TcpAppMetrics> {
        let mut metrics = self.tcp.app_metrics(id);
        let node = self.apps[id.0 as usize].node;
        if let Some(smol) = &self.smol[node.0 as usize] {
            metrics.connections += smol.connections_of(id);
            metrics.final_state = metrics.final_state.or(smol.final_state_of(id));
        }
        (metrics.connections > 0 || self.apps[id.0 as usize].app.uses_tcp()).then_some(metrics)
    }

    /// Copies the packets `iface` sends and/or receives into `writer`,
    /// stamped with simulated nanoseconds. `name` identifies the capture in
    /// errors. On a link whose [`LinkModel::capture_link_type`] is not
    /// raw IP, the capture records the link's frames instead, and `writer`
    /// must have been made for that link type
    /// ([`Simulator::capture_link_type`]).
    pub fn add_capture(
        &mut self,
        iface: IfaceId,
        direction: CaptureDirection,
        name: &str,
        writer: PcapWriter,
    ) {
        let interface = &mut self.nodes[iface.node.0 as usize].interfaces[iface.index as usize];
        interface.tapped = true;
        let link = &mut self.links[interface.link.0 as usize].link;
        link.set_start_notices(true);
        // A link that captures its own frames records those; the writer
        // must have been made for its link type (`capture_link_type`).
        let frames = link.capture_link_type() != LinkType::Raw;
        if frames {
            link.set_frame_captures(true);
        }
        self.taps.push(Tap {
            name: name.to_string(),
            iface,
            direction,
            writer,
            frames,
        });
    }

    /// What a capture of `iface` records (the link type its writer needs).
    pub fn capture_link_type(&self, iface: IfaceId) -> LinkType {
        let interface = &self.nodes[iface.node.0 as usize].interfaces[iface.index as usize];
        self.links[interface.link.0 as usize]
            .link
            .capture_link_type()
    }

    /// Sets the limits `run_until` stops at.
    pub fn set_limits(&mut self, limits: RunLimits) {
        self.limits = limits;
    }

    /// The counter [`crate::limits::RunLimits::max_output`] is compared
    /// with: wrap output files in a [`crate::limits::CountingWriter`] on it.
    pub fn output_counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.output_bytes)
    }

    /// Runs every event up to and including time `end`, then sets the
    /// clock to `end`. Stops at the first output error, or with
    /// [`SimError::Stopped`] when a limit is reached (after the event in
    /// hand is fully handled, so the state and outputs are consistent).
    pub fn run_until(&mut self, end: SimTime) -> Result<(), SimError> {
        // Wall time only decides when a run stops, never what happens in
        // simulated time, so runs stay deterministic up to the stop.
        #[allow(clippy::disallowed_methods)]
        let started = self.limits.max_wall.map(|_| Instant::now());
        if let Some(stop) = self.over_limit(started) {
            return Err(SimError::Stopped { stop, at: self.now });
        }
        let mut popped: u64 = 0;
        let mut next_check = self.check_interval();
        while let Some((t, event)) = self.queue.pop_until(end) {
            if t == self.now {
                self.same_instant += 1;
                if self.same_instant >= self.limits.stall_events {
                    let what = self.describe(event);
                    let count = self.same_instant;
                    return Err(SimError::Stopped {
                        stop: Stop::Stalled { what, count },
                        at: t,
                    });
                }
            } else {
                self.same_instant = 1;
            }
            self.now = t;
            if self.dispatch(event) {
                self.events_processed += 1;
            }
            self.settle();
            if let Some(e) = self.error.take() {
                return Err(e);
            }
            popped += 1;
            if popped >= next_check {
                if let Some(stop) = self.over_limit(started) {
                    return Err(SimError::Stopped { stop, at: self.now });
                }
                next_check = popped + self.check_interval();
            }
        }
        if end != SimTime::MAX {
            self.now = self.now.max(end);
        }
        Ok(())
    }

    /// Events to pop before the limits are checked again: [`CHECK_EVERY`],
    /// or fewer so that `max_events` stops the run exactly. At least one,
    /// since each pop handles at most one event.
    fn check_interval(&self) -> u64 {
        let left = self
            .limits
            .max_events
            .map_or(u64::MAX, |max| max.saturating_sub(self.events_processed));
        left.clamp(1, CHECK_EVERY)
    }

    /// The limit reached, if any.
    fn over_limit(&self, started: Option<Instant>) -> Option<Stop> {
        let limits = &self.limits;
        if limits.stop.as_ref().is_some_and(StopFlag::is_raised) {
            return Some(Stop::Interrupted);
        }
        if let Some(max) = limits.max_events.filter(|&m| self.events_processed >= m) {
            return Some(Stop::MaxEvents(max));
        }
        if let (Some(max), Some(started)) = (limits.max_wall, started) {
            if started.elapsed() >= max {
                return Some(Stop::MaxWall(max));
            }
        }
        let written = self.output_bytes.load(Ordering::Relaxed);
        if let Some(max) = limits.max_output.filter(|&m| written >= m) {
            return Some(Stop::MaxOutput(max));
        }
        None
    }

    /// The component an event belongs to and what it is, for errors.
    fn describe(&self, event: Event) -> String {
        match event {
            Event::LinkWakeup { link, .. } => {
                format!("wakeup of link {:?}", self.links[link as usize].name)
            }
            Event::AppStart { app } => format!("start of app {:?}", self.apps[app as usize].name),
            Event::AppTimer { app, .. } => {
                format!("timer of app {:?}", self.apps[app as usize].name)
            }
            Event::TcpTimer { node, .. } => {
                format!("tcp timer of host {:?}", self.nodes[node as usize].name)
            }
            Event::MiddleboxWakeup { middlebox, .. } => format!(
                "wakeup of middlebox {:?}",
                self.middleboxes[middlebox as usize].name
            ),
        }
    }

    /// Flushes captures and the trace sink, reporting the first error.
    pub fn finish(&mut self) -> Result<(), SimError> {
        let mut first = None;
        for tap in &mut self.taps {
            if let Err(source) = tap.writer.flush() {
                first.get_or_insert(SimError::Capture {
                    name: tap.name.clone(),
                    source,
                });
            }
        }
        if let Err(e) = self.tracer.flush() {
            first.get_or_insert(SimError::Trace(e));
        }
        first.map_or(Ok(()), Err)
    }

    /// All nodes, indexed by [`NodeId`].
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// One node.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// Number of links.
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// A link's name.
    pub fn link_name(&self, id: LinkId) -> &str {
        &self.links[id.0 as usize].name
    }

    /// A link's model.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.0 as usize].link
    }

    /// A link's kind.
    pub fn link_kind(&self, id: LinkId) -> &'static str {
        self.links[id.0 as usize].link.kind()
    }

    /// A snapshot of a link's counters, as of the current time.
    pub fn link_stats(&self, id: LinkId) -> LinkStats {
        self.links[id.0 as usize].link.stats(self.now)
    }

    /// The interfaces attached to a link, by port.
    pub fn link_ports(&self, id: LinkId) -> &[IfaceId] {
        &self.links[id.0 as usize].ports
    }

    /// Number of apps.
    pub fn app_count(&self) -> usize {
        self.apps.len()
    }

    /// An app's name.
    pub fn app_name(&self, id: AppId) -> &str {
        &self.apps[id.0 as usize].name
    }

    /// The node an app runs on.
    pub fn app_node(&self, id: AppId) -> NodeId {
        self.apps[id.0 as usize].node
    }

    /// An app.
    pub fn app(&self, id: AppId) -> &AnyApp {
        &self.apps[id.0 as usize].app
    }

    /// A snapshot of an app's counters.
    pub fn app_stats(&self, id: AppId) -> AppStats {
        self.apps[id.0 as usize].app.stats()
    }

    /// Carrier sense at an interface: whether the medium is busy as heard
    /// there now. Wired links report the last busy/free notification.
    pub fn carrier_sense(&self, iface: IfaceId) -> bool {
        let interface = &self.nodes[iface.node.0 as usize].interfaces[iface.index as usize];
        self.links[interface.link.0 as usize]
            .link
            .carrier_sense(interface.port, self.now)
    }

    /// Packet buffers currently in use (queued, on a link or in an app).
    pub fn packets_in_use(&self) -> usize {
        self.pool.live()
    }

    /// Packet buffers ever allocated; flat once a run is warm.
    pub fn packet_buffers(&self) -> usize {
        self.pool.capacity()
    }

    // ----- event handling -----

    /// Handles one event; false if it was stale.
    fn dispatch(&mut self, event: Event) -> bool {
        match event {
            Event::LinkWakeup { link, generation } => {
                let slot = &mut self.links[link as usize];
                if slot.generation != generation {
                    return false;
                }
                slot.wakeup = None;
                slot.link.handle_timeout(self.now, &mut self.link_out);
                self.after_link_call(link);
            }
            Event::AppStart { app } => self.call_app(app, |a, cx| a.on_start(cx)),
            Event::AppTimer { app, token } => self.call_app(app, |a, cx| a.on_timer(cx, token)),
            Event::TcpTimer { node, generation } => {
                let host = &mut self.tcp.hosts[node as usize];
                if host.generation != generation {
                    return false;
                }
                host.timer_at = None;
                host.wakeups += 1;
                self.tcp.handle_timeout(self.now, NodeId(node));
            }
            Event::MiddleboxWakeup {
                middlebox,
                generation,
            } => {
                let slot = &mut self.middleboxes[middlebox as usize];
                if slot.generation != generation {
                    return false;
                }
                slot.wakeup = None;
                self.call_middlebox(middlebox, None, |m, cx| {
                    m.handle_timeout(cx);
                    None
                });
            }
        }
        true
    }

    /// Works off everything the current event caused: link outputs,
    /// deliveries, and TCP output and app callbacks, until nothing is left.
    fn settle(&mut self) {
        loop {
            self.process_work();
            let Some(node) = self.tcp.next_dirty() else {
                break;
            };
            self.tcp_flush(node);
        }
    }

    fn process_work(&mut self) {
        while let Some(work) = self.work.pop_front() {
            match work {
                Work::Link { link, output } => self.handle_link_output(link, output),
                Work::Loopback { node, packet } => self.deliver_local(node, packet),
                Work::Released(held) => self.arrive(held),
            }
        }
    }

    /// Queues a link's outputs and makes sure it is woken at its deadline.
    fn after_link_call(&mut self, link: u32) {
        let slot = &mut self.links[link as usize];
        if let Some(at) = slot.link.poll_timeout() {
            let sooner = match slot.wakeup {
                None => true,
                Some(pending) => at < pending,
            };
            if sooner {
                slot.generation = slot.generation.wrapping_add(1);
                slot.wakeup = Some(at);
                let generation = slot.generation;
                self.queue
                    .push(at.max(self.now), Event::LinkWakeup { link, generation });
            }
        }
        // Notices that only feed traces and captures would do nothing
        // without them; leaving them out of the work list changes nothing
        // else, as the others keep their order.
        let tracing = self.tracer.enabled();
        let ports = &self.links[link as usize].ports;
        for output in self.link_out.drain(..) {
            let idle = !tracing
                && match output {
                    LinkOutput::Enqueued { .. }
                    | LinkOutput::ParentChanged { .. }
                    | LinkOutput::MacAttempt { .. } => true,
                    LinkOutput::TxStart { port, .. } => {
                        let iface = ports[port as usize];
                        !self.nodes[iface.node.0 as usize].interfaces[iface.index as usize].tapped
                    }
                    _ => false,
                };
            if !idle {
                self.work.push_back(Work::Link { link, output });
            }
        }
    }

    fn handle_link_output(&mut self, link: u32, output: LinkOutput<PacketId>) {
        let iface = self.links[link as usize].ports[output.port() as usize];
        match output {
            LinkOutput::Enqueued {
                frame, queue_len, ..
            } => {
                trace!(
                    self,
                    TraceEvent::PacketEnqueued {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                        packet: self.pool.uid(frame.packet),
                        len: frame.len,
                        queue_len,
                    }
                );
            }
            LinkOutput::TxStart { frame, .. } => {
                self.capture(iface, CaptureDirection::Tx, frame.packet);
                trace!(
                    self,
                    TraceEvent::PacketSent {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                        packet: self.pool.uid(frame.packet),
                        len: frame.len,
                    }
                );
            }
            LinkOutput::Delivered { frame, .. } => self.delivered(link, iface, frame),
            LinkOutput::Arrived { datagram, .. } => {
                let packet = self.pool.alloc();
                let len = datagram.len() as u32;
                self.pool.buf_mut(packet).extend_from_slice(&datagram);
                self.delivered(link, iface, Frame { packet, len });
            }
            LinkOutput::Consumed { frame, .. } => {
                self.capture(iface, CaptureDirection::Tx, frame.packet);
                trace!(
                    self,
                    TraceEvent::PacketSent {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                        packet: self.pool.uid(frame.packet),
                        len: frame.len,
                    }
                );
                self.pool.free(frame.packet);
            }
            LinkOutput::Captured {
                direction, psdu, ..
            } => self.capture_frame(iface, direction, &psdu),
            LinkOutput::Dropped { frame, reason, .. } => {
                trace!(
                    self,
                    TraceEvent::PacketDropped {
                        node: iface.node.0,
                        iface: Some(iface.index),
                        link: Some(link),
                        packet: self.pool.uid(frame.packet),
                        len: frame.len,
                        reason,
                    }
                );
                self.pool.free(frame.packet);
            }
            LinkOutput::MediumBusy { until, .. } => {
                self.interface_mut(iface).medium_busy = true;
                trace!(
                    self,
                    TraceEvent::LinkBusy {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                        until_ns: until.as_nanos(),
                    }
                );
            }
            LinkOutput::MediumFree { .. } => {
                self.interface_mut(iface).medium_busy = false;
                trace!(
                    self,
                    TraceEvent::LinkFree {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                    }
                );
            }
            LinkOutput::Indication { indication, .. } => {
                self.link_indication(iface, link, indication);
            }
            LinkOutput::MacAttempt { frame, attempt, .. } => {
                trace!(
                    self,
                    TraceEvent::MacAttempt {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                        packet: self.pool.uid(frame.packet),
                        len: frame.len,
                        attempt,
                    }
                );
            }
            LinkOutput::ParentChanged { parent, rank, .. } => {
                let parent_node =
                    parent.map(|p| self.links[link as usize].ports[p as usize].node.0);
                trace!(
                    self,
                    TraceEvent::ParentChanged {
                        node: iface.node.0,
                        link,
                        parent: parent_node,
                        rank,
                    }
                );
            }
        }
    }

    /// A frame arrived intact at `iface`: captured, traced, and handed to
    /// the node's middleboxes or IP layer.
    fn delivered(&mut self, link: u32, iface: IfaceId, frame: Frame<PacketId>) {
        self.capture(iface, CaptureDirection::Rx, frame.packet);
        trace!(
            self,
            TraceEvent::PacketReceived {
                node: iface.node.0,
                iface: iface.index,
                link,
                packet: self.pool.uid(frame.packet),
                len: frame.len,
            }
        );
        if self.node_middleboxes[iface.node.0 as usize].is_empty() {
            // The common case, kept as direct as before middleboxes.
            self.bridge_or_route(iface, frame.packet);
        } else {
            self.arrive(Held {
                packet: frame.packet,
                iface,
                next: 0,
                since: self.now,
            });
        }
    }

    /// Hands a link layer's indication to the node's middleboxes and to its
    /// TCP connections.
    fn link_indication(&mut self, iface: IfaceId, link: u32, indication: LinkIndication) {
        let (rtt_ns, expected_outage_ns) = match indication {
            LinkIndication::GoingDown {
                rtt,
                expected_outage,
            } => (Some(rtt.as_nanos()), Some(expected_outage.as_nanos())),
            _ => (None, None),
        };
        trace!(
            self,
            TraceEvent::LinkIndication {
                node: iface.node.0,
                iface: iface.index,
                link,
                indication: indication.name(),
                rtt_ns,
                expected_outage_ns,
            }
        );
        let node = iface.node.0 as usize;
        for i in 0..self.node_middleboxes[node].len() {
            let middlebox = self.node_middleboxes[node][i];
            self.call_middlebox(middlebox, None, |m, cx| {
                m.on_link_indication(cx, iface.index, indication);
                None
            });
        }
        match indication {
            LinkIndication::GoingDown { .. } => self.tcp.link_warning(self.now, iface.node, true),
            LinkIndication::Up => self.tcp.link_warning(self.now, iface.node, false),
            LinkIndication::Gone => {}
        }
    }

    fn interface_mut(&mut self, iface: IfaceId) -> &mut Interface {
        &mut self.nodes[iface.node.0 as usize].interfaces[iface.index as usize]
    }

    fn capture(&mut self, iface: IfaceId, dir: CaptureDirection, packet: PacketId) {
        if !self.nodes[iface.node.0 as usize].interfaces[iface.index as usize].tapped {
            return;
        }
        let bytes = self.pool.bytes(packet);
        let now = self.now.as_nanos();
        for tap in &mut self.taps {
            if tap.iface != iface || tap.frames || !tap.direction.includes(dir) {
                continue;
            }
            if let Err(source) = tap.writer.write_packet(now, bytes) {
                self.error.get_or_insert(SimError::Capture {
                    name: tap.name.clone(),
                    source,
                });
            }
        }
    }

    /// Writes a link-layer frame to the taps of `iface` that record frames.
    fn capture_frame(&mut self, iface: IfaceId, dir: CaptureDirection, psdu: &[u8]) {
        let now = self.now.as_nanos();
        for tap in &mut self.taps {
            if tap.iface != iface || !tap.frames || !tap.direction.includes(dir) {
                continue;
            }
            if let Err(source) = tap.writer.write_packet(now, psdu) {
                self.error.get_or_insert(SimError::Capture {
                    name: tap.name.clone(),
                    source,
                });
            }
        }
    }

    // ----- IP layer -----

    /// A bridge passes a frame that arrived on `iface` out of its other
    /// interface, byte for byte.
    fn bridge_forward(&mut self, iface: IfaceId, packet: PacketId) {
        let node = iface.node;
        let node_ref = &self.nodes[node.0 as usize];
        let out_index = (0..node_ref.interfaces.len() as u32).find(|&i| i != iface.index);
        let Some(out_index) = out_index else {
            self.drop_at(node, packet, DropReason::NoRoute);
            return;
        };
        let interface = &node_ref.interfaces[out_index as usize];
        let (link, port) = (interface.link, interface.port);
        let slot = &self.links[link.0 as usize];
        if slot.ports.len() != 2 {
            self.drop_at(node, packet, DropReason::NeighbourUnknown);
            return;
        }
        self.nodes[node.0 as usize].stats.bridged += 1;
        trace!(
            self,
            TraceEvent::PacketBridged {
                node: node.0,
                in_iface: iface.index,
                out_iface: out_index,
                packet: self.pool.uid(packet),
            }
        );
        let frame = Frame {
            packet,
            len: self.pool.len(packet) as u32,
        };
        let to = 1 - port;
        let slot = &mut self.links[link.0 as usize];
        slot.link
            .transmit(self.now, port, to, frame, &mut self.link_out);
        self.after_link_call(link.0);
    }

    /// A packet arrived at a node from a link, or was released by one of
    /// its middleboxes: the middleboxes from `next` on see it, then the
    /// node bridges, delivers or forwards it.
    fn arrive(&mut self, mut held: Held) {
        let node = held.iface.node.0 as usize;
        while let Some(&middlebox) = self.node_middleboxes[node].get(held.next as usize) {
            held.next += 1;
            held.since = self.now;
            let packet = held.packet;
            let passed =
                self.call_middlebox(middlebox, Some(packet), |m, cx| m.on_packet(cx, held));
            let Some(passed) = passed else {
                return;
            };
            held = passed;
        }
        self.bridge_or_route(held.iface, held.packet);
    }

    /// A packet past the node's middleboxes: a bridge passes it on, any
    /// other node delivers or forwards it.
    #[inline]
    fn bridge_or_route(&mut self, iface: IfaceId, packet: PacketId) {
        if self.nodes[iface.node.0 as usize].bridge {
            self.bridge_forward(iface, packet);
        } else {
            self.ip_input(iface, packet);
        }
    }

    /// A datagram arrived on `iface`: deliver it, forward it or drop it.
    fn ip_input(&mut self, iface: IfaceId, packet: PacketId) {
        let node = iface.node;
        if ip_version(self.pool.bytes(packet)) == Some(6) {
            self.ip6_input(iface, packet);
            return;
        }
        let header = match ipv4::Packet::new_checked(self.pool.bytes(packet)) {
            Ok(p) if p.version() == 4 && p.verify_checksum() => Some((p.dst_addr(), p.ttl())),
            _ => None,
        };
        let Some((dst, ttl)) = header else {
            self.drop_at(node, packet, DropReason::BadHeader);
            return;
        };
        if self.nodes[node.0 as usize].owns(dst) {
            self.deliver_local(node, packet);
            return;
        }
        if ttl <= 1 {
            self.drop_at(node, packet, DropReason::TtlExpired);
            return;
        }
        let mut view = ipv4::Packet::new_unchecked(&mut self.pool.buf_mut(packet)[..]);
        view.set_ttl(ttl - 1);
        view.fill_checksum();
        self.route_out(node, packet, dst, Some((iface.index, ttl - 1)));
    }

    /// An IPv6 datagram arrived on `iface`: deliver it, forward it with
    /// its hop limit decremented, or drop it.
    fn ip6_input(&mut self, iface: IfaceId, packet: PacketId) {
        let node = iface.node;
        let header = Ipv6Repr::parse(self.pool.bytes(packet))
            .ok()
            .map(|(ip, _)| (ip.dst, ip.hop_limit));
        let Some((dst, hop_limit)) = header else {
            self.drop_at(node, packet, DropReason::BadHeader);
            return;
        };
        if self.nodes[node.0 as usize].owns6(dst) {
            self.deliver_local(node, packet);
            return;
        }
        if hop_limit <= 1 {
            self.drop_at(node, packet, DropReason::TtlExpired);
            return;
        }
        // IPv6 has no header checksum: only the hop limit changes.
        self.pool.buf_mut(packet)[IPV6_HOP_LIMIT_OFFSET] = hop_limit - 1;
        self.route_out6(node, packet, dst, Some((iface.index, hop_limit - 1)));
    }

    /// A local app sent a datagram.
    fn send_local(&mut self, node: NodeId, packet: PacketId) {
        if ip_version(self.pool.bytes(packet)) == Some(6) {
            let Ok((ip, _)) = Ipv6Repr::parse(self.pool.bytes(packet)) else {
                self.drop_at(node, packet, DropReason::BadHeader);
                return;
            };
            self.nodes[node.0 as usize].stats.originated += 1;
            if self.nodes[node.0 as usize].owns6(ip.dst) {
                self.work.push_back(Work::Loopback { node, packet });
                return;
            }
            self.route_out6(node, packet, ip.dst, None);
            return;
        }
        let dst = match ipv4::Packet::new_checked(self.pool.bytes(packet)) {
            Ok(p) if p.version() == 4 => p.dst_addr(),
            _ => {
                self.drop_at(node, packet, DropReason::BadHeader);
                return;
            }
        };
        self.nodes[node.0 as usize].stats.originated += 1;
        if self.nodes[node.0 as usize].owns(dst) {
            self.work.push_back(Work::Loopback { node, packet });
            return;
        }
        self.route_out(node, packet, dst, None);
    }

    /// Sends a datagram towards `dst`; `forwarded` is the arrival interface
    /// and new TTL when routing on behalf of another node.
    fn route_out(
        &mut self,
        node: NodeId,
        packet: PacketId,
        dst: Ipv4Addr,
        forwarded: Option<(u32, u8)>,
    ) {
        let node_ref = &self.nodes[node.0 as usize];
        let Some((out_iface, next_hop)) = node_ref.routes.lookup(dst) else {
            self.drop_at(node, packet, DropReason::NoRoute);
            return;
        };
        let interface = &node_ref.interfaces[out_iface as usize];
        let (link, port) = (interface.link, interface.port);
        let slot = &self.links[link.0 as usize];
        // A link that routes by the datagram (a mesh) needs no next hop.
        let to = if slot.link.reads_datagrams() {
            Some(0)
        } else if slot.link.addressed() {
            slot.ports.iter().position(|p| {
                self.nodes[p.node.0 as usize].interfaces[p.index as usize]
                    .cidr
                    .addr
                    == next_hop
            })
        } else {
            (slot.ports.len() == 2).then_some(1 - port as usize)
        };
        let Some(to) = to else {
            self.drop_at(node, packet, DropReason::NeighbourUnknown);
            return;
        };
        self.link_send(node, packet, out_iface, to as u32, forwarded);
    }

    /// Sends an IPv6 datagram towards `dst`; `forwarded` is the arrival
    /// interface and new hop limit when routing for another node.
    fn route_out6(
        &mut self,
        node: NodeId,
        packet: PacketId,
        dst: Ipv6Addr,
        forwarded: Option<(u32, u8)>,
    ) {
        let node_ref = &self.nodes[node.0 as usize];
        let Some((out_iface, next_hop)) = node_ref.routes6.lookup(dst) else {
            self.drop_at(node, packet, DropReason::NoRoute);
            return;
        };
        let interface = &node_ref.interfaces[out_iface as usize];
        let (link, port) = (interface.link, interface.port);
        let slot = &self.links[link.0 as usize];
        // A link that routes by the datagram (a mesh) needs no next hop.
        let to = if slot.link.reads_datagrams() {
            Some(0)
        } else if slot.link.addressed() {
            slot.ports.iter().position(|p| {
                self.nodes[p.node.0 as usize].interfaces[p.index as usize]
                    .ipv6
                    .is_some_and(|c| c.addr == next_hop)
            })
        } else {
            (slot.ports.len() == 2).then_some(1 - port as usize)
        };
        let Some(to) = to else {
            self.drop_at(node, packet, DropReason::NeighbourUnknown);
            return;
        };
        self.link_send(node, packet, out_iface, to as u32, forwarded);
    }

    /// Hands a datagram to the link of `node`'s interface `out_iface`,
    /// for port `to`; traces the forwarding when it is not the node's own.
    fn link_send(
        &mut self,
        node: NodeId,
        packet: PacketId,
        out_iface: u32,
        to: Port,
        forwarded: Option<(u32, u8)>,
    ) {
        if let Some((in_iface, ttl)) = forwarded {
            self.nodes[node.0 as usize].stats.forwarded += 1;
            trace!(
                self,
                TraceEvent::PacketForwarded {
                    node: node.0,
                    in_iface,
                    out_iface,
                    packet: self.pool.uid(packet),
                    ttl,
                }
            );
        }
        let interface = &self.nodes[node.0 as usize].interfaces[out_iface as usize];
        let (link, port) = (interface.link, interface.port);
        let frame = Frame {
            packet,
            len: self.pool.len(packet) as u32,
        };
        let slot = &mut self.links[link.0 as usize];
        if slot.link.reads_datagrams() {
            slot.link.transmit_datagram(
                self.now,
                port,
                frame,
                self.pool.bytes(packet),
                &mut self.link_out,
            );
        } else {
            slot.link
                .transmit(self.now, port, to, frame, &mut self.link_out);
        }
        self.after_link_call(link.0);
    }

    /// Hands a datagram addressed to `node` to the app bound to it.
    fn deliver_local(&mut self, node: NodeId, packet: PacketId) {
        // Both families number UDP and TCP alike (17, 6).
        let key_of = |proto: u8, payload: &[u8]| {
            let has_ports = proto == protocol::UDP || proto == protocol::TCP;
            let port = match payload {
                [_, _, hi, lo, ..] if has_ports => Some(u16::from_be_bytes([*hi, *lo])),
                _ => None,
            };
            (proto, port)
        };
        let bytes = self.pool.bytes(packet);
        let key = if ip_version(bytes) == Some(6) {
            Ipv6Repr::parse(bytes)
                .ok()
                .map(|(ip, payload)| key_of(ip.next_header, payload))
        } else {
            ipv4::Packet::new_checked(bytes)
                .ok()
                .map(|p| key_of(p.protocol(), p.payload()))
        };
        let Some((proto, port)) = key else {
            self.drop_at(node, packet, DropReason::BadHeader);
            return;
        };
        let Some(app) = self.demux[node.0 as usize].lookup(proto, port) else {
            if proto == protocol::TCP && self.tcp.hosts[node.0 as usize].active() {
                self.tcp_input(node, packet);
            } else {
                self.drop_at(node, packet, DropReason::NoListener);
            }
            return;
        };
        self.nodes[node.0 as usize].stats.delivered += 1;
        trace!(
            self,
            TraceEvent::PacketDelivered {
                node: node.0,
                app: Some(app.0),
                packet: self.pool.uid(packet),
                len: self.pool.len(packet) as u32,
            }
        );
        let datagram = self.pool.take(packet);
        self.call_app(app.0, |a, cx| a.on_packet(cx, &datagram));
        self.pool.put_back(packet, datagram);
        self.pool.free(packet);
    }

    /// A TCP datagram for `node` that no raw app bound: hand it to the
    /// host's TCP stack.
    fn tcp_input(&mut self, node: NodeId, packet: PacketId) {
        if let Some(smol) = self.smol[node.0 as usize].as_deref_mut() {
            // smoltcp parses (and checks) the datagram itself.
            smol.input(self.pool.bytes(packet));
            self.tcp.mark(node);
            self.nodes[node.0 as usize].stats.delivered += 1;
            trace!(
                self,
                TraceEvent::PacketDelivered {
                    node: node.0,
                    app: None,
                    packet: self.pool.uid(packet),
                    len: self.pool.len(packet) as u32,
                }
            );
            self.pool.free(packet);
            return;
        }
        let datagram = self.pool.take(packet);
        let name = &self.nodes[node.0 as usize].name;
        let owner = if ip_version(&datagram) == Some(6) {
            match ipv6::parse(&datagram) {
                Ok(ipv6::ParsedPacket6 {
                    ip,
                    transport: Transport6::Tcp(tcp),
                }) => Ok(self.tcp.input(self.now, node, name, &ip, &tcp)),
                _ => Err(()),
            }
        } else {
            match packet::parse(&datagram) {
                Ok(packet::ParsedPacket {
                    ip,
                    transport: Transport::Tcp(tcp),
                }) => Ok(self.tcp.input(self.now, node, name, &ip, &tcp)),
                _ => Err(()),
            }
        };
        self.pool.put_back(packet, datagram);
        let Ok(owner) = owner else {
            self.drop_at(node, packet, DropReason::BadHeader);
            return;
        };
        self.nodes[node.0 as usize].stats.delivered += 1;
        trace!(
            self,
            TraceEvent::PacketDelivered {
                node: node.0,
                app: owner.map(|a| a.0),
                packet: self.pool.uid(packet),
                len: self.pool.len(packet) as u32,
            }
        );
        self.pool.free(packet);
    }

    /// Collects a host's TCP output and events and delivers the app
    /// callbacks they cause, until the host is quiet; then re-arms its
    /// timer.
    fn tcp_flush(&mut self, node: NodeId) {
        loop {
            // Output of an app's calls leaves before the next event is
            // delivered, as it would from a real socket.
            if self.tcp.take_dirty(node) {
                self.tcp_drain(node);
            } else if let Some((app, flow, event)) = self.tcp.notes.pop_front() {
                self.call_app(app.0, |a, cx| a.on_tcp(cx, flow, event));
                if event.is_final() && !is_smoltcp_flow(flow) {
                    self.tcp.retire(self.now, flow);
                }
            } else {
                break;
            }
        }
        self.tcp.end_flush(node);
        self.tcp_reschedule(node);
    }

    /// Sends every datagram the host's stacks have ready and collects their
    /// events, in the engine's documented order.
    fn tcp_drain(&mut self, node: NodeId) {
        if let Some(smol) = self.smol[node.0 as usize].as_deref_mut() {
            let sent = smol.poll(self.now, &mut self.tcp.notes);
            // State changes are all smoltcp lets us see of its connections.
            for (app, flow, from, to) in smol.take_state_changes() {
                if self.tracer.enabled() {
                    self.tracer.record(
                        self.now,
                        TraceEvent::Tcp {
                            node: node.0,
                            app: Some(app.0),
                            flow: flow.0,
                            detail: TcpTrace(rtolab_tcp::trace::TraceEvent::State { from, to }),
                        },
                    );
                }
            }
            for datagram in sent {
                let id = self.pool.alloc();
                *self.pool.buf_mut(id) = datagram;
                self.send_local(node, id);
            }
            return;
        }
        let stacks = self.tcp.hosts[node.0 as usize].stack_count();
        for s in 0..stacks {
            while let Some(len) = self.tcp.poll_transmit(self.now, node, s) {
                self.tcp.buf.truncate(len);
                let id = self.pool.alloc();
                // Swap buffers rather than copy: the pool's empty buffer
                // becomes the next transmit buffer.
                std::mem::swap(self.pool.buf_mut(id), &mut self.tcp.buf);
                self.send_local(node, id);
            }
            while let Some(drained) = self.tcp.poll_event(self.now, node, s) {
                if let Drained::Trace { flow, app, trace } = drained {
                    if self.tracer.enabled() {
                        self.tracer.record(
                            trace.time,
                            TraceEvent::Tcp {
                                node: node.0,
                                app: app.map(|a| a.0),
                                flow: flow.0,
                                detail: TcpTrace(trace.event),
                            },
                        );
                    }
                }
            }
        }
    }

    /// Keeps exactly one live timer event per host, at its earliest TCP
    /// deadline; a replaced event goes stale and is skipped when it pops.
    fn tcp_reschedule(&mut self, node: NodeId) {
        let host = &mut self.tcp.hosts[node.0 as usize];
        let next = match self.smol[node.0 as usize].as_deref_mut() {
            // A deadline at `now` right after a poll is smoltcp's
            // microsecond rounding: look again a microsecond later.
            Some(smol) => smol
                .poll_at(self.now)
                .map(|at| at.max(self.now + SimDuration::from_micros(1))),
            None => host.next_deadline(),
        };
        if next == host.timer_at {
            return;
        }
        host.generation = host.generation.wrapping_add(1);
        host.timer_at = next;
        if let Some(at) = next {
            let generation = host.generation;
            self.queue.push(
                at.max(self.now),
                Event::TcpTimer {
                    node: node.0,
                    generation,
                },
            );
        }
    }

    fn drop_at(&mut self, node: NodeId, packet: PacketId, reason: DropReason) {
        let stats = &mut self.nodes[node.0 as usize].stats;
        match reason {
            DropReason::NoRoute => stats.dropped_no_route += 1,
            DropReason::NeighbourUnknown => stats.dropped_neighbour_unknown += 1,
            DropReason::TtlExpired => stats.dropped_ttl_expired += 1,
            DropReason::BadHeader => stats.dropped_bad_header += 1,
            DropReason::NoListener => stats.dropped_no_listener += 1,
            _ => {}
        }
        trace!(
            self,
            TraceEvent::PacketDropped {
                node: node.0,
                iface: None,
                link: None,
                packet: self.pool.uid(packet),
                len: self.pool.len(packet) as u32,
                reason,
            }
        );
        self.pool.free(packet);
    }

    /// Calls a middlebox, carries out what it asked for, and reschedules
    /// its wakeup; returns the packet `hook` passed on, if any. `handed` is
    /// the packet the call hands it, traced as held if it keeps it without
    /// dropping it.
    fn call_middlebox(
        &mut self,
        middlebox: u32,
        handed: Option<PacketId>,
        hook: impl FnOnce(&mut AnyMiddlebox, &mut MiddleboxCx<'_>) -> Option<Held>,
    ) -> Option<Held> {
        let slot = &mut self.middleboxes[middlebox as usize];
        let node = slot.node;
        let mut actions = std::mem::take(&mut self.middlebox_actions);
        let cx = MiddleboxCx {
            now: self.now,
            pool: &mut self.pool,
            actions: &mut actions,
            rng: &mut slot.rng,
        };
        let (passed, kept) = call_hook(&mut slot.middlebox, cx, handed, hook);
        if let Some(packet) = kept {
            trace!(
                self,
                TraceEvent::PacketHeld {
                    node: node.0,
                    middlebox,
                    packet: self.pool.uid(packet),
                }
            );
        }
        for action in actions.drain(..) {
            match action {
                MiddleboxAction::Release(held) => {
                    trace!(
                        self,
                        TraceEvent::PacketReleased {
                            node: node.0,
                            middlebox,
                            packet: self.pool.uid(held.packet),
                            held_ns: self.now.saturating_since(held.since).as_nanos(),
                        }
                    );
                    self.work.push_back(Work::Released(held));
                }
                MiddleboxAction::Drop(held) => {
                    self.drop_at(node, held.packet, DropReason::Middlebox);
                }
                MiddleboxAction::Inject(packet) => {
                    trace!(
                        self,
                        TraceEvent::PacketInjected {
                            node: node.0,
                            middlebox,
                            packet: self.pool.uid(packet),
                            len: self.pool.len(packet) as u32,
                        }
                    );
                    self.send_local(node, packet);
                }
            }
        }
        self.middlebox_actions = actions;
        self.after_middlebox_call(middlebox);
        passed
    }

    /// Makes sure a middlebox is woken at its deadline.
    fn after_middlebox_call(&mut self, middlebox: u32) {
        let slot = &mut self.middleboxes[middlebox as usize];
        let at = slot.middlebox.poll_timeout().map(|t| t.max(self.now));
        if at != slot.wakeup {
            slot.generation = slot.generation.wrapping_add(1);
            slot.wakeup = at;
            if let Some(at) = at {
                self.queue.push(
                    at,
                    Event::MiddleboxWakeup {
                        middlebox,
                        generation: slot.generation,
                    },
                );
            }
        }
    }

    fn call_app(&mut self, app: u32, hook: impl FnOnce(&mut AnyApp, &mut AppContext<'_>)) {
        let slot = &mut self.apps[app as usize];
        let node = slot.node;
        let mut cx = AppContext {
            now: self.now,
            app: AppId(app),
            node_id: node,
            node: &self.nodes[node.0 as usize],
            pool: &mut self.pool,
            queue: &mut self.queue,
            outbox: &mut self.outbox,
            demux: &mut self.demux[node.0 as usize],
            tracer: &mut self.tracer,
            rng: &mut slot.rng,
            tcp: &mut self.tcp,
            smol: self.smol[node.0 as usize].as_deref_mut(),
            tcp_config: slot.tcp_config,
            links: &self.links,
        };
        hook(&mut slot.app, &mut cx);
        let mut outbox = std::mem::take(&mut self.outbox);
        for packet in outbox.drain(..) {
            self.send_local(node, packet);
        }
        self.outbox = outbox;
    }
}

/// Offset of the hop limit in the IPv6 header (RFC 8200 §3).
const IPV6_HOP_LIMIT_OFFSET: usize = 7;

/// The IP version nibble of a datagram, `None` when it is empty.
fn ip_version(datagram: &[u8]) -> Option<u8> {
    datagram.first().map(|b| b >> 4)
}
