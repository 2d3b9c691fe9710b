//! A host's TCP endpoint: demultiplexes segments by 4-tuple, owns the
//! listeners and answers segments nobody wants with RST.
//!
//! Simulator hosts and the emulator both drive a [`Stack`] with the same
//! call order as a [`Connection`]: `handle_*`, then `poll_transmit` until
//! `None`, then `poll_event` until `None`, then `poll_timeout`.
//!
//! The cost of each call follows the connections it concerns, not how
//! many the stack holds: the stack remembers which connections were touched
//! (handed a segment, a timeout or an application call) and polls only
//! those, and it keeps their deadlines in a heap.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use rtolab_time::SimTime;
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet::{self, emit_tcp, Transport};
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpRepr};
use rtolab_wire::WireError;

use crate::conn::{reset_reply, Connection, Event, State};
use crate::profile::Config;
use crate::trace::TraceLevel;

/// Handle of a connection inside a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

/// First ephemeral port (IANA dynamic range).
pub const EPHEMERAL_START: u16 = 49152;

/// A connection and the stack's bookkeeping of it.
#[derive(Debug)]
struct Slot {
    conn: Connection,
    /// Time of this connection's earliest entry in [`Stack::deadlines`]:
    /// never later than its deadline while it is not on
    /// [`Touched::timer_dirty`].
    registered: Option<SimTime>,
    /// Listed on [`Touched::may_send`].
    may_send: bool,
    /// Listed on [`Touched::may_report`].
    may_report: bool,
    /// Listed on [`Touched::timer_dirty`].
    timer_dirty: bool,
}

impl Slot {
    fn new(conn: Connection) -> Slot {
        Slot {
            conn,
            registered: None,
            may_send: false,
            may_report: false,
            timer_dirty: false,
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
        if !slot.may_send {
            slot.may_send = true;
            insert_sorted(&mut self.may_send, id);
        }
        if !slot.may_report {
            slot.may_report = true;
            insert_sorted(&mut self.may_report, id);
        }
        self.timers_may_move(id, slot);
    }

    fn timers_may_move(&mut self, id: ConnId, slot: &mut Slot) {
        self.settled = false;
        if !slot.timer_dirty {
            slot.timer_dirty = true;
            self.timer_dirty.push(id);
        }
    }
}

/// All TCP connections and listeners of one IPv4 address.
#[derive(Debug)]
pub struct Stack {
    config: Arc<Config>,
    addr: Ipv4Addr,
    seed: u64,
    counter: u64,
    next_id: u32,
    next_port: u16,
    conns: BTreeMap<ConnId, Slot>,
    tuples: BTreeMap<(SocketAddrV4, SocketAddrV4), ConnId>,
    listeners: BTreeMap<u16, VecDeque<ConnId>>,
    passive: BTreeMap<ConnId, u16>,
    resets: VecDeque<Vec<u8>>,
    /// Buffers of sent resets, reused for the next ones.
    spare: Vec<Vec<u8>>,
    events: VecDeque<(ConnId, Event)>,
    closed: BTreeSet<ConnId>,
    cursor: u32,
    ttl: u8,
    touched: Touched,
    /// Deadlines by connection, updated lazily: an entry later found to be
    /// early (the deadline moved on) is replaced when it reaches the top,
    /// and one of a removed connection is dropped then.
    deadlines: BinaryHeap<Reverse<(SimTime, ConnId)>>,
    /// Scratch list of connections whose timers are due.
    due: Vec<ConnId>,
    trace_level: TraceLevel,
}

/// SplitMix64: a small, well-mixed hash for ISNs and per-connection seeds.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Stack {
    /// A stack for `addr`; `seed` makes initial sequence numbers and policy
    /// randomness reproducible.
    pub fn new(config: Arc<Config>, addr: Ipv4Addr, seed: u64) -> Stack {
        let ttl = config.profile.ttl;
        Stack {
            config,
            addr,
            seed,
            counter: 0,
            next_id: 0,
            next_port: EPHEMERAL_START,
            conns: BTreeMap::new(),
            tuples: BTreeMap::new(),
            listeners: BTreeMap::new(),
            passive: BTreeMap::new(),
            resets: VecDeque::new(),
            spare: Vec::new(),
            events: VecDeque::new(),
            closed: BTreeSet::new(),
            cursor: 0,
            ttl,
            touched: Touched {
                may_send: Vec::new(),
                may_report: Vec::new(),
                timer_dirty: Vec::new(),
                settled: true,
            },
            deadlines: BinaryHeap::new(),
            due: Vec::new(),
            trace_level: TraceLevel::All,
        }
    }

    /// The stack's address.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    fn next_seed(&mut self) -> u64 {
        self.counter += 1;
        mix(self.seed ^ mix(self.counter))
    }

    fn insert(&mut self, mut conn: Connection) -> ConnId {
        conn.set_trace_level(self.trace_level);
        let id = ConnId(self.next_id);
        self.next_id += 1;
        self.tuples.insert((conn.local(), conn.remote()), id);
        let slot = self.conns.entry(id).or_insert(Slot::new(conn));
        self.touched.touch(id, slot);
        id
    }

    /// Brings `deadlines` up to date with the touched connections, then
    /// makes its top exact.
    fn sync_timers(&mut self) {
        for id in self.touched.timer_dirty.drain(..) {
            let Some(slot) = self.conns.get_mut(&id) else {
                continue;
            };
            slot.timer_dirty = false;
            if let Some(at) = slot.conn.poll_timeout() {
                // A later deadline keeps the earlier entry, which is fixed
                // once it reaches the top.
                if slot.registered.map_or(true, |r| at < r) {
                    self.deadlines.push(Reverse((at, id)));
                    slot.registered = Some(at);
                }
            }
        }
        while let Some(&Reverse((at, id))) = self.deadlines.peek() {
            let slot = self.conns.get_mut(&id);
            let Some(slot) = slot.filter(|s| s.registered == Some(at)) else {
                // Removed connection, or a superseded entry.
                self.deadlines.pop();
                continue;
            };
            let actual = slot.conn.poll_timeout();
            if actual == Some(at) {
                break;
            }
            self.deadlines.pop();
            slot.registered = actual;
            if let Some(actual) = actual {
                self.deadlines.push(Reverse((actual, id)));
            }
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
        self.listeners.remove(&port);
    }

    /// An established connection that arrived on `port`, if any.
    pub fn accept(&mut self, port: u16) -> Option<ConnId> {
        self.listeners.get_mut(&port)?.pop_front()
    }

    /// Opens a connection to `remote` from an ephemeral port.
    pub fn connect(&mut self, now: SimTime, remote: SocketAddrV4) -> ConnId {
        let mut port = self.next_port;
        while self
            .tuples
            .contains_key(&(SocketAddrV4::new(self.addr, port), remote))
            || self.listeners.contains_key(&port)
        {
            port = port.checked_add(1).unwrap_or(EPHEMERAL_START);
        }
        self.next_port = port.checked_add(1).unwrap_or(EPHEMERAL_START);
        let seed = self.next_seed();
        let local = SocketAddrV4::new(self.addr, port);
        let conn = Connection::connect(
            self.config.clone(),
            now,
            local,
            remote,
            SeqNumber(seed as u32),
            seed,
        );
        self.insert(conn)
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

    /// Forgets a connection (normally once it is closed), returning it.
    pub fn remove(&mut self, id: ConnId) -> Option<Connection> {
        let slot = self.conns.remove(&id)?;
        let conn = slot.conn;
        if self.tuples.get(&(conn.local(), conn.remote())) == Some(&id) {
            self.tuples.remove(&(conn.local(), conn.remote()));
        }
        self.passive.remove(&id);
        if slot.may_send {
            self.touched.may_send.retain(|&x| x != id);
        }
        if slot.may_report {
            self.touched.may_report.retain(|&x| x != id);
        }
        self.sync_timers();
        Some(conn)
    }

    /// Ids of all connections, in creation order.
    pub fn conn_ids(&self) -> Vec<ConnId> {
        self.conns.keys().copied().collect()
    }

    /// Parses a whole IPv4 datagram and processes it if it is TCP for this
    /// address; anything else is ignored. Malformed datagrams are errors.
    pub fn handle_datagram(&mut self, now: SimTime, datagram: &[u8]) -> Result<(), WireError> {
        let parsed = packet::parse(datagram)?;
        if let Transport::Tcp(tcp) = parsed.transport {
            if parsed.ip.dst == self.addr {
                self.handle_segment(now, &parsed.ip, &tcp);
            }
        }
        Ok(())
    }

    /// Processes one TCP segment addressed to this stack.
    pub fn handle_segment(&mut self, now: SimTime, ip: &Ipv4Repr, tcp: &TcpRepr) {
        let local = SocketAddrV4::new(ip.dst, tcp.dst_port);
        let remote = SocketAddrV4::new(ip.src, tcp.src_port);
        if let Some(id) = self.tuples.get(&(local, remote)).copied() {
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
            if let Some(conn) = Connection::accept(
                self.config.clone(),
                now,
                ip,
                tcp,
                SeqNumber(seed as u32),
                seed,
            ) {
                let id = self.insert(conn);
                self.passive.insert(id, tcp.dst_port);
            }
            return;
        }
        // RFC 9293 §3.10.7.1: no connection, answer with RST.
        if let Some(reply) = reset_reply(tcp) {
            let ip_out = Ipv4Repr {
                src: ip.dst,
                dst: ip.src,
                protocol: protocol::TCP,
                ttl: self.ttl,
                ident: 0,
                dont_fragment: true,
                tos: 0,
                payload_len: reply.buffer_len(),
            };
            let mut buf = self.spare.pop().unwrap_or_default();
            if emit_tcp(&mut buf, &ip_out, &reply).is_ok() {
                self.resets.push_back(buf);
            } else {
                self.spare.push(buf);
            }
        }
    }

    /// Fires due timers of every connection.
    pub fn handle_timeout(&mut self, now: SimTime) {
        self.sync_timers();
        let mut due = std::mem::take(&mut self.due);
        while let Some(&Reverse((at, id))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            let slot = self.conns.get_mut(&id);
            let Some(slot) = slot.filter(|s| s.registered == Some(at)) else {
                continue;
            };
            slot.registered = None;
            match slot.conn.poll_timeout() {
                Some(t) if t <= now => due.push(id),
                Some(t) => {
                    slot.registered = Some(t);
                    self.deadlines.push(Reverse((t, id)));
                }
                None => {}
            }
        }
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
            return self.deadlines.peek().map(|&Reverse((at, _))| at);
        }
        // Touched since the heap was brought up to date: ask them all.
        self.conns
            .values()
            .filter_map(|s| s.conn.poll_timeout())
            .min()
    }

    /// The next event of any connection.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<(ConnId, Event)> {
        if self.events.is_empty() {
            // In id order, as a scan of all connections would; untouched
            // connections have no events.
            let mut ids = std::mem::take(&mut self.touched.may_report);
            for &id in &ids {
                let Some(slot) = self.conns.get_mut(&id) else {
                    continue;
                };
                slot.may_report = false;
                let conn = &mut slot.conn;
                while let Some(event) = conn.poll_event() {
                    if event == Event::Connected {
                        if let Some(port) = self.passive.get(&id) {
                            if let Some(queue) = self.listeners.get_mut(port) {
                                queue.push_back(id);
                            }
                        }
                    }
                    self.events.push_back((id, event));
                }
                if conn.is_closed() && self.closed.insert(id) {
                    // A closed connection no longer owns its 4-tuple.
                    if self.tuples.get(&(conn.local(), conn.remote())) == Some(&id) {
                        self.tuples.remove(&(conn.local(), conn.remote()));
                    }
                }
            }
            // Keep the list's allocation.
            ids.clear();
            self.touched.may_report = ids;
        }
        self.events.pop_front()
    }
}
