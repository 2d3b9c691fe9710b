//! Our engine behind the host-stack seam on an rtolab host of the
//! emulator: one engine [`Stack`] for the host's address, its connections
//! known to the apps by flow ids, and the engine's own counters.

use std::any::Any;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use rtolab_sim::app::AppId;
use rtolab_sim::tcp_layer::{
    BadSegment, FlowId, HostStack, Route, StackCx, StackOutput, TcpConfigId, TcpCounts, TcpError,
    TcpEvent, TcpRun,
};
use rtolab_tcp::{Bytes, Config, ConnId, ConnectError, Connection, Event, Stack, State};
use rtolab_time::SimTime;

/// The connections of a host's apps: the flow ids the apps know them by,
/// the [`ConnId`]s the stack does, and the app owning each.
#[derive(Debug, Default)]
pub(crate) struct Flows {
    /// By flow id: the connection and its app, `None` once it is over.
    pub(crate) slots: Vec<Option<(ConnId, usize)>>,
    by_conn: BTreeMap<ConnId, FlowId>,
}

impl Flows {
    /// A new flow for `conn`, owned by app `app`.
    pub(crate) fn insert(&mut self, conn: ConnId, app: usize) -> FlowId {
        let flow = FlowId(self.slots.len() as u32);
        self.slots.push(Some((conn, app)));
        self.by_conn.insert(conn, flow);
        flow
    }

    /// The flow of connection `conn` and its app, while it is open.
    pub(crate) fn of_conn(&self, conn: ConnId) -> Option<(FlowId, usize)> {
        let flow = *self.by_conn.get(&conn)?;
        let (_, app) = self.slots[flow.0 as usize]?;
        Some((flow, app))
    }

    /// The connection of `flow` if it is an open flow of app `app`.
    pub(crate) fn conn(&self, flow: FlowId, app: usize) -> Result<ConnId, TcpError> {
        match self.slots.get(flow.0 as usize) {
            Some(&Some((conn, owner))) if owner == app => Ok(conn),
            _ => Err(TcpError::UnknownFlow(flow)),
        }
    }

    /// Forgets a flow that is over; its id is never reused.
    pub(crate) fn remove(&mut self, flow: FlowId) {
        if let Some(slot) = self.slots.get_mut(flow.0 as usize) {
            if let Some((conn, _)) = slot.take() {
                self.by_conn.remove(&conn);
            }
        }
    }

    /// The open connections of app `app`.
    pub(crate) fn of_app(&self, app: usize) -> impl Iterator<Item = ConnId> + '_ {
        self.slots
            .iter()
            .flatten()
            .filter(move |(_, owner)| *owner == app)
            .map(|(conn, _)| *conn)
    }
}

/// The engine's event as the apps see it; `None` for traces.
fn tcp_event(event: &Event) -> Option<TcpEvent> {
    Some(match event {
        Event::Connected => TcpEvent::Connected,
        Event::Readable => TcpEvent::Readable,
        Event::Writable => TcpEvent::Writable,
        Event::PeerClosed => TcpEvent::PeerClosed,
        Event::Closed => TcpEvent::Closed,
        Event::Reset => TcpEvent::Reset,
        Event::TimedOut => TcpEvent::TimedOut,
        Event::Trace(_) => return None,
    })
}

/// The engine on an rtolab host: its stack, the apps' flows and listening
/// ports, and the counters of all its connections.
pub(crate) struct EngineHost {
    pub(crate) stack: Stack,
    pub(crate) flows: Flows,
    /// TCP port to the app listening on it.
    listeners: BTreeMap<u16, usize>,
    counts: TcpCounts,
    /// The collection in progress has sent everything; events come next.
    draining_events: bool,
}

impl EngineHost {
    /// A stack at `addr` configured by `config`; `seed` makes its
    /// sequence numbers reproducible.
    pub(crate) fn new(addr: Ipv4Addr, config: Arc<Config>, seed: u64) -> EngineHost {
        EngineHost {
            stack: Stack::new(config, addr, seed),
            flows: Flows::default(),
            listeners: BTreeMap::new(),
            counts: TcpCounts::default(),
            draining_events: false,
        }
    }

    /// A passive open: a new flow of the app listening on its port.
    fn accept(&mut self, conn: ConnId, event: TcpEvent) -> Option<(FlowId, usize)> {
        if event != TcpEvent::Connected {
            return None;
        }
        let c = self.stack.conn(conn).filter(|c| !c.is_active_open())?;
        let port = c.local().port();
        let app = *self.listeners.get(&port)?;
        // The flow is handed to the app directly: keep the accept queue
        // empty.
        let _ = self.stack.accept(port);
        Some((self.flows.insert(conn, app), app))
    }

    fn conn_of(&self, app: AppId, flow: FlowId) -> Result<ConnId, TcpError> {
        self.flows.conn(flow, app.0 as usize)
    }
}

impl HostStack for EngineHost {
    fn takes_tcp(&self) -> bool {
        true
    }

    fn listen(
        &mut self,
        _cx: &mut StackCx<'_>,
        app: AppId,
        _config: Option<TcpConfigId>,
        port: u16,
    ) -> Result<(), TcpError> {
        let app = app.0 as usize;
        match self.listeners.get(&port) {
            Some(&owner) if owner != app => Err(TcpError::PortInUse {
                port,
                owner: AppId(owner as u32),
            }),
            _ => {
                self.listeners.insert(port, app);
                self.stack.listen(port);
                Ok(())
            }
        }
    }

    /// The host has one address: a peer of the other family is
    /// unreachable. The host's link layer is the real one, which tells the
    /// RTO policy nothing about the path.
    fn connect(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        _config: Option<TcpConfigId>,
        remote: SocketAddr,
        port: Option<u16>,
        _route: Route,
    ) -> Result<FlowId, TcpError> {
        let conn = self
            .stack
            .try_connect_from(cx.now(), remote, port, None, |_| true)
            .map_err(|e| match e {
                ConnectError::FamilyMismatch { .. } => TcpError::NoRoute(remote.ip()),
                ConnectError::NoFreePort { .. } => TcpError::NoFreePort(remote),
            })?;
        Ok(self.flows.insert(conn, app.0 as usize))
    }

    fn send(
        &mut self,
        _cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        data: &[u8],
    ) -> Result<usize, TcpError> {
        let conn = self.conn_of(app, flow)?;
        Ok(self
            .stack
            .send(conn, data)
            .ok_or(TcpError::UnknownFlow(flow))??)
    }

    fn send_shared(
        &mut self,
        _cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        data: Bytes,
    ) -> Result<usize, TcpError> {
        let conn = self.conn_of(app, flow)?;
        Ok(self
            .stack
            .send_shared(conn, data)
            .ok_or(TcpError::UnknownFlow(flow))??)
    }

    fn recv(
        &mut self,
        _cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        buf: &mut [u8],
    ) -> Result<usize, TcpError> {
        let conn = self.conn_of(app, flow)?;
        self.stack
            .recv(conn, buf)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    fn close(&mut self, cx: &mut StackCx<'_>, app: AppId, flow: FlowId) -> Result<(), TcpError> {
        let conn = self.conn_of(app, flow)?;
        let c = self.stack.conn_mut(conn);
        c.ok_or(TcpError::UnknownFlow(flow))?.close(cx.now());
        Ok(())
    }

    fn abort(&mut self, cx: &mut StackCx<'_>, app: AppId, flow: FlowId) -> Result<(), TcpError> {
        let conn = self.conn_of(app, flow)?;
        let c = self.stack.conn_mut(conn);
        c.ok_or(TcpError::UnknownFlow(flow))?.abort(cx.now());
        Ok(())
    }

    fn connection(&self, _run: &TcpRun, app: Option<AppId>, flow: FlowId) -> Option<&Connection> {
        let conn = match app {
            Some(app) => self.conn_of(app, flow).ok()?,
            None => self.flows.slots.get(flow.0 as usize).copied().flatten()?.0,
        };
        self.stack.conn(conn)
    }

    fn accepted(&self, _run: &TcpRun, flow: FlowId) -> bool {
        let conn = self.flows.slots.get(flow.0 as usize).copied().flatten();
        conn.and_then(|(c, _)| self.stack.conn(c))
            .is_some_and(|c| !c.is_active_open())
    }

    fn send_capacity(
        &mut self,
        _cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
    ) -> Result<usize, TcpError> {
        let conn = self.conn_of(app, flow)?;
        self.stack
            .conn(conn)
            .map(Connection::send_capacity)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    fn bytes_acked(
        &mut self,
        _cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
    ) -> Result<u64, TcpError> {
        let conn = self.conn_of(app, flow)?;
        self.stack
            .conn(conn)
            .map(|c| c.stats().bytes_acked)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    /// Datagrams of other protocols, or for another address, are ignored.
    fn input(
        &mut self,
        cx: &mut StackCx<'_>,
        datagram: &[u8],
    ) -> Result<Option<AppId>, BadSegment> {
        self.stack.handle_datagram(cx.now(), datagram)?;
        Ok(None)
    }

    fn timeout(&mut self, cx: &mut StackCx<'_>) {
        self.stack.handle_timeout(cx.now());
    }

    /// Every datagram to send, then every event: traces are counted,
    /// app events go to the apps, accepted connections become flows of
    /// the app listening on their port.
    fn poll_output(&mut self, cx: &mut StackCx<'_>, buf: &mut Vec<u8>) -> Option<StackOutput> {
        if !self.draining_events {
            if let Some(len) = self.stack.poll_transmit(cx.now(), buf) {
                buf.truncate(len);
                return Some(StackOutput::Datagram);
            }
            self.draining_events = true;
        }
        while let Some((conn, event)) = self.stack.poll_event() {
            if let Event::Trace(trace) = &event {
                self.counts.record(&trace.event);
                continue;
            }
            let Some(event) = tcp_event(&event) else {
                continue;
            };
            let (flow, owner) = match self.flows.of_conn(conn) {
                Some(known) => known,
                None => match self.accept(conn, event) {
                    Some(accepted) => accepted,
                    None => {
                        if event.is_final() {
                            let _ = self.stack.remove(conn);
                        }
                        continue;
                    }
                },
            };
            cx.notify(AppId(owner as u32), flow, event);
        }
        self.draining_events = false;
        None
    }

    fn next_deadline(&mut self, _now: SimTime) -> Option<SimTime> {
        self.stack.poll_timeout()
    }

    fn finished(&mut self, _cx: &mut StackCx<'_>, flow: FlowId) {
        if let Some(Some((conn, _))) = self.flows.slots.get(flow.0 as usize).copied() {
            self.flows.remove(flow);
            let _ = self.stack.remove(conn);
        }
    }

    fn connections_over(&self, _run: &TcpRun, app: AppId) -> bool {
        self.flows.of_app(app.0 as usize).all(|c| {
            self.stack.conn(c).map_or(true, |c| {
                matches!(c.state(), State::Closed | State::TimeWait)
            })
        })
    }

    fn counts(&self) -> Option<TcpCounts> {
        Some(self.counts)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_map_connections_both_ways_and_check_the_owner() {
        let mut flows = Flows::default();
        let a = flows.insert(ConnId(7), 0);
        let b = flows.insert(ConnId(3), 1);
        assert_eq!((a, b), (FlowId(0), FlowId(1)));
        assert_eq!(flows.of_conn(ConnId(3)), Some((FlowId(1), 1)));
        assert_eq!(flows.conn(a, 0), Ok(ConnId(7)));
        // Another app's flow is unknown to this one.
        assert_eq!(flows.conn(a, 1), Err(TcpError::UnknownFlow(a)));
        assert_eq!(flows.of_app(1).collect::<Vec<_>>(), [ConnId(3)]);
        flows.remove(a);
        assert_eq!(flows.of_conn(ConnId(7)), None);
        assert_eq!(flows.conn(a, 0), Err(TcpError::UnknownFlow(a)));
        // Ids are not reused.
        assert_eq!(flows.insert(ConnId(7), 0), FlowId(2));
    }
}
