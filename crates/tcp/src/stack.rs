//! A host's TCP endpoint: demultiplexes segments by 4-tuple, owns the
//! listeners and answers segments nobody wants with RST.
//!
//! Simulator hosts and the emulator both drive a [`Stack`] with the same
//! call order as a [`Connection`]: `handle_*`, then `poll_transmit` until
//! `None`, then `poll_event` until `None`, then `poll_timeout`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use rtolab_time::SimTime;
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet::{self, emit_tcp, Transport};
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpRepr};
use rtolab_wire::WireError;

use crate::conn::{reset_reply, Connection, Event, State};
use crate::profile::Config;

/// Handle of a connection inside a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

/// First ephemeral port (IANA dynamic range).
pub const EPHEMERAL_START: u16 = 49152;

/// All TCP connections and listeners of one IPv4 address.
#[derive(Debug)]
pub struct Stack {
    config: Arc<Config>,
    addr: Ipv4Addr,
    seed: u64,
    counter: u64,
    next_id: u32,
    next_port: u16,
    conns: BTreeMap<ConnId, Connection>,
    tuples: BTreeMap<(SocketAddrV4, SocketAddrV4), ConnId>,
    listeners: BTreeMap<u16, VecDeque<ConnId>>,
    passive: BTreeMap<ConnId, u16>,
    resets: VecDeque<Vec<u8>>,
    events: VecDeque<(ConnId, Event)>,
    closed: BTreeSet<ConnId>,
    cursor: u32,
    ttl: u8,
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
            events: VecDeque::new(),
            closed: BTreeSet::new(),
            cursor: 0,
            ttl,
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

    fn insert(&mut self, conn: Connection) -> ConnId {
        let id = ConnId(self.next_id);
        self.next_id += 1;
        self.tuples.insert((conn.local(), conn.remote()), id);
        self.conns.insert(id, conn);
        id
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
        self.conns.get(&id)
    }

    /// The connection `id`, mutably (for send, recv, close, abort).
    pub fn conn_mut(&mut self, id: ConnId) -> Option<&mut Connection> {
        self.conns.get_mut(&id)
    }

    /// Forgets a connection (normally once it is closed), returning it.
    pub fn remove(&mut self, id: ConnId) -> Option<Connection> {
        let conn = self.conns.remove(&id)?;
        if self.tuples.get(&(conn.local(), conn.remote())) == Some(&id) {
            self.tuples.remove(&(conn.local(), conn.remote()));
        }
        self.passive.remove(&id);
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
            if let Some(conn) = self.conns.get_mut(&id) {
                if conn.state() != State::Closed {
                    conn.handle_segment(now, ip, tcp);
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
            let mut buf = Vec::new();
            if emit_tcp(&mut buf, &ip_out, &reply).is_ok() {
                self.resets.push_back(buf);
            }
        }
    }

    /// Fires due timers of every connection.
    pub fn handle_timeout(&mut self, now: SimTime) {
        for conn in self.conns.values_mut() {
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
        }
    }

    /// Writes the next datagram to send into `buf`; connections take turns.
    #[must_use]
    pub fn poll_transmit(&mut self, now: SimTime, buf: &mut Vec<u8>) -> Option<usize> {
        if let Some(datagram) = self.resets.pop_front() {
            buf.clear();
            buf.extend_from_slice(&datagram);
            return Some(buf.len());
        }
        let ids: Vec<ConnId> = self
            .conns
            .range(ConnId(self.cursor)..)
            .chain(self.conns.range(..ConnId(self.cursor)))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(conn) = self.conns.get_mut(&id) {
                if let Some(len) = conn.poll_transmit(now, buf) {
                    self.cursor = id.0.wrapping_add(1);
                    return Some(len);
                }
            }
        }
        None
    }

    /// The earliest deadline of any connection.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<SimTime> {
        self.conns.values().filter_map(|c| c.poll_timeout()).min()
    }

    /// The next event of any connection.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<(ConnId, Event)> {
        if self.events.is_empty() {
            for (&id, conn) in self.conns.iter_mut() {
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
        }
        self.events.pop_front()
    }
}
