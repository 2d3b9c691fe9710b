//! A few MAC stacks on an ideal shared channel, for the tests: who hears
//! whom is an adjacency matrix; a frame is on the air for
//! `airtime_ns(len)` with no propagation delay; a receiver locks onto a
//! frame that starts while it listens and is idle; any other frame of a
//! neighbour overlapping it at that receiver destroys it; a radio that is
//! off or transmitting receives nothing; a channel check is busy while
//! any neighbour transmits.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ieee802154::{airtime_ns, Address};

use super::{MacConfig, MacEvent, MacPacketId, MacStack, RadioCommand};
use crate::rng::component_stream;

/// Node `i`'s address, in the style of Cooja's Sky motes.
pub fn addr(i: usize) -> Address {
    let b = i as u8 + 1;
    Address::Extended([0x00, 0x12, 0x74, b, 0x00, b, b, b])
}

#[derive(Clone, Debug)]
struct Rx {
    from: usize,
    corrupt: bool,
}

#[derive(Clone, Debug, Default)]
struct Radio {
    on: bool,
    tx: Option<(SimTime, Vec<u8>)>,
    rx: Option<Rx>,
    /// Since when the radio has been on or transmitting.
    active_since: Option<SimTime>,
    active: SimDuration,
}

/// Everything that happened, for the determinism test and diagnosis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trace {
    Command(SimTime, usize, String),
    Event(SimTime, usize, MacEvent),
}

pub struct Testbed {
    pub nodes: Vec<MacStack>,
    adjacent: Vec<Vec<bool>>,
    radios: Vec<Radio>,
    /// Ends of transmissions: (time, order, node).
    ends: BinaryHeap<Reverse<(SimTime, u64, usize)>>,
    order: u64,
    pub now: SimTime,
    pub trace: Vec<Trace>,
    pub events: Vec<Vec<(SimTime, MacEvent)>>,
    /// Transmissions started by each node: (start, PSDU).
    pub transmissions: Vec<Vec<(SimTime, Vec<u8>)>>,
}

impl Testbed {
    /// Nodes booted at `boots[i]`, hearing each other per `adjacent`.
    pub fn new(config: &MacConfig, seed: u64, boots: &[SimTime], adjacent: Vec<Vec<bool>>) -> Self {
        let n = boots.len();
        assert_eq!(adjacent.len(), n);
        let nodes = boots
            .iter()
            .enumerate()
            .map(|(i, &boot)| {
                MacStack::new(
                    config,
                    addr(i),
                    component_stream(seed, &format!("mac/{i}")),
                    boot,
                )
            })
            .collect();
        let mut tb = Testbed {
            nodes,
            adjacent,
            radios: vec![Radio::default(); n],
            ends: BinaryHeap::new(),
            order: 0,
            now: SimTime::ZERO,
            trace: Vec::new(),
            events: vec![Vec::new(); n],
            transmissions: vec![Vec::new(); n],
        };
        for i in 0..n {
            tb.service(i);
        }
        tb
    }

    /// A line of nodes, each hearing its neighbours in the line.
    pub fn line(config: &MacConfig, seed: u64, boots: &[SimTime]) -> Self {
        let n = boots.len();
        let adjacent = (0..n)
            .map(|i| (0..n).map(|j| i.abs_diff(j) == 1).collect())
            .collect();
        Testbed::new(config, seed, boots, adjacent)
    }

    pub fn send(&mut self, from: usize, dst: Address, payload: Vec<u8>) -> MacPacketId {
        let id = self.nodes[from].send(self.now, dst, payload);
        self.service(from);
        id
    }

    /// Nodes `i` and `j` no longer hear each other.
    pub fn cut(&mut self, i: usize, j: usize) {
        self.adjacent[i][j] = false;
        self.adjacent[j][i] = false;
    }

    /// Total time node `i`'s radio has been on (listening or sending).
    pub fn radio_on_time(&self, i: usize) -> SimDuration {
        let r = &self.radios[i];
        r.active + r.active_since.map_or(SimDuration::ZERO, |s| self.now - s)
    }

    pub fn radio_is_on(&self, i: usize) -> bool {
        self.radios[i].on
    }

    /// Runs every event up to and including `end`.
    pub fn run_until(&mut self, end: SimTime) {
        loop {
            let medium = self.ends.peek().map(|Reverse((t, _, _))| *t);
            let timer = (0..self.nodes.len())
                .filter_map(|i| self.nodes[i].poll_timeout().map(|t| (t, i)))
                .min();
            let next = match (medium, timer) {
                (Some(m), Some((t, _))) => m.min(t),
                (Some(m), None) => m,
                (None, Some((t, _))) => t,
                (None, None) => break,
            };
            if next > end {
                break;
            }
            self.now = next;
            if medium == Some(next) {
                let Some(Reverse((_, _, i))) = self.ends.pop() else {
                    break;
                };
                self.end_transmission(i);
            } else if let Some((_, i)) = timer {
                self.nodes[i].handle_timeout(self.now);
                self.service(i);
            }
        }
        self.now = end;
    }

    fn set_active(&mut self, i: usize) {
        let now = self.now;
        let r = &mut self.radios[i];
        let active = r.on || r.tx.is_some();
        match (active, r.active_since) {
            (true, None) => r.active_since = Some(now),
            (false, Some(since)) => {
                r.active += now - since;
                r.active_since = None;
            }
            _ => {}
        }
    }

    fn on_air(&self, i: usize) -> bool {
        self.radios[i].tx.is_some()
    }

    /// Runs node `i`'s commands and collects its events.
    fn service(&mut self, i: usize) {
        loop {
            let mut moved = false;
            while let Some(event) = self.nodes[i].poll_event() {
                self.trace.push(Trace::Event(self.now, i, event.clone()));
                self.events[i].push((self.now, event));
            }
            while let Some(cmd) = self.nodes[i].poll_radio() {
                moved = true;
                let name = match &cmd {
                    RadioCommand::Transmit(p) => format!("tx {p:02x?}"),
                    other => format!("{other:?}"),
                };
                self.trace.push(Trace::Command(self.now, i, name));
                match cmd {
                    RadioCommand::On => {
                        self.radios[i].on = true;
                        self.set_active(i);
                    }
                    RadioCommand::Off => {
                        self.radios[i].on = false;
                        if self.radios[i].rx.take().is_some() {
                            self.nodes[i].handle_rx_failed(self.now);
                        }
                        self.set_active(i);
                    }
                    RadioCommand::Cca => {
                        let busy =
                            (0..self.nodes.len()).any(|j| self.adjacent[i][j] && self.on_air(j));
                        self.nodes[i].handle_cca(self.now, !busy);
                    }
                    RadioCommand::Transmit(psdu) => self.start_transmission(i, psdu),
                }
            }
            if !moved {
                break;
            }
        }
    }

    fn start_transmission(&mut self, i: usize, psdu: Vec<u8>) {
        assert!(self.radios[i].tx.is_none(), "node {i} transmits twice");
        if self.radios[i].rx.take().is_some() {
            self.nodes[i].handle_rx_failed(self.now);
        }
        let end = self.now + SimDuration::from_nanos(airtime_ns(psdu.len()));
        self.transmissions[i].push((self.now, psdu.clone()));
        self.radios[i].tx = Some((end, psdu));
        self.set_active(i);
        self.ends.push(Reverse((end, self.order, i)));
        self.order += 1;
        for j in 0..self.nodes.len() {
            if !self.adjacent[i][j] {
                continue;
            }
            if let Some(rx) = self.radios[j].rx.as_mut() {
                rx.corrupt = true;
                continue;
            }
            if self.radios[j].on && self.radios[j].tx.is_none() {
                // Another neighbour already on the air spoils it from the
                // start.
                let corrupt =
                    (0..self.nodes.len()).any(|k| k != i && self.adjacent[j][k] && self.on_air(k));
                self.radios[j].rx = Some(Rx { from: i, corrupt });
                self.nodes[j].handle_rx_start(self.now);
                self.service(j);
            }
        }
    }

    fn end_transmission(&mut self, i: usize) {
        let Some((_, psdu)) = self.radios[i].tx.take() else {
            return;
        };
        self.set_active(i);
        for j in 0..self.nodes.len() {
            if !self.adjacent[i][j] {
                continue;
            }
            let ours = self.radios[j].rx.as_ref().is_some_and(|rx| rx.from == i);
            if !ours {
                continue;
            }
            let Some(rx) = self.radios[j].rx.take() else {
                continue;
            };
            if rx.corrupt {
                self.nodes[j].handle_rx_failed(self.now);
            } else {
                self.nodes[j].handle_rx(self.now, &psdu);
            }
            self.service(j);
        }
        self.nodes[i].handle_tx_done(self.now);
        self.service(i);
    }
}
