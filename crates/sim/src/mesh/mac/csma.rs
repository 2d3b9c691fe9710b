//! CSMA as Contiki 3.0 has it (core/net/mac/csma.c): a queue per
//! neighbour, each with its own retransmission timer; a packet the RDC
//! reports unacknowledged or collided is sent again after a random backoff
//! that grows with its transmissions, until it has been sent
//! [`CSMA_MAX_MAC_TRANSMISSIONS`](super::config::CSMA_MAX_MAC_TRANSMISSIONS)
//! times (or as configured).
//!
//! Two details of csma.c that shape the traffic are kept: collisions do not
//! count as transmissions (a packet that keeps meeting a busy channel is
//! retried without limit, with the smallest backoff), and after a packet
//! leaves the queue the next one waits one time base before it is sent.

use std::collections::VecDeque;

use rand::Rng;
use rtolab_time::SimTime;
use rtolab_wire::ieee802154::{Address, MAX_PSDU_LEN};

use super::config::CsmaConfig;
use super::framer::{data_frame, psdu_len};
use super::rdc::{Burst, OutFrame, RdcStatus};
use super::ticks::clock;
use super::{MacEvent, MacPacketId, TxStatus};
use crate::event::earliest;
use crate::rng::SimRng;

/// Largest exponent of the backoff window (`CSMA_MAX_BACKOFF_EXPONENT`,
/// csma.c).
pub const CSMA_MAX_BACKOFF_EXPONENT: u32 = 3;

#[derive(Clone, Debug)]
struct Packet {
    id: MacPacketId,
    seq: u8,
    payload: Vec<u8>,
    /// The frame once the RDC has created it (ContikiMAC keeps it, with
    /// the pending bit it was given, for every later transmission).
    psdu: Option<Vec<u8>>,
}

#[derive(Clone, Debug)]
struct Neighbor {
    addr: Address,
    queue: VecDeque<Packet>,
    /// The transmit timer: when, and the order it was set in (ties).
    timer: Option<(SimTime, u64)>,
    transmissions: u32,
    collisions: u32,
}

/// The CSMA layer of one node.
#[derive(Debug)]
pub(crate) struct Csma {
    config: CsmaConfig,
    /// `default_timebase()`, clock ticks.
    timebase: u64,
    seqno: Option<u16>,
    neighbors: Vec<Neighbor>,
    queued: usize,
    next_id: u64,
    timer_order: u64,
}

impl Csma {
    pub fn new(config: CsmaConfig, timebase_ticks: u64) -> Self {
        Csma {
            config,
            timebase: timebase_ticks,
            seqno: None,
            neighbors: Vec::new(),
            queued: 0,
            next_id: 0,
            timer_order: 0,
        }
    }

    fn set_timer(&mut self, i: usize, at: SimTime) {
        self.neighbors[i].timer = Some((at, self.timer_order));
        self.timer_order += 1;
    }

    /// csma.c `send_packet`: queue a packet for `dst`, or say at once why
    /// not.
    pub fn send(
        &mut self,
        now: SimTime,
        me: Address,
        dst: Address,
        payload: Vec<u8>,
        rng: &mut SimRng,
    ) -> (MacPacketId, Option<TxStatus>) {
        let id = MacPacketId(self.next_id);
        self.next_id += 1;
        // The sequence number starts random (802.15.4) and skips 0, which
        // framer-802154.c would take for "none".
        let mut seqno = *self.seqno.get_or_insert_with(|| rng.gen::<u16>());
        if seqno == 0 {
            seqno = 1;
        }
        self.seqno = Some(seqno.wrapping_add(1));
        if psdu_len(me, dst, payload.len()) > MAX_PSDU_LEN {
            // Contiki's framer fails on it (MAC_TX_ERR_FATAL).
            return (id, Some(TxStatus::Err));
        }
        let i = match self.neighbors.iter().position(|n| n.addr == dst) {
            Some(i) => i,
            None if self.neighbors.len() < self.config.neighbor_queues => {
                self.neighbors.push(Neighbor {
                    addr: dst,
                    queue: VecDeque::new(),
                    timer: None,
                    transmissions: 0,
                    collisions: 0,
                });
                self.neighbors.len() - 1
            }
            None => return (id, Some(TxStatus::QueueFull)),
        };
        if self.neighbors[i].queue.len() >= self.config.queue_len
            || self.queued >= self.config.queue_len
        {
            if self.neighbors[i].queue.is_empty() {
                self.neighbors.remove(i);
            }
            return (id, Some(TxStatus::QueueFull));
        }
        self.neighbors[i].queue.push_back(Packet {
            id,
            seq: seqno as u8,
            payload,
            psdu: None,
        });
        self.queued += 1;
        if self.neighbors[i].queue.len() == 1 {
            // The first packet of a queue goes as soon as possible.
            self.set_timer(i, now);
        }
        (id, None)
    }

    pub fn poll_timeout(&self) -> Option<SimTime> {
        self.neighbors
            .iter()
            .fold(None, |min, n| earliest(min, n.timer.map(|(at, _)| at)))
    }

    /// The neighbours whose timers expired by `now`, in expiry order; their
    /// timers are cleared.
    pub fn take_due(&mut self, now: SimTime) -> Vec<Address> {
        let mut due: Vec<(SimTime, u64, Address)> = self
            .neighbors
            .iter()
            .filter_map(|n| match n.timer {
                Some((at, order)) if at <= now => Some((at, order, n.addr)),
                _ => None,
            })
            .collect();
        for n in &mut self.neighbors {
            if n.timer.is_some_and(|(at, _)| at <= now) {
                n.timer = None;
            }
        }
        due.sort();
        due.into_iter().map(|(_, _, a)| a).collect()
    }

    /// csma.c `transmit_packet_list`: the neighbour's whole queue, framed.
    /// `keep_frames`: ContikiMAC frames each packet once, marking all but
    /// the last of the list as pending, and keeps the frame; nullrdc frames
    /// every transmission afresh, without the pending bit.
    pub fn burst(
        &mut self,
        dst: Address,
        me: Address,
        pan_id: u16,
        keep_frames: bool,
    ) -> Option<Burst> {
        let n = self.neighbors.iter_mut().find(|n| n.addr == dst)?;
        let len = n.queue.len();
        let mut frames = Vec::with_capacity(len);
        for (i, p) in n.queue.iter_mut().enumerate() {
            let pending = keep_frames && i + 1 < len;
            let built = match (&p.psdu, keep_frames) {
                (Some(psdu), true) => Some(psdu.clone()),
                _ => data_frame(pan_id, me, dst, p.seq, pending, &p.payload).ok(),
            };
            // The length was checked when the packet was queued.
            let Some(psdu) = built else { continue };
            if keep_frames {
                p.psdu = Some(psdu.clone());
            }
            frames.push(OutFrame {
                id: p.id,
                seq: p.seq,
                pending: psdu_pending(&psdu),
                psdu,
            });
        }
        (!frames.is_empty()).then_some(Burst { dst, frames })
    }

    /// csma.c `packet_sent`: the RDC's result for one frame.
    pub fn packet_sent(
        &mut self,
        now: SimTime,
        dst: Address,
        id: MacPacketId,
        status: RdcStatus,
        rng: &mut SimRng,
    ) -> Option<MacEvent> {
        let i = self.neighbors.iter().position(|n| n.addr == dst)?;
        let n = &mut self.neighbors[i];
        match status {
            RdcStatus::Ok | RdcStatus::NoAck => n.transmissions += 1,
            RdcStatus::Collision => n.collisions += 1,
        }
        let q = n.queue.iter().position(|p| p.id == id)?;
        let transmissions = n.transmissions;
        let retry = match status {
            RdcStatus::Ok => None,
            RdcStatus::NoAck => Some(TxStatus::NoAck),
            RdcStatus::Collision => Some(TxStatus::Collision),
        };
        if let Some(failed) = retry {
            // A random time in [T, T + 2^e T), e the transmissions so far
            // capped at CSMA_MAX_BACKOFF_EXPONENT, T the time base.
            let exponent = transmissions.min(CSMA_MAX_BACKOFF_EXPONENT);
            let window = (1u64 << exponent) * self.timebase;
            let ticks = self.timebase + rng.gen_range(0..window);
            if transmissions < u32::from(self.config.max_transmissions) {
                self.set_timer(i, now + clock(ticks));
                return None;
            }
            self.free_packet(now, i, q);
            return Some(MacEvent::TxOutcome {
                id,
                dst,
                status: failed,
                transmissions,
            });
        }
        self.free_packet(now, i, q);
        Some(MacEvent::TxOutcome {
            id,
            dst,
            status: TxStatus::Ok,
            transmissions,
        })
    }

    /// csma.c `free_packet`.
    fn free_packet(&mut self, now: SimTime, i: usize, q: usize) {
        self.neighbors[i].queue.remove(q);
        self.queued -= 1;
        if self.neighbors[i].queue.is_empty() {
            self.neighbors.remove(i);
        } else {
            let n = &mut self.neighbors[i];
            n.transmissions = 0;
            n.collisions = 0;
            let at = now + clock(self.timebase);
            self.set_timer(i, at);
        }
    }

    /// Packets queued, all neighbours together.
    pub fn queued(&self) -> usize {
        self.queued
    }
}

/// The frame pending bit of a PSDU built by `data_frame`.
fn psdu_pending(psdu: &[u8]) -> bool {
    psdu.first().is_some_and(|fc| fc & 0x10 != 0)
}
