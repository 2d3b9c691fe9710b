//! The transport glue: datagrams for a node go to the app bound to them
//! or to the host's TCP stack, whose output and events it drives.

use rtolab_tcp::ParsedIp;
use rtolab_wire::ipv4::protocol;

use crate::app::{AnyApp, App, AppContext, AppId};
use crate::event::Event;
use crate::node::NodeId;
use crate::pool::PacketId;
use crate::tcp_layer::StackOutput;
use crate::trace::{DropReason, TcpTrace, TraceEvent};

use super::Simulator;

impl Simulator {
    /// Hands a datagram addressed to `node`, whose IP header the node
    /// parsed where it entered as `ip`, to the app bound to it.
    pub(super) fn deliver_local(&mut self, node: NodeId, packet: PacketId, ip: &ParsedIp) {
        // Both families number UDP and TCP alike (17, 6).
        let proto = ip.protocol();
        let has_ports = proto == protocol::UDP || proto == protocol::TCP;
        let port = match &self.pool.bytes(packet)[ip.payload()] {
            [_, _, hi, lo, ..] if has_ports => Some(u16::from_be_bytes([*hi, *lo])),
            _ => None,
        };
        let Some(app) = self.demux[node.0 as usize].lookup(proto, port) else {
            if proto == protocol::TCP && self.tcp.hosts[node.0 as usize].stack.takes_tcp() {
                self.tcp_input(node, packet, ip);
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
    fn tcp_input(&mut self, node: NodeId, packet: PacketId, ip: &ParsedIp) {
        let name = &self.nodes[node.0 as usize].name;
        let datagram = self.pool.bytes(packet);
        let owner = self.tcp.with_host(self.now, node, name, |stack, cx| {
            stack.input_parsed(cx, ip, datagram)
        });
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
            } else if let Some((app, flow, event)) = self.tcp.run.notes.pop_front() {
                self.call_app(app.0, |a, cx| a.on_tcp(cx, flow, event));
                if event.is_final() {
                    let name = &self.nodes[node.0 as usize].name;
                    self.tcp
                        .with_host(self.now, node, name, |stack, cx| stack.finished(cx, flow));
                }
            } else {
                break;
            }
        }
        self.tcp.end_flush(node);
        self.tcp_reschedule(node);
    }

    /// Sends every datagram the host's stack has ready and records its
    /// trace records, in the order the stack hands them over.
    fn tcp_drain(&mut self, node: NodeId) {
        while let Some(output) =
            self.tcp
                .poll_output(self.now, node, &self.nodes[node.0 as usize].name)
        {
            match output {
                StackOutput::Datagram => {
                    let id = self.pool.alloc();
                    // Swap buffers rather than copy: the pool's empty buffer
                    // becomes the next transmit buffer.
                    std::mem::swap(self.pool.buf_mut(id), &mut self.tcp.buf);
                    self.send_local(node, id);
                }
                StackOutput::Trace {
                    time,
                    app,
                    flow,
                    event,
                } => {
                    if self.tracer.enabled() {
                        self.tracer.record(
                            time,
                            TraceEvent::Tcp {
                                node: node.0,
                                app: app.map(|a| a.0),
                                flow: flow.0,
                                detail: TcpTrace(event),
                            },
                        );
                    }
                }
            }
        }
    }

    /// Keeps exactly one live timer event per host, at its stack's next
    /// deadline; a replaced event goes stale and is skipped when it pops.
    fn tcp_reschedule(&mut self, node: NodeId) {
        let host = &mut self.tcp.hosts[node.0 as usize];
        let next = host.stack.next_deadline(self.now);
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
