//! The one driver of a node's middleboxes, for the simulator and the
//! emulator alike.
//!
//! A [`MiddleboxChain`] holds one node's middleboxes in order, hands each
//! packet the node receives to them, carries released packets on through
//! the rest of the chain, and reports everything else (passed, held,
//! released, dropped, injected) as [`ChainEvent`]s for the caller to
//! forward, count and free.
//!
//! It is driven in one of two ways:
//!
//! * step by step, by the simulator: each call reports to a [`ChainHost`]
//!   as things happen (so an injected packet is sent before the next
//!   middlebox is called), a released packet continues only when the host
//!   calls [`MiddleboxChain::resume`] (the simulator queues it behind the
//!   work already pending at that instant), and each middlebox is woken on
//!   its own ([`MiddleboxChain::wake`]);
//! * as a whole, by a program on another clock (the real-time emulator):
//!   [`MiddleboxChain::arrive`], [`MiddleboxChain::handle_timeout`] and
//!   [`MiddleboxChain::link_indication`] collect the events in a `Vec`,
//!   carry released packets on at once, and the caller wakes the chain at
//!   [`MiddleboxChain::poll_timeout`].

use std::collections::VecDeque;

use rtolab_time::{SimDuration, SimTime};

use super::{call_hook, Action, AnyMiddlebox, Held, MiddleboxCx};
use crate::link::LinkIndication;
use crate::node::{IfaceId, NodeId};
use crate::pool::{PacketId, PacketPool};
use crate::rng::SimRng;

/// What happened to a packet in a [`MiddleboxChain`]; indices are
/// positions in the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainEvent {
    /// The packet passed every middlebox: forward or deliver it.
    Passed {
        /// The packet.
        packet: PacketId,
        /// The interface it arrived on.
        iface: u32,
    },
    /// A middlebox kept the packet it was handed.
    Held {
        /// The middlebox.
        middlebox: usize,
        /// The packet.
        packet: PacketId,
    },
    /// A middlebox let a held packet go; it continues through the chain.
    Released {
        /// The middlebox.
        middlebox: usize,
        /// The packet.
        packet: PacketId,
        /// How long it was held.
        held: SimDuration,
    },
    /// A middlebox discarded the packet: the caller counts and frees it.
    Dropped {
        /// The middlebox.
        middlebox: usize,
        /// The packet.
        packet: PacketId,
    },
    /// A middlebox built a datagram of its own: the caller sends it from
    /// the node like a local one.
    Injected {
        /// The middlebox.
        middlebox: usize,
        /// The datagram.
        packet: PacketId,
    },
}

/// The caller of a chain driven step by step: it lends the packet pool
/// and carries out each event as the chain reports it.
pub trait ChainHost {
    /// The pool the chain's packets live in.
    fn pool(&mut self) -> &mut PacketPool;
    /// Something happened; events come in the order they happened.
    fn event(&mut self, event: ChainEvent);
    /// Middlebox `middlebox` was called and its events reported; it next
    /// wants to be woken at `deadline`.
    fn called(&mut self, middlebox: usize, deadline: Option<SimTime>) {
        let _ = (middlebox, deadline);
    }
}

/// A host that collects the events, for a chain driven as a whole.
struct Collect<'a> {
    pool: &'a mut PacketPool,
    out: &'a mut Vec<ChainEvent>,
}

impl ChainHost for Collect<'_> {
    fn pool(&mut self) -> &mut PacketPool {
        self.pool
    }
    fn event(&mut self, event: ChainEvent) {
        self.out.push(event);
    }
}

struct Slot {
    name: String,
    middlebox: AnyMiddlebox,
    rng: SimRng,
}

/// One node's middleboxes, in the order packets meet them.
pub struct MiddleboxChain {
    node: NodeId,
    slots: Vec<Slot>,
    actions: Vec<Action>,
    /// Released packets waiting to continue through the chain.
    released: VecDeque<Held>,
}

impl MiddleboxChain {
    /// An empty chain for `node`.
    pub fn new(node: NodeId) -> MiddleboxChain {
        MiddleboxChain {
            node,
            slots: Vec::new(),
            actions: Vec::new(),
            released: VecDeque::new(),
        }
    }

    /// Adds a middlebox after those already there; `rng` is its random
    /// stream (the simulator gives it `middlebox/<name>` of the seed).
    pub fn push(&mut self, name: &str, middlebox: AnyMiddlebox, rng: SimRng) {
        self.slots.push(Slot {
            name: name.to_string(),
            middlebox,
            rng,
        });
    }

    /// Whether the chain has no middlebox.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Number of middleboxes.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Middlebox `i`'s name.
    pub fn name(&self, i: usize) -> &str {
        &self.slots[i].name
    }

    /// Middlebox `i`'s kind and counters.
    pub fn report(&self, i: usize) -> (&'static str, serde_json::Value) {
        let m = &self.slots[i].middlebox;
        (m.kind(), m.stats())
    }

    /// When middlebox `i` next wants to be woken.
    pub fn deadline(&self, i: usize) -> Option<SimTime> {
        self.slots[i].middlebox.poll_timeout()
    }

    /// The earliest deadline of any middlebox.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        self.slots
            .iter()
            .filter_map(|s| s.middlebox.poll_timeout())
            .min()
    }

    /// Per middlebox: its name, kind and counters.
    pub fn stats(&self) -> Vec<(String, &'static str, serde_json::Value)> {
        self.slots
            .iter()
            .map(|s| (s.name.clone(), s.middlebox.kind(), s.middlebox.stats()))
            .collect()
    }

    // ----- driven step by step -----

    /// The node's interface `iface` received `packet` at `now`: the
    /// middleboxes see it in order. Packets released meanwhile wait for
    /// [`MiddleboxChain::resume`].
    pub fn receive(
        &mut self,
        now: SimTime,
        iface: u32,
        packet: PacketId,
        host: &mut impl ChainHost,
    ) {
        let held = Held {
            packet,
            iface: IfaceId {
                node: self.node,
                index: iface,
            },
            next: 0,
            since: now,
        };
        self.walk(now, held, host);
    }

    /// Carries the oldest released packet on through the middleboxes after
    /// the one that held it; false when none is waiting.
    pub fn resume(&mut self, now: SimTime, host: &mut impl ChainHost) -> bool {
        let Some(held) = self.released.pop_front() else {
            return false;
        };
        self.walk(now, held, host);
        true
    }

    /// Wakes middlebox `i`.
    pub fn wake(&mut self, i: usize, now: SimTime, host: &mut impl ChainHost) {
        self.call(i, now, None, host, |m, cx| {
            m.handle_timeout(cx);
            None
        });
    }

    /// Hands middlebox `i` a link layer's indication about interface
    /// `iface`.
    pub fn indicate(
        &mut self,
        i: usize,
        now: SimTime,
        iface: u32,
        indication: LinkIndication,
        host: &mut impl ChainHost,
    ) {
        self.call(i, now, None, host, |m, cx| {
            m.on_link_indication(cx, iface, indication);
            None
        });
    }

    // ----- driven as a whole -----

    /// The node's interface `iface` received `packet` at `now`.
    pub fn arrive(
        &mut self,
        now: SimTime,
        pool: &mut PacketPool,
        iface: u32,
        packet: PacketId,
        out: &mut Vec<ChainEvent>,
    ) {
        let mut host = Collect { pool, out };
        self.receive(now, iface, packet, &mut host);
        while self.resume(now, &mut host) {}
    }

    /// Wakes every middlebox whose deadline is at or before `now`.
    pub fn handle_timeout(
        &mut self,
        now: SimTime,
        pool: &mut PacketPool,
        out: &mut Vec<ChainEvent>,
    ) {
        let mut host = Collect { pool, out };
        for i in 0..self.slots.len() {
            if self.deadline(i).is_some_and(|t| t <= now) {
                self.wake(i, now, &mut host);
                while self.resume(now, &mut host) {}
            }
        }
    }

    /// Hands a link layer's indication about interface `iface` to every
    /// middlebox.
    pub fn link_indication(
        &mut self,
        now: SimTime,
        pool: &mut PacketPool,
        iface: u32,
        indication: LinkIndication,
        out: &mut Vec<ChainEvent>,
    ) {
        let mut host = Collect { pool, out };
        for i in 0..self.slots.len() {
            self.indicate(i, now, iface, indication, &mut host);
            while self.resume(now, &mut host) {}
        }
    }

    /// Takes `held` through the middleboxes from `held.next` on.
    fn walk(&mut self, now: SimTime, mut held: Held, host: &mut impl ChainHost) {
        while (held.next as usize) < self.slots.len() {
            let i = held.next as usize;
            held.next += 1;
            held.since = now;
            let packet = held.packet;
            match self.call(i, now, Some(packet), host, |m, cx| m.on_packet(cx, held)) {
                Some(passed) => held = passed,
                None => return,
            }
        }
        host.event(ChainEvent::Passed {
            packet: held.packet,
            iface: held.iface.index,
        });
    }

    /// Calls middlebox `i` and reports what it asked for, in order: the
    /// packet it was `handed` if it kept it, then its releases, drops and
    /// injections. Returns the packet it passed on, if any.
    fn call(
        &mut self,
        i: usize,
        now: SimTime,
        handed: Option<PacketId>,
        host: &mut impl ChainHost,
        hook: impl FnOnce(&mut AnyMiddlebox, &mut MiddleboxCx<'_>) -> Option<Held>,
    ) -> Option<Held> {
        let slot = &mut self.slots[i];
        let mut actions = std::mem::take(&mut self.actions);
        let cx = MiddleboxCx {
            now,
            pool: host.pool(),
            actions: &mut actions,
            rng: &mut slot.rng,
        };
        let (passed, kept) = call_hook(&mut slot.middlebox, cx, handed, hook);
        if let Some(packet) = kept {
            host.event(ChainEvent::Held {
                middlebox: i,
                packet,
            });
        }
        for action in actions.drain(..) {
            match action {
                Action::Release(held) => {
                    host.event(ChainEvent::Released {
                        middlebox: i,
                        packet: held.packet,
                        held: now.saturating_since(held.since),
                    });
                    self.released.push_back(held);
                }
                Action::Drop(held) => host.event(ChainEvent::Dropped {
                    middlebox: i,
                    packet: held.packet,
                }),
                Action::Inject(packet) => host.event(ChainEvent::Injected {
                    middlebox: i,
                    packet,
                }),
            }
        }
        self.actions = actions;
        host.called(i, self.slots[i].middlebox.poll_timeout());
        passed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::middlebox::{DropListSpec, MiddleboxSpec, PacketFilter, StallSpec};

    /// A stall from 1 s to 2 s holds what arrives then and lets it go at
    /// 2 s, after which it passes the next middlebox (a drop list that
    /// drops the second matching packet).
    #[test]
    fn held_packets_continue_through_the_rest_of_the_chain() {
        let specs = [
            MiddleboxSpec::Stall(StallSpec {
                start: SimDuration::from_secs(1),
                end: SimDuration::from_secs(2),
                filter: PacketFilter::default(),
            }),
            MiddleboxSpec::DropList(DropListSpec {
                drop: vec![2],
                filter: PacketFilter::default(),
            }),
        ];
        let mut chain = MiddleboxChain::new(NodeId(1));
        for (i, spec) in specs.iter().enumerate() {
            chain.push(
                &format!("m{i}"),
                spec.build(),
                crate::rng::component_stream(1, "x"),
            );
        }
        let mut pool = PacketPool::new();
        let mut out = Vec::new();
        let packet = |pool: &mut PacketPool| {
            let id = pool.alloc();
            pool.buf_mut(id).extend_from_slice(&[0x45; 20]);
            id
        };
        let at = |ms| SimTime::ZERO + SimDuration::from_millis(ms);
        let first = packet(&mut pool);
        chain.arrive(at(500), &mut pool, 0, first, &mut out);
        assert_eq!(
            out,
            [ChainEvent::Passed {
                packet: first,
                iface: 0
            }]
        );
        out.clear();
        let second = packet(&mut pool);
        chain.arrive(at(1500), &mut pool, 0, second, &mut out);
        assert_eq!(
            out,
            [ChainEvent::Held {
                middlebox: 0,
                packet: second
            }]
        );
        out.clear();
        let due = chain.poll_timeout().expect("the stall ends");
        assert_eq!(due, at(2000));
        chain.handle_timeout(due, &mut pool, &mut out);
        assert_eq!(
            out,
            [
                ChainEvent::Released {
                    middlebox: 0,
                    packet: second,
                    held: SimDuration::from_millis(500)
                },
                ChainEvent::Dropped {
                    middlebox: 1,
                    packet: second
                },
            ]
        );
        assert_eq!(chain.stats().len(), 2);
    }

    /// Records what a chain driven step by step reports.
    #[derive(Default)]
    struct Recorder {
        pool: PacketPool,
        events: Vec<ChainEvent>,
        called: Vec<(usize, Option<SimTime>)>,
    }

    impl ChainHost for Recorder {
        fn pool(&mut self) -> &mut PacketPool {
            &mut self.pool
        }
        fn event(&mut self, event: ChainEvent) {
            self.events.push(event);
        }
        fn called(&mut self, middlebox: usize, deadline: Option<SimTime>) {
            self.called.push((middlebox, deadline));
        }
    }

    /// Driven step by step, a released packet waits for `resume`, and
    /// every call reports the middlebox's next deadline.
    #[test]
    fn step_by_step_a_released_packet_waits_for_resume() {
        let mut chain = MiddleboxChain::new(NodeId(1));
        let stall = MiddleboxSpec::Stall(StallSpec {
            start: SimDuration::from_secs(1),
            end: SimDuration::from_secs(2),
            filter: PacketFilter::default(),
        });
        chain.push("stall", stall.build(), crate::rng::component_stream(1, "x"));
        let mut host = Recorder::default();
        let packet = host.pool.alloc();
        host.pool.buf_mut(packet).extend_from_slice(&[0x45; 20]);
        let at = |ms| SimTime::ZERO + SimDuration::from_millis(ms);
        chain.receive(at(1500), 0, packet, &mut host);
        assert_eq!(
            host.events,
            [ChainEvent::Held {
                middlebox: 0,
                packet
            }]
        );
        assert_eq!(host.called, [(0, Some(at(2000)))]);
        host.events.clear();
        chain.wake(0, at(2000), &mut host);
        let released = ChainEvent::Released {
            middlebox: 0,
            packet,
            held: SimDuration::from_millis(500),
        };
        // Released but not yet past the chain: the host decides when.
        assert_eq!(host.events, [released]);
        assert!(chain.resume(at(2000), &mut host));
        assert_eq!(
            host.events,
            [released, ChainEvent::Passed { packet, iface: 0 }]
        );
        assert!(!chain.resume(at(2000), &mut host));
        assert_eq!(chain.deadline(0), None);
    }
}
