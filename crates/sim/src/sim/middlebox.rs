//! Middleboxes in a node's forwarding path: handing them packets,
//! carrying out what they ask for, waking them at their deadlines.

use crate::event::Event;
use crate::middlebox::{call_hook, Action as MiddleboxAction, AnyMiddlebox, Held, MiddleboxCx};
use crate::pool::PacketId;
use crate::trace::{DropReason, TraceEvent};

use super::{Simulator, Work};

impl Simulator {
    /// A packet arrived at a node from a link, or was released by one of
    /// its middleboxes: the middleboxes from `next` on see it, then the
    /// node bridges, delivers or forwards it.
    pub(super) fn arrive(&mut self, mut held: Held) {
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

    /// Calls a middlebox, carries out what it asked for, and reschedules
    /// its wakeup; returns the packet `hook` passed on, if any. `handed` is
    /// the packet the call hands it, traced as held if it keeps it without
    /// dropping it.
    pub(super) fn call_middlebox(
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
    pub(super) fn after_middlebox_call(&mut self, middlebox: u32) {
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
}
