//! The engine: the simulator's link models, bridges and rtolab hosts, told
//! the time by a driver and fed datagrams from the hosts' TUN devices.
//!
//! The engine is itself sans-IO. The driver (see [`crate::runtime`]) reads
//! the clock and the TUN devices; the engine answers with the datagrams to
//! write to TUN devices, each with the time the model scheduled its
//! delivery, through an [`Egress`]. Tests drive it through virtual time
//! with no devices at all.
//!
//! Events are processed in time order across all links and hosts: each
//! call handles every deadline up to `now`, earliest first, at its own
//! scheduled time. A driver that wakes late therefore replays the same
//! history as a punctual one; only the moment a datagram reaches a TUN
//! device is late, and the driver measures by how much.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use rand::RngCore;
use rtolab_sim::link::{
    Datagram, Frame, Link, LinkIndication, LinkModel, LinkOut, LinkOutput, Medium, UNKNOWN_UID,
};
use rtolab_sim::middlebox::{ChainEvent, MiddleboxChain};
use rtolab_sim::node::NodeId;
use rtolab_sim::out_dir::OutDir;
use rtolab_sim::pool::{PacketId, PacketPool};
use rtolab_sim::rng::component_stream;
use rtolab_sim::scenario::LinkModelSpec;
use rtolab_sim::tcp_layer::TcpCounts;
use rtolab_sim::{CaptureDirection, Ipv4Cidr};
use rtolab_tcp::{Config, Profile};
use rtolab_time::SimTime;
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::pcap::PcapWriter;
use serde::Serialize;

use crate::apps::rtolab::{RtolabApp, RtolabHost};
use crate::apps::EngineAppReport;
use crate::config::{EmuScenario, HostKind};
use crate::error::EmuError;
use crate::wire_stats::{WireCounts, WireTracker};

/// Index of a TUN-attached interface in [`Engine::tun_ports`].
pub type TunId = usize;

/// Where datagrams leave the engine: the TUN devices of Linux hosts.
pub trait Egress {
    /// Writes `datagram` to TUN interface `tun`; the link model delivered
    /// it at `due`.
    fn deliver(&mut self, tun: TunId, datagram: &[u8], due: SimTime);
}

/// An interface of a Linux host: a TUN device in the host's namespace,
/// attached to one end of a link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TunPort {
    /// Index of the host in the scenario.
    pub host: usize,
    /// Host name.
    pub host_name: String,
    /// Link name.
    pub link: String,
    /// Device name inside the namespace (at most 15 characters).
    pub device: String,
    /// Interface address and prefix.
    pub address: Ipv4Cidr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Tun(TunId),
    /// Index into the engine's rtolab hosts.
    Rtolab(usize),
    /// The scenario index of a bridge host.
    Bridge(usize),
}

struct PortEnd {
    owner: Owner,
    host: usize,
    /// Index of this interface among the host's (in link order, as the
    /// simulator numbers them).
    iface: u32,
    /// Indices of captures tapping this interface.
    taps: Vec<usize>,
}

struct LinkSlot {
    name: String,
    link: Link,
    /// What the link carries, asked once when it was built.
    medium: Medium,
    ports: Vec<PortEnd>,
}

struct Tap {
    file: PathBuf,
    direction: CaptureDirection,
    writer: PcapWriter,
}

struct RtolabSlot {
    host: RtolabHost,
    /// Scenario index of the host.
    index: usize,
    link: usize,
    port: u32,
}

/// Counters of what crossed the engine's edges.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EdgeCounts {
    /// Datagrams read from TUN devices and accepted.
    pub packets_from_tun: u64,
    /// Datagrams written to TUN devices.
    pub packets_to_tun: u64,
    /// Datagrams from hosts that failed to parse (malformed, hostile, not
    /// IPv4), by error, dropped without reaching a link.
    pub rejected: BTreeMap<String, u64>,
    /// Frames the link models dropped, by reason.
    pub link_drops: BTreeMap<String, u64>,
    /// Frames that reached a bridge with no way out.
    pub bridge_drops: u64,
    /// Datagrams middleboxes dropped.
    pub middlebox_drops: u64,
    /// Datagrams middleboxes injected that had no way out.
    pub middlebox_unrouted: u64,
}

/// A middlebox in an [`EngineReport`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MiddleboxReport {
    /// Middlebox name.
    pub name: String,
    /// Host it sits on.
    pub host: String,
    /// Its kind.
    pub kind: &'static str,
    /// Packets it kept when handed them.
    pub held: u64,
    /// Held packets it let go.
    pub released: u64,
    /// Packets it dropped.
    pub dropped: u64,
    /// Datagrams it built.
    pub injected: u64,
    /// Its own counters, as the simulator reports them.
    pub stats: serde_json::Value,
}

/// A link layer's indication to a node, as the emulator records it (the
/// simulator traces the same as `link_indication`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IndicationRecord {
    /// When, in ns of the run's clock.
    pub at_ns: u64,
    /// Link name.
    pub link: String,
    /// The notified host.
    pub host: String,
    /// `going_down`, `gone` or `up`.
    pub indication: &'static str,
    /// `going_down`: the link's round trip, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ns: Option<u64>,
    /// `going_down`: the predicted outage, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_outage_ns: Option<u64>,
}

impl EdgeCounts {
    /// All rejected datagrams.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }
}

/// A link in an [`EngineReport`]: the simulator's own report of a link.
pub use rtolab_sim::run::LinkReport;

/// A host in an [`EngineReport`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostReport {
    /// Host name.
    pub name: String,
    /// Which stack ran it.
    pub stack: HostKind,
    /// What it put on its links.
    pub wire: WireCounts,
    /// The engine's own counters (rtolab hosts; not smoltcp hosts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<TcpCounts>,
}

/// The engine's view of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineReport {
    /// Per link.
    pub links: Vec<LinkReport>,
    /// Per host (bridges included).
    pub hosts: Vec<HostReport>,
    /// Apps of rtolab hosts.
    pub apps: Vec<EngineAppReport>,
    /// Middleboxes, by host, each host's in the order packets meet them.
    pub middleboxes: Vec<MiddleboxReport>,
    /// Link indications, in time order.
    pub indications: Vec<IndicationRecord>,
    /// Edge counters.
    pub edges: EdgeCounts,
}

/// A node's middleboxes and what they did.
struct ChainSlot {
    chain: MiddleboxChain,
    /// Per middlebox of the chain: held, released, dropped, injected.
    counts: Vec<[u64; 4]>,
}

/// The links, bridges and rtolab hosts of one emulation.
pub struct Engine {
    links: Vec<LinkSlot>,
    pool: PacketPool,
    tuns: Vec<TunPort>,
    /// (link, port) of each TUN interface.
    tun_ends: Vec<(usize, u32)>,
    rtolab: Vec<RtolabSlot>,
    /// Per bridge host (scenario index): its two (link, port) ends.
    bridges: BTreeMap<usize, Vec<(usize, u32)>>,
    taps: Vec<Tap>,
    capture_error: Option<EmuError>,
    work: VecDeque<(usize, SimTime, LinkOutput<PacketId>)>,
    link_out: LinkOut<PacketId>,
    wire: WireTracker,
    host_names: Vec<String>,
    host_kinds: Vec<HostKind>,
    host_wire: Vec<WireCounts>,
    edges: EdgeCounts,
    scratch: Vec<PacketId>,
    /// Per link, per port: the interface's address and prefix.
    subnets: Vec<Vec<Option<Ipv4Cidr>>>,
    /// Per host (scenario index): its interfaces as (link, port).
    host_ifaces: Vec<Vec<(usize, u32)>>,
    /// Middlebox chains by host (scenario index).
    chains: BTreeMap<usize, ChainSlot>,
    chain_out: Vec<ChainEvent>,
    indications: Vec<IndicationRecord>,
}

/// A device name for interface `index` of a host on `link`: `rt<index>-`
/// and as much of the link name as fits in 15 characters.
pub(crate) fn device_name(index: usize, link: &str) -> String {
    let mut name = format!("rt{index}-");
    for c in link.chars() {
        if name.len() >= 15 {
            break;
        }
        name.push(if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        });
    }
    name
}

fn build_link(model: &LinkModelSpec, name: &str, seed: u64) -> Option<Link> {
    // The same random stream the simulator gives the link of that name.
    let rng = component_stream(seed, &format!("link/{name}"));
    model.emulated().then(|| model.build(rng))
}

impl Engine {
    /// Builds the links, bridges and rtolab hosts of `emu`, with random
    /// streams from `seed`; opens the captures in `out_dir` if given.
    pub fn new(emu: &EmuScenario, seed: u64, out_dir: Option<&OutDir>) -> Result<Engine, EmuError> {
        let s = &emu.scenario;
        let host_index = |name: &str| s.hosts.iter().position(|h| h.name == name);
        let mut engine = Engine {
            links: Vec::new(),
            pool: PacketPool::new(),
            tuns: Vec::new(),
            tun_ends: Vec::new(),
            rtolab: Vec::new(),
            bridges: BTreeMap::new(),
            taps: Vec::new(),
            capture_error: None,
            work: VecDeque::new(),
            link_out: LinkOut::new(),
            wire: WireTracker::new(),
            host_names: s.hosts.iter().map(|h| h.name.clone()).collect(),
            host_kinds: emu.kinds.clone(),
            host_wire: vec![WireCounts::default(); s.hosts.len()],
            edges: EdgeCounts::default(),
            scratch: Vec::new(),
            subnets: s
                .links
                .iter()
                .map(|l| l.model.attachments().iter().map(|e| e.address).collect())
                .collect(),
            host_ifaces: vec![Vec::new(); s.hosts.len()],
            chains: BTreeMap::new(),
            chain_out: Vec::new(),
            indications: Vec::new(),
        };
        for m in &s.middleboxes {
            let Some(h) = host_index(&m.host) else {
                continue;
            };
            let slot = engine.chains.entry(h).or_insert_with(|| ChainSlot {
                chain: MiddleboxChain::new(NodeId(h as u32)),
                counts: Vec::new(),
            });
            // The random stream the simulator gives a middlebox of that name.
            let rng = component_stream(seed, &format!("middlebox/{}", m.name));
            slot.chain.push(&m.name, m.kind.build(), rng);
            slot.counts.push([0; 4]);
        }
        let mut interfaces = vec![0usize; s.hosts.len()];
        for (l, spec) in s.links.iter().enumerate() {
            let link = build_link(&spec.model, &spec.name, seed).ok_or_else(|| {
                rtolab_sim::ScenarioError {
                    path: format!("link[{l}].kind"),
                    message: "this link model is not emulated".to_string(),
                }
            })?;
            let mut ports = Vec::new();
            for (p, end) in spec.model.attachments().iter().enumerate() {
                let Some(h) = host_index(&end.host) else {
                    continue;
                };
                let owner = match emu.kinds[h] {
                    HostKind::Bridge => {
                        engine.bridges.entry(h).or_default().push((l, p as u32));
                        Owner::Bridge(h)
                    }
                    HostKind::Rtolab | HostKind::Smoltcp => {
                        let host = &s.hosts[h];
                        let apps: Vec<RtolabApp> = s
                            .apps
                            .iter()
                            .filter(|a| a.host == host.name)
                            .map(|a| RtolabApp::new(a, seed))
                            .collect();
                        let profile = s
                            .apps
                            .iter()
                            .filter(|a| a.host == host.name)
                            .find_map(|a| a.tcp.as_deref().cloned())
                            .or_else(|| host.tcp.clone())
                            .unwrap_or_else(Profile::linux);
                        let addr = end
                            .address
                            .map_or(std::net::Ipv4Addr::UNSPECIFIED, |c| c.addr);
                        let seed =
                            component_stream(seed, &format!("tcp/{}/{addr}", host.name)).next_u64();
                        let rtolab_host = match host.smoltcp {
                            Some(settings) => RtolabHost::new_smoltcp(
                                &host.name,
                                addr,
                                end.address.map_or(32, |c| c.prefix_len),
                                settings,
                                seed,
                                apps,
                            )
                            .map_err(|e| {
                                rtolab_sim::ScenarioError {
                                    path: format!("host[{h}].tcp"),
                                    message: e.to_string(),
                                }
                            })?,
                            None => RtolabHost::new(
                                &host.name,
                                addr,
                                Arc::new(Config::from_profile(profile)),
                                seed,
                                apps,
                            ),
                        };
                        engine.rtolab.push(RtolabSlot {
                            host: rtolab_host,
                            index: h,
                            link: l,
                            port: p as u32,
                        });
                        Owner::Rtolab(engine.rtolab.len() - 1)
                    }
                    // lwIP hosts exchange datagrams with the driver like
                    // TUN devices do (over a socket to their program).
                    HostKind::Linux | HostKind::Lwip => {
                        let address = end.address.unwrap_or(Ipv4Cidr {
                            addr: std::net::Ipv4Addr::UNSPECIFIED,
                            prefix_len: 32,
                        });
                        engine.tuns.push(TunPort {
                            host: h,
                            host_name: s.hosts[h].name.clone(),
                            link: spec.name.clone(),
                            device: device_name(interfaces[h], &spec.name),
                            address,
                        });
                        engine.tun_ends.push((l, p as u32));
                        interfaces[h] += 1;
                        Owner::Tun(engine.tuns.len() - 1)
                    }
                };
                ports.push(PortEnd {
                    owner,
                    host: h,
                    iface: engine.host_ifaces[h].len() as u32,
                    taps: Vec::new(),
                });
                engine.host_ifaces[h].push((l, p as u32));
            }
            engine.links.push(LinkSlot {
                name: spec.name.clone(),
                medium: link.medium(),
                link,
                ports,
            });
        }
        if let Some(out) = out_dir {
            for capture in &s.captures {
                let Some(l) = engine.links.iter().position(|l| l.name == capture.link) else {
                    continue;
                };
                let Some(h) = host_index(&capture.host) else {
                    continue;
                };
                let Some(port) = engine.links[l].ports.iter().position(|p| p.host == h) else {
                    continue;
                };
                let path = out.join(&capture.file);
                let file = out.create(&capture.file).map_err(|source| EmuError::Io {
                    path: path.clone(),
                    source,
                })?;
                let writer =
                    PcapWriter::from_writer(Box::new(file)).map_err(|source| EmuError::Io {
                        path: path.clone(),
                        source,
                    })?;
                engine.links[l].ports[port].taps.push(engine.taps.len());
                engine.taps.push(Tap {
                    file: path,
                    direction: capture.direction,
                    writer,
                });
            }
        }
        Ok(engine)
    }

    /// The TUN interfaces the driver must provide, indexed by [`TunId`].
    pub fn tun_ports(&self) -> &[TunPort] {
        &self.tuns
    }

    /// Capture files being written.
    pub fn capture_files(&self) -> Vec<PathBuf> {
        self.taps.iter().map(|t| t.file.clone()).collect()
    }

    /// The earliest deadline of any link, rtolab host or middlebox.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let links = self.links.iter().filter_map(|l| l.link.poll_timeout());
        let hosts = self.rtolab.iter().filter_map(|r| r.host.poll_timeout());
        let chains = self.chains.values().filter_map(|c| c.chain.poll_timeout());
        links.chain(hosts).chain(chains).min()
    }

    /// Whether no datagram is left anywhere between the hosts: every one a
    /// link or middlebox took has been delivered or dropped (links and
    /// middleboxes hold theirs in the pool). Pending timers do not count:
    /// a fading link's next outage or the NFC slot clock is always due.
    pub fn network_empty(&self) -> bool {
        self.pool.live() == 0
    }

    /// Whether every client app of every rtolab host has finished.
    pub fn rtolab_clients_done(&self) -> bool {
        self.rtolab.iter().all(|r| r.host.clients_done())
    }

    /// Whether any rtolab host runs a client app.
    pub fn has_rtolab_clients(&self) -> bool {
        self.rtolab
            .iter()
            .any(|r| r.host.apps().iter().any(RtolabApp::is_client))
    }

    /// Handles everything due up to `now`, in time order.
    pub fn advance(&mut self, now: SimTime, egress: &mut impl Egress) {
        loop {
            let link = self
                .links
                .iter()
                .enumerate()
                .filter_map(|(i, l)| l.link.poll_timeout().map(|t| (t, i)))
                .min();
            let host = self
                .rtolab
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.host.poll_timeout().map(|t| (t, i)))
                .min();
            let chain = self
                .chains
                .iter()
                .filter_map(|(&h, c)| c.chain.poll_timeout().map(|t| (t, h)))
                .min();
            // Ties: links first, then hosts, then middleboxes.
            let next = [
                link.map(|(t, i)| (t, 0, i)),
                host.map(|(t, i)| (t, 1, i)),
                chain.map(|(t, h)| (t, 2, h)),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some((t, 0, i)) if t <= now => {
                    self.links[i].link.handle_timeout(t, &mut self.link_out);
                    self.queue_outputs(i, t);
                }
                Some((t, 1, i)) if t <= now => {
                    self.rtolab[i].host.handle_timeout(t);
                    self.drive_host(i, t);
                }
                Some((t, _, h)) if t <= now => {
                    self.with_chain(h, t, |chain, pool, out| {
                        chain.handle_timeout(t, pool, out);
                    });
                }
                _ => break,
            }
            self.process(egress);
        }
    }

    /// Takes a datagram a Linux host wrote to its TUN interface `tun` at
    /// `now`. Anything that is not a well-formed IPv4 datagram is counted
    /// and dropped. Call [`Engine::advance`] up to `now` first.
    pub fn ingress(&mut self, now: SimTime, tun: TunId, datagram: &[u8], egress: &mut impl Egress) {
        let Some(&(link, port)) = self.tun_ends.get(tun) else {
            return;
        };
        let host = self.tuns[tun].host;
        match packet::parse(datagram) {
            Ok(parsed) => {
                let counts = &mut self.host_wire[host];
                counts.packets_sent += 1;
                if let Transport::Tcp(tcp) = &parsed.transport {
                    self.wire.observe(counts, &parsed.ip, tcp);
                }
            }
            Err(e) => {
                *self.edges.rejected.entry(e.to_string()).or_default() += 1;
                return;
            }
        }
        self.edges.packets_from_tun += 1;
        let id = self.pool.alloc();
        self.pool.buf_mut(id).extend_from_slice(datagram);
        self.transmit(link, port, now, id);
        self.process(egress);
    }

    fn transmit(&mut self, link: usize, port: u32, now: SimTime, packet: PacketId) {
        let frame = Frame {
            packet,
            len: self.pool.len(packet) as u32,
        };
        let slot = &mut self.links[link];
        match slot.medium {
            // A link that reads the bytes (an NFC link compressing headers)
            // gets them, as in the simulator.
            Medium::Ip => {
                let datagram = Datagram {
                    bytes: self.pool.bytes(packet),
                    uid: self.pool.uid(packet),
                    ip: None,
                };
                slot.link
                    .transmit_datagram(now, port, frame, datagram, &mut self.link_out);
            }
            Medium::PointToPoint | Medium::Broadcast => {
                slot.link
                    .transmit(now, port, 1 - port.min(1), frame, &mut self.link_out);
            }
        }
        self.queue_outputs(link, now);
    }

    fn queue_outputs(&mut self, link: usize, t: SimTime) {
        for output in self.link_out.drain(..) {
            self.work.push_back((link, t, output));
        }
    }

    /// Runs an rtolab host's stack and apps at `t` and puts what it sends
    /// on its link.
    fn drive_host(&mut self, i: usize, t: SimTime) {
        let pool = &mut self.pool;
        let scratch = &mut self.scratch;
        self.rtolab[i].host.drive(t, |datagram| {
            let id = pool.alloc();
            pool.buf_mut(id).extend_from_slice(datagram);
            scratch.push(id);
        });
        let (link, port, index) = (
            self.rtolab[i].link,
            self.rtolab[i].port,
            self.rtolab[i].index,
        );
        let sent = std::mem::take(&mut self.scratch);
        for &id in &sent {
            if let Ok(parsed) = packet::parse(self.pool.bytes(id)) {
                let counts = &mut self.host_wire[index];
                counts.packets_sent += 1;
                if let Transport::Tcp(tcp) = &parsed.transport {
                    self.wire.observe(counts, &parsed.ip, tcp);
                }
            }
            self.transmit(link, port, t, id);
        }
        self.scratch = sent;
        self.scratch.clear();
    }

    /// Handles queued link outputs until none are left.
    fn process(&mut self, egress: &mut impl Egress) {
        while let Some((link, t, output)) = self.work.pop_front() {
            match output {
                LinkOutput::TxStart { port, frame } => {
                    self.capture(link, port, CaptureDirection::Tx, t, frame.packet);
                }
                LinkOutput::Delivered { port, frame } => {
                    self.capture(link, port, CaptureDirection::Rx, t, frame.packet);
                    self.deliver(link, port, t, frame.packet, egress);
                }
                LinkOutput::Dropped { frame, reason, .. } => {
                    let name = serde_json::to_value(reason)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| format!("{reason:?}"));
                    *self.edges.link_drops.entry(name).or_default() += 1;
                    self.pool.free(frame.packet);
                }
                LinkOutput::Indication { port, indication } => {
                    self.link_indication(link, port, t, indication);
                }
                LinkOutput::Consumed { port, frame } => {
                    self.capture(link, port, CaptureDirection::Tx, t, frame.packet);
                    self.pool.free(frame.packet);
                }
                LinkOutput::Arrived {
                    port,
                    datagram,
                    uid,
                } => {
                    let id = match uid {
                        UNKNOWN_UID => self.pool.alloc(),
                        uid => self.pool.alloc_as(uid),
                    };
                    self.pool.buf_mut(id).extend_from_slice(&datagram);
                    self.capture(link, port, CaptureDirection::Rx, t, id);
                    self.deliver(link, port, t, id, egress);
                }
                // Only link kinds the emulator cannot run (`EMULATED =
                // false`: the mesh) capture their own frames.
                LinkOutput::Captured { .. }
                | LinkOutput::MediumBusy { .. }
                | LinkOutput::MediumFree { .. } => {}
            }
        }
    }

    /// Records a link layer's indication and hands it to the notified
    /// host's middleboxes. Linux hosts cannot hear it: their kernel has no
    /// such interface.
    fn link_indication(&mut self, link: usize, port: u32, t: SimTime, indication: LinkIndication) {
        let Some(end) = self.links[link].ports.get(port as usize) else {
            return;
        };
        let (host, iface) = (end.host, end.iface);
        let (rtt_ns, expected_outage_ns) = match indication {
            LinkIndication::GoingDown {
                rtt,
                expected_outage,
            } => (Some(rtt.as_nanos()), Some(expected_outage.as_nanos())),
            _ => (None, None),
        };
        self.indications.push(IndicationRecord {
            at_ns: t.as_nanos(),
            link: self.links[link].name.clone(),
            host: self.host_names[host].clone(),
            indication: indication.name(),
            rtt_ns,
            expected_outage_ns,
        });
        self.with_chain(host, t, |chain, pool, out| {
            chain.link_indication(t, pool, iface, indication, out);
        });
    }

    /// Runs `f` on host `h`'s middleboxes, if it has any, and carries out
    /// what they did.
    fn with_chain(
        &mut self,
        h: usize,
        t: SimTime,
        f: impl FnOnce(&mut MiddleboxChain, &mut PacketPool, &mut Vec<ChainEvent>),
    ) {
        let mut out = std::mem::take(&mut self.chain_out);
        if let Some(slot) = self.chains.get_mut(&h) {
            f(&mut slot.chain, &mut self.pool, &mut out);
        }
        self.chain_events(h, t, &mut out);
        self.chain_out = out;
    }

    /// Carries out what host `h`'s middleboxes did: forwards what passed,
    /// frees what they dropped, sends what they built.
    fn chain_events(&mut self, h: usize, t: SimTime, events: &mut Vec<ChainEvent>) {
        for event in events.drain(..) {
            let count = |engine: &mut Engine, m: usize, k: usize| {
                if let Some(slot) = engine.chains.get_mut(&h) {
                    slot.counts[m][k] += 1;
                }
            };
            match event {
                ChainEvent::Passed { packet, iface } => {
                    match self.host_ifaces[h].get(iface as usize).copied() {
                        Some((link, port)) => self.past_middleboxes(link, port, t, packet),
                        None => self.pool.free(packet),
                    }
                }
                ChainEvent::Held { middlebox, .. } => count(self, middlebox, 0),
                ChainEvent::Released { middlebox, .. } => count(self, middlebox, 1),
                ChainEvent::Dropped { middlebox, packet } => {
                    count(self, middlebox, 2);
                    self.edges.middlebox_drops += 1;
                    self.pool.free(packet);
                }
                ChainEvent::Injected { middlebox, packet } => {
                    count(self, middlebox, 3);
                    self.send_from(h, t, packet);
                }
            }
        }
    }

    /// Sends a datagram a middlebox built at host `h` like a local one: on
    /// the interface whose subnet (its own, or for a bridge the far end's)
    /// holds the destination.
    fn send_from(&mut self, h: usize, t: SimTime, packet: PacketId) {
        let dst = match packet::parse(self.pool.bytes(packet)) {
            Ok(parsed) => Some(parsed.ip.dst),
            Err(_) => None,
        };
        let out = dst.and_then(|dst| {
            self.host_ifaces[h].iter().copied().find(|&(link, port)| {
                self.subnets[link].iter().enumerate().any(|(p, c)| {
                    (p as u32 == port || self.host_kinds[h] == HostKind::Bridge)
                        && c.is_some_and(|c| c.contains(dst))
                })
            })
        });
        match out {
            Some((link, port)) => self.transmit(link, port, t, packet),
            None => {
                self.edges.middlebox_unrouted += 1;
                self.pool.free(packet);
            }
        }
    }

    fn deliver(
        &mut self,
        link: usize,
        port: u32,
        t: SimTime,
        packet: PacketId,
        egress: &mut impl Egress,
    ) {
        let Some(end) = self.links[link].ports.get(port as usize) else {
            self.pool.free(packet);
            return;
        };
        let (host, iface) = (end.host, end.iface);
        if let Owner::Tun(tun) = end.owner {
            egress.deliver(tun, self.pool.bytes(packet), t);
            self.edges.packets_to_tun += 1;
            self.pool.free(packet);
            return;
        }
        if !self.chains.contains_key(&host) {
            self.past_middleboxes(link, port, t, packet);
            return;
        }
        self.with_chain(host, t, |chain, pool, out| {
            chain.arrive(t, pool, iface, packet, out);
        });
    }

    /// A datagram that arrived at an rtolab host or a bridge from `link`
    /// and passed its middleboxes: the host takes it, the bridge passes it
    /// on.
    fn past_middleboxes(&mut self, link: usize, port: u32, t: SimTime, packet: PacketId) {
        let Some(end) = self.links[link].ports.get(port as usize) else {
            self.pool.free(packet);
            return;
        };
        match end.owner {
            Owner::Tun(_) => self.pool.free(packet),
            Owner::Rtolab(i) => {
                let result = self.rtolab[i]
                    .host
                    .handle_datagram(t, self.pool.bytes(packet));
                self.pool.free(packet);
                if let Err(e) = result {
                    *self.edges.rejected.entry(e.to_string()).or_default() += 1;
                }
                self.drive_host(i, t);
            }
            Owner::Bridge(h) => {
                let out = self
                    .bridges
                    .get(&h)
                    .and_then(|ends| ends.iter().find(|&&(l, _)| l != link).copied());
                match out {
                    Some((l, p)) => self.transmit(l, p, t, packet),
                    None => {
                        self.edges.bridge_drops += 1;
                        self.pool.free(packet);
                    }
                }
            }
        }
    }

    fn capture(&mut self, link: usize, port: u32, dir: CaptureDirection, t: SimTime, p: PacketId) {
        let Some(end) = self.links[link].ports.get(port as usize) else {
            return;
        };
        for &tap in &end.taps {
            let tap = &mut self.taps[tap];
            if !tap.direction.includes(dir) {
                continue;
            }
            if let Err(source) = tap.writer.write_packet(t.as_nanos(), self.pool.bytes(p)) {
                self.capture_error.get_or_insert(EmuError::Io {
                    path: tap.file.clone(),
                    source,
                });
            }
        }
    }

    /// Flushes the captures; the first capture error of the run, if any.
    pub fn finish(&mut self) -> Result<(), EmuError> {
        for tap in &mut self.taps {
            if let Err(source) = tap.writer.flush() {
                self.capture_error.get_or_insert(EmuError::Io {
                    path: tap.file.clone(),
                    source,
                });
            }
        }
        match self.capture_error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// What happened up to `now`.
    pub fn report(&self, now: SimTime) -> EngineReport {
        EngineReport {
            links: self
                .links
                .iter()
                .map(|l| LinkReport {
                    name: l.name.clone(),
                    kind: l.link.kind(),
                    stats: l.link.stats(now),
                })
                .collect(),
            hosts: self
                .host_names
                .iter()
                .enumerate()
                .map(|(h, name)| HostReport {
                    name: name.clone(),
                    stack: self.host_kinds[h],
                    wire: self.host_wire[h],
                    engine: self
                        .rtolab
                        .iter()
                        .find(|r| r.index == h)
                        // smoltcp keeps no such counters.
                        .and_then(|r| r.host.counts()),
                })
                .collect(),
            apps: self
                .rtolab
                .iter()
                .flat_map(|r| r.host.app_reports())
                .collect(),
            middleboxes: self
                .chains
                .iter()
                .flat_map(|(&h, slot)| {
                    slot.chain.stats().into_iter().zip(&slot.counts).map(
                        move |((name, kind, stats), c)| MiddleboxReport {
                            name,
                            host: self.host_names[h].clone(),
                            kind,
                            held: c[0],
                            released: c[1],
                            dropped: c[2],
                            injected: c[3],
                            stats,
                        },
                    )
                })
                .collect(),
            indications: self.indications.clone(),
            edges: self.edges.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::device_name;

    /// Link names reach `ip` (as one argument of a list, never through a
    /// shell) only as device names: plain, short, never an option.
    #[test]
    fn device_names_are_plain_whatever_the_link_is_called() {
        for link in [
            "-rf",
            "a;reboot",
            "$(id)",
            "../../x",
            "a b\tc",
            "é\u{1b}[31m",
            "",
        ] {
            let name = device_name(3, link);
            assert!(name.starts_with("rt3-"), "{name:?}");
            assert!(name.len() <= 15, "{name:?}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{name:?}"
            );
        }
    }
}
