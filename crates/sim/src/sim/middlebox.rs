//! Middleboxes in a node's forwarding path: the node's
//! [`MiddleboxChain`] drives them, the simulator carries out what they do
//! as it happens and wakes each at its own deadline.

use rtolab_time::SimTime;

use crate::event::Event;
use crate::middlebox::{ChainEvent, ChainHost, MiddleboxChain};
use crate::node::{IfaceId, NodeId};
use crate::pool::PacketPool;
use crate::trace::{DropReason, TraceEvent};

use super::{Simulator, Work};

/// The simulator as the host of one node's chain.
pub(super) struct NodeChain<'a> {
    sim: &'a mut Simulator,
    node: NodeId,
}

impl NodeChain<'_> {
    /// The simulator's number of the node's `i`th middlebox.
    fn id(&self, i: usize) -> u32 {
        self.sim.node_middleboxes[self.node.0 as usize][i]
    }
}

impl ChainHost for NodeChain<'_> {
    fn pool(&mut self) -> &mut PacketPool {
        &mut self.sim.pool
    }

    fn event(&mut self, event: ChainEvent) {
        let node = self.node;
        match event {
            ChainEvent::Passed { packet, iface } => {
                let iface = IfaceId { node, index: iface };
                self.sim.bridge_or_route(iface, packet);
            }
            ChainEvent::Held { middlebox, packet } => {
                let middlebox = self.id(middlebox);
                let sim = &mut *self.sim;
                trace!(
                    sim,
                    TraceEvent::PacketHeld {
                        node: node.0,
                        middlebox,
                        packet: sim.pool.uid(packet),
                    }
                );
            }
            ChainEvent::Released {
                middlebox,
                packet,
                held,
            } => {
                let middlebox = self.id(middlebox);
                let sim = &mut *self.sim;
                trace!(
                    sim,
                    TraceEvent::PacketReleased {
                        node: node.0,
                        middlebox,
                        packet: sim.pool.uid(packet),
                        held_ns: held.as_nanos(),
                    }
                );
                // It goes on behind the work already pending, as a packet
                // arriving now would.
                sim.work.push_back(Work::Released(node));
            }
            ChainEvent::Dropped { packet, .. } => {
                self.sim.drop_at(node, packet, DropReason::Middlebox);
            }
            ChainEvent::Injected { middlebox, packet } => {
                let middlebox = self.id(middlebox);
                let sim = &mut *self.sim;
                trace!(
                    sim,
                    TraceEvent::PacketInjected {
                        node: node.0,
                        middlebox,
                        packet: sim.pool.uid(packet),
                        len: sim.pool.len(packet) as u32,
                    }
                );
                sim.send_local(node, packet);
            }
        }
    }

    fn called(&mut self, middlebox: usize, deadline: Option<SimTime>) {
        let middlebox = self.id(middlebox);
        self.sim.schedule_middlebox(middlebox, deadline);
    }
}

impl Simulator {
    /// Runs `f` on `node`'s middleboxes, which report to the simulator as
    /// things happen.
    pub(super) fn with_chain(
        &mut self,
        node: NodeId,
        f: impl FnOnce(&mut MiddleboxChain, &mut NodeChain<'_>),
    ) {
        // Taken out for the call: what the chain reports never reaches the
        // node's own middleboxes again (they see only packets from links,
        // and released packets wait in the work list).
        let n = node.0 as usize;
        let mut chain = std::mem::replace(&mut self.chains[n], MiddleboxChain::new(node));
        f(&mut chain, &mut NodeChain { sim: self, node });
        self.chains[n] = chain;
    }

    /// Makes sure a middlebox is woken at its deadline.
    pub(super) fn schedule_middlebox(&mut self, middlebox: u32, deadline: Option<SimTime>) {
        let slot = &mut self.middleboxes[middlebox as usize];
        let at = deadline.map(|t| t.max(self.now));
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
