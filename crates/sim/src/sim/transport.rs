//! The transport glue: datagrams for a node go to the app bound to them
//! or to the host's TCP stack, whose output and events it drives.

use rtolab_time::SimDuration;
use rtolab_wire::ipv4::{self, protocol};
use rtolab_wire::ipv6::{self, Ipv6Repr, Transport6};
use rtolab_wire::packet::{self, Transport};

use crate::app::{AnyApp, App, AppContext, AppId};
use crate::event::Event;
use crate::node::NodeId;
use crate::pool::PacketId;
use crate::smol::is_smoltcp_flow;
use crate::tcp_layer::Drained;
use crate::trace::{DropReason, TcpTrace, TraceEvent};

use super::ip::ip_version;
use super::Simulator;

impl Simulator {
    /// Hands a datagram addressed to `node` to the app bound to it.
    pub(super) fn deliver_local(&mut self, node: NodeId, packet: PacketId) {
        // Both families number UDP and TCP alike (17, 6).
        let key_of = |proto: u8, payload: &[u8]| {
            let has_ports = proto == protocol::UDP || proto == protocol::TCP;
            let port = match payload {
                [_, _, hi, lo, ..] if has_ports => Some(u16::from_be_bytes([*hi, *lo])),
                _ => None,
            };
            (proto, port)
        };
        let bytes = self.pool.bytes(packet);
        let key = if ip_version(bytes) == Some(6) {
            Ipv6Repr::parse(bytes)
                .ok()
                .map(|(ip, payload)| key_of(ip.next_header, payload))
        } else {
            ipv4::Packet::new_checked(bytes)
                .ok()
                .map(|p| key_of(p.protocol(), p.payload()))
        };
        let Some((proto, port)) = key else {
            self.drop_at(node, packet, DropReason::BadHeader);
            return;
        };
        let Some(app) = self.demux[node.0 as usize].lookup(proto, port) else {
            if proto == protocol::TCP && self.tcp.hosts[node.0 as usize].active() {
                self.tcp_input(node, packet);
            } else {
                self.drop_at(node, packet, DropReason::NoListener);
            }
            return;
        };
        self.nodes[node.0 as usize].stats.delivered += 1;
        trace!(
            self,
            TraceEvent::PacketDelivered {
                node: node.0,
                app: Some(app.0),
                packet: self.pool.uid(packet),
                len: self.pool.len(packet) as u32,
            }
        );
        let datagram = self.pool.take(packet);
        self.call_app(app.0, |a, cx| a.on_packet(cx, &datagram));
        self.pool.put_back(packet, datagram);
        self.pool.free(packet);
    }

    /// A TCP datagram for `node` that no raw app bound: hand it to the
    /// host's TCP stack.
    fn tcp_input(&mut self, node: NodeId, packet: PacketId) {
        if let Some(smol) = self.smol[node.0 as usize].as_deref_mut() {
            // smoltcp parses (and checks) the datagram itself.
            smol.input(self.pool.bytes(packet));
            self.tcp.mark(node);
            self.nodes[node.0 as usize].stats.delivered += 1;
            trace!(
                self,
                TraceEvent::PacketDelivered {
                    node: node.0,
                    app: None,
                    packet: self.pool.uid(packet),
                    len: self.pool.len(packet) as u32,
                }
            );
            self.pool.free(packet);
            return;
        }
        let datagram = self.pool.take(packet);
        let name = &self.nodes[node.0 as usize].name;
        let owner = if ip_version(&datagram) == Some(6) {
            match ipv6::parse(&datagram) {
                Ok(ipv6::ParsedPacket6 {
                    ip,
                    transport: Transport6::Tcp(tcp),
                }) => Ok(self.tcp.input(self.now, node, name, &ip, &tcp)),
                _ => Err(()),
            }
        } else {
            match packet::parse(&datagram) {
                Ok(packet::ParsedPacket {
                    ip,
                    transport: Transport::Tcp(tcp),
                }) => Ok(self.tcp.input(self.now, node, name, &ip, &tcp)),
                _ => Err(()),
            }
        };
        self.pool.put_back(packet, datagram);
        let Ok(owner) = owner else {
            self.drop_at(node, packet, DropReason::BadHeader);
            return;
        };
        self.nodes[node.0 as usize].stats.delivered += 1;
        trace!(
            self,
            TraceEvent::PacketDelivered {
                node: node.0,
                app: owner.map(|a| a.0),
                packet: self.pool.uid(packet),
                len: self.pool.len(packet) as u32,
            }
        );
        self.pool.free(packet);
    }

    /// Collects a host's TCP output and events and delivers the app
    /// callbacks they cause, until the host is quiet; then re-arms its
    /// timer.
    pub(super) fn tcp_flush(&mut self, node: NodeId) {
        loop {
            // Output of an app's calls leaves before the next event is
            // delivered, as it would from a real socket.
            if self.tcp.take_dirty(node) {
                self.tcp_drain(node);
            } else if let Some((app, flow, event)) = self.tcp.notes.pop_front() {
                self.call_app(app.0, |a, cx| a.on_tcp(cx, flow, event));
                if event.is_final() && !is_smoltcp_flow(flow) {
                    self.tcp.retire(self.now, flow);
                }
            } else {
                break;
            }
        }
        self.tcp.end_flush(node);
        self.tcp_reschedule(node);
    }

    /// Sends every datagram the host's stacks have ready and collects their
    /// events, in the engine's documented order.
    fn tcp_drain(&mut self, node: NodeId) {
        if let Some(smol) = self.smol[node.0 as usize].as_deref_mut() {
            let sent = smol.poll(self.now, &mut self.tcp.notes);
            // State changes are all smoltcp lets us see of its connections.
            for (app, flow, from, to) in smol.take_state_changes() {
                if self.tracer.enabled() {
                    self.tracer.record(
                        self.now,
                        TraceEvent::Tcp {
                            node: node.0,
                            app: Some(app.0),
                            flow: flow.0,
                            detail: TcpTrace(rtolab_tcp::trace::TraceEvent::State { from, to }),
                        },
                    );
                }
            }
            for datagram in sent {
                let id = self.pool.alloc();
                *self.pool.buf_mut(id) = datagram;
                self.send_local(node, id);
            }
            return;
        }
        let stacks = self.tcp.hosts[node.0 as usize].stack_count();
        for s in 0..stacks {
            while let Some(len) = self.tcp.poll_transmit(self.now, node, s) {
                self.tcp.buf.truncate(len);
                let id = self.pool.alloc();
                // Swap buffers rather than copy: the pool's empty buffer
                // becomes the next transmit buffer.
                std::mem::swap(self.pool.buf_mut(id), &mut self.tcp.buf);
                self.send_local(node, id);
            }
            while let Some(drained) = self.tcp.poll_event(self.now, node, s) {
                if let Drained::Trace { flow, app, trace } = drained {
                    if self.tracer.enabled() {
                        self.tracer.record(
                            trace.time,
                            TraceEvent::Tcp {
                                node: node.0,
                                app: app.map(|a| a.0),
                                flow: flow.0,
                                detail: TcpTrace(trace.event),
                            },
                        );
                    }
                }
            }
        }
    }

    /// Keeps exactly one live timer event per host, at its earliest TCP
    /// deadline; a replaced event goes stale and is skipped when it pops.
    fn tcp_reschedule(&mut self, node: NodeId) {
        let host = &mut self.tcp.hosts[node.0 as usize];
        let next = match self.smol[node.0 as usize].as_deref_mut() {
            // A deadline at `now` right after a poll is smoltcp's
            // microsecond rounding: look again a microsecond later.
            Some(smol) => smol
                .poll_at(self.now)
                .map(|at| at.max(self.now + SimDuration::from_micros(1))),
            None => host.next_deadline(),
        };
        if next == host.timer_at {
            return;
        }
        host.generation = host.generation.wrapping_add(1);
        host.timer_at = next;
        if let Some(at) = next {
            let generation = host.generation;
            self.queue.push(
                at.max(self.now),
                Event::TcpTimer {
                    node: node.0,
                    generation,
                },
            );
        }
    }

    pub(super) fn call_app(
        &mut self,
        app: u32,
        hook: impl FnOnce(&mut AnyApp, &mut AppContext<'_>),
    ) {
        let slot = &mut self.apps[app as usize];
        let node = slot.node;
        let mut cx = AppContext {
            now: self.now,
            app: AppId(app),
            node_id: node,
            node: &self.nodes[node.0 as usize],
            pool: &mut self.pool,
            queue: &mut self.queue,
            outbox: &mut self.outbox,
            demux: &mut self.demux[node.0 as usize],
            tracer: &mut self.tracer,
            rng: &mut slot.rng,
            tcp: &mut self.tcp,
            smol: self.smol[node.0 as usize].as_deref_mut(),
            tcp_config: slot.tcp_config,
            links: &self.links,
        };
        hook(&mut slot.app, &mut cx);
        let mut outbox = std::mem::take(&mut self.outbox);
        for packet in outbox.drain(..) {
            self.send_local(node, packet);
        }
        self.outbox = outbox;
    }
}
