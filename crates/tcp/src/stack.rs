//! A host's TCP endpoint: demultiplexes segments by 4-tuple, owns the
//! listeners and answers segments nobody wants with RST.
//!
//! A stack has one address, IPv4 or IPv6, and speaks that family: it reads
//! and writes IPv4 or IPv6 datagrams accordingly.
//!
//! Simulator hosts and the emulator both drive a [`Stack`] with the same
//! call order as a [`Connection`]: `handle_*`, then `poll_transmit` until
//! `None`, then `poll_event` until `None`, then `poll_timeout`.
//!
//! The cost of each call follows the connections it concerns, not how
//! many the stack holds: the stack remembers which connections were touched
//! (handed a segment, a timeout or an application call) and polls only
//! those, and it keeps their deadlines in a heap.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;

use rtolab_time::SimTime;
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::ipv6::{self, Ipv6Repr};
use rtolab_wire::packet::emit_tcp;
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpRepr};
use rtolab_wire::WireError;

use crate::clock::{HostTimer, TimerEpoch};
use crate::conn::{reset_reply, ConnError, Connection, Event};
use crate::ip::{plain, IpHeader, TupleKey, Tuples};
use crate::parsed::{parse_tcp, IpRepr, ParsedIp};
use crate::profile::Config;
use crate::rto::PathHint;
use crate::state::State;
use crate::trace::TraceLevel;

/// Handle of a connection inside a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

/// First ephemeral port (IANA dynamic range).
pub const EPHEMERAL_START: u16 = 49152;

/// Ephemeral ports of a host: `EPHEMERAL_START..=65535`.
pub const EPHEMERAL_PORTS: u32 = 65536 - EPHEMERAL_START as u32;

/// A connection and the stack's bookkeeping of it.
#[derive(Debug)]
struct Slot {
    conn: Connection,
    /// Listed on [`Touched::may_send`].
    may_send: bool,
    /// Listed on [`Touched::may_report`].
    may_report: bool,
    /// Listed on [`Touched::timer_dirty`].
    timer_dirty: bool,
    /// The listening port it was accepted on, for a passive open.
    accepted_on: Option<u16>,
}

impl Slot {
    fn new(conn: Connection) -> Slot {
        Slot {
            conn,
            may_send: false,
            may_report: false,
            timer_dirty: false,
            accepted_on: None,
        }
    }
}

/// The connections handed something (a segment, a timeout, an application
/// call) since the stack last collected their output, events and deadline.
/// Only these can have any: a connection changes only when called.
#[derive(Debug)]
struct Touched {
    /// May have a datagram to send; sorted by id, as connections take
    /// turns in id order.
    may_send: Vec<ConnId>,
    /// May have events to collect; sorted by id.
    may_report: Vec<ConnId>,
    /// Deadline may have moved since [`Stack::deadlines`] was last brought
    /// up to date.
    timer_dirty: Vec<ConnId>,
    /// The top of [`Stack::deadlines`] is every connection's earliest
    /// deadline.
    settled: bool,
}

/// Connections by id. Ids are handed out in sequence, so a ring of slots
/// indexed from the oldest live id is a dense map with O(1) lookups.
#[derive(Debug, Default)]
struct Slots {
    /// `ring[i]` holds connection `base + i`, if it is still there.
    ring: VecDeque<Option<Box<Slot>>>,
    base: u32,
}

impl Slots {
    fn index(&self, id: ConnId) -> Option<usize> {
        id.0.checked_sub(self.base).map(|i| i as usize)
    }

    fn get(&self, id: &ConnId) -> Option<&Slot> {
        self.ring.get(self.index(*id)?)?.as_deref()
    }

    fn get_mut(&mut self, id: &ConnId) -> Option<&mut Slot> {
        let i = self.index(*id)?;
        self.ring.get_mut(i)?.as_deref_mut()
    }

    /// Stores connection `id`, which must be newer than every other.
    fn insert(&mut self, id: ConnId, slot: Slot) -> &mut Slot {
        if self.ring.is_empty() {
            self.base = id.0;
        }
        let i = (id.0 - self.base) as usize;
        while self.ring.len() <= i {
            self.ring.push_back(None);
        }
        self.ring[i].insert(Box::new(slot))
    }

    fn remove(&mut self, id: &ConnId) -> Option<Slot> {
        let i = self.index(*id)?;
        let slot = self.ring.get_mut(i)?.take()?;
        while let Some(None) = self.ring.front() {
            self.ring.pop_front();
            self.base += 1;
        }
        Some(*slot)
    }

    /// Live connections in id order.
    fn iter(&self) -> impl Iterator<Item = (ConnId, &Slot)> {
        let base = self.base;
        self.ring
            .iter()
            .enumerate()
            .filter_map(move |(i, s)| Some((ConnId(base + i as u32), s.as_deref()?)))
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Slot> {
        self.ring.iter_mut().filter_map(|s| s.as_deref_mut())
    }
}

/// Each connection's deadline, in a binary min-heap that knows where
/// every connection sits, so a deadline that moves is re-sorted in place.
#[derive(Debug, Default)]
struct Deadlines {
    heap: Vec<(SimTime, ConnId)>,
    /// `at[id]`: index of connection `id` in `heap`, or [`Deadlines::NONE`].
    /// Connection ids are handed out in sequence, so this stays dense.
    at: Vec<u32>,
    /// Scratch list of heap indices for [`Deadlines::due`].
    walk: Vec<usize>,
}

impl Deadlines {
    const NONE: u32 = u32::MAX;

    fn earliest(&self) -> Option<SimTime> {
        self.heap.first().map(|&(t, _)| t)
    }

    /// Sets (or with `None` clears) the deadline of connection `id`.
    fn set(&mut self, id: ConnId, deadline: Option<SimTime>) {
        let index = id.0 as usize;
        if self.at.len() <= index {
            self.at.resize(index + 1, Self::NONE);
        }
        let i = self.at[index];
        match (i, deadline) {
            (Self::NONE, None) => {}
            (Self::NONE, Some(t)) => {
                self.heap.push((t, id));
                self.at[index] = (self.heap.len() - 1) as u32;
                self.sift_up(self.heap.len() - 1);
            }
            (i, Some(t)) => {
                let i = i as usize;
                let old = self.heap[i].0;
                self.heap[i].0 = t;
                if t < old {
                    self.sift_up(i);
                } else {
                    self.sift_down(i);
                }
            }
            (i, None) => {
                let i = i as usize;
                self.at[index] = Self::NONE;
                let last = self.heap.len() - 1;
                if i != last {
                    self.heap.swap(i, last);
                    self.at[self.heap[i].1 .0 as usize] = i as u32;
                }
                self.heap.pop();
                if i < self.heap.len() {
                    self.sift_down(i);
                    self.sift_up(i);
                }
            }
        }
    }

    /// Adds every connection whose deadline is at or before `now` to `due`.
    fn due(&mut self, now: SimTime, due: &mut Vec<ConnId>) {
        // Children are never earlier than their parent: descend only into
        // due nodes.
        self.walk.clear();
        if self.heap.first().is_some_and(|&(t, _)| t <= now) {
            self.walk.push(0);
        }
        while let Some(i) = self.walk.pop() {
            due.push(self.heap[i].1);
            for child in [2 * i + 1, 2 * i + 2] {
                if self.heap.get(child).is_some_and(|&(t, _)| t <= now) {
                    self.walk.push(child);
                }
            }
        }
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        self.at[self.heap[i].1 .0 as usize] = i as u32;
        self.at[self.heap[j].1 .0 as usize] = j as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[i] >= self.heap[parent] {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let mut least = i;
            for child in [2 * i + 1, 2 * i + 2] {
                if child < self.heap.len() && self.heap[child] < self.heap[least] {
                    least = child;
                }
            }
            if least == i {
                break;
            }
            self.swap(i, least);
            i = least;
        }
    }
}

/// Adds `id` to a list sorted by id.
fn insert_sorted(list: &mut Vec<ConnId>, id: ConnId) {
    // Usually the newest id, or the only one.
    match list.last() {
        Some(&last) if last > id => {
            let at = list.partition_point(|&x| x < id);
            list.insert(at, id);
        }
        _ => list.push(id),
    }
}

impl Touched {
    fn touch(&mut self, id: ConnId, slot: &mut Slot) {
        self.may_send(id, slot);
        if !slot.may_report {
            slot.may_report = true;
            insert_sorted(&mut self.may_report, id);
        }
        self.timers_may_move(id, slot);
    }

    /// Lists a connection that may have a datagram to send, and nothing
    /// else new: its events and deadline are as they were.
    fn may_send(&mut self, id: ConnId, slot: &mut Slot) {
        if !slot.may_send {
            slot.may_send = true;
            insert_sorted(&mut self.may_send, id);
        }
    }

    fn timers_may_move(&mut self, id: ConnId, slot: &mut Slot) {
        self.settled = false;
        if !slot.timer_dirty {
            slot.timer_dirty = true;
            self.timer_dirty.push(id);
        }
    }
}

/// All TCP connections and listeners of one IPv4 or IPv6 address.
#[derive(Debug)]
pub struct Stack {
    config: Arc<Config>,
    addr: IpAddr,
    seed: u64,
    counter: u64,
    next_id: u32,
    next_port: u16,
    conns: Slots,
    /// Connection by (local, remote) address.
    tuples: Tuples<ConnId>,
    listeners: BTreeMap<u16, VecDeque<ConnId>>,
    resets: VecDeque<Vec<u8>>,
    /// Buffers of sent resets, reused for the next ones.
    spare: Vec<Vec<u8>>,
    /// Events moved out of their connections (see [`Stack::remove`]),
    /// handed out before any others.
    events: VecDeque<(ConnId, Event)>,
    /// This round's events still queued in their connections: which
    /// connection, and how many of its events, in the order handed out.
    draining: VecDeque<(ConnId, usize)>,
    closed: BTreeSet<ConnId>,
    cursor: u32,
    ttl: u8,
    touched: Touched,
    /// Deadlines of the connections, up to date for all but the touched
    /// ones.
    deadlines: Deadlines,
    /// Scratch list of connections whose timers are due.
    due: Vec<ConnId>,
    trace_level: TraceLevel,
    /// The host's tick timer, when the profile's grids start with the
    /// host's first connection ([`crate::clock::TimerStart`]); one for all
    /// of the stack's connections, as lwIP has one TCP timer.
    timer: Option<HostTimer>,
    /// Connections of the timer's epoch not yet seen closed.
    timed: Vec<ConnId>,
    /// When the last of the epoch's connections that left `timed` went.
    timed_gone: Option<SimTime>,
    /// The latest time the stack was called with, for a connection removed
    /// before it closed.
    latest: SimTime,
    /// Ports given back so far (4-tuples freed, listeners removed).
    released: u64,
    /// A remote towards which the last search found every ephemeral port
    /// taken by this stack itself, and `released` then: until a port comes
    /// back, connecting there again fails at once instead of searching.
    exhausted: Option<(SocketAddr, u64)>,
}

/// Why [`Stack::try_connect`] opened no connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The remote address is of the other family than the stack's.
    #[error("cannot connect from {local} to {remote}: the addresses are of different families")]
    FamilyMismatch {
        /// The stack's address.
        local: IpAddr,
        /// The address asked for.
        remote: SocketAddr,
    },
    /// Every ephemeral port, or the port asked for, is in use towards
    /// `remote` (TIME-WAIT keeps a port): a real stack's `EADDRNOTAVAIL`.
    #[error("no free local port towards {remote}")]
    NoFreePort {
        /// The address asked for.
        remote: SocketAddr,
    },
}

/// The tuple key of a connection the stack made: both of its addresses
/// are of the stack's family.
fn key_of(conn: &Connection) -> Option<TupleKey> {
    TupleKey::of(conn.local(), conn.remote())
}

/// SplitMix64: a small, well-mixed hash for ISNs and per-connection seeds.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Stack {
    /// A stack for `addr`, an IPv4 or IPv6 address; `seed` makes initial
    /// sequence numbers and policy randomness reproducible.
    pub fn new(config: Arc<Config>, addr: impl Into<IpAddr>, seed: u64) -> Stack {
        let ttl = config.profile.ttl;
        let timer = config.profile.host_timer();
        Stack {
            config,
            addr: addr.into(),
            seed,
            counter: 0,
            next_id: 0,
            next_port: EPHEMERAL_START,
            conns: Slots::default(),
            tuples: Tuples::default(),
            listeners: BTreeMap::new(),
            resets: VecDeque::new(),
            spare: Vec::new(),
            events: VecDeque::new(),
            draining: VecDeque::new(),
            closed: BTreeSet::new(),
            cursor: 0,
            ttl,
            touched: Touched {
                may_send: Vec::new(),
                may_report: Vec::new(),
                timer_dirty: Vec::new(),
                settled: true,
            },
            deadlines: Deadlines::default(),
            due: Vec::new(),
            trace_level: TraceLevel::All,
            timer,
            timed: Vec::new(),
            timed_gone: None,
            latest: SimTime::ZERO,
            released: 0,
            exhausted: None,
        }
    }

    /// A connection opens at `now`: the epoch of the host's timer it runs
    /// in, starting the timer if it had stopped; `None` when the profile's
    /// grids run from time zero.
    fn timer_epoch(&mut self, now: SimTime) -> Option<TimerEpoch> {
        self.latest = self.latest.max(now);
        let timer = self.timer.as_mut()?;
        // lwIP checks its lists after every tick: the host is idle once
        // every connection of the epoch is closed (TIME-WAIT counts as
        // open), since the last one went.
        let conns = &self.conns;
        let mut gone = self.timed_gone;
        self.timed.retain(|id| match conns.get(id) {
            Some(slot) if !slot.conn.is_closed() => true,
            Some(slot) => {
                gone = gone.max(slot.conn.closed_at());
                false
            }
            None => false,
        });
        let idle_since = if self.timed.is_empty() { gone } else { None };
        let epoch = timer.open(now, idle_since);
        // A restarted timer counts the going of its own connections only.
        let restarted = idle_since.is_some() && epoch.start == now;
        self.timed_gone = if restarted { None } else { gone };
        Some(epoch)
    }

    /// The stack's address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    fn next_seed(&mut self) -> u64 {
        self.counter += 1;
        mix(self.seed ^ mix(self.counter))
    }

    /// Adds a connection; `accepted_on` is the listening port of a passive
    /// open.
    fn insert(&mut self, mut conn: Connection, accepted_on: Option<u16>) -> ConnId {
        conn.set_trace_level(self.trace_level);
        let id = ConnId(self.next_id);
        self.next_id += 1;
        if self.timer.is_some() {
            self.timed.push(id);
        }
        if let Some(key) = key_of(&conn) {
            self.tuples.insert(key, id);
        }
        let slot = self.conns.insert(
            id,
            Slot {
                accepted_on,
                ..Slot::new(conn)
            },
        );
        self.touched.touch(id, slot);
        id
    }

    /// Brings `deadlines` up to date with the touched connections.
    fn sync_timers(&mut self) {
        for id in self.touched.timer_dirty.drain(..) {
            let deadline = self.conns.get_mut(&id).and_then(|slot| {
                slot.timer_dirty = false;
                slot.conn.poll_timeout()
            });
            self.deadlines.set(id, deadline);
        }
        self.touched.settled = true;
    }

    /// Chooses which trace events every connection records, now and for
    /// connections made later ([`TraceLevel::All`] unless set).
    pub fn set_trace_level(&mut self, level: TraceLevel) {
        self.trace_level = level;
        for slot in self.conns.values_mut() {
            slot.conn.set_trace_level(level);
        }
    }

    /// Accepts connections on `port`.
    pub fn listen(&mut self, port: u16) {
        self.listeners.entry(port).or_default();
    }

    /// Stops accepting on `port` (existing connections are unaffected).
    pub fn unlisten(&mut self, port: u16) {
        if self.listeners.remove(&port).is_some() {
            self.released += 1;
        }
    }

    /// Frees the 4-tuple of connection `id` (whose key is `key`), if it
    /// still owns it.
    fn free_tuple(&mut self, key: Option<TupleKey>, id: ConnId) {
        if let Some(key) = key {
            if self.tuples.get(&key) == Some(&id) {
                self.tuples.remove(&key);
                self.released += 1;
            }
        }
    }

    /// An established connection that arrived on `port`, if any.
    pub fn accept(&mut self, port: u16) -> Option<ConnId> {
        self.listeners.get_mut(&port)?.pop_front()
    }

    /// Opens a connection to `remote` from an ephemeral port.
    ///
    /// # Panics
    ///
    /// If `remote` is not of the stack's address family, which no datagram
    /// can join, or every ephemeral port is in use towards it: a caller's
    /// bug. Use [`Stack::try_connect`] for addresses and port counts that
    /// were not checked.
    pub fn connect(&mut self, now: SimTime, remote: impl Into<SocketAddr>) -> ConnId {
        match self.try_connect(now, remote, None) {
            Ok(id) => id,
            Err(e) => panic!("{e}"),
        }
    }

    /// Opens a connection to `remote` from an ephemeral port, or fails if
    /// `remote` is not of the stack's address family or every ephemeral
    /// port is in use towards it. `path` is what the host's link layer
    /// knows of the path's timing, for the RTO policy
    /// ([`crate::rto::ConnectionContext::path`]); `None` when it knows
    /// nothing.
    pub fn try_connect(
        &mut self,
        now: SimTime,
        remote: impl Into<SocketAddr>,
        path: Option<PathHint>,
    ) -> Result<ConnId, ConnectError> {
        self.try_connect_from(now, remote, None, path, |_| true)
    }

    /// [`Stack::try_connect`] from local port `port` if given (ephemeral or
    /// not), else from the next ephemeral port that is free on the stack
    /// and for which `host_free` holds: a host with other stacks and
    /// listeners says which ports they leave free. At most
    /// [`EPHEMERAL_PORTS`] ports are tried before
    /// [`ConnectError::NoFreePort`].
    pub fn try_connect_from(
        &mut self,
        now: SimTime,
        remote: impl Into<SocketAddr>,
        port: Option<u16>,
        path: Option<PathHint>,
        host_free: impl Fn(u16) -> bool,
    ) -> Result<ConnId, ConnectError> {
        let remote = plain(remote.into());
        let key = |addr: IpAddr, p: u16| TupleKey::of(SocketAddr::new(addr, p), remote);
        if key(self.addr, 0).is_none() {
            return Err(ConnectError::FamilyMismatch {
                local: self.addr,
                remote,
            });
        }
        let no_port = ConnectError::NoFreePort { remote };
        let stack_free = |s: &Stack, p: u16| {
            !s.listeners.contains_key(&p)
                && key(s.addr, p).is_some_and(|k| !s.tuples.contains_key(&k))
        };
        let port = match port {
            Some(p) if p < EPHEMERAL_START => {
                if !(stack_free(self, p) && host_free(p)) {
                    return Err(no_port);
                }
                p
            }
            _ => {
                if port.is_none() && self.exhausted == Some((remote, self.released)) {
                    return Err(no_port);
                }
                // Ports are tried in turn from the one after the last taken.
                // One free on the stack but refused (by the host, or not the
                // one asked for) still draws its seed, so ISNs do not depend
                // on which of the two refused it.
                let mut p = self.next_port;
                let mut refused = 0;
                let mut only_ours = port.is_none();
                let mut found = None;
                for _ in 0..EPHEMERAL_PORTS {
                    if stack_free(self, p) {
                        if port.map_or(true, |want| want == p) && host_free(p) {
                            found = Some(p);
                            break;
                        }
                        refused += 1;
                        only_ours = false;
                    }
                    p = p.checked_add(1).unwrap_or(EPHEMERAL_START);
                }
                let Some(p) = found else {
                    if only_ours {
                        self.exhausted = Some((remote, self.released));
                    }
                    return Err(no_port);
                };
                self.counter += refused;
                self.next_port = p.checked_add(1).unwrap_or(EPHEMERAL_START);
                p
            }
        };
        let seed = self.next_seed();
        let local = SocketAddr::new(self.addr, port);
        let epoch = self.timer_epoch(now);
        let conn = Connection::open_active(
            self.config.clone(),
            now,
            local,
            remote,
            SeqNumber(seed as u32),
            seed,
            path,
            epoch,
        );
        Ok(self.insert(conn, None))
    }

    /// The connection `id`.
    pub fn conn(&self, id: ConnId) -> Option<&Connection> {
        self.conns.get(&id).map(|s| &s.conn)
    }

    /// The connection `id`, mutably (for send, recv, close, abort).
    pub fn conn_mut(&mut self, id: ConnId) -> Option<&mut Connection> {
        let slot = self.conns.get_mut(&id)?;
        self.touched.touch(id, slot);
        Some(&mut slot.conn)
    }

    /// [`Connection::send`] on connection `id`. Cheaper than going through
    /// [`Stack::conn_mut`]: queuing data raises no event and moves no timer,
    /// so only the connection's output is polled afterwards.
    pub fn send(&mut self, id: ConnId, data: &[u8]) -> Option<Result<usize, ConnError>> {
        self.queue(id, |conn| conn.send(data))
    }

    /// [`Connection::send_shared`] on connection `id`, as cheap as
    /// [`Stack::send`].
    pub fn send_shared(&mut self, id: ConnId, data: Bytes) -> Option<Result<usize, ConnError>> {
        self.queue(id, |conn| conn.send_shared(data))
    }

    /// Queues data on connection `id` with `queue_on`, then lists the
    /// connection for transmission if anything was taken.
    fn queue(
        &mut self,
        id: ConnId,
        queue_on: impl FnOnce(&mut Connection) -> Result<usize, ConnError>,
    ) -> Option<Result<usize, ConnError>> {
        let slot = self.conns.get_mut(&id)?;
        let queued = queue_on(&mut slot.conn);
        if matches!(queued, Ok(n) if n > 0) {
            self.touched.may_send(id, slot);
        }
        Some(queued)
    }

    /// [`Connection::recv`] on connection `id`. Cheaper than going through
    /// [`Stack::conn_mut`]: reading raises no event and moves no timer, and
    /// the connection has output only when the read opened the window
    /// enough for an update.
    pub fn recv(&mut self, id: ConnId, buf: &mut [u8]) -> Option<usize> {
        let slot = self.conns.get_mut(&id)?;
        let n = slot.conn.recv(buf);
        if slot.conn.ack_due() {
            self.touched.may_send(id, slot);
        }
        Some(n)
    }

    /// Forgets a connection (normally once it is closed), returning it.
    pub fn remove(&mut self, id: ConnId) -> Option<Connection> {
        if self.draining.iter().any(|&(d, _)| d == id) {
            // Its events of this round are still due.
            self.detach_events();
        }
        let slot = self.conns.remove(&id)?;
        let conn = slot.conn;
        if let Some(i) = self.timed.iter().position(|&x| x == id) {
            // Removed while open, it goes now: the latest time seen.
            self.timed.swap_remove(i);
            let gone = conn.closed_at().unwrap_or(self.latest);
            self.timed_gone = self.timed_gone.max(Some(gone));
        }
        self.free_tuple(key_of(&conn), id);
        if slot.may_send {
            self.touched.may_send.retain(|&x| x != id);
        }
        if slot.may_report {
            self.touched.may_report.retain(|&x| x != id);
        }
        self.deadlines.set(id, None);
        self.sync_timers();
        Some(conn)
    }

    /// Ids of all connections, in creation order.
    pub fn conn_ids(&self) -> Vec<ConnId> {
        self.conns.iter().map(|(id, _)| id).collect()
    }

    /// Parses a whole IPv4 or IPv6 datagram (told apart by its version
    /// field) and processes it if it is TCP for this address; anything else
    /// is ignored. Malformed IP headers and TCP segments are errors.
    pub fn handle_datagram(&mut self, now: SimTime, datagram: &[u8]) -> Result<(), WireError> {
        let ip = ParsedIp::parse(datagram, true)?;
        // The header's lengths were checked against the datagram.
        self.handle_ip(now, &ip, &datagram[ip.payload()])
    }

    /// Processes the payload of a datagram whose IP header the caller has
    /// parsed (and, for IPv4, verified) already: only TCP is parsed here,
    /// checksum included, if `ip` carries TCP for this address; anything
    /// else is ignored.
    pub fn handle_ip(
        &mut self,
        now: SimTime,
        ip: &ParsedIp,
        payload: &[u8],
    ) -> Result<(), WireError> {
        if ip.protocol() != protocol::TCP {
            return Ok(());
        }
        let tcp = parse_tcp(ip, payload)?;
        if ip.dst() != self.addr {
            return Ok(());
        }
        match &ip.header {
            IpRepr::V4(h) => self.handle_segment(now, h, &tcp),
            IpRepr::V6(h) => self.handle_segment(now, h, &tcp),
        }
        Ok(())
    }

    /// Processes one TCP segment addressed to this stack; `ip` is the IPv4
    /// or IPv6 header it came in.
    pub fn handle_segment<H: IpHeader>(&mut self, now: SimTime, ip: &H, tcp: &TcpRepr) {
        self.latest = self.latest.max(now);
        if let Some(id) = self.tuples.get(&ip.tuple_key(tcp)).copied() {
            if let Some(slot) = self.conns.get_mut(&id) {
                if slot.conn.state() != State::Closed {
                    slot.conn.handle_segment(now, ip, tcp);
                    self.touched.touch(id, slot);
                    return;
                }
            }
        }
        let plain_syn = tcp.flags.contains(TcpFlags::SYN)
            && !tcp.flags.contains(TcpFlags::ACK)
            && !tcp.flags.contains(TcpFlags::RST);
        if plain_syn && self.listeners.contains_key(&tcp.dst_port) {
            let seed = self.next_seed();
            let epoch = self.timer_epoch(now);
            if let Some(conn) = Connection::open_passive(
                self.config.clone(),
                now,
                ip,
                tcp,
                SeqNumber(seed as u32),
                seed,
                epoch,
            ) {
                self.insert(conn, Some(tcp.dst_port));
            }
            return;
        }
        // RFC 9293 §3.10.7.1: no connection, answer with RST.
        if let Some(reply) = reset_reply(tcp, self.config.profile.reset_with_ack) {
            let mut buf = self.spare.pop().unwrap_or_default();
            let emitted = match (ip.dst_addr(), ip.src_addr()) {
                (IpAddr::V4(src), IpAddr::V4(dst)) => {
                    let ip_out = Ipv4Repr {
                        src,
                        dst,
                        protocol: protocol::TCP,
                        ttl: self.ttl,
                        ident: 0,
                        dont_fragment: true,
                        tos: 0,
                        payload_len: reply.buffer_len(),
                    };
                    emit_tcp(&mut buf, &ip_out, &reply)
                }
                (IpAddr::V6(src), IpAddr::V6(dst)) => {
                    let ip_out = Ipv6Repr {
                        src,
                        dst,
                        next_header: ipv6::next_header::TCP,
                        hop_limit: self.ttl,
                        traffic_class: 0,
                        flow_label: 0,
                        payload_len: reply.buffer_len(),
                    };
                    ipv6::emit_tcp(&mut buf, &ip_out, &reply)
                }
                // An IP header has one family; nothing to answer otherwise.
                _ => {
                    self.spare.push(buf);
                    return;
                }
            };
            if emitted.is_ok() {
                self.resets.push_back(buf);
            } else {
                self.spare.push(buf);
            }
        }
    }

    /// The host's link layer warned of an outage (`true`) or said the link
    /// is back (`false`): Freeze-TCP freezes or thaws every connection
    /// (nothing happens unless their profile sets `freeze`).
    pub fn link_warning(&mut self, now: SimTime, going_down: bool) {
        if !self.config.profile.freeze {
            return;
        }
        let ids: Vec<ConnId> = self.conns.iter().map(|(id, _)| id).collect();
        for id in ids {
            if let Some(slot) = self.conns.get_mut(&id) {
                if going_down {
                    slot.conn.freeze(now);
                } else {
                    slot.conn.thaw(now);
                }
                self.touched.touch(id, slot);
            }
        }
    }

    /// Fires due timers of every connection.
    pub fn handle_timeout(&mut self, now: SimTime) {
        self.latest = self.latest.max(now);
        self.sync_timers();
        let mut due = std::mem::take(&mut self.due);
        self.deadlines.due(now, &mut due);
        // In connection order, as a scan of all connections would.
        due.sort_unstable();
        for &id in &due {
            if let Some(slot) = self.conns.get_mut(&id) {
                slot.conn.handle_timeout(now);
                self.touched.touch(id, slot);
            }
        }
        due.clear();
        self.due = due;
        self.sync_timers();
    }

    /// Writes the next datagram to send into `buf`; connections take turns.
    #[must_use]
    pub fn poll_transmit(&mut self, now: SimTime, buf: &mut Vec<u8>) -> Option<usize> {
        if let Some(datagram) = self.resets.pop_front() {
            buf.clear();
            buf.extend_from_slice(&datagram);
            self.spare.push(datagram);
            return Some(buf.len());
        }
        // Connections in id order from the cursor on, wrapping around; only
        // those that may send are asked, the others would answer `None`.
        // Each is asked until it has nothing more, then leaves the list,
        // so the ones before the cursor are all that is left on wrapping.
        let cursor = ConnId(self.cursor);
        let mut i = self.touched.may_send.partition_point(|&id| id < cursor);
        while !self.touched.may_send.is_empty() {
            if i >= self.touched.may_send.len() {
                i = 0;
            }
            let id = self.touched.may_send[i];
            if let Some(slot) = self.conns.get_mut(&id) {
                // Sending arms and stops timers; even with nothing to send,
                // a zero window arms the persist timer.
                self.touched.timers_may_move(id, slot);
                if let Some(len) = slot.conn.poll_transmit(now, buf) {
                    self.cursor = id.0.wrapping_add(1);
                    return Some(len);
                }
                slot.may_send = false;
            }
            self.touched.may_send.remove(i);
        }
        self.sync_timers();
        None
    }

    /// The earliest deadline of any connection.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<SimTime> {
        if self.touched.settled {
            return self.deadlines.earliest();
        }
        // Touched since the heap was brought up to date: ask them all.
        self.conns
            .iter()
            .filter_map(|(_, s)| s.conn.poll_timeout())
            .min()
    }

    /// The next event of any connection.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<(ConnId, Event)> {
        loop {
            if let Some(event) = self.events.pop_front() {
                return Some(event);
            }
            if self.draining.is_empty() {
                self.collect_events();
            }
            let (id, left) = self.draining.front_mut()?;
            let id = *id;
            *left -= 1;
            if *left == 0 {
                self.draining.pop_front();
            }
            if let Some(event) = self.conns.get_mut(&id).and_then(|s| s.conn.poll_event()) {
                return Some((id, event));
            }
        }
    }

    /// Starts a round of events: notes how many each touched connection has
    /// queued (they are handed out from the connections themselves, in id
    /// order, as a scan of all connections would; untouched ones have none),
    /// queues accepted connections on their listeners, and frees the
    /// 4-tuples of closed connections.
    fn collect_events(&mut self) {
        let mut ids = std::mem::take(&mut self.touched.may_report);
        for &id in &ids {
            let Some(slot) = self.conns.get_mut(&id) else {
                continue;
            };
            slot.may_report = false;
            let conn = &slot.conn;
            let queued = conn.queued_events();
            if !queued.is_empty() {
                if let Some(port) = &slot.accepted_on {
                    for event in queued {
                        if *event == Event::Connected {
                            if let Some(queue) = self.listeners.get_mut(port) {
                                queue.push_back(id);
                            }
                        }
                    }
                }
                self.draining.push_back((id, queued.len()));
            }
            if conn.is_closed() && self.closed.insert(id) {
                // A closed connection no longer owns its 4-tuple.
                let key = key_of(conn);
                self.free_tuple(key, id);
            }
        }
        // Keep the list's allocation.
        ids.clear();
        self.touched.may_report = ids;
    }

    /// Moves the rest of this round's events out of their connections, for
    /// when one of them is about to be removed.
    fn detach_events(&mut self) {
        for (id, left) in self.draining.drain(..) {
            if let Some(slot) = self.conns.get_mut(&id) {
                for _ in 0..left {
                    if let Some(event) = slot.conn.poll_event() {
                        self.events.push_back((id, event));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddrV4};

    use super::*;
    use crate::trace::TraceEvent;
    use crate::Profile;

    const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn stack() -> Stack {
        Stack::new(Arc::new(Config::from_profile(Profile::linux())), HOST, 7)
    }

    /// Collects output and events, as a driver does after each call.
    fn drive(s: &mut Stack, now: SimTime) -> Vec<(ConnId, Event)> {
        let mut buf = Vec::new();
        while s.poll_transmit(now, &mut buf).is_some() {}
        std::iter::from_fn(|| s.poll_event()).collect()
    }

    /// The earliest deadline found by asking every connection.
    fn earliest(s: &Stack) -> Option<SimTime> {
        let ids = s.conn_ids();
        ids.iter()
            .filter_map(|&id| s.conn(id)?.poll_timeout())
            .min()
    }

    #[test]
    fn deadline_is_the_earliest_of_all_connections_as_they_change() {
        let mut s = stack();
        for i in 0..24u16 {
            let now = SimTime::from_millis(u64::from(i) * 37);
            s.connect(now, SocketAddrV4::new(PEER, 1000 + i));
            drive(&mut s, now);
            assert_eq!(s.poll_timeout(), earliest(&s));
        }
        // Unanswered SYNs back off, some connections are aborted and some
        // removed: the deadline keeps matching a scan of all of them.
        let mut step = 0;
        while let Some(now) = s.poll_timeout() {
            s.handle_timeout(now);
            step += 1;
            let ids = s.conn_ids();
            if step % 5 == 0 {
                if let Some(c) = s.conn_mut(ids[step % ids.len()]) {
                    c.abort(now);
                }
            }
            if step % 7 == 0 {
                s.remove(ids[(step * 3) % ids.len()]);
            }
            drive(&mut s, now);
            assert_eq!(s.poll_timeout(), earliest(&s), "step {step}");
        }
        assert!(step > 24, "timers fired {step} times");
        assert_eq!(earliest(&s), None);
    }

    #[test]
    fn events_of_a_connection_removed_mid_round_are_still_handed_out() {
        let mut s = stack();
        let a = s.connect(SimTime::ZERO, SocketAddrV4::new(PEER, 80));
        let b = s.connect(SimTime::ZERO, SocketAddrV4::new(PEER, 81));
        let mut buf = Vec::new();
        while s.poll_transmit(SimTime::ZERO, &mut buf).is_some() {}
        let first = s.poll_event();
        assert!(matches!(first, Some((id, _)) if id == a));
        assert!(s.remove(a).is_some());
        let rest: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
        let owners: Vec<ConnId> = rest.iter().map(|(id, _)| *id).collect();
        // a's state change and armed timer, then b's.
        assert_eq!(owners, [a, b, b], "{rest:?}");
        assert!(matches!(
            rest[0].1,
            Event::Trace(t) if matches!(t.event, TraceEvent::RtoArmed { .. })
        ));
    }

    /// Runs `f` on a thread and fails the test if it has not returned
    /// within a minute, instead of hanging the test run.
    fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("returned within a minute")
    }

    #[test]
    fn connecting_with_every_ephemeral_port_taken_fails_until_one_is_freed() {
        within_a_minute(|| {
            let mut s = stack();
            let peer = SocketAddrV4::new(PEER, 80);
            let ids: Vec<ConnId> = (0..EPHEMERAL_PORTS)
                .map(|_| s.try_connect(SimTime::ZERO, peer, None).unwrap())
                .collect();
            let no_port = Err(ConnectError::NoFreePort {
                remote: peer.into(),
            });
            assert_eq!(s.try_connect(SimTime::ZERO, peer, None), no_port);
            // Asked again with nothing freed: the same answer.
            assert_eq!(s.try_connect(SimTime::ZERO, peer, None), no_port);
            assert_eq!(
                s.try_connect_from(SimTime::ZERO, peer, Some(50000), None, |_| true),
                no_port
            );
            // Ports are per 4-tuple: another peer, or a port outside the
            // ephemeral range, is free.
            assert!(s
                .try_connect(SimTime::ZERO, SocketAddrV4::new(PEER, 81), None)
                .is_ok());
            let low = s
                .try_connect_from(SimTime::ZERO, peer, Some(8080), None, |_| true)
                .unwrap();
            assert_eq!(s.conn(low).unwrap().local().port(), 8080);
            assert_eq!(
                s.try_connect_from(SimTime::ZERO, peer, Some(8080), None, |_| true),
                no_port
            );
            // A freed port is found again.
            let freed = s.remove(ids[100]).unwrap().local().port();
            let id = s.try_connect(SimTime::ZERO, peer, None).unwrap();
            assert_eq!(s.conn(id).unwrap().local().port(), freed);
            assert_eq!(s.try_connect(SimTime::ZERO, peer, None), no_port);
        });
    }

    #[test]
    fn ports_the_host_refuses_are_skipped_and_each_draws_a_seed() {
        let peer = SocketAddrV4::new(PEER, 80);
        let syn = |s: &mut Stack| {
            let mut buf = Vec::new();
            let n = s.poll_transmit(SimTime::ZERO, &mut buf).expect("a SYN");
            buf.truncate(n);
            buf
        };
        // The host holds the first ephemeral port elsewhere.
        let mut a = stack();
        let id = a
            .try_connect_from(SimTime::ZERO, peer, None, None, |p| p != EPHEMERAL_START)
            .unwrap();
        assert_eq!(a.conn(id).unwrap().local().port(), EPHEMERAL_START + 1);
        // Asking for that port explicitly sends the same SYN, ISN included.
        let mut b = stack();
        b.try_connect_from(SimTime::ZERO, peer, Some(EPHEMERAL_START + 1), None, |_| {
            true
        })
        .unwrap();
        assert_eq!(syn(&mut a), syn(&mut b));
        // The host refusing every port leaves none.
        assert_eq!(
            stack().try_connect_from(SimTime::ZERO, peer, None, None, |_| false),
            Err(ConnectError::NoFreePort {
                remote: peer.into()
            })
        );
    }

    const HOST6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const PEER6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0x212, 0x4b00, 0, 2);

    fn stack6() -> Stack {
        Stack::new(Arc::new(Config::from_profile(Profile::linux())), HOST6, 7)
    }

    /// A SYN from the IPv6 peer's port 40000 to `port`, with `mss`.
    fn syn6(port: u16, mss: Option<u16>) -> Vec<u8> {
        let tcp = TcpRepr {
            src_port: 40000,
            dst_port: port,
            seq: SeqNumber(5000),
            ack: SeqNumber(0),
            flags: TcpFlags::SYN,
            window: 8000,
            urgent: 0,
            options: rtolab_wire::tcp::TcpOptions {
                mss,
                ..Default::default()
            },
            payload: &[],
        };
        from_peer6(&tcp)
    }

    /// `tcp` in an IPv6 datagram from the peer to the host.
    fn from_peer6(tcp: &TcpRepr) -> Vec<u8> {
        let ip = Ipv6Repr {
            src: PEER6,
            dst: HOST6,
            next_header: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 0,
        };
        let mut out = Vec::new();
        ipv6::emit_tcp(&mut out, &ip, tcp).unwrap();
        out
    }

    /// Every datagram the stack has to send, parsed as IPv6.
    fn sent6(s: &mut Stack) -> Vec<(Ipv6Repr, TcpFlags, SeqNumber, SeqNumber, Option<u16>)> {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while let Some(len) = s.poll_transmit(SimTime::ZERO, &mut buf) {
            let parsed = ipv6::parse(&buf[..len]).expect("a valid IPv6 datagram");
            let ipv6::Transport6::Tcp(tcp) = parsed.transport else {
                panic!("not TCP");
            };
            out.push((parsed.ip, tcp.flags, tcp.seq, tcp.ack, tcp.options.mss));
        }
        out
    }

    #[test]
    fn a_segment_to_a_closed_ipv6_port_gets_a_reset() {
        let mut s = stack6();
        s.handle_datagram(SimTime::ZERO, &syn6(81, Some(1000)))
            .unwrap();
        let sent = sent6(&mut s);
        assert_eq!(sent.len(), 1, "{sent:?}");
        let (ip, flags, seq, ack, _) = sent[0];
        assert_eq!((ip.src, ip.dst, ip.hop_limit), (HOST6, PEER6, 64));
        assert_eq!(flags, TcpFlags(TcpFlags::RST.0 | TcpFlags::ACK.0));
        // RFC 9293 §3.10.7.1: SEQ 0, ACK the SYN's sequence number plus one.
        assert_eq!((seq, ack), (SeqNumber(0), SeqNumber(5001)));
        assert!(s.conn_ids().is_empty());
    }

    /// The reset a host with `profile` sends for a late FIN+ACK (10
    /// bytes, seq 7000, ack 9000) from the peer after its connection is gone.
    fn reset_for_late_fin(profile: Profile) -> (TcpFlags, SeqNumber, SeqNumber) {
        let mut s = Stack::new(Arc::new(Config::from_profile(profile)), HOST6, 7);
        let tcp = TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq: SeqNumber(7000),
            ack: SeqNumber(9000),
            flags: TcpFlags(TcpFlags::FIN.0 | TcpFlags::ACK.0),
            window: 8000,
            urgent: 0,
            options: rtolab_wire::tcp::TcpOptions::default(),
            payload: b"0123456789",
        };
        s.handle_datagram(SimTime::ZERO, &from_peer6(&tcp)).unwrap();
        let sent = sent6(&mut s);
        assert_eq!(sent.len(), 1, "{sent:?}");
        let (_, flags, seq, ack, _) = sent[0];
        (flags, seq, ack)
    }

    #[test]
    fn a_segment_with_ack_for_no_connection_gets_a_bare_rst_unless_the_profile_is_lwip() {
        // RFC 9293 §3.10.7.1: <SEQ=SEG.ACK><CTL=RST>.
        for name in ["rfc", "linux", "uip"] {
            let profile = Profile::named(name).expect("a built-in profile");
            let (flags, seq, _) = reset_for_late_fin(profile);
            assert_eq!((flags, seq), (TcpFlags::RST, SeqNumber(9000)), "{name}");
        }
        // lwIP's tcp_rst also acknowledges the segment: its 10 bytes and FIN.
        let lwip = reset_for_late_fin(Profile::lwip());
        assert_eq!(
            lwip,
            (
                TcpFlags(TcpFlags::RST.0 | TcpFlags::ACK.0),
                SeqNumber(9000),
                SeqNumber(7011)
            )
        );
    }

    #[test]
    fn an_ipv6_listener_accepts_and_assumes_the_ipv6_default_mss() {
        for (mss, expected) in [(Some(700), 700), (None, crate::ip::DEFAULT_MSS_V6)] {
            let mut s = stack6();
            s.listen(80);
            s.handle_datagram(SimTime::ZERO, &syn6(80, mss)).unwrap();
            let sent = sent6(&mut s);
            let (ip, flags, _, ack, announced) = sent[0];
            assert_eq!((ip.src, ip.dst), (HOST6, PEER6));
            assert_eq!(flags, TcpFlags(TcpFlags::SYN.0 | TcpFlags::ACK.0));
            assert_eq!(ack, SeqNumber(5001));
            assert_eq!(announced, Some(Profile::linux().mss));
            let id = s.conn_ids()[0];
            let c = s.conn(id).unwrap();
            assert_eq!(c.local(), SocketAddr::new(HOST6.into(), 80));
            assert_eq!(c.remote(), SocketAddr::new(PEER6.into(), 40000));
            assert_eq!(c.send_mss(), expected, "peer MSS {mss:?}");
        }
        // The same SYN without MSS over IPv4 assumes 536.
        let mut s = stack();
        s.listen(80);
        s.handle_datagram(SimTime::ZERO, &syn4()).unwrap();
        let id = s.conn_ids()[0];
        assert_eq!(s.conn(id).unwrap().send_mss(), crate::ip::DEFAULT_MSS);
    }

    #[test]
    fn an_ipv6_connect_sends_a_syn_with_the_mss_and_refuses_ipv4_peers() {
        let mut s = stack6();
        let remote = SocketAddr::new(PEER6.into(), 80);
        let id = s.connect(SimTime::ZERO, remote);
        assert_eq!(s.conn(id).unwrap().remote(), remote);
        let sent = sent6(&mut s);
        assert_eq!(sent.len(), 1);
        let (ip, flags, _, _, mss) = sent[0];
        assert_eq!((ip.src, ip.dst), (HOST6, PEER6));
        assert_eq!((flags, mss), (TcpFlags::SYN, Some(1460)));
        let err = s
            .try_connect(SimTime::ZERO, SocketAddrV4::new(PEER, 80), None)
            .unwrap_err();
        assert!(
            matches!(err, ConnectError::FamilyMismatch { local, .. } if local == IpAddr::V6(HOST6))
        );
        assert!(err.to_string().contains("different families"), "{err}");
        assert_eq!(s.conn_ids(), [id]);
        assert!(stack().try_connect(SimTime::ZERO, remote, None).is_err());
    }

    #[test]
    fn ipv6_and_ipv4_datagrams_reach_only_their_own_stack() {
        // An IPv4 stack ignores an IPv6 SYN and the reverse: neither
        // answers a segment not addressed to it.
        let mut s4 = stack();
        s4.listen(80);
        s4.handle_datagram(SimTime::ZERO, &syn6(80, None)).unwrap();
        assert!(s4.conn_ids().is_empty());
        let mut buf = Vec::new();
        assert_eq!(s4.poll_transmit(SimTime::ZERO, &mut buf), None);
        let mut s6 = stack6();
        s6.listen(80);
        let v4_syn = syn4();
        s6.handle_datagram(SimTime::ZERO, &v4_syn).unwrap();
        assert!(s6.conn_ids().is_empty());
        // Malformed IPv6 is an error naming the field, not a panic.
        let mut bad = syn6(80, None);
        bad[45] ^= 1;
        let e = s6.handle_datagram(SimTime::ZERO, &bad).unwrap_err();
        assert_eq!(e.field, "tcp.checksum");
    }

    /// An IPv4 SYN from the peer to the host, port 80.
    fn syn4() -> Vec<u8> {
        let tcp = TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq: SeqNumber(5000),
            ack: SeqNumber(0),
            flags: TcpFlags::SYN,
            window: 8000,
            urgent: 0,
            options: Default::default(),
            payload: &[],
        };
        let ip = Ipv4Repr {
            src: PEER,
            dst: HOST,
            protocol: protocol::TCP,
            ttl: 64,
            ident: 0,
            dont_fragment: true,
            tos: 0,
            payload_len: 0,
        };
        let mut out = Vec::new();
        emit_tcp(&mut out, &ip, &tcp).unwrap();
        out
    }

    #[test]
    fn handle_ip_takes_a_parsed_ipv4_header_and_parses_only_tcp() {
        let datagram = syn4();
        let ip = ParsedIp::parse(&datagram, true).unwrap();
        assert_eq!(ip.payload(), 20..datagram.len());
        let mut s = stack();
        s.listen(80);
        s.handle_ip(SimTime::ZERO, &ip, &datagram[ip.payload()])
            .unwrap();
        assert_eq!(s.conn_ids().len(), 1);
        let id = s.conn_ids()[0];
        assert_eq!(
            s.conn(id).unwrap().remote(),
            SocketAddr::new(PEER.into(), 40000)
        );
    }

    #[test]
    fn handle_ip_takes_a_parsed_ipv6_header_and_parses_only_tcp() {
        let datagram = syn6(80, Some(1200));
        let ip = ParsedIp::parse(&datagram, true).unwrap();
        assert!(matches!(ip.header, IpRepr::V6(h) if h.src == PEER6 && h.dst == HOST6));
        let mut s = stack6();
        s.listen(80);
        s.handle_ip(SimTime::ZERO, &ip, &datagram[ip.payload()])
            .unwrap();
        assert_eq!(s.conn_ids().len(), 1);
        assert_eq!(s.conn(s.conn_ids()[0]).unwrap().send_mss(), 1200);
    }

    #[test]
    fn handle_ip_refuses_a_tcp_checksum_of_either_family() {
        for (mut datagram, mut s, header_len) in [
            (syn4(), stack(), 20),
            (syn6(80, None), stack6(), ipv6::HEADER_LEN),
        ] {
            s.listen(80);
            // A flipped bit in the TCP header: the IP header still parses.
            datagram[header_len + 4] ^= 0x01;
            let ip = ParsedIp::parse(&datagram, true).unwrap();
            let err = s
                .handle_ip(SimTime::ZERO, &ip, &datagram[ip.payload()])
                .unwrap_err();
            assert_eq!(err.kind, rtolab_wire::WireErrorKind::BadChecksum, "{err}");
            assert_eq!(err.field, "tcp.checksum");
            assert_eq!(err.offset, header_len + 16);
            assert!(s.conn_ids().is_empty());
            // The raw-bytes entry goes the same way.
            assert_eq!(s.handle_datagram(SimTime::ZERO, &datagram), Err(err));
        }
    }

    #[test]
    fn an_ipv4_header_checksum_is_verified_unless_the_sender_parses_it() {
        let mut datagram = syn4();
        datagram[8] -= 1; // the TTL, as a router would, without the checksum
        let err = ParsedIp::parse(&datagram, true).unwrap_err();
        assert_eq!(
            (err.field, err.kind),
            ("ipv4.checksum", rtolab_wire::WireErrorKind::BadChecksum)
        );
        assert!(ParsedIp::parse(&datagram, false).is_ok());
        let mut s = stack();
        s.listen(80);
        assert_eq!(s.handle_datagram(SimTime::ZERO, &datagram), Err(err));
        assert!(s.conn_ids().is_empty());
    }

    #[test]
    fn tcp_in_an_ipv4_fragment_is_refused() {
        let mut datagram = syn4();
        // More fragments, with the header checksum made good again.
        datagram[6] |= 0x20;
        let mut view = rtolab_wire::ipv4::Packet::new_unchecked(&mut datagram[..]);
        view.fill_checksum();
        let ip = ParsedIp::parse(&datagram, true).unwrap();
        assert!(ip.fragment);
        let mut s = stack();
        s.listen(80);
        let err = s.handle_datagram(SimTime::ZERO, &datagram).unwrap_err();
        assert_eq!(err.field, "ipv4.fragment");
        assert!(s.conn_ids().is_empty());
    }
}
