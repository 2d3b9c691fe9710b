//! The MAC stack of Contiki 3.0 for IEEE 802.15.4: CSMA over a radio duty
//! cycling layer, ContikiMAC or nullrdc (docs/mesh.md, "MAC and radio duty
//! cycling").
//!
//! A [`MacStack`] is one node's MAC, a sans-IO state machine: it is told
//! the time with every input and answers with radio commands, events for
//! the layer above, and the instant it next needs to be woken. It never
//! sees the medium; it drives its radio:
//!
//! * it returns [`RadioCommand`]s from [`MacStack::poll_radio`]: `On`,
//!   `Off`, `Cca` (answered through [`MacStack::handle_cca`]) and
//!   `Transmit` (a whole PSDU; [`MacStack::handle_tx_done`] when its last
//!   bit left). Commands take effect at the time of the call that produced
//!   them;
//! * the radio reports [`MacStack::handle_rx_start`] (it locked onto a
//!   frame: the MAC keeps it on), then [`MacStack::handle_rx`] (the frame
//!   arrived intact) or [`MacStack::handle_rx_failed`].
//!
//! Like the CC2420 of the Tmote Sky, the stack acknowledges on its own an
//! intact data frame addressed to it that asks for it, one turnaround
//! (192 µs) after its end, whatever the duty cycling is doing.
//!
//! Above, [`MacStack::send`] queues a packet for a neighbour (or
//! [`BROADCAST`]); [`MacStack::poll_event`] gives every packet's final
//! [`MacEvent::TxOutcome`] (what RPL's ETX is fed from) and each new frame
//! received, [`MacEvent::Received`].
//!
//! Randomness (CSMA's first sequence number and backoffs) comes from the
//! [`SimRng`] given at construction, the node's MAC stream.

pub mod config;
pub mod contikimac;
pub mod csma;
pub mod framer;
pub mod nullrdc;
pub mod radio;
mod rdc;
pub mod ticks;

#[cfg(test)]
mod testbed;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ieee802154::{airtime_ns, ACK_PSDU_LEN, MAX_PSDU_LEN};
pub use rtolab_wire::ieee802154::{Address, BROADCAST};
use serde::Serialize;

pub use config::{ContikiMacConfig, CsmaConfig, MacConfig, NullRdcConfig, RdcConfig};
pub use radio::RadioCommand;

use contikimac::{strobe_time, ContikiMac, CHECK_TIME_TX};
use csma::Csma;
use nullrdc::NullRdc;
use radio::{RadioCtl, TURNAROUND};
use rdc::{Io, RdcNote};
use ticks::{rtimer, CLOCK_SECOND};

use crate::event::earliest;
use crate::rng::SimRng;

// Above the configuration and the layers it configures: how long a hop
// takes follows from both.
impl MacConfig {
    /// The longest one hop takes to deliver a full-sized (127-byte) frame
    /// with one transmission, its ACK included, to a neighbour whose radio
    /// sleeps on this configuration's schedule. CSMA's retransmissions are
    /// not included.
    ///
    /// * ContikiMAC: the sender's `CCA_COUNT_MAX_TX` channel checks
    ///   (`CHECK_TIME_TX`), then a strobe train of at most `STROBE_TIME`
    ///   (a cycle and two wake-up checks), in which the receiver wakes and
    ///   takes a copy, then that copy's airtime, the turnaround and the
    ///   ACK. A phase-locked send (a guard time before the receiver's
    ///   wake-up, at most `MAX_PHASE_STROBE_TIME` of strobes) never takes
    ///   longer. At 8 Hz: 4296 rtimer ticks (131.1 ms) + 4.256 ms +
    ///   0.192 ms + 0.352 ms = 135.9 ms.
    /// * nullrdc: the receiver is always on: the turnaround after the
    ///   channel check, the frame, the turnaround and the ACK (4.99 ms).
    pub fn hop_time(&self) -> SimDuration {
        let frame_and_ack = SimDuration::from_nanos(airtime_ns(MAX_PSDU_LEN))
            + TURNAROUND
            + SimDuration::from_nanos(airtime_ns(ACK_PSDU_LEN));
        match &self.rdc {
            RdcConfig::ContikiMac(c) => {
                rtimer(CHECK_TIME_TX + strobe_time(c.check_rate_hz)) + frame_and_ack
            }
            RdcConfig::NullRdc(_) => TURNAROUND + frame_and_ack,
        }
    }
}

/// A packet handed to [`MacStack::send`], named in its outcome. Only the
/// MAC's own: not the simulator's [`PacketId`](crate::pool::PacketId) of
/// the datagram it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct MacPacketId(pub u64);

/// The final result of a packet (Contiki's `MAC_TX_*` as CSMA reports it
/// upward).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TxStatus {
    /// Acknowledged (a broadcast: sent).
    Ok,
    /// Not acknowledged after the last allowed transmission.
    NoAck,
    /// The last attempt met a busy channel or a frame that was not its ACK.
    /// CSMA retries collisions without limit, so this is only reported when
    /// unacknowledged transmissions used up the limit first.
    Collision,
    /// The packet cannot be framed (too long for a PSDU).
    Err,
    /// No room: the packet queue or the table of neighbour queues is full.
    /// Contiki reports it as `MAC_TX_ERR`.
    QueueFull,
}

/// What the MAC tells the layer above.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MacEvent {
    /// A packet's final result.
    TxOutcome {
        /// The packet, as [`MacStack::send`] named it.
        id: MacPacketId,
        /// Its destination.
        dst: Address,
        /// The result.
        status: TxStatus,
        /// Its transmissions that were acknowledged or not (collisions not
        /// counted, as csma.c counts them); 0 when it was never sent.
        transmissions: u32,
    },
    /// A new data frame for this node or broadcast (duplicates dropped).
    Received {
        /// Sender.
        src: Address,
        /// This node's address or the broadcast address.
        dst: Address,
        /// MAC payload (a 6LoWPAN packet).
        payload: Vec<u8>,
    },
}

/// Counters of one MAC stack.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MacStats {
    /// Packets accepted by [`MacStack::send`].
    pub packets_queued: u64,
    /// Packets refused: queue or neighbour table full.
    pub queue_full: u64,
    /// Final results by status.
    pub packets_ok: u64,
    /// Packets dropped unacknowledged.
    pub packets_no_ack: u64,
    /// Packets dropped on a collision.
    pub packets_collision: u64,
    /// Packets that could not be framed.
    pub packets_err: u64,
    /// Data frames put on the air (every strobe counts).
    pub frames_transmitted: u64,
    /// Strobes the CC2420's channel check kept off the air.
    pub strobes_not_started: u64,
    /// Unicast sends through the RDC (each one a strobe train).
    pub unicasts_strobed: u64,
    /// Strobes of those trains.
    pub unicast_strobes: u64,
    /// Unicast sends acknowledged.
    pub unicasts_acked: u64,
    /// Strobes of the acknowledged ones: strobes per unicast is
    /// `acked_unicast_strobes / unicasts_acked`.
    pub acked_unicast_strobes: u64,
    /// Broadcast sends through the RDC.
    pub broadcasts_strobed: u64,
    /// Sends given up before the first strobe: busy channel.
    pub collisions_before_sending: u64,
    /// Unicasts started at a locked neighbour's phase.
    pub phase_locked_sends: u64,
    /// Of those, the ones not acknowledged.
    pub phase_misses: u64,
    /// Unicasts set aside until a locked neighbour's phase.
    pub phase_deferrals: u64,
    /// Phases forgotten after unacknowledged unicasts.
    pub phases_forgotten: u64,
    /// ACKs this node sent.
    pub acks_sent: u64,
    /// ACKs received for its own frames.
    pub acks_received: u64,
    /// Data frames received for this node or broadcast.
    pub frames_received: u64,
    /// Of those, duplicates dropped.
    pub duplicates_dropped: u64,
    /// ContikiMAC wake-ups.
    pub wakeups: u64,
    /// Channel checks made at wake-ups.
    pub channel_checks: u64,
    /// Wake-ups that found energy and stayed awake.
    pub wakeups_with_energy: u64,
    /// Listening ended by fast sleep.
    pub fast_sleeps: u64,
}

// One per node, built once and never moved around: boxing would only add
// an indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Rdc {
    ContikiMac(ContikiMac),
    NullRdc(NullRdc),
}

/// One node's MAC stack: CSMA over ContikiMAC or nullrdc.
#[derive(Debug)]
pub struct MacStack {
    me: Address,
    pan_id: u16,
    radio: RadioCtl,
    csma: Csma,
    rdc: Rdc,
    rng: SimRng,
    notes: VecDeque<RdcNote>,
    events: VecDeque<MacEvent>,
    /// Neighbour queues due to go to the RDC (their CSMA transmit timer
    /// fired, or phase.c's wait ended). Contiki runs these in its process
    /// context, one at a time, so they wait while the RDC is sending.
    jobs: VecDeque<Address>,
    stats: MacStats,
}

impl MacStack {
    /// The MAC of the node with address `me` (extended, as Contiki with
    /// IPv6 uses), booted at `now`, drawing from `rng`. `config` must have
    /// passed [`MacConfig::validate`].
    pub fn new(config: &MacConfig, me: Address, rng: SimRng, now: SimTime) -> Self {
        let mut radio = RadioCtl::new();
        let mut notes = VecDeque::new();
        let mut stats = MacStats::default();
        let (rdc, timebase) = match &config.rdc {
            RdcConfig::ContikiMac(c) => (
                Rdc::ContikiMac(ContikiMac::new(c, config.pan_id, me, now)),
                contikimac::channel_check_interval(c.check_rate_hz),
            ),
            RdcConfig::NullRdc(c) => {
                let mut io = Io {
                    radio: &mut radio,
                    notes: &mut notes,
                    stats: &mut stats,
                };
                (
                    Rdc::NullRdc(NullRdc::new(config.pan_id, me, &mut io)),
                    // No channel check interval: one period of the
                    // configured rate (csma.c `default_timebase`).
                    CLOCK_SECOND / u64::from(c.check_rate_hz.max(1)),
                )
            }
        };
        MacStack {
            me,
            pan_id: config.pan_id,
            radio,
            csma: Csma::new(config.csma, timebase.max(1)),
            rdc,
            rng,
            notes,
            events: VecDeque::new(),
            jobs: VecDeque::new(),
            stats,
        }
    }

    /// This node's address.
    pub fn address(&self) -> Address {
        self.me
    }

    /// Queues `payload` for `dst` (a neighbour, or [`BROADCAST`]). A packet
    /// refused at once has its [`MacEvent::TxOutcome`] ready immediately.
    pub fn send(&mut self, now: SimTime, dst: Address, payload: Vec<u8>) -> MacPacketId {
        let (id, refused) = self.csma.send(now, self.me, dst, payload, &mut self.rng);
        match refused {
            None => self.stats.packets_queued += 1,
            Some(status) => {
                match status {
                    TxStatus::QueueFull => self.stats.queue_full += 1,
                    _ => self.stats.packets_err += 1,
                }
                self.events.push_back(MacEvent::TxOutcome {
                    id,
                    dst,
                    status,
                    transmissions: 0,
                });
            }
        }
        // The queue's timer fires at `now` through `handle_timeout`, as
        // Contiki's ctimer fires after the sending process yields: packets
        // queued together go out together.
        id
    }

    /// Timers due by `now` fire.
    pub fn handle_timeout(&mut self, now: SimTime) {
        self.run(now);
    }

    /// The answer to the oldest unanswered [`RadioCommand::Cca`].
    pub fn handle_cca(&mut self, now: SimTime, clear: bool) {
        if let Some(ticket) = self.radio.cca_answered() {
            let mut io = Io {
                radio: &mut self.radio,
                notes: &mut self.notes,
                stats: &mut self.stats,
            };
            match &mut self.rdc {
                Rdc::ContikiMac(m) => m.handle_cca(now, ticket, clear, &mut io),
                Rdc::NullRdc(m) => m.handle_cca(now, ticket, clear, &mut io),
            }
        }
        self.run(now);
    }

    /// The last bit of the frame of the last [`RadioCommand::Transmit`]
    /// left.
    pub fn handle_tx_done(&mut self, now: SimTime) {
        let was_ack = self.radio.tx_done();
        if was_ack {
            self.stats.acks_sent = self.radio.acks_sent;
        } else {
            let mut io = Io {
                radio: &mut self.radio,
                notes: &mut self.notes,
                stats: &mut self.stats,
            };
            match &mut self.rdc {
                Rdc::ContikiMac(m) => m.handle_tx_done(now, &mut io),
                Rdc::NullRdc(m) => m.handle_tx_done(now, &mut io),
            }
        }
        self.run(now);
    }

    /// The radio locked onto an incoming frame.
    pub fn handle_rx_start(&mut self, now: SimTime) {
        self.radio.rx_start();
        self.run(now);
    }

    /// The frame being received arrived intact: `psdu` with its FCS.
    pub fn handle_rx(&mut self, now: SimTime, psdu: &[u8]) {
        self.radio.rx_end();
        if let framer::Incoming::Data {
            dst,
            ack_request: true,
            seq,
            ..
        } = framer::classify(psdu, self.pan_id, self.me)
        {
            if dst == self.me {
                self.radio.schedule_ack(now, seq);
            }
        }
        let mut io = Io {
            radio: &mut self.radio,
            notes: &mut self.notes,
            stats: &mut self.stats,
        };
        match &mut self.rdc {
            Rdc::ContikiMac(m) => m.handle_rx(now, psdu, &mut io),
            Rdc::NullRdc(m) => m.handle_rx(psdu, &mut io),
        }
        self.run(now);
    }

    /// The frame being received was lost (collision, too weak, radio
    /// switched).
    pub fn handle_rx_failed(&mut self, now: SimTime) {
        self.radio.rx_end();
        self.run(now);
    }

    /// The next command for the radio.
    pub fn poll_radio(&mut self) -> Option<RadioCommand> {
        self.radio.poll()
    }

    /// The next event for the layer above.
    pub fn poll_event(&mut self) -> Option<MacEvent> {
        self.events.pop_front()
    }

    /// When [`MacStack::handle_timeout`] is next needed.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let rdc = match &self.rdc {
            Rdc::ContikiMac(m) => earliest(m.poll_timeout(), m.next_deferred()),
            Rdc::NullRdc(m) => m.poll_timeout(),
        };
        earliest(
            earliest(self.radio.poll_timeout(), self.csma.poll_timeout()),
            rdc,
        )
    }

    /// The counters.
    pub fn stats(&self) -> &MacStats {
        &self.stats
    }

    /// Packets waiting in CSMA's queues.
    pub fn queued(&self) -> usize {
        self.csma.queued()
    }

    fn rdc_busy(&self) -> bool {
        match &self.rdc {
            Rdc::ContikiMac(m) => m.busy(),
            Rdc::NullRdc(m) => m.busy(),
        }
    }

    /// Fires what is due by `now` and runs queued work until nothing moves.
    fn run(&mut self, now: SimTime) {
        loop {
            let mut moved = false;
            if self.radio.poll_timeout().is_some_and(|at| at <= now) {
                self.radio.handle_timeout(now);
                moved = true;
            }
            let mut io = Io {
                radio: &mut self.radio,
                notes: &mut self.notes,
                stats: &mut self.stats,
            };
            match &mut self.rdc {
                Rdc::ContikiMac(m) => {
                    if m.poll_timeout().is_some_and(|at| at <= now) {
                        m.handle_timeout(now, &mut io);
                        moved = true;
                    }
                }
                Rdc::NullRdc(m) => {
                    if m.poll_timeout().is_some_and(|at| at <= now) {
                        m.handle_timeout(now, &mut io);
                        moved = true;
                    }
                }
            }
            for dst in self.csma.take_due(now) {
                self.jobs.push_back(dst);
                moved = true;
            }
            if let Rdc::ContikiMac(m) = &mut self.rdc {
                for dst in m.take_due_deferred(now) {
                    self.jobs.push_back(dst);
                    moved = true;
                }
            }
            moved |= self.drain_notes(now);
            if !self.rdc_busy() {
                if let Some(job) = self.jobs.pop_front() {
                    self.run_job(now, job);
                    moved = true;
                }
            }
            moved |= self.drain_notes(now);
            if !moved {
                break;
            }
        }
    }

    /// csma.c `transmit_packet_list`: the neighbour's queue to the RDC.
    fn run_job(&mut self, now: SimTime, dst: Address) {
        let keep = matches!(self.rdc, Rdc::ContikiMac(_));
        let Some(burst) = self.csma.burst(dst, self.me, self.pan_id, keep) else {
            return;
        };
        let mut io = Io {
            radio: &mut self.radio,
            notes: &mut self.notes,
            stats: &mut self.stats,
        };
        match &mut self.rdc {
            Rdc::ContikiMac(m) => m.send_list(now, burst, &mut io),
            Rdc::NullRdc(m) => m.send_list(now, burst, &mut io),
        }
    }

    /// Hands the RDC's reports to CSMA and the layer above.
    fn drain_notes(&mut self, now: SimTime) -> bool {
        let mut any = false;
        while let Some(note) = self.notes.pop_front() {
            any = true;
            match note {
                RdcNote::Input { src, dst, payload } => {
                    self.events
                        .push_back(MacEvent::Received { src, dst, payload });
                }
                RdcNote::Sent { dst, id, status } => {
                    if let Some(event) = self.csma.packet_sent(now, dst, id, status, &mut self.rng)
                    {
                        if let MacEvent::TxOutcome { status, .. } = &event {
                            match status {
                                TxStatus::Ok => self.stats.packets_ok += 1,
                                TxStatus::NoAck => self.stats.packets_no_ack += 1,
                                TxStatus::Collision => self.stats.packets_collision += 1,
                                TxStatus::Err | TxStatus::QueueFull => self.stats.packets_err += 1,
                            }
                        }
                        self.events.push_back(event);
                    }
                }
            }
        }
        any
    }
}
