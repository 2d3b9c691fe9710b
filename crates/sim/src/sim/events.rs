//! The event loop and the link glue: events pop one at a time, links'
//! outputs are worked off in order, frames that arrive are captured,
//! traced and handed to the node.

use std::sync::atomic::Ordering;
use std::time::Instant;

use rtolab_time::SimTime;

use crate::app::App;
use crate::capture::CaptureDirection;
use crate::event::Event;
use crate::limits::{Stop, StopFlag, CHECK_EVERY};
use crate::link::{Emitted, Frame, LinkIndication, LinkModel, LinkOutput, LinkTrace, UNKNOWN_UID};
use crate::node::{IfaceId, Interface, NodeId};
use crate::pool::PacketId;
use crate::trace::TraceEvent;

use super::{SimError, Simulator, Work};

impl Simulator {
    /// Runs every event up to and including time `end`, then sets the
    /// clock to `end`. Stops at the first output error, or with
    /// [`SimError::Stopped`] when a limit is reached (after the event in
    /// hand is fully handled, so the state and outputs are consistent).
    pub fn run_until(&mut self, end: SimTime) -> Result<(), SimError> {
        // Wall time only decides when a run stops, never what happens in
        // simulated time, so runs stay deterministic up to the stop.
        #[allow(clippy::disallowed_methods)]
        let started = self.limits.max_wall.map(|_| Instant::now());
        if let Some(stop) = self.over_limit(started) {
            return Err(SimError::Stopped { stop, at: self.now });
        }
        let mut popped: u64 = 0;
        let mut next_check = self.check_interval();
        #[cfg(debug_assertions)]
        let watchdog = crate::limits::Watchdog::aborting();
        while let Some((t, event)) = self.queue.pop_until(end) {
            if t == self.now {
                self.same_instant += 1;
                if self.same_instant >= self.limits.stall_events {
                    let what = self.describe(event);
                    let count = self.same_instant;
                    return Err(SimError::Stopped {
                        stop: Stop::Stalled { what, count },
                        at: t,
                    });
                }
            } else {
                self.same_instant = 1;
            }
            self.now = t;
            #[cfg(debug_assertions)]
            watchdog.begin(event);
            if self.dispatch(event) {
                self.events_processed += 1;
            }
            self.settle();
            #[cfg(debug_assertions)]
            watchdog.end();
            if let Some(e) = self.error.take() {
                return Err(e);
            }
            popped += 1;
            if popped >= next_check {
                if let Some(stop) = self.over_limit(started) {
                    return Err(SimError::Stopped { stop, at: self.now });
                }
                next_check = popped + self.check_interval();
            }
        }
        if end != SimTime::MAX {
            self.now = self.now.max(end);
        }
        Ok(())
    }

    /// Events to pop before the limits are checked again: [`CHECK_EVERY`],
    /// or fewer so that `max_events` stops the run exactly. At least one,
    /// since each pop handles at most one event.
    fn check_interval(&self) -> u64 {
        let left = self
            .limits
            .max_events
            .map_or(u64::MAX, |max| max.saturating_sub(self.events_processed));
        left.clamp(1, CHECK_EVERY)
    }

    /// The limit reached, if any.
    fn over_limit(&self, started: Option<Instant>) -> Option<Stop> {
        let limits = &self.limits;
        if limits.stop.as_ref().is_some_and(StopFlag::is_raised) {
            return Some(Stop::Interrupted);
        }
        if let Some(max) = limits.max_events.filter(|&m| self.events_processed >= m) {
            return Some(Stop::MaxEvents(max));
        }
        if let (Some(max), Some(started)) = (limits.max_wall, started) {
            if started.elapsed() >= max {
                return Some(Stop::MaxWall(max));
            }
        }
        let written = self.output_bytes.load(Ordering::Relaxed);
        if let Some(max) = limits.max_output.filter(|&m| written >= m) {
            return Some(Stop::MaxOutput(max));
        }
        None
    }

    /// The component an event belongs to and what it is, for errors.
    fn describe(&self, event: Event) -> String {
        match event {
            Event::LinkWakeup { link, .. } => {
                format!("wakeup of link {:?}", self.links[link as usize].name)
            }
            Event::AppStart { app } => format!("start of app {:?}", self.apps[app as usize].name),
            Event::AppTimer { app, .. } => {
                format!("timer of app {:?}", self.apps[app as usize].name)
            }
            Event::TcpTimer { node, .. } => {
                format!("tcp timer of host {:?}", self.nodes[node as usize].name)
            }
            Event::MiddleboxWakeup { middlebox, .. } => {
                let slot = &self.middleboxes[middlebox as usize];
                let chain = &self.chains[slot.node.0 as usize];
                format!("wakeup of middlebox {:?}", chain.name(slot.index as usize))
            }
        }
    }

    /// Tells every app that the run reached its planned end
    /// ([`App::on_end`](crate::app::App::on_end)); call it once, after
    /// [`Simulator::run_until`] of the whole duration returned `Ok`.
    pub fn end_apps(&mut self) {
        for app in 0..self.apps.len() as u32 {
            self.call_app(app, |a, cx| a.on_end(cx));
        }
        self.settle();
    }

    /// Flushes captures and the trace sink, reporting the first error.
    pub fn finish(&mut self) -> Result<(), SimError> {
        let mut first = None;
        for tap in &mut self.taps {
            if let Err(source) = tap.writer.flush() {
                first.get_or_insert(SimError::Capture {
                    name: tap.name.clone(),
                    source,
                });
            }
        }
        if let Err(e) = self.tracer.flush() {
            first.get_or_insert(SimError::Trace(e));
        }
        first.map_or(Ok(()), Err)
    }

    /// Handles one event; false if it was stale.
    fn dispatch(&mut self, event: Event) -> bool {
        match event {
            Event::LinkWakeup { link, generation } => {
                let slot = &mut self.links[link as usize];
                if slot.generation != generation {
                    return false;
                }
                slot.wakeup = None;
                slot.link.handle_timeout(self.now, &mut self.link_out);
                self.after_link_call(link);
            }
            Event::AppStart { app } => self.call_app(app, |a, cx| a.on_start(cx)),
            Event::AppTimer { app, token } => self.call_app(app, |a, cx| a.on_timer(cx, token)),
            Event::TcpTimer { node, generation } => {
                let host = &mut self.tcp.hosts[node as usize];
                if host.generation != generation {
                    return false;
                }
                host.timer_at = None;
                host.wakeups += 1;
                let name = &self.nodes[node as usize].name;
                self.tcp
                    .with_host(self.now, NodeId(node), name, |stack, cx| stack.timeout(cx));
            }
            Event::MiddleboxWakeup {
                middlebox,
                generation,
            } => {
                let slot = &mut self.middleboxes[middlebox as usize];
                if slot.generation != generation {
                    return false;
                }
                slot.wakeup = None;
                let (node, index, now) = (slot.node, slot.index as usize, self.now);
                self.with_chain(node, |chain, host| chain.wake(index, now, host));
            }
        }
        true
    }

    /// Works off everything the current event caused: link outputs,
    /// deliveries, and TCP output and app callbacks, until nothing is left.
    #[inline]
    fn settle(&mut self) {
        // Many steps leave nothing to do: only those that do pay for the
        // loop's frame.
        if self.work.is_empty() && !self.tcp.has_dirty() {
            return;
        }
        self.settle_pending();
    }

    #[inline(never)]
    fn settle_pending(&mut self) {
        loop {
            self.process_work();
            let Some(node) = self.tcp.next_dirty() else {
                break;
            };
            self.tcp_flush(node);
        }
    }

    fn process_work(&mut self) {
        while let Some(work) = self.work.pop_front() {
            match work {
                Work::Link { link, output } => self.handle_link_output(link, output),
                Work::LinkTrace { link, trace } => self.trace_link(link, trace),
                Work::Loopback { node, packet } => self.loopback(node, packet),
                Work::Released(node) => {
                    let now = self.now;
                    self.with_chain(node, |chain, host| {
                        chain.resume(now, host);
                    });
                }
            }
        }
    }

    /// Queues a link's outputs and makes sure it is woken at its deadline.
    pub(super) fn after_link_call(&mut self, link: u32) {
        let slot = &mut self.links[link as usize];
        if let Some(at) = slot.link.poll_timeout() {
            let sooner = match slot.wakeup {
                None => true,
                Some(pending) => at < pending,
            };
            if sooner {
                slot.generation = slot.generation.wrapping_add(1);
                slot.wakeup = Some(at);
                let generation = slot.generation;
                self.queue
                    .push(at.max(self.now), Event::LinkWakeup { link, generation });
            }
        }
        // Start notices feed only traces and captures: without either they
        // would do nothing, and leaving them out of the work list changes
        // nothing else, as the others keep their order. Trace records come
        // only while a trace listens (the buffer keeps them then).
        let tracing = self.tracer.enabled();
        let ports = &self.links[link as usize].ports;
        let (nodes, work) = (&self.nodes, &mut self.work);
        self.link_out.drain_in_order(|item| match item {
            Emitted::Output(output) => {
                let idle = !tracing
                    && match output {
                        LinkOutput::TxStart { port, .. } => {
                            let iface = ports[port as usize];
                            !nodes[iface.node.0 as usize].interfaces[iface.index as usize].tapped
                        }
                        _ => false,
                    };
                if !idle {
                    work.push_back(Work::Link { link, output });
                }
            }
            Emitted::Trace(trace) => work.push_back(Work::LinkTrace { link, trace }),
        });
    }

    /// Writes a link's trace record out.
    fn trace_link(&mut self, link: u32, record: LinkTrace<PacketId>) {
        let iface = self.links[link as usize].ports[record.port() as usize];
        match record {
            LinkTrace::Enqueued {
                frame, queue_len, ..
            } => {
                trace!(
                    self,
                    TraceEvent::PacketEnqueued {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                        packet: self.pool.uid(frame.packet),
                        len: frame.len,
                        queue_len,
                    }
                );
            }
            LinkTrace::MacAttempt { frame, attempt, .. } => {
                trace!(
                    self,
                    TraceEvent::MacAttempt {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                        packet: self.pool.uid(frame.packet),
                        len: frame.len,
                        attempt,
                    }
                );
            }
            LinkTrace::ParentChanged { parent, rank, .. } => {
                let parent_node =
                    parent.map(|p| self.links[link as usize].ports[p as usize].node.0);
                trace!(
                    self,
                    TraceEvent::ParentChanged {
                        node: iface.node.0,
                        link,
                        parent: parent_node,
                        rank,
                    }
                );
            }
        }
    }

    /// A datagram a link gave back: the packet the sender handed over,
    /// rebuilt. It keeps its uid so that a trace follows it across the
    /// link.
    // Out of line: links that carry frames never give one back, and the
    // match that handles every output stays smaller without it.
    #[inline(never)]
    fn arrived(&mut self, link: u32, iface: IfaceId, datagram: &[u8], uid: u64) {
        let packet = match uid {
            UNKNOWN_UID => self.pool.alloc(),
            uid => self.pool.alloc_as(uid),
        };
        let len = datagram.len() as u32;
        self.pool.buf_mut(packet).extend_from_slice(datagram);
        self.delivered(link, iface, Frame { packet, len });
    }

    fn handle_link_output(&mut self, link: u32, output: LinkOutput<PacketId>) {
        let iface = self.links[link as usize].ports[output.port() as usize];
        match output {
            LinkOutput::TxStart { frame, .. } => self.sent(link, iface, frame),
            LinkOutput::Delivered { frame, .. } => self.delivered(link, iface, frame),
            LinkOutput::Arrived { datagram, uid, .. } => {
                self.arrived(link, iface, &datagram, uid);
            }
            LinkOutput::Consumed { frame, .. } => {
                self.sent(link, iface, frame);
                self.pool.free(frame.packet);
            }
            LinkOutput::Captured {
                direction, psdu, ..
            } => self.capture_frame(iface, direction, &psdu),
            LinkOutput::Dropped { frame, reason, .. } => {
                trace!(
                    self,
                    TraceEvent::PacketDropped {
                        node: iface.node.0,
                        iface: Some(iface.index),
                        link: Some(link),
                        packet: self.pool.uid(frame.packet),
                        len: frame.len,
                        reason,
                    }
                );
                self.pool.free(frame.packet);
            }
            LinkOutput::MediumBusy { until, .. } => {
                self.interface_mut(iface).medium_busy = true;
                trace!(
                    self,
                    TraceEvent::LinkBusy {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                        until_ns: until.as_nanos(),
                    }
                );
            }
            LinkOutput::MediumFree { .. } => {
                self.interface_mut(iface).medium_busy = false;
                trace!(
                    self,
                    TraceEvent::LinkFree {
                        node: iface.node.0,
                        iface: iface.index,
                        link,
                    }
                );
            }
            LinkOutput::Indication { indication, .. } => {
                self.link_indication(iface, link, indication);
            }
        }
    }

    /// A frame leaving `iface`: captured and traced as sent (a link that
    /// consumes the datagram frees it after).
    fn sent(&mut self, link: u32, iface: IfaceId, frame: Frame<PacketId>) {
        self.capture(iface, CaptureDirection::Tx, frame.packet);
        trace!(
            self,
            TraceEvent::PacketSent {
                node: iface.node.0,
                iface: iface.index,
                link,
                packet: self.pool.uid(frame.packet),
                len: frame.len,
            }
        );
    }

    /// A frame arrived intact at `iface`: captured, traced, and handed to
    /// the node's middleboxes or IP layer.
    fn delivered(&mut self, link: u32, iface: IfaceId, frame: Frame<PacketId>) {
        self.capture(iface, CaptureDirection::Rx, frame.packet);
        trace!(
            self,
            TraceEvent::PacketReceived {
                node: iface.node.0,
                iface: iface.index,
                link,
                packet: self.pool.uid(frame.packet),
                len: frame.len,
            }
        );
        if self.chains[iface.node.0 as usize].is_empty() {
            // The common case, kept as direct as before middleboxes.
            self.bridge_or_route(iface, frame.packet);
        } else {
            let now = self.now;
            self.with_chain(iface.node, |chain, host| {
                chain.receive(now, iface.index, frame.packet, host);
            });
        }
    }

    /// Hands a link layer's indication to the node's middleboxes and to its
    /// TCP connections.
    fn link_indication(&mut self, iface: IfaceId, link: u32, indication: LinkIndication) {
        let (rtt_ns, expected_outage_ns) = match indication {
            LinkIndication::GoingDown {
                rtt,
                expected_outage,
            } => (Some(rtt.as_nanos()), Some(expected_outage.as_nanos())),
            _ => (None, None),
        };
        trace!(
            self,
            TraceEvent::LinkIndication {
                node: iface.node.0,
                iface: iface.index,
                link,
                indication: indication.name(),
                rtt_ns,
                expected_outage_ns,
            }
        );
        let now = self.now;
        self.with_chain(iface.node, |chain, host| {
            for i in 0..chain.len() {
                chain.indicate(i, now, iface.index, indication, host);
            }
        });
        let going_down = match indication {
            LinkIndication::GoingDown { .. } => true,
            LinkIndication::Up => false,
            LinkIndication::Gone => return,
        };
        let name = &self.nodes[iface.node.0 as usize].name;
        self.tcp.with_host(self.now, iface.node, name, |stack, cx| {
            stack.link_warning(cx, going_down)
        });
    }

    fn interface_mut(&mut self, iface: IfaceId) -> &mut Interface {
        &mut self.nodes[iface.node.0 as usize].interfaces[iface.index as usize]
    }

    fn capture(&mut self, iface: IfaceId, dir: CaptureDirection, packet: PacketId) {
        if !self.nodes[iface.node.0 as usize].interfaces[iface.index as usize].tapped {
            return;
        }
        let bytes = self.pool.bytes(packet);
        let now = self.now.as_nanos();
        for tap in &mut self.taps {
            if tap.iface != iface || tap.frames || !tap.direction.includes(dir) {
                continue;
            }
            if let Err(source) = tap.writer.write_packet(now, bytes) {
                self.error.get_or_insert(SimError::Capture {
                    name: tap.name.clone(),
                    source,
                });
            }
        }
    }

    /// Writes a link-layer frame to the taps of `iface` that record frames.
    fn capture_frame(&mut self, iface: IfaceId, dir: CaptureDirection, psdu: &[u8]) {
        let now = self.now.as_nanos();
        for tap in &mut self.taps {
            if tap.iface != iface || !tap.frames || !tap.direction.includes(dir) {
                continue;
            }
            if let Err(source) = tap.writer.write_packet(now, psdu) {
                self.error.get_or_insert(SimError::Capture {
                    name: tap.name.clone(),
                    source,
                });
            }
        }
    }
}
