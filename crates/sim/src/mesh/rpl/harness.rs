//! A test network for [`Rpl`] instances, standing in for the radio and MAC
//! built elsewhere: nodes joined by a neighbour graph, each directed link
//! delivering a frame with some probability after a small delay. A unicast
//! is tried up to `max_transmissions` times, each attempt succeeding with
//! the link's probability, and its outcome goes back to the sender as the
//! MAC would report it. Multicasts are sent once, with no outcome. Nodes can
//! be switched off: they neither send, receive nor acknowledge.
//!
//! Optional upward data traffic stands for the TCP clients of the study:
//! every node sends a frame to its next hop towards the root at a fixed
//! interval, which feeds the link estimate as data would.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::icmpv6::{
    rpl_option, DodagConfiguration, Icmpv6Repr, PrefixInformation, RplRepr, RplTarget,
    TransitInformation,
};
use rtolab_wire::ieee802154::Address;
use rtolab_wire::ipv6::{self, Ipv6Repr, Transport6};

use super::{Role, Rpl, RplConfig, RplEvent, TxStatus};
use crate::rng::{component_stream, SimRng};

/// One node of the test network.
pub struct HarnessNode {
    pub rpl: Rpl,
    pub alive: bool,
}

enum Ev {
    Deliver {
        to: usize,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        message: Vec<u8>,
    },
    Outcome {
        node: usize,
        neighbour: Ipv6Addr,
        status: TxStatus,
        transmissions: u32,
    },
    Data {
        node: usize,
    },
}

/// Messages seen on the air, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub dio: u64,
    pub dis: u64,
    pub dao: u64,
    pub dao_ack: u64,
}

pub struct Harness {
    pub nodes: Vec<HarnessNode>,
    /// `links[i]`: (neighbour, delivery probability from i to it).
    links: Vec<Vec<(usize, f64)>>,
    queue: BTreeMap<(SimTime, u64), Ev>,
    seq: u64,
    rng: SimRng,
    pub now: SimTime,
    pub delay: SimDuration,
    pub max_transmissions: u32,
    pub data_interval: Option<SimDuration>,
    /// Every event of every node, in order.
    pub trace: Vec<(SimTime, usize, RplEvent)>,
    pub counts: Counts,
}

/// The MAC address of node `i`, shaped like Cooja's Sky motes'.
pub fn mac(i: usize) -> Address {
    let id = u8::try_from(i + 1).expect("small test networks");
    Address::Extended([0x00, 0x12, 0x74, id, 0x00, id, id, id])
}

pub const PREFIX: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0);

/// The study's grid: `side` × `side` nodes 40 m apart with a 50 m range, so
/// only row and column neighbours hear each other. Node `r * side + c`.
pub fn grid(side: usize) -> Vec<(usize, usize)> {
    let mut edges = Vec::new();
    for r in 0..side {
        for c in 0..side {
            let i = r * side + c;
            if c + 1 < side {
                edges.push((i, i + 1));
            }
            if r + 1 < side {
                edges.push((i, i + side));
            }
        }
    }
    edges
}

impl Harness {
    /// `n` nodes, node 0 the root of fd00::/64, over symmetric `edges` each
    /// delivering with probability `p`.
    pub fn new(seed: u64, n: usize, edges: &[(usize, usize)], p: f64, config: &RplConfig) -> Self {
        let mut links = vec![Vec::new(); n];
        for &(a, b) in edges {
            links[a].push((b, p));
            links[b].push((a, p));
        }
        let nodes = (0..n)
            .map(|i| {
                let role = if i == 0 {
                    Role::Root {
                        prefix: PREFIX,
                        prefix_len: 64,
                    }
                } else {
                    Role::Node
                };
                let rng = component_stream(seed, &format!("rpl/n{i}"));
                HarnessNode {
                    rpl: Rpl::new(SimTime::ZERO, config.clone(), mac(i), role, rng).unwrap(),
                    alive: true,
                }
            })
            .collect();
        let mut h = Harness {
            nodes,
            links,
            queue: BTreeMap::new(),
            seq: 0,
            rng: component_stream(seed, "harness"),
            now: SimTime::ZERO,
            delay: SimDuration::from_millis(5),
            max_transmissions: 4,
            data_interval: None,
            trace: Vec::new(),
            counts: Counts::default(),
        };
        for i in 0..n {
            h.drain(i);
        }
        h
    }

    /// Starts the upward data traffic, each node at a random phase.
    pub fn with_data(mut self, interval: SimDuration) -> Self {
        self.data_interval = Some(interval);
        for node in 1..self.nodes.len() {
            let phase = self.rng.gen_range(0..interval.as_nanos());
            self.push(self.now + SimDuration::from_nanos(phase), Ev::Data { node });
        }
        self
    }

    fn push(&mut self, at: SimTime, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    pub fn index_of(&self, link_local: Ipv6Addr) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.rpl.link_local() == link_local)
    }

    pub fn neighbours(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.links[i].iter().map(|&(j, _)| j)
    }

    /// Runs every event and timer up to and including `until`.
    pub fn run_until(&mut self, until: SimTime) {
        loop {
            let next_event = self.queue.keys().next().map(|&(t, _)| t);
            let next_timer = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.alive)
                .filter_map(|(i, n)| n.rpl.poll_timeout().map(|t| (t, i)))
                .min();
            let event_first = match (next_event, next_timer) {
                (Some(e), Some((t, _))) => e <= t,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if event_first {
                let (&(at, seq), _) = self.queue.iter().next().expect("checked");
                if at > until {
                    break;
                }
                let ev = self.queue.remove(&(at, seq)).expect("present");
                self.now = at;
                self.handle(ev);
            } else {
                let (at, i) = next_timer.expect("checked");
                if at > until {
                    break;
                }
                self.now = at;
                self.nodes[i].rpl.handle_timeout(at);
                self.drain(i);
            }
        }
        self.now = until;
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver {
                to,
                src,
                dst,
                message,
            } => {
                if self.nodes[to].alive {
                    let now = self.now;
                    self.nodes[to]
                        .rpl
                        .handle_message(now, src, dst, &message)
                        .expect("every message sent is well formed");
                    self.drain(to);
                }
            }
            Ev::Outcome {
                node,
                neighbour,
                status,
                transmissions,
            } => {
                if self.nodes[node].alive {
                    let now = self.now;
                    self.nodes[node]
                        .rpl
                        .handle_tx_outcome(now, neighbour, status, transmissions);
                    self.drain(node);
                }
            }
            Ev::Data { node } => {
                let interval = self.data_interval.expect("data scheduled");
                self.push(self.now + interval, Ev::Data { node });
                if self.nodes[node].alive {
                    let root = self.nodes[0].rpl.global_address().expect("root address");
                    if let Some(next) = self.nodes[node].rpl.next_hop(root) {
                        self.unicast(node, next, None);
                    }
                }
            }
        }
    }

    /// Sends what node `i` has to send and records its events.
    fn drain(&mut self, i: usize) {
        while let Some(ev) = self.nodes[i].rpl.poll_event() {
            self.trace.push((self.now, i, ev));
        }
        while let Some(tx) = self.nodes[i].rpl.poll_transmit() {
            let src = self.nodes[i].rpl.link_local();
            self.check_and_count(src, tx.dst, &tx.message);
            if tx.dst.is_multicast() {
                for k in 0..self.links[i].len() {
                    let (j, p) = self.links[i][k];
                    if self.nodes[j].alive && self.rng.gen_bool(p) {
                        let at = self.now + self.delay;
                        self.push(
                            at,
                            Ev::Deliver {
                                to: j,
                                src,
                                dst: tx.dst,
                                message: tx.message.clone(),
                            },
                        );
                    }
                }
            } else {
                self.unicast(i, tx.dst, Some(tx.message));
            }
        }
    }

    /// A unicast from `i` to the neighbour with link-local address `dst`,
    /// delivering `message` if any (data frames carry none RPL reads).
    fn unicast(&mut self, i: usize, dst: Ipv6Addr, message: Option<Vec<u8>>) {
        let src = self.nodes[i].rpl.link_local();
        let link = self.links[i]
            .iter()
            .copied()
            .find(|&(j, _)| self.nodes[j].rpl.link_local() == dst);
        let mut outcome = (TxStatus::NoAck, self.max_transmissions);
        if let Some((j, p)) = link {
            for attempt in 1..=self.max_transmissions {
                if self.nodes[j].alive && self.rng.gen_bool(p) {
                    outcome = (TxStatus::Ok, attempt);
                    if let Some(message) = message {
                        let at = self.now + self.delay.saturating_mul(u64::from(attempt));
                        self.push(
                            at,
                            Ev::Deliver {
                                to: j,
                                src,
                                dst,
                                message,
                            },
                        );
                    }
                    break;
                }
            }
        }
        let at = self.now + self.delay.saturating_mul(u64::from(outcome.1));
        self.push(
            at,
            Ev::Outcome {
                node: i,
                neighbour: dst,
                status: outcome.0,
                transmissions: outcome.1,
            },
        );
    }

    /// Every message must survive an IPv6 round trip through the wire crate
    /// with its checksum, and its options must read as their types.
    fn check_and_count(&mut self, src: Ipv6Addr, dst: Ipv6Addr, message: &[u8]) {
        let repr = Icmpv6Repr::parse(message).expect("RPL message parses");
        let ip = Ipv6Repr {
            src,
            dst,
            next_header: 58,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 0,
        };
        let mut datagram = Vec::new();
        ipv6::emit_icmpv6(&mut datagram, &ip, &repr).expect("emits");
        let parsed = ipv6::parse(&datagram).expect("datagram parses");
        assert_eq!(parsed.transport, Transport6::Icmpv6(repr));
        let Icmpv6Repr::Rpl(rpl) = repr else {
            panic!("not an RPL message: {repr:?}");
        };
        let options = match rpl {
            RplRepr::Dio { options, .. } => {
                self.counts.dio += 1;
                options
            }
            RplRepr::Dis { options } => {
                self.counts.dis += 1;
                options
            }
            RplRepr::Dao { options, .. } => {
                self.counts.dao += 1;
                options
            }
            RplRepr::DaoAck { options, .. } => {
                self.counts.dao_ack += 1;
                options
            }
        };
        for o in options.iter() {
            match o.kind {
                rpl_option::DODAG_CONFIGURATION => {
                    DodagConfiguration::parse(o.data).expect("configuration");
                }
                rpl_option::PREFIX_INFORMATION => {
                    PrefixInformation::parse(o.data).expect("prefix");
                }
                rpl_option::RPL_TARGET => {
                    RplTarget::parse(o.data).expect("target");
                }
                rpl_option::TRANSIT_INFORMATION => {
                    TransitInformation::parse(o.data).expect("transit");
                }
                other => panic!("unexpected option {other}"),
            }
        }
    }

    /// Whether every live node's chain of preferred parents reaches the
    /// root over live neighbours.
    pub fn upward_complete(&self) -> bool {
        (1..self.nodes.len())
            .filter(|&i| self.nodes[i].alive)
            .all(|i| self.path_up(i).is_some())
    }

    /// The hops from `i` up to the root.
    pub fn path_up(&self, i: usize) -> Option<Vec<usize>> {
        let mut path = vec![i];
        let mut at = i;
        while at != 0 {
            let parent = self.index_of(self.nodes[at].rpl.preferred_parent()?)?;
            if !self.nodes[parent].alive
                || !self.neighbours(at).any(|j| j == parent)
                || path.contains(&parent)
            {
                return None;
            }
            path.push(parent);
            at = parent;
        }
        Some(path)
    }

    /// Whether the root reaches every live node's global address hop by
    /// hop through the nodes' next hops.
    pub fn downward_complete(&self) -> bool {
        (1..self.nodes.len())
            .filter(|&i| self.nodes[i].alive)
            .all(|i| self.path_down(i).is_some())
    }

    /// The hops from the root down to `i`.
    pub fn path_down(&self, i: usize) -> Option<Vec<usize>> {
        let dst = self.nodes[i].rpl.global_address()?;
        let mut path = vec![0];
        let mut at = 0;
        while at != i {
            let next = self.index_of(self.nodes[at].rpl.next_hop(dst)?)?;
            if !self.nodes[next].alive
                || !self.neighbours(at).any(|j| j == next)
                || path.contains(&next)
            {
                return None;
            }
            path.push(next);
            at = next;
        }
        Some(path)
    }

    /// Runs in one-second steps until both directions are complete, giving
    /// the time they first were, or None by `limit`.
    pub fn run_until_complete(&mut self, limit: SimTime) -> Option<SimTime> {
        while self.now < limit {
            let next = self.now + SimDuration::from_secs(1);
            self.run_until(next);
            if self.upward_complete() && self.downward_complete() {
                return Some(self.now);
            }
        }
        None
    }
}
