//! Apps the integration tests share: a TCP upload of a given byte string
//! and a listener that keeps every byte it reads.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rtolab_sim::app::{App, AppContext, AppCx, AppStats};
use rtolab_sim::tcp_layer::{FlowId, TcpEvent};

/// Sends `data` over one connection to `peer`, then closes it.
pub struct Upload {
    pub peer: SocketAddr,
    pub data: Vec<u8>,
    pub sent: usize,
    pub heard: Arc<Mutex<Vec<TcpEvent>>>,
}

impl Upload {
    fn push(&mut self, cx: &mut AppContext<'_>, flow: FlowId) {
        while self.sent < self.data.len() {
            match cx.tcp_send(flow, &self.data[self.sent..]) {
                Ok(0) | Err(_) => return,
                Ok(n) => self.sent += n,
            }
        }
        let _ = cx.tcp_close(flow);
    }
}

impl App<AppContext<'_>> for Upload {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        cx.tcp_connect(self.peer).unwrap();
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn on_tcp(&mut self, cx: &mut AppContext<'_>, flow: FlowId, event: TcpEvent) {
        self.heard.lock().unwrap().push(event);
        if matches!(event, TcpEvent::Connected | TcpEvent::Writable) {
            self.push(cx, flow);
        }
    }
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::json!({ "sent": self.sent }))
    }
}

/// Listens on `port`, keeps every byte it reads and closes when the
/// peer does.
pub struct Collect {
    pub port: u16,
    pub got: Arc<Mutex<Vec<u8>>>,
}

impl App<AppContext<'_>> for Collect {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        cx.tcp_listen(self.port).unwrap();
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn on_tcp(&mut self, cx: &mut AppContext<'_>, flow: FlowId, event: TcpEvent) {
        if event == TcpEvent::PeerClosed {
            let _ = cx.tcp_close(flow);
        }
        if event != TcpEvent::Readable {
            return;
        }
        let mut buf = [0u8; 4096];
        let mut got = self.got.lock().unwrap();
        while let Ok(n @ 1..) = cx.tcp_recv(flow, &mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
    }
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::json!({ "received": self.got.lock().unwrap().len() }))
    }
}
