//! ContikiMAC as Contiki 3.0 has it (core/net/mac/contikimac/contikimac.c,
//! with the phase lock of core/net/mac/phase.c).
//!
//! **Receiving.** Every cycle the node wakes and makes up to
//! [`CCA_COUNT_MAX`] channel checks, [`CCA_SLEEP_TIME`] apart, each with the
//! radio on for [`CCA_CHECK_TIME`]. Energy on the channel keeps it awake:
//! every [`CCA_CHECK_TIME`] + [`CCA_SLEEP_TIME`] it checks again, and sleeps
//! after more than [`MAX_SILENCE_PERIODS`] clear checks in a row, after
//! [`MAX_NONACTIVITY_PERIODS`] checks without a frame being received (fast
//! sleep), or after [`LISTEN_TIME_AFTER_PACKET_DETECTED`]. A frame received
//! puts it to sleep at once (unless its frame pending bit announces more).
//!
//! **Sending.** A frame is sent after [`CCA_COUNT_MAX_TX`] clear channel
//! checks (a busy one is a collision, left to CSMA), then repeated
//! ("strobed") back to back, [`INTER_PACKET_INTERVAL`] apart, for up to
//! `STROBE_TIME` ([`strobe_time`]): a unicast until its ACK arrives, a broadcast for the
//! whole time. A sender that has had a unicast acknowledged remembers when
//! (the receiver's phase) and next time starts [`GUARD_TIME`] before the
//! receiver is expected to wake, strobing for at most
//! [`MAX_PHASE_STROBE_TIME`].

use std::collections::{BTreeMap, VecDeque};

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ieee802154::Address;

use super::framer::{classify, is_broadcast, Incoming, SeqnoHistory};
use super::radio::{CcaTicket, RSSI_VALID, TURNAROUND, TX_NO_START};
use super::rdc::{Burst, Io, OutFrame, RdcNote, RdcStatus};
use super::ticks::{clock, rtimer, whole_clock_ticks, CLOCK_SECOND, RTIMER_SECOND};
use crate::event::earliest;
use crate::mesh::mac::config::ContikiMacConfig;

/// Channel checks per wake-up (`CCA_COUNT_MAX`, contikimac.c).
pub const CCA_COUNT_MAX: u64 = 2;
/// Clear channel checks before sending (`CCA_COUNT_MAX_TX`, contikimac.c).
pub const CCA_COUNT_MAX_TX: u64 = 6;
/// Radio-on time of one channel check, rtimer ticks
/// (`CCA_CHECK_TIME` = `RTIMER_ARCH_SECOND / 8192`, contikimac.c): 4 ticks,
/// 122 µs.
pub const CCA_CHECK_TIME: u64 = RTIMER_SECOND / 8192;
/// Sleep between two channel checks, rtimer ticks (`CCA_SLEEP_TIME` =
/// `RTIMER_ARCH_SECOND / 2000`, contikimac.c, the rtimer being faster than
/// 8 kHz): 16 ticks, 488 µs.
pub const CCA_SLEEP_TIME: u64 = RTIMER_SECOND / 2000;
/// One wake-up's checks, rtimer ticks (`CHECK_TIME`, contikimac.c): 40 ticks.
pub const CHECK_TIME: u64 = CCA_COUNT_MAX * (CCA_CHECK_TIME + CCA_SLEEP_TIME);
/// The checks before sending, rtimer ticks (`CHECK_TIME_TX`, contikimac.c):
/// 120 ticks.
pub const CHECK_TIME_TX: u64 = CCA_COUNT_MAX_TX * (CCA_CHECK_TIME + CCA_SLEEP_TIME);
/// Longest stay awake after energy was detected, rtimer ticks
/// (`LISTEN_TIME_AFTER_PACKET_DETECTED` = `RTIMER_ARCH_SECOND / 80`,
/// contikimac.c): 409 ticks, 12.5 ms.
pub const LISTEN_TIME_AFTER_PACKET_DETECTED: u64 = RTIMER_SECOND / 80;
/// Clear checks in a row, beyond which a listening node sleeps
/// (`MAX_SILENCE_PERIODS`, contikimac.c).
pub const MAX_SILENCE_PERIODS: u32 = 5;
/// Checks without a frame, beyond which a listening node sleeps
/// (`MAX_NONACTIVITY_PERIODS`, contikimac.c; `WITH_FAST_SLEEP` 1).
pub const MAX_NONACTIVITY_PERIODS: u32 = 10;
/// How long before a locked neighbour's expected wake-up strobing starts,
/// rtimer ticks (`GUARD_TIME` = `10 * CHECK_TIME + CHECK_TIME_TX`,
/// contikimac.c): 520 ticks, 15.9 ms.
pub const GUARD_TIME: u64 = 10 * CHECK_TIME + CHECK_TIME_TX;
/// Gap after each strobe, rtimer ticks (`INTER_PACKET_INTERVAL` =
/// `RTIMER_ARCH_SECOND / 2500`, contikimac.c): 13 ticks, 397 µs.
pub const INTER_PACKET_INTERVAL: u64 = RTIMER_SECOND / 2500;
/// Wait for an ACK whose start was detected, rtimer ticks
/// (`AFTER_ACK_DETECTECT_WAIT_TIME` = `RTIMER_ARCH_SECOND / 1500`,
/// contikimac.c): 21 ticks, 641 µs.
pub const AFTER_ACK_DETECTECT_WAIT_TIME: u64 = RTIMER_SECOND / 1500;
/// Longest strobing to a locked (or already awake) neighbour, rtimer ticks
/// (`MAX_PHASE_STROBE_TIME` = `RTIMER_ARCH_SECOND / 60`, contikimac.c):
/// 546 ticks, 16.7 ms.
pub const MAX_PHASE_STROBE_TIME: u64 = RTIMER_SECOND / 60;
/// How long a receiver of a burst waits for its next frame, clock ticks
/// (`INTER_PACKET_DEADLINE` = `CLOCK_SECOND / 32`, contikimac.c): 31.25 ms.
pub const INTER_PACKET_DEADLINE: u64 = CLOCK_SECOND / 32;
/// Channel check rate from which contikimac.c turns the phase lock off.
pub const PHASE_OPTIMIZATION_MAX_RATE: u32 = 64;
/// A wait for a locked neighbour longer than this many clock ticks is
/// spent with the packet set aside (`PHASE_DEFER_THRESHOLD`, phase.c).
pub const PHASE_DEFER_THRESHOLD: u64 = 1;
/// Packets set aside at once (`PHASE_QUEUESIZE`, phase.c).
pub const PHASE_QUEUESIZE: usize = 8;
/// Unacknowledged unicasts after which a phase is forgotten (`MAX_NOACKS`,
/// phase.c).
pub const MAX_NOACKS: u32 = 16;
/// Time from the first unacknowledged unicast after which the next one
/// forgets the phase, clock ticks (`MAX_NOACKS_TIME` = `CLOCK_SECOND * 30`,
/// phase.c).
pub const MAX_NOACKS_TIME: u64 = CLOCK_SECOND * 30;

/// `CYCLE_TIME` (`RTIMER_ARCH_SECOND / NETSTACK_RDC_CHANNEL_CHECK_RATE`,
/// contikimac.c), rtimer ticks.
pub const fn cycle_time(check_rate_hz: u32) -> u64 {
    RTIMER_SECOND / check_rate_hz as u64
}

/// `STROBE_TIME` (`CYCLE_TIME + 2 * CHECK_TIME`, contikimac.c), rtimer ticks.
pub const fn strobe_time(check_rate_hz: u32) -> u64 {
    cycle_time(check_rate_hz) + 2 * CHECK_TIME
}

/// ContikiMAC's channel check interval in clock ticks, which CSMA uses as
/// its retransmission time base (contikimac.c `duty_cycle`).
pub const fn channel_check_interval(check_rate_hz: u32) -> u64 {
    CLOCK_SECOND * cycle_time(check_rate_hz) / RTIMER_SECOND
}

/// The constants as durations.
#[derive(Clone, Copy, Debug)]
struct Timing {
    cycle: SimDuration,
    cca_check: SimDuration,
    cca_sleep: SimDuration,
    period: SimDuration,
    listen: SimDuration,
    /// `CYCLE_TIME - CHECK_TIME * 4`: a cycle that ran past this starts the
    /// next one at once.
    cycle_margin: SimDuration,
    strobe: SimDuration,
    guard: SimDuration,
    inter_packet: SimDuration,
    after_ack: SimDuration,
    max_phase_strobe: SimDuration,
    burst_deadline: SimDuration,
    max_noacks_time: SimDuration,
}

impl Timing {
    fn new(rate: u32) -> Self {
        Timing {
            cycle: rtimer(cycle_time(rate)),
            cca_check: rtimer(CCA_CHECK_TIME),
            cca_sleep: rtimer(CCA_SLEEP_TIME),
            period: rtimer(CCA_CHECK_TIME + CCA_SLEEP_TIME),
            listen: rtimer(LISTEN_TIME_AFTER_PACKET_DETECTED),
            cycle_margin: rtimer(cycle_time(rate) - 4 * CHECK_TIME),
            strobe: rtimer(strobe_time(rate)),
            guard: rtimer(GUARD_TIME),
            inter_packet: rtimer(INTER_PACKET_INTERVAL),
            after_ack: rtimer(AFTER_ACK_DETECTECT_WAIT_TIME),
            max_phase_strobe: rtimer(MAX_PHASE_STROBE_TIME),
            burst_deadline: clock(INTER_PACKET_DEADLINE),
            max_noacks_time: clock(MAX_NOACKS_TIME),
        }
    }
}

/// The power cycle (contikimac.c `powercycle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pc {
    /// Until the next wake-up.
    Sleep,
    /// Radio on for a channel check.
    CcaSettle { count: u64 },
    /// Waiting for the check's answer.
    CcaWait { count: u64, ticket: CcaTicket },
    /// Radio off between two checks.
    CcaSleep { count: u64 },
    /// Energy seen: listening, checking every period.
    Listen {
        start: SimTime,
        base: SimTime,
        periods: u32,
        silence: u32,
        ticket: Option<CcaTicket>,
    },
}

/// One neighbour's phase (phase.c `struct phase`).
#[derive(Clone, Copy, Debug)]
struct Phase {
    time: SimTime,
    noacks: u32,
    noacks_since: SimTime,
}

/// The steps of sending one frame (contikimac.c `send_packet`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Waiting for a locked neighbour's expected wake-up (phase.c's busy
    /// wait).
    PhaseWait,
    CcaSettle(u64),
    CcaWait(u64, CcaTicket),
    CcaSleep(u64),
    /// Radio switched on by the CC2420's transmit, settling.
    Rssi,
    /// The CC2420's own channel check before a strobe (`STXONCCA`).
    StrobeCca(CcaTicket),
    Turnaround,
    OnAir,
    /// The channel was busy: the strobe did not start.
    NoStart,
    InterPacket,
    AckCca(CcaTicket),
    AckWait,
}

#[derive(Clone, Debug)]
struct Tx {
    dst: Address,
    frame: OutFrame,
    broadcast: bool,
    awake: bool,
    known: bool,
    step: Step,
    at: Option<SimTime>,
    t0: SimTime,
    txtime: SimTime,
    radio_was_on: bool,
    strobes: u64,
    got_ack: bool,
    collisions: u32,
    encounter: Option<SimTime>,
}

/// The ContikiMAC layer of one node.
#[derive(Debug)]
pub(crate) struct ContikiMac {
    t: Timing,
    phase_optimization: bool,
    pan_id: u16,
    me: Address,
    cycle_start: SimTime,
    pc: Pc,
    pc_at: Option<SimTime>,
    /// `we_are_sending`.
    sending: bool,
    tx: Option<Tx>,
    /// The rest of the burst being sent.
    burst: Option<(Address, VecDeque<OutFrame>)>,
    /// A frame received while the sender blocks the stack (the radio's
    /// receive buffer).
    pending_rx: Option<Vec<u8>>,
    /// `we_are_receiving_burst`, with its deadline.
    burst_rx: Option<SimTime>,
    phases: BTreeMap<Address, Phase>,
    /// Neighbours whose queues phase.c set aside, and until when.
    deferred: Vec<(SimTime, Address)>,
    seqnos: SeqnoHistory,
}

enum PhaseWait {
    Unknown,
    Deferred(SimTime),
    SendAt(SimTime),
}

impl ContikiMac {
    pub fn new(config: &ContikiMacConfig, pan_id: u16, me: Address, now: SimTime) -> Self {
        let t = Timing::new(config.check_rate_hz);
        // init() sets the first wake-up one cycle after boot; the loop's
        // first `cycle_start += CYCLE_TIME` starts from that instant.
        let first = now + t.cycle;
        ContikiMac {
            t,
            phase_optimization: config.phase_optimization
                && config.check_rate_hz < PHASE_OPTIMIZATION_MAX_RATE,
            pan_id,
            me,
            cycle_start: first,
            pc: Pc::Sleep,
            pc_at: Some(first),
            sending: false,
            tx: None,
            burst: None,
            pending_rx: None,
            burst_rx: None,
            phases: BTreeMap::new(),
            deferred: Vec::new(),
            seqnos: SeqnoHistory::default(),
        }
    }

    /// The stack is blocked sending (Contiki's send runs to completion).
    pub fn busy(&self) -> bool {
        self.tx.is_some() || self.burst.is_some()
    }

    pub fn poll_timeout(&self) -> Option<SimTime> {
        earliest(
            earliest(self.pc_at, self.tx.as_ref().and_then(|t| t.at)),
            self.burst_rx,
        )
    }

    pub fn next_deferred(&self) -> Option<SimTime> {
        self.deferred
            .iter()
            .fold(None, |min, &(at, _)| earliest(min, Some(at)))
    }

    /// The neighbours whose set-aside queues are due by `now`, in the
    /// order they are due.
    pub fn take_due_deferred(&mut self, now: SimTime) -> Vec<Address> {
        let mut due: Vec<(SimTime, Address)> = Vec::new();
        self.deferred.retain(|&(at, dst)| {
            if at <= now {
                due.push((at, dst));
                false
            } else {
                true
            }
        });
        // Stable: equal times keep the order they were set aside in.
        due.sort_by_key(|&(at, _)| at);
        due.into_iter().map(|(_, dst)| dst).collect()
    }

    pub fn handle_timeout(&mut self, now: SimTime, io: &mut Io) {
        if self.burst_rx.is_some_and(|at| at <= now) {
            // recv_burst_off
            self.burst_rx = None;
            io.radio.off();
        }
        if self
            .tx
            .as_ref()
            .and_then(|t| t.at)
            .is_some_and(|at| at <= now)
        {
            if let Some(tx) = self.tx.as_mut() {
                tx.at = None;
            }
            self.tx_timer(now, io);
        }
        if self.pc_at.is_some_and(|at| at <= now) {
            self.pc_at = None;
            self.pc_timer(now, io);
        }
    }

    pub fn handle_cca(&mut self, now: SimTime, ticket: CcaTicket, clear: bool, io: &mut Io) {
        if let Some(tx) = &self.tx {
            match tx.step {
                Step::CcaWait(_, t) | Step::StrobeCca(t) | Step::AckCca(t) if t == ticket => {
                    return self.tx_cca(now, clear, io);
                }
                _ => {}
            }
        }
        match self.pc {
            Pc::CcaWait { ticket: t, .. } if t == ticket => self.pc_cca(now, clear, io),
            Pc::Listen {
                ticket: Some(t), ..
            } if t == ticket => self.pc_cca(now, clear, io),
            _ => {}
        }
    }

    pub fn handle_tx_done(&mut self, now: SimTime, io: &mut Io) {
        let Some(tx) = self.tx.as_mut() else { return };
        if tx.step != Step::OnAir {
            return;
        }
        // The CC2420 goes back to sleep after sending if it was asleep.
        if tx.radio_was_on {
            io.radio.on();
        } else {
            io.radio.off();
        }
        tx.step = Step::InterPacket;
        tx.at = Some(now + self.t.inter_packet);
    }

    pub fn handle_rx(&mut self, now: SimTime, psdu: &[u8], io: &mut Io) {
        if self.busy() {
            // The sender holds the stack; the frame waits in the radio.
            if self.pending_rx.is_none() {
                self.pending_rx = Some(psdu.to_vec());
            }
            return;
        }
        self.input(now, psdu, io);
    }

    /// contikimac.c `input_packet`.
    fn input(&mut self, now: SimTime, psdu: &[u8], io: &mut Io) {
        if self.burst_rx.is_none() {
            io.radio.off();
        }
        let Incoming::Data {
            src,
            dst,
            seq,
            pending,
            payload,
            ..
        } = classify(psdu, self.pan_id, self.me)
        else {
            return;
        };
        if pending {
            io.radio.on();
            self.burst_rx = Some(now + self.t.burst_deadline);
        } else {
            io.radio.off();
            self.burst_rx = None;
        }
        io.stats.frames_received += 1;
        if self.seqnos.is_duplicate(src, seq) {
            io.stats.duplicates_dropped += 1;
            return;
        }
        self.seqnos.register(src, seq);
        io.notes.push_back(RdcNote::Input { src, dst, payload });
    }

    // ---- power cycle ----

    fn pc_timer(&mut self, now: SimTime, io: &mut Io) {
        match self.pc {
            Pc::Sleep => {
                self.cycle_start += self.t.cycle;
                io.stats.wakeups += 1;
                self.pc_check(now, 0, io);
            }
            Pc::CcaSettle { count } => {
                if self.sending || self.burst_rx.is_some() || !io.radio.is_on() {
                    self.pc_sleep(now, count);
                } else {
                    let ticket = io.radio.cca();
                    self.pc = Pc::CcaWait { count, ticket };
                }
            }
            Pc::CcaSleep { count } => self.pc_check(now, count + 1, io),
            Pc::Listen { .. } => self.listen_step(now, io),
            Pc::CcaWait { .. } => {}
        }
    }

    fn pc_check(&mut self, now: SimTime, count: u64, io: &mut Io) {
        if count >= CCA_COUNT_MAX {
            return self.end_cycle(now);
        }
        if !self.sending && self.burst_rx.is_none() {
            io.radio.on();
            io.stats.channel_checks += 1;
            self.pc = Pc::CcaSettle { count };
            self.pc_at = Some(now + self.t.cca_check);
        } else {
            self.pc_sleep(now, count);
        }
    }

    fn pc_sleep(&mut self, now: SimTime, count: u64) {
        self.pc = Pc::CcaSleep { count };
        self.pc_at = Some(now + self.t.cca_sleep);
    }

    fn pc_cca(&mut self, now: SimTime, clear: bool, io: &mut Io) {
        match self.pc {
            Pc::CcaWait { count, .. } => {
                if clear {
                    self.turn_radio_off(io);
                    self.pc_sleep(now, count);
                } else {
                    io.stats.wakeups_with_energy += 1;
                    self.pc = Pc::Listen {
                        start: now,
                        base: now,
                        periods: 0,
                        silence: 0,
                        ticket: None,
                    };
                    self.listen_step(now, io);
                }
            }
            Pc::Listen {
                start,
                base,
                mut periods,
                mut silence,
                ..
            } => {
                if clear {
                    silence += 1;
                } else {
                    silence = 0;
                }
                periods += 1;
                let receiving = io.radio.receiving();
                if receiving {
                    silence = 0;
                }
                if silence > MAX_SILENCE_PERIODS {
                    self.turn_radio_off(io);
                    return self.end_cycle(now);
                }
                if periods > MAX_NONACTIVITY_PERIODS && !receiving {
                    io.stats.fast_sleeps += 1;
                    self.turn_radio_off(io);
                    return self.end_cycle(now);
                }
                let next = base + self.t.period;
                self.pc = Pc::Listen {
                    start,
                    base: next,
                    periods,
                    silence,
                    ticket: None,
                };
                self.pc_at = Some(next.max(now));
            }
            _ => {}
        }
    }

    /// The top of the listening loop.
    fn listen_step(&mut self, now: SimTime, io: &mut Io) {
        let Pc::Listen {
            start,
            base,
            periods,
            silence,
            ..
        } = self.pc
        else {
            return;
        };
        if !self.sending && io.radio.is_on() && now < start + self.t.listen {
            let ticket = io.radio.cca();
            self.pc = Pc::Listen {
                start,
                base,
                periods,
                silence,
                ticket: Some(ticket),
            };
            return;
        }
        if io.radio.is_on() && (!io.radio.receiving() || now >= start + self.t.listen) {
            self.turn_radio_off(io);
        }
        self.end_cycle(now);
    }

    fn end_cycle(&mut self, now: SimTime) {
        self.pc = Pc::Sleep;
        // `RTIMER_NOW() - cycle_start < CYCLE_TIME - CHECK_TIME * 4`, signed:
        // a cycle that ran long starts the next one at once.
        let early = now < self.cycle_start || now - self.cycle_start < self.t.cycle_margin;
        self.pc_at = Some(if early {
            self.cycle_start + self.t.cycle
        } else {
            now
        });
    }

    /// `powercycle_turn_radio_off`: not while sending or receiving a burst.
    fn turn_radio_off(&mut self, io: &mut Io) {
        if !self.sending && self.burst_rx.is_none() {
            io.radio.off();
        }
    }

    /// A send took the radio: checks in progress are abandoned (their
    /// answers, if late, are ignored).
    fn pc_preempt(&mut self, now: SimTime) {
        match self.pc {
            Pc::CcaSettle { count } | Pc::CcaWait { count, .. } => self.pc_sleep(now, count),
            Pc::Listen {
                start,
                base,
                periods,
                silence,
                ticket: Some(_),
            } => {
                self.pc = Pc::Listen {
                    start,
                    base,
                    periods,
                    silence,
                    ticket: None,
                };
                self.pc_at = Some(now + self.t.period);
            }
            _ => {}
        }
    }

    // ---- sending ----

    /// contikimac.c `qsend_list`.
    pub fn send_list(&mut self, now: SimTime, burst: Burst, io: &mut Io) {
        let Some(first) = burst.frames.first() else {
            return;
        };
        if self.burst_rx.is_some() {
            // Not while receiving a burst: a collision, for CSMA to retry.
            io.notes.push_back(RdcNote::Sent {
                dst: burst.dst,
                id: first.id,
                status: RdcStatus::Collision,
            });
            return;
        }
        self.burst = Some((burst.dst, burst.frames.into()));
        self.next_frame(now, false, io);
    }

    fn next_frame(&mut self, now: SimTime, awake: bool, io: &mut Io) {
        let Some((dst, frames)) = self.burst.as_mut() else {
            return;
        };
        let dst = *dst;
        let Some(frame) = frames.pop_front() else {
            self.burst = None;
            return self.idle(now, io);
        };
        let broadcast = is_broadcast(dst);
        let mut tx = Tx {
            dst,
            frame,
            broadcast,
            awake,
            known: false,
            step: Step::PhaseWait,
            at: None,
            t0: now,
            txtime: now,
            radio_was_on: false,
            strobes: 0,
            got_ack: false,
            collisions: 0,
            encounter: None,
        };
        if !broadcast && !awake && self.phase_optimization {
            match self.phase_wait(now, dst) {
                PhaseWait::Unknown => {}
                PhaseWait::Deferred(at) => {
                    // phase.c sets the neighbour's list aside (the live CSMA
                    // queue, with whatever joins it meanwhile) and the stack
                    // is free until then.
                    self.burst = None;
                    self.deferred.push((at, dst));
                    io.stats.phase_deferrals += 1;
                    return self.idle(now, io);
                }
                PhaseWait::SendAt(at) => {
                    tx.known = true;
                    io.stats.phase_locked_sends += 1;
                    tx.at = Some(at.max(now));
                    self.tx = Some(tx);
                    return;
                }
            }
        }
        self.tx = Some(tx);
        self.start_sending(now, io);
    }

    /// phase.c `phase_wait`.
    fn phase_wait(&self, now: SimTime, dst: Address) -> PhaseWait {
        let Some(e) = self.phases.get(&dst) else {
            return PhaseWait::Unknown;
        };
        let cycle = i128::from(self.t.cycle.as_nanos());
        let diff = i128::from(e.time.as_nanos()) - i128::from(now.as_nanos());
        // Time to the neighbour's next wake-up, within one cycle.
        let mut wait = SimDuration::from_nanos(diff.rem_euclid(cycle) as u64);
        if wait < self.t.guard {
            wait += self.t.cycle;
        }
        let before = wait - self.t.guard;
        let ticks = whole_clock_ticks(before);
        if ticks > PHASE_DEFER_THRESHOLD && self.deferred.len() < PHASE_QUEUESIZE {
            return PhaseWait::Deferred(now + clock(ticks));
        }
        PhaseWait::SendAt(now + before)
    }

    /// phase.c `phase_update`.
    fn phase_update(
        &mut self,
        now: SimTime,
        dst: Address,
        tx: &Tx,
        status: RdcStatus,
        io: &mut Io,
    ) {
        if let Some(e) = self.phases.get_mut(&dst) {
            match status {
                RdcStatus::Ok => {
                    if let Some(t) = tx.encounter {
                        e.time = t;
                    }
                    e.noacks = 0;
                }
                RdcStatus::NoAck => {
                    e.noacks += 1;
                    if e.noacks == 1 {
                        e.noacks_since = now;
                    }
                    if e.noacks >= MAX_NOACKS || now >= e.noacks_since + self.t.max_noacks_time {
                        self.phases.remove(&dst);
                        io.stats.phases_forgotten += 1;
                    }
                }
                RdcStatus::Collision => {}
            }
        } else if status == RdcStatus::Ok {
            if let Some(time) = tx.encounter {
                self.phases.insert(
                    dst,
                    Phase {
                        time,
                        noacks: 0,
                        noacks_since: now,
                    },
                );
            }
        }
    }

    fn start_sending(&mut self, now: SimTime, io: &mut Io) {
        self.sending = true;
        self.pc_preempt(now);
        if io.radio.receiving() || self.pending_rx.is_some() {
            // Sending now would trash the frame coming in: a collision.
            self.sending = false;
            return self.finish(now, RdcStatus::Collision, io);
        }
        io.radio.off();
        let Some(tx) = self.tx.as_mut() else { return };
        if tx.awake {
            self.strobes_begin(now, io);
        } else {
            self.tx_check(now, 0, io);
        }
    }

    fn tx_check(&mut self, now: SimTime, i: u64, io: &mut Io) {
        if i >= CCA_COUNT_MAX_TX {
            return self.strobes_begin(now, io);
        }
        let Some(tx) = self.tx.as_mut() else { return };
        io.radio.on();
        tx.step = Step::CcaSettle(i);
        tx.at = Some(now + self.t.cca_check);
    }

    fn strobes_begin(&mut self, now: SimTime, io: &mut Io) {
        let Some(tx) = self.tx.as_mut() else { return };
        if !tx.broadcast {
            // On to hear the ACK.
            io.radio.on();
        }
        tx.t0 = now;
        self.strobe_loop(now, io);
    }

    /// The strobe loop's condition and one strobe's transmit.
    fn strobe_loop(&mut self, now: SimTime, io: &mut Io) {
        let t = self.t;
        let Some(tx) = self.tx.as_mut() else { return };
        let over = now >= tx.t0 + t.strobe;
        let missed = !tx.broadcast && (tx.awake || tx.known) && now >= tx.t0 + t.max_phase_strobe;
        if tx.got_ack || tx.collisions > 0 || over || missed {
            return self.strobes_end(now, io);
        }
        tx.txtime = now;
        tx.strobes += 1;
        tx.radio_was_on = io.radio.is_on();
        if io.radio.ack_busy() {
            tx.step = Step::NoStart;
            tx.at = Some(now + TX_NO_START);
        } else if !tx.radio_was_on {
            io.radio.on();
            tx.step = Step::Rssi;
            tx.at = Some(now + RSSI_VALID);
        } else {
            tx.step = Step::StrobeCca(io.radio.cca());
        }
    }

    fn tx_timer(&mut self, now: SimTime, io: &mut Io) {
        let t = self.t;
        let Some(tx) = self.tx.as_mut() else { return };
        match tx.step {
            Step::PhaseWait => self.start_sending(now, io),
            Step::CcaSettle(i) => tx.step = Step::CcaWait(i, io.radio.cca()),
            Step::CcaSleep(i) => self.tx_check(now, i + 1, io),
            Step::Rssi => tx.step = Step::StrobeCca(io.radio.cca()),
            Step::Turnaround => {
                if io.radio.ack_busy() {
                    tx.step = Step::NoStart;
                    tx.at = Some(now + TX_NO_START);
                } else {
                    io.radio.transmit(tx.frame.psdu.clone());
                    io.stats.frames_transmitted += 1;
                    tx.step = Step::OnAir;
                }
            }
            Step::NoStart => {
                io.stats.strobes_not_started += 1;
                tx.step = Step::InterPacket;
                tx.at = Some(now + t.inter_packet);
            }
            Step::InterPacket => {
                if tx.broadcast {
                    self.strobe_loop(now, io);
                } else if io.radio.receiving() || self.pending_rx.is_some() {
                    tx.step = Step::AckWait;
                    tx.at = Some(now + t.after_ack);
                } else {
                    tx.step = Step::AckCca(io.radio.cca());
                }
            }
            Step::AckWait => {
                // Read what the radio holds: our ACK, or a collision.
                let seq = tx.frame.seq;
                match self
                    .pending_rx
                    .take()
                    .map(|p| classify(&p, self.pan_id, self.me))
                {
                    Some(Incoming::Ack(s)) if s == seq => {
                        tx.got_ack = true;
                        tx.encounter = Some(tx.txtime);
                        io.stats.acks_received += 1;
                    }
                    _ => tx.collisions += 1,
                }
                self.strobe_loop(now, io);
            }
            Step::CcaWait(..) | Step::StrobeCca(_) | Step::OnAir | Step::AckCca(_) => {}
        }
    }

    fn tx_cca(&mut self, now: SimTime, clear: bool, io: &mut Io) {
        let t = self.t;
        let Some(tx) = self.tx.as_mut() else { return };
        match tx.step {
            Step::CcaWait(i, _) => {
                io.radio.off();
                if clear {
                    tx.step = Step::CcaSleep(i);
                    tx.at = Some(now + t.cca_sleep);
                } else {
                    io.stats.collisions_before_sending += 1;
                    tx.collisions += 1;
                    self.sending = false;
                    self.finish(now, RdcStatus::Collision, io);
                }
            }
            Step::StrobeCca(_) => {
                if clear {
                    tx.step = Step::Turnaround;
                    tx.at = Some(now + TURNAROUND);
                } else {
                    tx.step = Step::NoStart;
                    tx.at = Some(now + TX_NO_START);
                }
            }
            Step::AckCca(_) => {
                if clear {
                    self.strobe_loop(now, io);
                } else {
                    tx.step = Step::AckWait;
                    tx.at = Some(now + t.after_ack);
                }
            }
            _ => {}
        }
    }

    fn strobes_end(&mut self, now: SimTime, io: &mut Io) {
        io.radio.off();
        self.sending = false;
        let Some(tx) = self.tx.take() else { return };
        let status = if tx.collisions > 0 {
            RdcStatus::Collision
        } else if !tx.broadcast && !tx.got_ack {
            RdcStatus::NoAck
        } else {
            RdcStatus::Ok
        };
        if tx.broadcast {
            io.stats.broadcasts_strobed += 1;
        } else {
            io.stats.unicasts_strobed += 1;
            io.stats.unicast_strobes += tx.strobes;
            if tx.got_ack {
                io.stats.unicasts_acked += 1;
                io.stats.acked_unicast_strobes += tx.strobes;
            }
            if tx.known && !tx.got_ack {
                io.stats.phase_misses += 1;
            }
            if self.phase_optimization && tx.collisions == 0 && !tx.awake {
                self.phase_update(now, tx.dst, &tx, status, io);
            }
        }
        self.tx = Some(tx);
        self.finish(now, status, io);
    }

    /// Reports the frame's result and goes on with the burst.
    fn finish(&mut self, now: SimTime, status: RdcStatus, io: &mut Io) {
        let Some(tx) = self.tx.take() else { return };
        io.notes.push_back(RdcNote::Sent {
            dst: tx.dst,
            id: tx.frame.id,
            status,
        });
        if status == RdcStatus::Ok && tx.frame.pending {
            // Within a burst the receiver is awake already.
            self.next_frame(now, true, io);
        } else {
            self.burst = None;
            self.idle(now, io);
        }
    }

    /// The stack is free again: a frame that came in meanwhile is read.
    fn idle(&mut self, now: SimTime, io: &mut Io) {
        if let Some(psdu) = self.pending_rx.take() {
            self.input(now, &psdu, io);
        }
    }
}
