//! A node's middleboxes driven from outside the simulator.
//!
//! The simulator runs middleboxes inside its own event loop. A program
//! that moves packets on another clock (the real-time emulator) needs the
//! same behaviour without a [`Simulator`](crate::Simulator): a
//! [`MiddleboxChain`] holds one node's middleboxes in order, hands each
//! packet the node receives to them, carries released packets on through
//! the rest of the chain as the simulator does, and reports everything
//! else (passed, held, released, dropped, injected) as [`ChainEvent`]s for
//! the caller to forward, count and free. The caller wakes the chain at
//! [`MiddleboxChain::poll_timeout`].

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

    /// The node's interface `iface` received `packet` at `now`.
    pub fn arrive(
        &mut self,
        now: SimTime,
        pool: &mut PacketPool,
        iface: u32,
        packet: PacketId,
        out: &mut Vec<ChainEvent>,
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
        self.walk(now, pool, held, out);
        self.drain(now, pool, out);
    }

    /// Wakes every middlebox whose deadline is at or before `now`.
    pub fn handle_timeout(
        &mut self,
        now: SimTime,
        pool: &mut PacketPool,
        out: &mut Vec<ChainEvent>,
    ) {
        for i in 0..self.slots.len() {
            if self.slots[i]
                .middlebox
                .poll_timeout()
                .is_some_and(|t| t <= now)
            {
                self.call(i, now, pool, None, out, |m, cx| {
                    m.handle_timeout(cx);
                    None
                });
                self.drain(now, pool, out);
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
        for i in 0..self.slots.len() {
            self.call(i, now, pool, None, out, |m, cx| {
                m.on_link_indication(cx, iface, indication);
                None
            });
            self.drain(now, pool, out);
        }
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

    /// Takes `held` through the middleboxes from `held.next` on.
    fn walk(
        &mut self,
        now: SimTime,
        pool: &mut PacketPool,
        mut held: Held,
        out: &mut Vec<ChainEvent>,
    ) {
        while (held.next as usize) < self.slots.len() {
            let i = held.next as usize;
            held.next += 1;
            held.since = now;
            let packet = held.packet;
            match self.call(i, now, pool, Some(packet), out, |m, cx| {
                m.on_packet(cx, held)
            }) {
                Some(passed) => held = passed,
                None => return,
            }
        }
        out.push(ChainEvent::Passed {
            packet: held.packet,
            iface: held.iface.index,
        });
    }

    /// Carries released packets on, in the order they were released.
    fn drain(&mut self, now: SimTime, pool: &mut PacketPool, out: &mut Vec<ChainEvent>) {
        while let Some(held) = self.released.pop_front() {
            self.walk(now, pool, held, out);
        }
    }

    /// Calls middlebox `i` and records what it asked for. The simulator's
    /// `call_middlebox` does the same through its own event queue.
    fn call(
        &mut self,
        i: usize,
        now: SimTime,
        pool: &mut PacketPool,
        handed: Option<PacketId>,
        out: &mut Vec<ChainEvent>,
        hook: impl FnOnce(&mut AnyMiddlebox, &mut MiddleboxCx<'_>) -> Option<Held>,
    ) -> Option<Held> {
        let slot = &mut self.slots[i];
        let cx = MiddleboxCx {
            now,
            pool,
            actions: &mut self.actions,
            rng: &mut slot.rng,
        };
        let (passed, kept) = call_hook(&mut slot.middlebox, cx, handed, hook);
        if let Some(packet) = kept {
            out.push(ChainEvent::Held {
                middlebox: i,
                packet,
            });
        }
        for action in self.actions.drain(..) {
            match action {
                Action::Release(held) => {
                    out.push(ChainEvent::Released {
                        middlebox: i,
                        packet: held.packet,
                        held: now.saturating_since(held.since),
                    });
                    self.released.push_back(held);
                }
                Action::Drop(held) => out.push(ChainEvent::Dropped {
                    middlebox: i,
                    packet: held.packet,
                }),
                Action::Inject(packet) => out.push(ChainEvent::Injected {
                    middlebox: i,
                    packet,
                }),
            }
        }
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
}
