//! Building a simulation (nodes, links, addresses, routes, apps,
//! middleboxes, TCP settings, captures) and reading its state.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use rtolab_tcp::trace::TraceLevel;
use rtolab_tcp::{Config, Connection};
use rtolab_time::SimTime;
use rtolab_wire::pcap::{LinkType, PcapWriter};

use crate::app::{AnyApp, AppId, AppStats, Demux};
use crate::capture::{CaptureDirection, Tap};
use crate::cidr::{Ipv4Cidr, Ipv6Cidr};
use crate::event::Event;
use crate::limits::RunLimits;
use crate::link::{
    BroadcastConfig, BroadcastMedium, HalfDuplexConfig, HalfDuplexLink, Link, LinkModel,
    LinkModelSpec, LinkOut, LinkStats, Medium, NfcConfig, NfcLink, P2pConfig, P2pLink, Position,
    RateDelay,
};
use crate::link_slot::LinkSlot;
use crate::middlebox::{AnyMiddlebox, MiddleboxChain};
use crate::node::{IfaceId, Interface, LinkId, MiddleboxId, Node, NodeId, Route};
use crate::pool::PacketPool;
use crate::queue::EventQueue;
use crate::rng::{component_stream, LazyStream, SimRng};
use crate::smol::SmolHost;
use crate::tcp_layer::{FlowId, FlowInfo, HostStack, TcpAppMetrics, TcpConfigId, TcpLayer};
use crate::trace::{TraceSink, Tracer};

use super::{AppSlot, BuildError, MiddleboxSlot, Simulator};

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
            chains: Vec::new(),
            node_middleboxes: Vec::new(),
            pool: PacketPool::new(),
            tracer: Tracer::default(),
            taps: Vec::new(),
            tcp: TcpLayer::new(seed),
            link_out: LinkOut::new(),
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
        // Links build their trace-only records from now on.
        self.link_out.set_tracing(true);
        // Without a sink the engine records only what the counters need.
        self.tcp.set_trace_level(TraceLevel::All);
    }

    /// Adds a node.
    pub fn add_node(&mut self, name: &str) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(Node::new(name));
        self.demux.push(Demux::default());
        self.chains.push(MiddleboxChain::new(id));
        self.node_middleboxes.push(Vec::new());
        self.tcp.add_node();
        id
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
            medium: link.medium(),
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
        self.add_link(name, Link::Nfc(NfcLink::new(config, rng)))
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
        if slot.medium == Medium::Broadcast || max.is_some_and(|m| slot.ports.len() >= m) {
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
        let rng = self.rng_stream(&format!("middlebox/{name}"));
        let chain = &mut self.chains[node.0 as usize];
        let index = chain.len();
        chain.push(name, middlebox, rng);
        let deadline = chain.deadline(index);
        self.middleboxes.push(MiddleboxSlot {
            node,
            index: index as u32,
            wakeup: None,
            generation: 0,
        });
        self.node_middleboxes[node.0 as usize].push(id);
        self.schedule_middlebox(id, deadline);
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
        let chain = &self.chains[slot.node.0 as usize];
        let (kind, stats) = chain.report(slot.index as usize);
        (chain.name(slot.index as usize), slot.node, kind, stats)
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
        self.tcp.run.add_config(config)
    }

    /// A registered TCP configuration.
    pub fn tcp_config(&self, id: TcpConfigId) -> &Config {
        self.tcp.run.config(id)
    }

    /// Sets the TCP configuration of `node`'s apps that have none of their
    /// own, and of the resets it sends. Without one, hosts use the `linux`
    /// profile.
    pub fn set_host_tcp_config(&mut self, node: NodeId, config: TcpConfigId) {
        self.tcp.hosts[node.0 as usize]
            .stack
            .set_default_config(config);
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
        self.set_host_stack(node, Box::new(host));
        Ok(())
    }

    /// Makes `node` run `stack` instead of our engine: its apps' TCP calls
    /// and the TCP datagrams no raw app bound go there. Call it before the
    /// run starts.
    pub fn set_host_stack(&mut self, node: NodeId, stack: Box<dyn HostStack>) {
        self.tcp.set_stack(node, stack);
    }

    /// The smoltcp stack of `node`, if it runs one.
    pub fn smoltcp_host(&self, node: NodeId) -> Option<&SmolHost> {
        self.tcp.hosts[node.0 as usize]
            .stack
            .as_any()
            .downcast_ref::<SmolHost>()
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
        let node = self.apps[id.0 as usize].node;
        let metrics = self.tcp.app_metrics(node, id);
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
}
