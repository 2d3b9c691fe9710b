//! RPL (RFC 6550) in storing mode, as Contiki 3.0 runs it
//! (`core/net/rpl/`): one instance, one DODAG, MRHOF over ETX, Trickle DIOs,
//! DAOs building downward routes hop by hop.
//!
//! [`Rpl`] is the routing state of one node as a sans-IO state machine: it
//! is told the time with every input and never reads a clock.
//!
//! * inputs: [`Rpl::handle_message`] (an ICMPv6 message addressed to this
//!   node or to ff02::1a), [`Rpl::handle_tx_outcome`] (how the MAC's
//!   unicast to a neighbour ended: the ETX estimate), [`Rpl::handle_timeout`];
//! * outputs: [`Rpl::poll_transmit`] (ICMPv6 messages to send from the
//!   node's link-local address, hop limit 64 as `uip_icmp6_send` uses, to
//!   ff02::1a or a neighbour's link-local address), [`Rpl::poll_event`]
//!   (parent changes: the tree over time), [`Rpl::poll_timeout`];
//! * routing: [`Rpl::next_hop`], [`Rpl::preferred_parent`], [`Rpl::rank`],
//!   [`Rpl::routes`].
//!
//! Neighbours are named by their link-local addresses, whose interface
//! identifier is their MAC address ([`addr::link_local`]), so the MAC's
//! destination maps to the neighbour RPL knows, and back.
//!
//! [`static_tree`] builds nodes whose tree is configured rather than
//! discovered, for controlled experiments.

pub mod addr;
mod config;
pub mod mrhof;
mod static_tree;
pub mod trickle;

#[cfg(test)]
mod harness;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::net::Ipv6Addr;

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::icmpv6::{
    rpl_option, DodagConfiguration, Icmpv6Repr, PrefixInformation, RplOptions, RplRepr, RplTarget,
    TransitInformation,
};
use rtolab_wire::ieee802154::Address;
use rtolab_wire::WireError;

pub use config::{RawRplConfig, RplConfig};
pub use mrhof::{LinkEstimate, TxStatus, INFINITE_RANK};
pub use static_tree::static_tree;

use crate::config::ScenarioError;
use crate::event::earliest;
use crate::rng::SimRng;
use addr::{interface_id, is_link_local, link_local, with_iid, ALL_RPL_NODES};
use trickle::Trickle;

/// Mode of operation: storing without multicast (`RPL_MOP_DEFAULT`,
/// `rpl-private.h`), the only one joined.
pub const MOP_STORING_NO_MULTICAST: u8 = 2;
/// Lollipop counters start here (`RPL_LOLLIPOP_INIT`, `rpl-private.h`).
const LOLLIPOP_INIT: u8 = 240;
/// Below this, lollipop counters wrap (`RPL_LOLLIPOP_CIRCULAR_REGION`).
const LOLLIPOP_CIRCULAR_REGION: u8 = 127;
/// Comparison window of lollipop counters (`RPL_LOLLIPOP_SEQUENCE_WINDOWS`).
const LOLLIPOP_SEQUENCE_WINDOWS: i32 = 16;
/// A route a No-Path DAO withdrew lives on this long, in seconds
/// (`DAO_EXPIRATION_TIMEOUT`, `rpl-private.h`).
const DAO_EXPIRATION_TIMEOUT: u32 = 60;
/// The first DIS is counted from a random start this many seconds early
/// (`RPL_DIS_START_DELAY`, `rpl-private.h`).
const DIS_START_DELAY: u64 = 5;
/// Period of route purging and rank recalculation (`handle_periodic_timer`,
/// `rpl-timers.c`).
const PERIODIC: SimDuration = SimDuration::from_secs(1);
/// Prefix lifetimes announced: infinite. Contiki's root sends zeros, which
/// its nodes ignore but RFC 4862 would read as "invalid".
const PREFIX_LIFETIME: u32 = u32::MAX;

/// What a node is in the DODAG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The DODAG root (the border router): it announces `prefix` and takes
    /// prefix + its interface identifier as its address and DODAGID.
    Root {
        /// The global prefix (aaaa::/64 in Contiki's examples, or fd00::/64).
        prefix: Ipv6Addr,
        /// Its length, 1 to 64 (the interface identifier takes the rest).
        prefix_len: u8,
    },
    /// A router joining the DODAG it hears of.
    Node,
}

/// An ICMPv6 message for the node to send, from its link-local address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RplTransmit {
    /// ff02::1a or a neighbour's link-local address.
    pub dst: Ipv6Addr,
    /// The ICMPv6 message, checksum zero (the IPv6 layer fills it).
    pub message: Vec<u8>,
}

/// Something that happened to the node's place in the DODAG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RplEvent {
    /// The node joined the DODAG `dodag_id` (a root: created it).
    Joined {
        /// DODAGID.
        dodag_id: Ipv6Addr,
    },
    /// A global address was configured from the DODAG's prefix.
    AddressConfigured {
        /// The address.
        address: Ipv6Addr,
    },
    /// The preferred parent changed, to `None` when the node lost every
    /// parent (its rank is then infinite). Reported once per input, with
    /// the rank after it.
    ParentChanged {
        /// The previous preferred parent.
        old: Option<Ipv6Addr>,
        /// The new one.
        new: Option<Ipv6Addr>,
        /// The node's rank now.
        rank: u16,
    },
}

/// A downward route learned from a DAO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The target address or prefix.
    pub target: Ipv6Addr,
    /// Its length in bits.
    pub prefix_len: u8,
    /// The child (link-local address) the target was announced by.
    pub next_hop: Ipv6Addr,
    /// Seconds left.
    pub lifetime_secs: u32,
    /// A No-Path DAO withdrew it; it expires within a minute.
    pub no_path: bool,
}

/// Message counters of one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RplStats {
    /// DIOs sent (multicast and unicast).
    pub dio_sent: u64,
    /// DISes sent.
    pub dis_sent: u64,
    /// DAOs originated (including No-Path DAOs).
    pub dao_sent: u64,
    /// DAOs forwarded towards the root.
    pub dao_forwarded: u64,
    /// DAO-ACKs sent.
    pub dao_ack_sent: u64,
    /// Preferred parent changes.
    pub parent_switches: u64,
    /// Local repairs (every parent lost).
    pub local_repairs: u64,
    /// Global repairs (a new DODAG version).
    pub global_repairs: u64,
    /// Messages dropped as malformed.
    pub malformed: u64,
}

/// A neighbour heard sending DIOs in our DODAG: a candidate parent
/// (Contiki's `rpl_parent_t` with its neighbour's link metric).
#[derive(Clone, Debug)]
struct Parent {
    addr: Ipv6Addr,
    rank: u16,
    dtsn: u8,
    link: LinkEstimate,
    /// Rank recalculation is due (`RPL_PARENT_FLAG_UPDATED`).
    updated: bool,
    /// Last transmission outcome for it (`last_tx_time`).
    last_tx: Option<SimTime>,
}

/// The DODAG the node is part of, with its instance's parameters.
#[derive(Clone, Debug)]
struct Dag {
    instance_id: u8,
    version: u8,
    dodag_id: Ipv6Addr,
    grounded: bool,
    preference: u8,
    rank: u16,
    min_rank: u16,
    preferred: Option<Ipv6Addr>,
    prefix: Option<(Ipv6Addr, u8)>,
    dtsn_out: u8,
    dio_interval_min: u8,
    dio_interval_doublings: u8,
    dio_redundancy: u8,
    max_rank_increase: u16,
    min_hop_rank_increase: u16,
    default_lifetime: u8,
    lifetime_unit: u16,
    trickle: Trickle,
}

impl Dag {
    fn root_rank(&self) -> u16 {
        self.min_hop_rank_increase
    }

    /// DAGRank: the integer part of a rank.
    fn dag_rank(&self, rank: u32) -> u32 {
        rank / u32::from(self.min_hop_rank_increase)
    }

    /// `acceptable_rank`: finite and within MaxRankIncrease of the lowest
    /// rank held since joining.
    fn acceptable(&self, rank: u16) -> bool {
        rank != INFINITE_RANK
            && (self.max_rank_increase == 0
                || self.dag_rank(u32::from(rank))
                    <= self.dag_rank(u32::from(self.min_rank) + u32::from(self.max_rank_increase)))
    }

    fn lifetime_secs(&self, lifetime: u8) -> u32 {
        RplConfig::lifetime_secs(lifetime, self.lifetime_unit)
    }
}

/// A DIO's contents, with the defaults Contiki assumes for missing options.
struct Dio {
    instance_id: u8,
    version: u8,
    rank: u16,
    grounded: bool,
    mop: u8,
    preference: u8,
    dtsn: u8,
    dodag_id: Ipv6Addr,
    conf: DodagConfiguration,
    prefix: Option<PrefixInformation>,
}

/// How the node's routes are made.
#[derive(Clone, Debug)]
enum Mode {
    /// RPL messages.
    Dynamic,
    /// Configured: no messages, no timers.
    Static,
}

/// RPL routing state of one node. See the [module documentation](self).
#[derive(Clone, Debug)]
pub struct Rpl {
    config: RplConfig,
    mode: Mode,
    is_root: bool,
    link_local: Ipv6Addr,
    iid: [u8; 8],
    global: Option<Ipv6Addr>,
    rng: SimRng,
    dag: Option<Dag>,
    parents: Vec<Parent>,
    /// Newest first, as Contiki's route list.
    routes: Vec<Route>,
    periodic_at: SimTime,
    dao_at: Option<SimTime>,
    dao_lifetime_at: Option<SimTime>,
    probing_at: Option<SimTime>,
    /// Seconds counted towards the next DIS (`next_dis`).
    next_dis: u64,
    dao_sequence: u8,
    out: VecDeque<RplTransmit>,
    events: VecDeque<RplEvent>,
    reported_parent: Option<Ipv6Addr>,
    stats: RplStats,
}

/// `RPL_LOLLIPOP_INCREMENT`.
fn lollipop_increment(c: &mut u8) {
    *c = if *c > LOLLIPOP_CIRCULAR_REGION {
        c.wrapping_add(1)
    } else {
        (*c + 1) & LOLLIPOP_CIRCULAR_REGION
    };
}

/// `lollipop_greater_than` (`rpl-dag.c`).
fn lollipop_greater_than(a: u8, b: u8) -> bool {
    let (a, b) = (i32::from(a), i32::from(b));
    let circular = i32::from(LOLLIPOP_CIRCULAR_REGION);
    if a > circular && b <= circular {
        return 256 + b - a > LOLLIPOP_SEQUENCE_WINDOWS;
    }
    (a > b && a - b < LOLLIPOP_SEQUENCE_WINDOWS)
        || (a < b && b - a > circular + 1 - LOLLIPOP_SEQUENCE_WINDOWS)
}

impl Rpl {
    /// A node with MAC address `mac` starting at `now`; `rng` is its
    /// component stream (`rng::component_stream(seed, "rpl/<node>")`).
    /// Fails, naming the field, for a configuration out of range
    /// (`rpl.<field>`) or a root prefix that leaves no room for a 64-bit
    /// interface identifier (`prefix_len`).
    pub fn new(
        now: SimTime,
        config: RplConfig,
        mac: Address,
        role: Role,
        rng: SimRng,
    ) -> Result<Self, ScenarioError> {
        config.check("rpl")?;
        let mut rpl = Rpl {
            mode: Mode::Dynamic,
            is_root: false,
            link_local: link_local(mac),
            iid: interface_id(mac),
            global: None,
            rng,
            dag: None,
            parents: Vec::new(),
            routes: Vec::new(),
            periodic_at: now + PERIODIC,
            dao_at: None,
            dao_lifetime_at: None,
            probing_at: None,
            next_dis: 0,
            dao_sequence: LOLLIPOP_INIT,
            out: VecDeque::new(),
            events: VecDeque::new(),
            reported_parent: None,
            stats: RplStats::default(),
            config,
        };
        // rpl_reset_periodic_timer: the first DIS comes after a random part
        // of the interval.
        let dis = rpl.config.dis_interval.as_nanos() / 1_000_000_000;
        rpl.next_dis = (dis / 2 + rpl.rng.gen_range(0..=dis)).saturating_sub(DIS_START_DELAY);
        if let Role::Root { prefix, prefix_len } = role {
            if !(1..=64).contains(&prefix_len) {
                return Err(ScenarioError::new(
                    "prefix_len",
                    format!("must be between 1 and 64, got {prefix_len}"),
                ));
            }
            rpl.set_root(now, prefix, prefix_len);
        }
        Ok(rpl)
    }

    /// `rpl_set_root` and `rpl_set_prefix`, as the border router calls them.
    fn set_root(&mut self, now: SimTime, prefix: Ipv6Addr, prefix_len: u8) {
        let c = &self.config;
        let global = with_iid(prefix, self.iid);
        self.is_root = true;
        self.global = Some(global);
        self.dag = Some(Dag {
            instance_id: c.instance_id,
            version: LOLLIPOP_INIT,
            dodag_id: global,
            // RPL_GROUNDED and RPL_PREFERENCE default to 0 (rpl-dag.c,
            // rpl-conf.h).
            grounded: false,
            preference: 0,
            rank: c.min_hop_rank_increase,
            min_rank: c.min_hop_rank_increase,
            preferred: None,
            prefix: Some((prefix, prefix_len)),
            dtsn_out: LOLLIPOP_INIT,
            dio_interval_min: c.dio_interval_min,
            dio_interval_doublings: c.dio_interval_doublings,
            dio_redundancy: c.dio_redundancy,
            max_rank_increase: c.max_rank_increase,
            min_hop_rank_increase: c.min_hop_rank_increase,
            default_lifetime: c.default_lifetime,
            lifetime_unit: c.lifetime_unit,
            trickle: Trickle::new(
                c.dio_interval_min,
                c.dio_interval_doublings,
                c.dio_redundancy,
            ),
        });
        self.events
            .push_back(RplEvent::AddressConfigured { address: global });
        self.events.push_back(RplEvent::Joined { dodag_id: global });
        self.reset_dio_timer(now);
    }

    /// A node of a configured tree (see [`static_tree`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new_static(
        config: RplConfig,
        mac: Address,
        global: Ipv6Addr,
        dodag_id: Ipv6Addr,
        parent: Option<Ipv6Addr>,
        rank: u16,
        routes: Vec<Route>,
        rng: SimRng,
    ) -> Self {
        let mut rpl = Rpl::new(SimTime::ZERO, config, mac, Role::Node, rng)
            .expect("static_tree checked the configuration, and a node has no prefix");
        let c = &rpl.config;
        rpl.mode = Mode::Static;
        rpl.is_root = parent.is_none();
        rpl.global = Some(global);
        rpl.dag = Some(Dag {
            instance_id: c.instance_id,
            version: LOLLIPOP_INIT,
            dodag_id,
            grounded: false,
            preference: 0,
            rank,
            min_rank: rank,
            preferred: parent,
            prefix: None,
            dtsn_out: LOLLIPOP_INIT,
            dio_interval_min: c.dio_interval_min,
            dio_interval_doublings: c.dio_interval_doublings,
            dio_redundancy: c.dio_redundancy,
            max_rank_increase: c.max_rank_increase,
            min_hop_rank_increase: c.min_hop_rank_increase,
            default_lifetime: c.default_lifetime,
            lifetime_unit: c.lifetime_unit,
            trickle: Trickle::new(
                c.dio_interval_min,
                c.dio_interval_doublings,
                c.dio_redundancy,
            ),
        });
        rpl.routes = routes;
        rpl.events
            .push_back(RplEvent::AddressConfigured { address: global });
        rpl.events.push_back(RplEvent::Joined { dodag_id });
        rpl.report_parent();
        rpl
    }

    // ----- accessors ------------------------------------------------------

    /// The node's link-local address, the source of everything it sends.
    pub fn link_local(&self) -> Ipv6Addr {
        self.link_local
    }

    /// The global address, once the DODAG's prefix is known.
    pub fn global_address(&self) -> Option<Ipv6Addr> {
        self.global
    }

    /// Whether the node is the DODAG root.
    pub fn is_root(&self) -> bool {
        self.is_root
    }

    /// The preferred parent (the default route's next hop).
    pub fn preferred_parent(&self) -> Option<Ipv6Addr> {
        self.dag.as_ref().and_then(|d| d.preferred)
    }

    /// The node's rank; [`INFINITE_RANK`] outside a DODAG or without parent.
    pub fn rank(&self) -> u16 {
        self.dag.as_ref().map_or(INFINITE_RANK, |d| d.rank)
    }

    /// Hops to the root as the node can tell them from its rank alone:
    /// `DAGRank(rank) − DAGRank(root rank)` (RFC 6550 §3.5.1), with the
    /// DODAG's MinHopRankIncrease. Under MRHOF each hop adds
    /// MinHopRankIncrease × ETX, so this is the hop count over links that
    /// deliver at the first try and counts each further expected
    /// transmission as one more hop. `Some(0)` at the root; `None` outside
    /// a DODAG or without a preferred parent.
    pub fn hops_to_root(&self) -> Option<u32> {
        let dag = self.dag.as_ref()?;
        if self.is_root {
            return Some(0);
        }
        if dag.preferred.is_none() || dag.rank == INFINITE_RANK {
            return None;
        }
        let rank = dag.dag_rank(u32::from(dag.rank));
        Some(rank.saturating_sub(dag.dag_rank(u32::from(dag.root_rank()))))
    }

    /// The DODAGID of the DODAG joined.
    pub fn dodag_id(&self) -> Option<Ipv6Addr> {
        self.dag.as_ref().map(|d| d.dodag_id)
    }

    /// Downward routes, newest first.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The ETX estimate of a candidate parent, in 1/256.
    pub fn link_etx(&self, neighbour: Ipv6Addr) -> Option<u16> {
        self.parent(neighbour).map(|p| p.link.etx())
    }

    /// Candidate parents: (link-local address, advertised rank, ETX in 1/256).
    pub fn candidates(&self) -> impl Iterator<Item = (Ipv6Addr, u16, u16)> + '_ {
        self.parents.iter().map(|p| (p.addr, p.rank, p.link.etx()))
    }

    /// Message counters.
    pub fn stats(&self) -> RplStats {
        self.stats
    }

    /// The next hop towards `dst`: nothing for the node's own addresses and
    /// multicast; the destination itself when link-local (on-link); the
    /// child a downward route names (longest prefix); else the preferred
    /// parent (the default route, which the root has not).
    pub fn next_hop(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        if dst == self.link_local || Some(dst) == self.global || dst.is_multicast() {
            return None;
        }
        if is_link_local(dst) {
            return Some(dst);
        }
        let dst_bits = u128::from(dst);
        self.routes
            .iter()
            .filter(|r| {
                let len = u32::from(r.prefix_len);
                let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
                dst_bits & mask == u128::from(r.target) & mask
            })
            .max_by_key(|r| r.prefix_len)
            .map(|r| r.next_hop)
            .or_else(|| self.preferred_parent())
    }

    // ----- sans-IO outputs --------------------------------------------------

    /// The next message to send.
    pub fn poll_transmit(&mut self) -> Option<RplTransmit> {
        self.out.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<RplEvent> {
        self.events.pop_front()
    }

    /// When [`Rpl::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        if let Mode::Static = self.mode {
            return None;
        }
        let dao = earliest(self.dao_at, self.dao_lifetime_at);
        let trickle = self.dag.as_ref().and_then(|d| d.trickle.deadline());
        earliest(
            earliest(Some(self.periodic_at), trickle),
            earliest(dao, self.probing_at),
        )
    }

    // ----- sans-IO inputs ---------------------------------------------------

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: SimTime) {
        if let Mode::Static = self.mode {
            return;
        }
        while self.periodic_at <= now {
            // ctimer_reset keeps the phase.
            self.periodic_at += PERIODIC;
            self.periodic(now);
        }
        if self
            .dag
            .as_ref()
            .and_then(|d| d.trickle.deadline())
            .is_some_and(|t| t <= now)
        {
            let dag = self.dag.as_mut().expect("checked above");
            if dag.trickle.fire(now, &mut self.rng) {
                self.dio_output(None);
            }
        }
        if self.dao_at.is_some_and(|t| t <= now) {
            self.dao_at = None;
            self.dao_timer(now);
        }
        if self.dao_lifetime_at.is_some_and(|t| t <= now) {
            self.dao_lifetime_at = None;
            self.dao_timer(now);
        }
        if self.probing_at.is_some_and(|t| t <= now) {
            self.probe(now);
        }
        self.report_parent();
    }

    /// How the MAC's unicast to `neighbour` (a link-local address) ended
    /// after `transmissions` attempts (`rpl_link_neighbor_callback`). Only
    /// candidate parents are tracked; the rank is recalculated at the next
    /// one-second tick.
    pub fn handle_tx_outcome(
        &mut self,
        now: SimTime,
        neighbour: Ipv6Addr,
        status: TxStatus,
        transmissions: u32,
    ) {
        if let Mode::Static = self.mode {
            return;
        }
        if let Some(p) = self.parent_mut(neighbour) {
            p.updated = true;
            p.link.update(status, transmissions);
            p.last_tx = Some(now);
        }
    }

    /// An ICMPv6 `message` from `src` to `dst` (this node's address or
    /// ff02::1a). Non-RPL messages are ignored; a malformed RPL message is
    /// dropped and its error returned.
    pub fn handle_message(
        &mut self,
        now: SimTime,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        message: &[u8],
    ) -> Result<(), WireError> {
        if let Mode::Static = self.mode {
            return Ok(());
        }
        let result = self.dispatch(now, src, dst, message);
        if result.is_err() {
            self.stats.malformed += 1;
        }
        self.report_parent();
        result
    }

    fn dispatch(
        &mut self,
        now: SimTime,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        message: &[u8],
    ) -> Result<(), WireError> {
        match Icmpv6Repr::parse(message)? {
            Icmpv6Repr::Rpl(RplRepr::Dis { .. }) => self.dis_input(now, src, dst),
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
                let mut dio = Dio {
                    instance_id,
                    version,
                    rank,
                    grounded,
                    mop: mode_of_operation,
                    preference,
                    dtsn,
                    dodag_id,
                    conf: self.default_conf(),
                    prefix: None,
                };
                for option in options.iter() {
                    match option.kind {
                        rpl_option::DODAG_CONFIGURATION => {
                            dio.conf = DodagConfiguration::parse(option.data)?
                        }
                        rpl_option::PREFIX_INFORMATION => {
                            dio.prefix = Some(PrefixInformation::parse(option.data)?)
                        }
                        _ => {}
                    }
                }
                self.process_dio(now, src, &dio);
            }
            Icmpv6Repr::Rpl(RplRepr::Dao {
                instance_id,
                expect_ack,
                sequence,
                dodag_id,
                options,
            }) => self.dao_input(
                src,
                instance_id,
                expect_ack,
                sequence,
                dodag_id,
                options,
                message,
            )?,
            // Contiki only logs DAO-ACKs.
            Icmpv6Repr::Rpl(RplRepr::DaoAck { .. }) => {}
            _ => {}
        }
        Ok(())
    }

    // ----- internals --------------------------------------------------------

    /// The DODAG configuration Contiki assumes when a DIO has none.
    fn default_conf(&self) -> DodagConfiguration {
        let c = &self.config;
        DodagConfiguration {
            authentication: false,
            path_control_size: 0,
            dio_interval_doublings: c.dio_interval_doublings,
            dio_interval_min: c.dio_interval_min,
            dio_redundancy: c.dio_redundancy,
            max_rank_increase: c.max_rank_increase,
            min_hop_rank_increase: c.min_hop_rank_increase,
            objective_code_point: mrhof::OCP_MRHOF,
            default_lifetime: c.default_lifetime,
            lifetime_unit: c.lifetime_unit,
        }
    }

    fn parent(&self, addr: Ipv6Addr) -> Option<&Parent> {
        self.parents.iter().find(|p| p.addr == addr)
    }

    fn parent_mut(&mut self, addr: Ipv6Addr) -> Option<&mut Parent> {
        self.parents.iter_mut().find(|p| p.addr == addr)
    }

    /// Queues a ParentChanged event if the preferred parent differs from the
    /// last one reported.
    fn report_parent(&mut self) {
        let now = self.preferred_parent();
        if now != self.reported_parent {
            self.events.push_back(RplEvent::ParentChanged {
                old: self.reported_parent,
                new: now,
                rank: self.rank(),
            });
            self.reported_parent = now;
        }
    }

    fn send(&mut self, dst: Ipv6Addr, repr: &Icmpv6Repr) {
        let mut message = vec![0; repr.buffer_len()];
        repr.emit(&mut message)
            .expect("RPL messages are built within their fields' ranges");
        self.out.push_back(RplTransmit { dst, message });
    }

    /// `handle_periodic_timer`: purge routes, recalculate ranks, solicit
    /// DIOs while outside any DODAG.
    fn periodic(&mut self, now: SimTime) {
        self.purge_routes();
        self.recalculate_ranks(now);
        self.next_dis += 1;
        let dis = self.config.dis_interval.as_nanos() / 1_000_000_000;
        if self.dag.is_none() && self.next_dis >= dis {
            self.next_dis = 0;
            self.stats.dis_sent += 1;
            self.send(
                ALL_RPL_NODES,
                &Icmpv6Repr::Rpl(RplRepr::Dis {
                    options: RplOptions::default(),
                }),
            );
        }
    }

    /// `rpl_purge_routes`: routes age by a second; dead ones go, and a
    /// router tells its parent with a No-Path DAO (one per tick).
    fn purge_routes(&mut self) {
        for r in &mut self.routes {
            r.lifetime_secs = r.lifetime_secs.saturating_sub(1);
        }
        while let Some(i) = self.routes.iter().position(|r| r.lifetime_secs < 1) {
            let route = self.routes.remove(i);
            if !self.is_root {
                if let Some(parent) = self.preferred_parent() {
                    self.dao_output_target(parent, route.target, route.prefix_len, 0);
                }
                return;
            }
        }
    }

    /// `rpl_recalculate_ranks`: parents flagged by a DIO or a transmission
    /// outcome are reconsidered.
    fn recalculate_ranks(&mut self, now: SimTime) {
        let mut i = 0;
        while i < self.parents.len() {
            if self.parents[i].updated && self.dag.is_some() {
                self.parents[i].updated = false;
                let addr = self.parents[i].addr;
                self.process_parent_event(now, addr);
            }
            i += 1;
        }
    }

    fn reset_dio_timer(&mut self, now: SimTime) {
        if let Some(dag) = self.dag.as_mut() {
            dag.trickle.reset(now, &mut self.rng);
        }
    }

    /// `dis_input`: a multicast DIS resets Trickle, a unicast one gets a
    /// unicast DIO.
    fn dis_input(&mut self, now: SimTime, src: Ipv6Addr, dst: Ipv6Addr) {
        if self.dag.is_none() {
            return;
        }
        if dst.is_multicast() {
            self.reset_dio_timer(now);
        } else {
            self.dio_output(Some(src));
        }
    }

    /// `dio_output`: to ff02::1a (and then the DTSN advances, asking
    /// children for fresh DAOs) or to one neighbour.
    fn dio_output(&mut self, unicast: Option<Ipv6Addr>) {
        let Some(dag) = self.dag.as_mut() else {
            return;
        };
        let mut options = Vec::new();
        DodagConfiguration {
            authentication: false,
            path_control_size: 0,
            dio_interval_doublings: dag.dio_interval_doublings,
            dio_interval_min: dag.dio_interval_min,
            dio_redundancy: dag.dio_redundancy,
            max_rank_increase: dag.max_rank_increase,
            min_hop_rank_increase: dag.min_hop_rank_increase,
            objective_code_point: mrhof::OCP_MRHOF,
            default_lifetime: dag.default_lifetime,
            lifetime_unit: dag.lifetime_unit,
        }
        .push(&mut options)
        .expect("path control size is 0");
        if let Some((prefix, prefix_len)) = dag.prefix {
            PrefixInformation {
                prefix_len,
                on_link: false,
                autonomous: true,
                router_address: false,
                valid_lifetime: PREFIX_LIFETIME,
                preferred_lifetime: PREFIX_LIFETIME,
                prefix,
            }
            .push(&mut options)
            .expect("prefix length checked when set");
        }
        let dtsn = dag.dtsn_out;
        if unicast.is_none() {
            lollipop_increment(&mut dag.dtsn_out);
        }
        let repr = Icmpv6Repr::Rpl(RplRepr::Dio {
            instance_id: dag.instance_id,
            version: dag.version,
            rank: dag.rank,
            grounded: dag.grounded,
            mode_of_operation: MOP_STORING_NO_MULTICAST,
            preference: dag.preference,
            dtsn,
            dodag_id: dag.dodag_id,
            options: RplOptions::parse(&options).expect("built as options"),
        });
        self.stats.dio_sent += 1;
        self.send(unicast.unwrap_or(ALL_RPL_NODES), &repr);
    }

    /// `rpl_process_dio`.
    fn process_dio(&mut self, now: SimTime, from: Ipv6Addr, dio: &Dio) {
        if dio.mop != MOP_STORING_NO_MULTICAST {
            return;
        }
        let Some(dag) = self.dag.as_mut() else {
            // Joining on an infinite rank would take a parent with no
            // route; Contiki does, and repairs later.
            if dio.rank != INFINITE_RANK {
                self.join_instance(now, from, dio);
            }
            return;
        };
        // One instance and one DODAG: DIOs of others are ignored.
        if dag.instance_id != dio.instance_id || dag.dodag_id != dio.dodag_id {
            return;
        }
        if lollipop_greater_than(dio.version, dag.version) {
            if self.is_root {
                dag.version = dio.version;
                lollipop_increment(&mut dag.version);
                self.reset_dio_timer(now);
            } else {
                self.set_prefix(dio);
                self.global_repair(now, from, dio);
            }
            return;
        }
        if lollipop_greater_than(dag.version, dio.version) {
            // The sender is on an older version.
            self.reset_dio_timer(now);
            return;
        }
        if dio.rank < dag.root_rank() {
            return;
        }
        if dio.rank == INFINITE_RANK {
            self.reset_dio_timer(now);
        }
        self.set_prefix(dio);
        if self.is_root {
            if dio.rank != INFINITE_RANK {
                self.heard_consistent();
            }
            return;
        }
        match self.parents.iter().position(|p| p.addr == from) {
            None => self.add_parent(from, dio),
            Some(i) if self.parents[i].rank == dio.rank => self.heard_consistent(),
            Some(i) => self.parents[i].rank = dio.rank,
        }
        let old_dtsn = {
            let p = self.parent_mut(from).expect("just added");
            p.updated = true;
            p.dtsn
        };
        if !self.process_parent_event(now, from) {
            return;
        }
        if self.preferred_parent() == Some(from) && lollipop_greater_than(dio.dtsn, old_dtsn) {
            let dag = self.dag.as_mut().expect("joined");
            lollipop_increment(&mut dag.dtsn_out);
            self.schedule_dao(now, self.config.dao_latency);
        }
        if let Some(p) = self.parent_mut(from) {
            p.dtsn = dio.dtsn;
        }
    }

    fn heard_consistent(&mut self) {
        if let Some(dag) = self.dag.as_mut() {
            dag.trickle.heard_consistent();
        }
    }

    /// `rpl_set_prefix` with `check_prefix`: take the announced prefix and
    /// configure an address from it.
    fn set_prefix(&mut self, dio: &Dio) {
        let Some(info) = dio.prefix.filter(|p| p.autonomous && p.prefix_len > 0) else {
            return;
        };
        // Only the upper 64 bits serve; a longer prefix is cut there.
        let len = info.prefix_len.min(64);
        if let Some(dag) = self.dag.as_mut() {
            dag.prefix = Some((info.prefix, len));
        }
        let address = with_iid(info.prefix, self.iid);
        if self.global != Some(address) {
            self.global = Some(address);
            self.events
                .push_back(RplEvent::AddressConfigured { address });
        }
    }

    fn add_parent(&mut self, from: Ipv6Addr, dio: &Dio) {
        self.parents.push(Parent {
            addr: from,
            rank: dio.rank,
            dtsn: dio.dtsn,
            link: LinkEstimate::new(self.config.init_link_metric),
            updated: false,
            last_tx: None,
        });
    }

    /// `rpl_join_instance`.
    fn join_instance(&mut self, now: SimTime, from: Ipv6Addr, dio: &Dio) {
        if dio.conf.objective_code_point != mrhof::OCP_MRHOF || dio.conf.min_hop_rank_increase == 0
        {
            return;
        }
        let c = &dio.conf;
        self.dag = Some(Dag {
            instance_id: dio.instance_id,
            version: dio.version,
            dodag_id: dio.dodag_id,
            grounded: dio.grounded,
            preference: dio.preference,
            rank: INFINITE_RANK,
            min_rank: INFINITE_RANK,
            preferred: Some(from),
            prefix: None,
            dtsn_out: LOLLIPOP_INIT,
            dio_interval_min: c.dio_interval_min,
            dio_interval_doublings: c.dio_interval_doublings,
            dio_redundancy: c.dio_redundancy,
            max_rank_increase: c.max_rank_increase,
            min_hop_rank_increase: c.min_hop_rank_increase,
            default_lifetime: c.default_lifetime,
            lifetime_unit: c.lifetime_unit,
            trickle: Trickle::new(
                c.dio_interval_min,
                c.dio_interval_doublings,
                c.dio_redundancy,
            ),
        });
        self.add_parent(from, dio);
        self.set_prefix(dio);
        let link = self.parents.last().expect("just added").link.etx();
        let dag = self.dag.as_mut().expect("just set");
        dag.rank = mrhof::rank_via(dio.rank, link);
        dag.min_rank = dag.rank;
        self.events.push_back(RplEvent::Joined {
            dodag_id: dio.dodag_id,
        });
        self.reset_dio_timer(now);
        self.schedule_dao(now, self.config.dao_latency);
        if self.config.probing {
            self.schedule_probing(now);
        }
    }

    /// `global_repair`: a new DODAG version; start over from its sender.
    fn global_repair(&mut self, now: SimTime, from: Ipv6Addr, dio: &Dio) {
        let addrs: Vec<Ipv6Addr> = self.parents.iter().map(|p| p.addr).collect();
        for addr in addrs {
            self.nullify_parent(addr);
        }
        self.parents.clear();
        let dag = self.dag.as_mut().expect("joined");
        dag.version = dio.version;
        dag.dio_interval_doublings = dio.conf.dio_interval_doublings;
        dag.dio_interval_min = dio.conf.dio_interval_min;
        dag.dio_redundancy = dio.conf.dio_redundancy;
        dag.default_lifetime = dio.conf.default_lifetime;
        dag.lifetime_unit = dio.conf.lifetime_unit;
        dag.min_rank = INFINITE_RANK;
        // The new parameters take effect when the parent change that
        // follows resets the timer.
        dag.trickle = Trickle::new(
            dag.dio_interval_min,
            dag.dio_interval_doublings,
            dag.dio_redundancy,
        );
        lollipop_increment(&mut dag.dtsn_out);
        self.add_parent(from, dio);
        let link = self.parents[0].link.etx();
        let dag = self.dag.as_mut().expect("joined");
        dag.rank = mrhof::rank_via(dio.rank, link);
        dag.min_rank = dag.rank;
        self.stats.global_repairs += 1;
        self.process_parent_event(now, from);
    }

    /// Whether [`RplConfig::freeze_tree_at`] has passed.
    fn tree_frozen(&self, now: SimTime) -> bool {
        self.config
            .freeze_tree_at
            .is_some_and(|at| now >= SimTime::ZERO + at)
    }

    /// `rpl_process_parent_event`: false when the parent was rejected.
    fn process_parent_event(&mut self, now: SimTime, addr: Ipv6Addr) -> bool {
        let Some(rank) = self.parent(addr).map(|p| p.rank) else {
            return false;
        };
        let mut accepted = true;
        // A frozen tree does not drop a parent for a rank that grew: only
        // one that lost its route (infinite rank) goes.
        let kept = self.tree_frozen(now) && rank != INFINITE_RANK;
        let dag = self.dag.as_ref().expect("parents only exist in a DODAG");
        if !kept && !dag.acceptable(rank) {
            let was_preferred = dag.preferred == Some(addr);
            self.nullify_parent(addr);
            if !was_preferred {
                return false;
            }
            accepted = false;
        }
        if !self.select_dag(now) {
            self.local_repair(now);
            return false;
        }
        accepted
    }

    /// The best candidate by MRHOF (`best_parent`), skipping infinite ranks.
    fn best_parent(&self) -> Option<Ipv6Addr> {
        let preferred = self.preferred_parent();
        let mut best: Option<&Parent> = None;
        for p in self.parents.iter().filter(|p| p.rank != INFINITE_RANK) {
            best = Some(match best {
                None => p,
                Some(b) => {
                    let which = if preferred == Some(b.addr) {
                        Some(true)
                    } else if preferred == Some(p.addr) {
                        Some(false)
                    } else {
                        None
                    };
                    let first = mrhof::prefer_first(
                        mrhof::path_metric(b.rank, b.link.etx()),
                        mrhof::path_metric(p.rank, p.link.etx()),
                        which,
                    );
                    if first {
                        b
                    } else {
                        p
                    }
                }
            });
        }
        best.map(|p| p.addr)
    }

    fn rank_through(&self, addr: Option<Ipv6Addr>) -> u16 {
        match addr.and_then(|a| self.parent(a)) {
            Some(p) => mrhof::rank_via(p.rank, p.link.etx()),
            None => INFINITE_RANK,
        }
    }

    /// `rpl_select_dag` for one DODAG: pick the preferred parent, update
    /// the rank, and on a change of parent move the default route, withdraw
    /// our routes from the old parent and announce them to the new one.
    /// False when no parent will do.
    fn select_dag(&mut self, now: SimTime) -> bool {
        if self.is_root {
            return true;
        }
        let last_parent = self.preferred_parent();
        // A frozen tree keeps a parent that can still carry traffic.
        let frozen = self.tree_frozen(now);
        let kept = last_parent
            .filter(|&a| frozen && self.parent(a).is_some_and(|p| p.rank != INFINITE_RANK));
        // rpl_select_parent
        match kept.or_else(|| self.best_parent()) {
            Some(best) => {
                let rank = self.rank_through(Some(best));
                let dag = self.dag.as_mut().expect("joined");
                dag.preferred = Some(best);
                dag.rank = rank;
            }
            None => {
                self.dag.as_mut().expect("joined").rank = INFINITE_RANK;
                return false;
            }
        }
        let rank = self.rank_through(self.preferred_parent());
        let dag = self.dag.as_mut().expect("joined");
        dag.rank = rank;
        if last_parent.is_none() || rank < dag.min_rank {
            dag.min_rank = rank;
        } else if kept.is_none() && !dag.acceptable(rank) {
            dag.preferred = None;
            if let Some(last) = last_parent {
                self.dao_output(last, 0);
            }
            return false;
        }
        if self.preferred_parent() != last_parent {
            self.stats.parent_switches += 1;
            if let Some(last) = last_parent {
                self.dao_output(last, 0);
            }
            let dag = self.dag.as_mut().expect("joined");
            lollipop_increment(&mut dag.dtsn_out);
            self.schedule_dao(now, self.config.dao_latency);
            self.reset_dio_timer(now);
        }
        true
    }

    /// `rpl_nullify_parent`: when it is the preferred parent, the node has
    /// no rank, no default route, and sends it a No-Path DAO.
    fn nullify_parent(&mut self, addr: Ipv6Addr) {
        let dag = self.dag.as_mut().expect("parents only exist in a DODAG");
        if dag.preferred == Some(addr) || dag.preferred.is_none() {
            dag.rank = INFINITE_RANK;
            if dag.preferred == Some(addr) {
                dag.preferred = None;
                self.dao_output(addr, 0);
            }
        }
    }

    /// `rpl_local_repair`: every parent dropped, the infinite rank
    /// advertised at once.
    fn local_repair(&mut self, now: SimTime) {
        self.dag.as_mut().expect("joined").rank = INFINITE_RANK;
        let addrs: Vec<Ipv6Addr> = self.parents.iter().map(|p| p.addr).collect();
        for addr in addrs {
            self.nullify_parent(addr);
        }
        self.reset_dio_timer(now);
        self.stats.local_repairs += 1;
    }

    /// `schedule_dao`: unless one is pending, a DAO within [L/2, 3L/2).
    fn schedule_dao(&mut self, now: SimTime, latency: SimDuration) {
        if self.dao_at.is_some_and(|t| t > now) {
            return;
        }
        let delay = if latency.is_zero() {
            SimDuration::ZERO
        } else {
            let l = latency.as_nanos();
            SimDuration::from_nanos(l / 2 + self.rng.gen_range(0..l))
        };
        self.dao_at = Some(now + delay);
        self.set_dao_lifetime_timer(now);
    }

    /// `set_dao_lifetime_timer`: with finite lifetimes, refresh routes at
    /// half their lifetime.
    fn set_dao_lifetime_timer(&mut self, now: SimTime) {
        let Some(dag) = self.dag.as_ref() else {
            return;
        };
        if dag.lifetime_unit != 0xffff && dag.default_lifetime != 0xff {
            let secs = u64::from(dag.lifetime_secs(dag.default_lifetime));
            self.dao_lifetime_at = Some(now + SimDuration::from_millis(secs * 500));
        }
    }

    /// `handle_dao_timer`: a DAO to the preferred parent.
    fn dao_timer(&mut self, now: SimTime) {
        if let Some(parent) = self.preferred_parent() {
            let lifetime = self.dag.as_ref().expect("has a parent").default_lifetime;
            self.dao_output(parent, lifetime);
        }
        self.dao_at = None;
        if self.dao_lifetime_at.map_or(true, |t| t <= now) {
            self.set_dao_lifetime_timer(now);
        }
    }

    /// `dao_output`: a DAO for our global address.
    fn dao_output(&mut self, parent: Ipv6Addr, lifetime: u8) {
        if let Some(global) = self.global {
            self.dao_output_target(parent, global, 128, lifetime);
        }
    }

    /// `dao_output_target`.
    fn dao_output_target(&mut self, parent: Ipv6Addr, target: Ipv6Addr, len: u8, lifetime: u8) {
        let Some(dag) = self.dag.as_ref() else {
            return;
        };
        lollipop_increment(&mut self.dao_sequence);
        let mut options = Vec::new();
        RplTarget {
            prefix_len: len,
            prefix: target,
        }
        .push(&mut options)
        .expect("prefix length at most 128");
        TransitInformation {
            external: false,
            path_control: 0,
            path_sequence: 0,
            path_lifetime: lifetime,
            parent: None,
        }
        .push(&mut options)
        .expect("fixed size");
        let repr = Icmpv6Repr::Rpl(RplRepr::Dao {
            instance_id: dag.instance_id,
            expect_ack: self.config.dao_ack,
            sequence: self.dao_sequence,
            // RPL_DAO_SPECIFY_DAG: on, as Contiki allows two DODAGs.
            dodag_id: Some(dag.dodag_id),
            options: RplOptions::parse(&options).expect("built as options"),
        });
        self.stats.dao_sent += 1;
        self.send(parent, &repr);
    }

    /// `dao_input`: install (or withdraw) the route to the target through
    /// the sender and pass the DAO on to our parent.
    #[allow(clippy::too_many_arguments)]
    fn dao_input(
        &mut self,
        src: Ipv6Addr,
        instance_id: u8,
        expect_ack: bool,
        sequence: u8,
        dodag_id: Option<Ipv6Addr>,
        options: RplOptions,
        message: &[u8],
    ) -> Result<(), WireError> {
        let Some(dag) = self.dag.as_ref() else {
            return Ok(());
        };
        if dag.instance_id != instance_id || dodag_id.is_some_and(|id| id != dag.dodag_id) {
            return Ok(());
        }
        let mut lifetime = dag.default_lifetime;
        // Loop detection: a DAO from a parent of lower rank, or from the
        // preferred parent.
        let my_dag_rank = dag.dag_rank(u32::from(dag.rank));
        let mhri = dag.min_hop_rank_increase;
        let preferred = dag.preferred;
        if let Some(p) = self.parent_mut(src) {
            if u32::from(p.rank) / u32::from(mhri) < my_dag_rank || preferred == Some(src) {
                p.rank = INFINITE_RANK;
                p.updated = true;
                return Ok(());
            }
        }
        let mut target = None;
        for option in options.iter() {
            match option.kind {
                rpl_option::RPL_TARGET => target = Some(RplTarget::parse(option.data)?),
                rpl_option::TRANSIT_INFORMATION => {
                    lifetime = TransitInformation::parse(option.data)?.path_lifetime
                }
                _ => {}
            }
        }
        let Some(target) = target else {
            return Ok(());
        };
        let dag = self.dag.as_ref().expect("checked above");
        let forward = dag.preferred;
        if lifetime == 0 {
            let withdrawn = self.routes.iter_mut().find(|r| {
                r.target == target.prefix
                    && r.prefix_len == target.prefix_len
                    && !r.no_path
                    && r.next_hop == src
            });
            if let Some(r) = withdrawn {
                r.no_path = true;
                r.lifetime_secs = DAO_EXPIRATION_TIMEOUT;
                if let Some(parent) = forward {
                    self.forward_dao(parent, message);
                }
                if expect_ack {
                    self.dao_ack_output(src, sequence);
                }
            }
            return Ok(());
        }
        let lifetime_secs = dag.lifetime_secs(lifetime);
        self.add_route(target, src, lifetime_secs);
        if let Some(parent) = forward {
            self.forward_dao(parent, message);
        }
        if expect_ack {
            self.dao_ack_output(src, sequence);
        }
        Ok(())
    }

    /// `rpl_add_route` over `uip_ds6_route_add`: a new next hop replaces the
    /// entry; a full table drops its oldest.
    fn add_route(&mut self, target: RplTarget, next_hop: Ipv6Addr, lifetime_secs: u32) {
        let existing = self
            .routes
            .iter()
            .position(|r| r.target == target.prefix && r.prefix_len == target.prefix_len);
        let route = Route {
            target: target.prefix,
            prefix_len: target.prefix_len,
            next_hop,
            lifetime_secs,
            no_path: false,
        };
        match existing {
            Some(i) if self.routes[i].next_hop == next_hop => self.routes[i] = route,
            _ => {
                if let Some(i) = existing {
                    self.routes.remove(i);
                }
                if self.routes.len() >= self.config.max_routes {
                    self.routes.pop();
                }
                self.routes.insert(0, route);
            }
        }
    }

    fn forward_dao(&mut self, parent: Ipv6Addr, message: &[u8]) {
        self.stats.dao_forwarded += 1;
        self.out.push_back(RplTransmit {
            dst: parent,
            message: message.to_vec(),
        });
    }

    fn dao_ack_output(&mut self, dst: Ipv6Addr, sequence: u8) {
        let instance_id = self.dag.as_ref().map_or(0, |d| d.instance_id);
        self.stats.dao_ack_sent += 1;
        self.send(
            dst,
            &Icmpv6Repr::Rpl(RplRepr::DaoAck {
                instance_id,
                sequence,
                status: 0,
                dodag_id: None,
                options: RplOptions::default(),
            }),
        );
    }

    /// `rpl_schedule_probing`: the next probe within [P/2, 3P/2).
    fn schedule_probing(&mut self, now: SimTime) {
        let p = self.config.probing_interval.as_nanos();
        self.probing_at = Some(now + SimDuration::from_nanos(p / 2 + self.rng.gen_range(0..p)));
    }

    /// `handle_probing_timer`: a unicast DIO to the parent most in need of
    /// a fresh link estimate.
    fn probe(&mut self, now: SimTime) {
        if let Some(target) = self.probing_target(now) {
            self.dio_output(Some(target));
        }
        self.schedule_probing(now);
    }

    /// `get_probing_target`: the preferred parent if not sent to lately;
    /// else, half of the time, the best stale parent; else the least
    /// recently sent-to parent.
    fn probing_target(&mut self, now: SimTime) -> Option<Ipv6Addr> {
        let preferred = self.preferred_parent()?;
        let expiration = self.config.probing_expiration;
        // Contiki compares with "now - expiration" only once twice that has
        // passed since boot; before, only never-used parents are stale.
        let since_boot = now.since_start();
        let stale = |p: &Parent| match p.last_tx {
            None => true,
            Some(t) => {
                since_boot > expiration.saturating_mul(2) && t < now.saturating_sub(expiration)
            }
        };
        if self.parent(preferred).is_some_and(stale) {
            return Some(preferred);
        }
        if self.rng.gen::<bool>() {
            let best = self
                .parents
                .iter()
                .filter(|p| stale(p))
                .min_by_key(|p| mrhof::rank_via(p.rank, p.link.etx()));
            if let Some(p) = best {
                return Some(p.addr);
            }
        }
        self.parents
            .iter()
            .min_by_key(|p| p.last_tx)
            .map(|p| p.addr)
    }
}
