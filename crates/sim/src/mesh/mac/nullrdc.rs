//! nullrdc as Contiki 3.0 has it (core/net/mac/nullrdc.c) with
//! `NULLRDC_802154_AUTOACK`, the variant that waits for the radio's ACK:
//! the radio is always on; each frame is sent once, after the CC2420's own
//! channel check, and a unicast then waits [`ACK_WAIT_TIME`] for its ACK.
//! Retries are CSMA's.

use std::collections::VecDeque;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ieee802154::Address;

use super::framer::{classify, is_broadcast, Incoming, SeqnoHistory};
use super::radio::{CcaTicket, TURNAROUND, TX_NO_START};
use super::rdc::{Burst, Io, OutFrame, RdcNote, RdcStatus};
use super::ticks::{rtimer, RTIMER_SECOND};

/// Wait after a unicast before looking for its ACK, rtimer ticks
/// (`ACK_WAIT_TIME` = `RTIMER_SECOND / 2500`, nullrdc.c): 13 ticks, 397 µs.
pub const ACK_WAIT_TIME: u64 = RTIMER_SECOND / 2500;
/// Wait for an ACK whose start was detected, rtimer ticks
/// (`AFTER_ACK_DETECTED_WAIT_TIME` = `RTIMER_SECOND / 1500`, nullrdc.c):
/// 21 ticks, 641 µs.
pub const AFTER_ACK_DETECTED_WAIT_TIME: u64 = RTIMER_SECOND / 1500;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Cca(CcaTicket),
    NoStart,
    Turnaround,
    OnAir,
    AckWait,
    AckCca(CcaTicket),
    AfterAck,
}

#[derive(Clone, Debug)]
struct Tx {
    dst: Address,
    frame: OutFrame,
    broadcast: bool,
    step: Step,
    at: Option<SimTime>,
}

/// The nullrdc layer of one node.
#[derive(Debug)]
pub(crate) struct NullRdc {
    pan_id: u16,
    me: Address,
    ack_wait: SimDuration,
    after_ack: SimDuration,
    tx: Option<Tx>,
    burst: Option<(Address, VecDeque<OutFrame>)>,
    pending_rx: Option<Vec<u8>>,
    seqnos: SeqnoHistory,
}

impl NullRdc {
    pub fn new(pan_id: u16, me: Address, io: &mut Io) -> Self {
        // init(): the radio is on for good.
        io.radio.on();
        NullRdc {
            pan_id,
            me,
            ack_wait: rtimer(ACK_WAIT_TIME),
            after_ack: rtimer(AFTER_ACK_DETECTED_WAIT_TIME),
            tx: None,
            burst: None,
            pending_rx: None,
            seqnos: SeqnoHistory::default(),
        }
    }

    pub fn busy(&self) -> bool {
        self.tx.is_some() || self.burst.is_some()
    }

    pub fn poll_timeout(&self) -> Option<SimTime> {
        self.tx.as_ref().and_then(|t| t.at)
    }

    /// nullrdc.c `send_list`: frames one after the other until one fails.
    pub fn send_list(&mut self, now: SimTime, burst: Burst, io: &mut Io) {
        self.burst = Some((burst.dst, burst.frames.into()));
        self.next_frame(now, io);
    }

    fn next_frame(&mut self, now: SimTime, io: &mut Io) {
        let Some((dst, frames)) = self.burst.as_mut() else {
            return;
        };
        let dst = *dst;
        let Some(frame) = frames.pop_front() else {
            self.burst = None;
            return self.idle(now, io);
        };
        let broadcast = is_broadcast(dst);
        self.tx = Some(Tx {
            dst,
            frame,
            broadcast,
            step: Step::NoStart,
            at: None,
        });
        if io.radio.receiving() || (!broadcast && self.pending_rx.is_some()) {
            // Receiving, or a frame not read yet that an ACK would be
            // confused with.
            return self.finish(now, RdcStatus::Collision, io);
        }
        let Some(tx) = self.tx.as_mut() else { return };
        if io.radio.ack_busy() {
            tx.at = Some(now + TX_NO_START);
        } else {
            tx.step = Step::Cca(io.radio.cca());
        }
    }

    pub fn handle_timeout(&mut self, now: SimTime, io: &mut Io) {
        let Some(tx) = self.tx.as_mut() else { return };
        if !tx.at.is_some_and(|at| at <= now) {
            return;
        }
        tx.at = None;
        match tx.step {
            Step::NoStart => {
                io.stats.strobes_not_started += 1;
                self.finish(now, RdcStatus::Collision, io);
            }
            Step::Turnaround => {
                io.radio.transmit(tx.frame.psdu.clone());
                io.stats.frames_transmitted += 1;
                tx.step = Step::OnAir;
            }
            Step::AckWait => {
                if io.radio.receiving() || self.pending_rx.is_some() {
                    tx.step = Step::AfterAck;
                    tx.at = Some(now + self.after_ack);
                } else {
                    tx.step = Step::AckCca(io.radio.cca());
                }
            }
            Step::AfterAck => {
                let seq = tx.frame.seq;
                let status = match self.pending_rx.take() {
                    None => RdcStatus::NoAck,
                    Some(p) => match classify(&p, self.pan_id, self.me) {
                        Incoming::Ack(s) if s == seq => {
                            io.stats.acks_received += 1;
                            RdcStatus::Ok
                        }
                        _ => RdcStatus::Collision,
                    },
                };
                self.finish(now, status, io);
            }
            Step::Cca(_) | Step::OnAir | Step::AckCca(_) => {}
        }
    }

    pub fn handle_cca(&mut self, now: SimTime, ticket: CcaTicket, clear: bool, io: &mut Io) {
        let Some(tx) = self.tx.as_mut() else { return };
        match tx.step {
            Step::Cca(t) if t == ticket => {
                if clear {
                    tx.step = Step::Turnaround;
                    tx.at = Some(now + TURNAROUND);
                } else {
                    tx.step = Step::NoStart;
                    tx.at = Some(now + TX_NO_START);
                }
            }
            Step::AckCca(t) if t == ticket => {
                if clear {
                    self.finish(now, RdcStatus::NoAck, io);
                } else {
                    tx.step = Step::AfterAck;
                    tx.at = Some(now + self.after_ack);
                }
            }
            _ => {}
        }
    }

    pub fn handle_tx_done(&mut self, now: SimTime, io: &mut Io) {
        let Some(tx) = self.tx.as_mut() else { return };
        if tx.step != Step::OnAir {
            return;
        }
        io.radio.on();
        if tx.broadcast {
            self.finish(now, RdcStatus::Ok, io);
        } else {
            tx.step = Step::AckWait;
            tx.at = Some(now + self.ack_wait);
        }
    }

    pub fn handle_rx(&mut self, psdu: &[u8], io: &mut Io) {
        if self.busy() {
            if self.pending_rx.is_none() {
                self.pending_rx = Some(psdu.to_vec());
            }
            return;
        }
        self.input(psdu, io);
    }

    /// nullrdc.c `packet_input`.
    fn input(&mut self, psdu: &[u8], io: &mut Io) {
        let Incoming::Data {
            src,
            dst,
            seq,
            payload,
            ..
        } = classify(psdu, self.pan_id, self.me)
        else {
            return;
        };
        io.stats.frames_received += 1;
        if self.seqnos.is_duplicate(src, seq) {
            io.stats.duplicates_dropped += 1;
            return;
        }
        self.seqnos.register(src, seq);
        io.notes.push_back(RdcNote::Input { src, dst, payload });
    }

    fn finish(&mut self, now: SimTime, status: RdcStatus, io: &mut Io) {
        let Some(tx) = self.tx.take() else { return };
        if tx.broadcast {
            io.stats.broadcasts_strobed += 1;
        } else {
            io.stats.unicasts_strobed += 1;
            io.stats.unicast_strobes += 1;
            if status == RdcStatus::Ok {
                io.stats.unicasts_acked += 1;
                io.stats.acked_unicast_strobes += 1;
            }
        }
        io.notes.push_back(RdcNote::Sent {
            dst: tx.dst,
            id: tx.frame.id,
            status,
        });
        if status == RdcStatus::Ok {
            self.next_frame(now, io);
        } else {
            self.burst = None;
            self.idle(now, io);
        }
    }

    fn idle(&mut self, _now: SimTime, io: &mut Io) {
        if let Some(psdu) = self.pending_rx.take() {
            self.input(&psdu, io);
        }
    }
}
