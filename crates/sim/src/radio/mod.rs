//! The radio medium shared by every wireless MAC: radios with positions,
//! propagation, receptions and collisions, radio states and energy.
//!
//! A [`RadioMedium`] is a sans-IO state machine like the link models: it is
//! told the time with every input and answers with [`RadioEvent`]s and its
//! next deadline. It never reads a clock, and its random draws come from
//! the stream it is built with.
//!
//! * Inputs: [`RadioMedium::transmit`] (a MAC puts a frame on air),
//!   [`RadioMedium::set_listening`] (a MAC turns its receiver on or off),
//!   and [`RadioMedium::handle_timeout`] at the instant
//!   [`RadioMedium::poll_timeout`] asked for.
//! * Outputs, from `handle_timeout`: [`RadioEvent::RxStart`] (a radio
//!   locked onto an incoming frame), [`RadioEvent::RxEnd`] (that frame
//!   ended, intact or not), [`RadioEvent::TxEnd`] (a frame's last bit left
//!   its sender).
//! * Queries: [`RadioMedium::channel_clear`] (clear channel assessment),
//!   [`RadioMedium::state`], [`RadioMedium::stats`].
//!
//! The medium carries a frame handle `P` it never looks into: only the
//! airtime the caller gives with it matters.
//!
//! # Reception
//!
//! When a radio transmits, the medium takes every radio's position at that
//! instant ([`mobility`]) and asks the propagation model ([`propagation`])
//! which radios hear the frame at all (the *arrivals*), and which of those
//! could decode it. An arrival starts and ends later than the transmission
//! by the propagation delay, distance / c.
//!
//! A radio locks onto an arriving frame (`RxStart`) only if, when the
//! frame's first bit arrives, it is listening (on, neither transmitting nor
//! already receiving), the frame is decodable there, the frame passes the
//! reception rule against what else is on air, and (unit disk) the random
//! reception draw succeeds. It then stays in the receive state until the
//! frame's last bit arrives (`RxEnd`), whatever happens meanwhile:
//!
//! * [`Reception::Collision`]: any other arrival overlapping the frame
//!   destroys it, as in Cooja's UDGM;
//! * [`Reception::Sinr`]: the frame survives while its power over the sum
//!   of the noise floor and every other arrival on air stays at or above the
//!   capture threshold. A stronger frame arriving later does not make the
//!   receiver switch to it: a receiver synchronised on a frame's preamble
//!   keeps decoding that frame, and the later one is only interference.
//!
//! A radio that starts transmitting or is switched off while receiving
//! ends the reception at once with [`RxOutcome::Aborted`]. Every `RxStart`
//! is followed by exactly one `RxEnd` for that radio, and every accepted
//! `transmit` by exactly one `TxEnd`.
//!
//! # Radio states
//!
//! Each radio is off, listening, receiving or transmitting
//! ([`RadioState`]). The MAC chooses on or off; a radio may transmit while
//! off (it is on for the frame and off again after, as Contiki's radio
//! drivers do), and receiving follows from frames. Radios start off at
//! time zero. The time in each state, the duty cycle and the energy drawn
//! ([`energy`]) are in [`RadioStats`].

pub mod energy;
pub mod mobility;
pub mod propagation;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

pub use energy::{EnergyModel, RawEnergy, StateTimes};
pub use mobility::{Mobility, RawMobility, Waypoint};
pub use propagation::{LogDistance, Propagation, Reception, Shadowing, UnitDisk, SPEED_OF_LIGHT};

use crate::config::{deserialize_at, ScenarioError};
use crate::position::Position;
use crate::rng::SimRng;
use propagation::{dbm_to_mw, standard_normal};

/// A radio of a [`RadioMedium`], numbered from 0 in the order added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RadioId(pub u32);

impl RadioId {
    /// Its index, 0-based.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a radio is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RadioState {
    /// Switched off: hears nothing.
    Off,
    /// On and listening for a frame.
    Listen,
    /// Locked onto an incoming frame.
    Receive,
    /// Sending a frame.
    Transmit,
}

/// How a reception ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RxOutcome {
    /// The frame arrived intact.
    Ok,
    /// Another signal destroyed it (overlap under the collision rule, or
    /// its SINR fell below the capture threshold).
    Collision,
    /// The receiving radio started transmitting or was switched off before
    /// the frame ended.
    Aborted,
}

/// What the medium tells the radios' owners.
#[derive(Clone, Debug, PartialEq)]
pub enum RadioEvent<P> {
    /// `radio` locked onto a frame from `from`: its MAC must keep it on.
    RxStart {
        /// The receiving radio.
        radio: RadioId,
        /// The sender.
        from: RadioId,
    },
    /// The frame `radio` had locked onto ended.
    RxEnd {
        /// The receiving radio.
        radio: RadioId,
        /// The sender.
        from: RadioId,
        /// The frame handle given to [`RadioMedium::transmit`].
        frame: P,
        /// Whether it arrived intact.
        outcome: RxOutcome,
    },
    /// The last bit of `radio`'s frame left it.
    TxEnd {
        /// The sending radio.
        radio: RadioId,
    },
}

/// Why [`RadioMedium::transmit`] refused a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransmitError {
    /// The radio is already transmitting.
    #[error("radio {0} is already transmitting")]
    Busy(u32),
    /// A frame must take some time on air.
    #[error("a frame's airtime must be positive")]
    ZeroAirtime,
}

/// Counters and state times of one radio.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RadioStats {
    /// Frames transmitted.
    pub sent: u64,
    /// Of those, frames nobody heard because the unit disk's transmission
    /// success draw failed.
    pub sent_erased: u64,
    /// Frames received intact.
    pub received: u64,
    /// Decodable frames lost to other signals: destroyed while being
    /// received, or arriving while another frame was on air.
    pub collisions: u64,
    /// Decodable frames lost to the unit disk's reception success draw.
    pub lost: u64,
    /// Decodable frames whose start arrived while the radio was off.
    pub missed_off: u64,
    /// Decodable frames whose start arrived while the radio transmitted.
    pub missed_transmitting: u64,
    /// Receptions cut short by transmitting or switching off.
    pub aborted: u64,
    /// Time in each state, from time zero.
    pub time: StateTimes,
    /// On-time over total time.
    pub duty_cycle: f64,
    /// Energy drawn, joules, from the medium's [`EnergyModel`].
    pub energy_j: f64,
}

/// Counters of every radio of a medium.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MediumStats {
    /// `radios[i]` is radio `i`'s.
    pub radios: Vec<RadioStats>,
}

/// A medium's models: propagation, reception rule, energy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RadioSpec {
    /// Who hears whom, how well.
    pub propagation: Propagation,
    /// What frames survive.
    pub reception: Reception,
    /// Currents and voltage.
    pub energy: EnergyModel,
}

/// The fields of a radio medium table; all optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRadioSpec {
    propagation: Option<toml::Table>,
    reception: Option<toml::Table>,
    energy: Option<RawEnergy>,
}

impl RadioSpec {
    /// Reads and validates a radio medium table at `path`:
    /// `{ propagation = {...}, reception = {...}, energy = {...} }`, each
    /// defaulting to Cooja's UDGM with the collision rule and the Tmote Sky
    /// currents.
    pub fn parse(table: toml::Table, path: &str) -> Result<RadioSpec, ScenarioError> {
        let raw: RawRadioSpec = deserialize_at(toml::Value::Table(table), path)?;
        let propagation = match raw.propagation {
            Some(t) => Propagation::parse(t, &format!("{path}.propagation"))?,
            None => Propagation::default(),
        };
        let reception = match raw.reception {
            Some(t) => Reception::parse(t, &format!("{path}.reception"))?,
            None => Reception::default(),
        };
        if matches!(reception, Reception::Sinr { .. })
            && matches!(propagation, Propagation::UnitDisk(_))
        {
            return Err(ScenarioError::new(
                format!("{path}.reception.kind"),
                "sinr needs received powers: use propagation kind \"log-distance\" or \"shadowing\"",
            ));
        }
        let energy =
            EnergyModel::from_raw(raw.energy.unwrap_or_default(), &format!("{path}.energy"))?;
        Ok(RadioSpec {
            propagation,
            reception,
            energy,
        })
    }
}

/// The reception in progress at a radio.
#[derive(Debug)]
struct Receiving<P> {
    tx: u64,
    from: RadioId,
    power_mw: f64,
    corrupted: bool,
    frame: P,
}

#[derive(Debug)]
struct Radio<P> {
    mobility: Mobility,
    listening: bool,
    /// The transmission it is sending.
    transmitting: Option<u64>,
    receiving: Option<Receiving<P>>,
    state: RadioState,
    /// When it entered `state`.
    since: SimTime,
    stats: RadioStats,
}

/// A frame on air at its sender.
#[derive(Debug)]
struct Transmission {
    from: RadioId,
    /// Its place in [`Slots`], which its steps name.
    slot: usize,
}

/// A frame's signal at one radio that hears it.
#[derive(Debug)]
struct Arrival<P> {
    tx: u64,
    from: RadioId,
    to: RadioId,
    start: SimTime,
    end: SimTime,
    /// Whether its start has been handled.
    started: bool,
    /// Received power, mW (log-distance; 0 under the unit disk).
    power_mw: f64,
    /// Whether it makes clear channel assessment report busy (unit disk).
    senses_busy: bool,
    /// Probability that the unit disk's reception draw succeeds.
    success: f64,
    /// The frame, when the radio could decode it.
    frame: Option<P>,
    /// Its place in [`Slots`], which its steps name.
    slot: usize,
}

impl<P> Arrival<P> {
    fn on_air(&self, at: SimTime) -> bool {
        self.start <= at && at < self.end
    }
}

/// What happens next inside the medium, in the order it is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    /// Ends first, so frames back to back do not overlap.
    ArrivalEnd,
    TxEnd,
    ArrivalStart,
}

/// A step's place in the order: when, what, transmission, radio. Ties go
/// by kind, then transmission, then receiving radio, so the order never
/// depends on how the lists are stored.
type StepKey = (SimTime, Step, u64, RadioId);

/// Where each entry of a list lives now, by a slot that stays its own while
/// it lives: the lists are compacted by swapping (their order is the order
/// interference is summed in), so positions move, and the steps name slots
/// rather than positions, which would have to be re-filed on every move.
#[derive(Debug, Default)]
struct Slots {
    /// `position[slot]`: the entry's index in its list.
    position: Vec<usize>,
    free: Vec<usize>,
}

impl Slots {
    /// A slot for an entry about to be pushed at `index`.
    fn take(&mut self, index: usize) -> usize {
        match self.free.pop() {
            Some(slot) => {
                self.position[slot] = index;
                slot
            }
            None => {
                self.position.push(index);
                self.position.len() - 1
            }
        }
    }
}

/// The shared radio medium. See the [module documentation](self).
#[derive(Debug)]
pub struct RadioMedium<P> {
    spec: RadioSpec,
    radios: Vec<Radio<P>>,
    transmissions: Vec<Transmission>,
    arrivals: Vec<Arrival<P>>,
    /// `shadowing[i][j]`, j < i: the shadowing term of the pair, dB.
    shadowing: Vec<Vec<f64>>,
    /// Events found while handling an input, handed out by the next
    /// `handle_timeout`.
    pending: Vec<RadioEvent<P>>,
    /// Every step to come, earliest first, with the slot of its entry:
    /// scanning the lists for the next one costs a pass per step. Keys are
    /// unique, so the heap hands them out in the one order they have.
    steps: BinaryHeap<Reverse<(StepKey, usize)>>,
    transmission_slots: Slots,
    arrival_slots: Slots,
    /// The latest time the medium was told.
    now: SimTime,
    next_tx: u64,
    rng: SimRng,
}

impl<P: Clone> RadioMedium<P> {
    /// A medium with no radios, drawing from `rng`.
    pub fn new(spec: RadioSpec, rng: SimRng) -> Self {
        RadioMedium {
            spec,
            radios: Vec::new(),
            transmissions: Vec::new(),
            arrivals: Vec::new(),
            shadowing: Vec::new(),
            pending: Vec::new(),
            steps: BinaryHeap::new(),
            transmission_slots: Slots::default(),
            arrival_slots: Slots::default(),
            now: SimTime::ZERO,
            next_tx: 0,
            rng,
        }
    }

    /// The medium's models.
    pub fn spec(&self) -> &RadioSpec {
        &self.spec
    }

    /// Adds a radio that moves as `mobility`, off; returns its id. Under
    /// log-distance propagation the shadowing towards every radio added
    /// before is drawn now, so it depends only on the order radios are
    /// added.
    pub fn add_radio(&mut self, mobility: Mobility) -> RadioId {
        let id = RadioId(self.radios.len() as u32);
        let row = match &self.spec.propagation {
            Propagation::LogDistance(m) if m.shadowing_sigma_db > 0.0 => (0..id.index())
                .map(|_| m.shadowing_sigma_db * standard_normal(&mut self.rng))
                .collect(),
            _ => Vec::new(),
        };
        self.shadowing.push(row);
        self.radios.push(Radio {
            mobility,
            listening: false,
            transmitting: None,
            receiving: None,
            state: RadioState::Off,
            since: SimTime::ZERO,
            stats: RadioStats::default(),
        });
        id
    }

    /// Number of radios.
    pub fn radio_count(&self) -> usize {
        self.radios.len()
    }

    /// Where `radio` is at `at`.
    ///
    /// # Panics
    ///
    /// If `radio` is not one of this medium's (as every method taking a
    /// [`RadioId`] does).
    pub fn position(&self, radio: RadioId, at: SimTime) -> Position {
        self.radios[radio.index()].mobility.position_at(at)
    }

    /// What `radio` is doing now.
    pub fn state(&self, radio: RadioId) -> RadioState {
        self.radios[radio.index()].state
    }

    /// The shadowing term between two radios, dB (0 without shadowing).
    pub fn shadowing_db(&self, a: RadioId, b: RadioId) -> f64 {
        let (hi, lo) = (a.index().max(b.index()), a.index().min(b.index()));
        self.shadowing[hi].get(lo).copied().unwrap_or(0.0)
    }

    /// Puts `frame` on air from `radio` at `now` for `airtime`. Its
    /// reception in progress, if any, is aborted. A radio that is off is
    /// on for the frame and off again after it.
    pub fn transmit(
        &mut self,
        now: SimTime,
        radio: RadioId,
        frame: P,
        airtime: SimDuration,
    ) -> Result<(), TransmitError> {
        let now = self.advance(now);
        if self.radios[radio.index()].transmitting.is_some() {
            return Err(TransmitError::Busy(radio.0));
        }
        if airtime.is_zero() {
            return Err(TransmitError::ZeroAirtime);
        }
        self.abort_reception(radio, now);
        let id = self.next_tx;
        self.next_tx += 1;
        let end = now + airtime;
        let sender = &mut self.radios[radio.index()];
        sender.transmitting = Some(id);
        sender.stats.sent += 1;
        self.settle(radio, now);
        let slot = self.transmission_slots.take(self.transmissions.len());
        self.steps
            .push(Reverse(((end, Step::TxEnd, id, radio), slot)));
        self.transmissions.push(Transmission { from: radio, slot });

        // Cooja's UDGM: a failed transmission draw means nobody hears the
        // frame, not even as interference. Drawn only when it can fail, so
        // the loss-free study configuration draws nothing.
        if let Propagation::UnitDisk(u) = &self.spec.propagation {
            if u.success_ratio_tx < 1.0 && self.rng.gen::<f64>() >= u.success_ratio_tx {
                self.radios[radio.index()].stats.sent_erased += 1;
                return Ok(());
            }
        }

        let origin = self.position(radio, now);
        for j in 0..self.radios.len() {
            let to = RadioId(j as u32);
            if to == radio {
                continue;
            }
            let distance = origin.distance(&self.position(to, now));
            let (power_mw, decodable, senses_busy, success) = match &self.spec.propagation {
                Propagation::UnitDisk(u) => {
                    if distance > u.interference_range {
                        continue;
                    }
                    let decodable = distance <= u.tx_range;
                    (
                        0.0,
                        decodable,
                        distance <= u.cca_range,
                        u.rx_success(distance),
                    )
                }
                Propagation::LogDistance(m) => {
                    let dbm = m.rx_power_dbm(distance, self.shadowing_db(radio, to));
                    if dbm < m.noise_floor_dbm {
                        continue;
                    }
                    (dbm_to_mw(dbm), dbm >= m.sensitivity_dbm, true, 1.0)
                }
                // ns-2: a frame below CSThresh_ is not heard at all, one
                // below RXThresh_ only as a busy channel and interference.
                Propagation::Shadowing(s) => {
                    let m = s.log_distance();
                    let dbm = s.draw_rx_power_dbm(distance, &mut self.rng);
                    if dbm < m.cca_threshold_dbm {
                        continue;
                    }
                    (dbm_to_mw(dbm), dbm >= m.sensitivity_dbm, true, 1.0)
                }
            };
            let delay = SimDuration::from_secs_f64(distance / SPEED_OF_LIGHT);
            let slot = self.arrival_slots.take(self.arrivals.len());
            self.steps
                .push(Reverse(((end + delay, Step::ArrivalEnd, id, to), slot)));
            self.steps
                .push(Reverse(((now + delay, Step::ArrivalStart, id, to), slot)));
            self.arrivals.push(Arrival {
                tx: id,
                from: radio,
                to,
                start: now + delay,
                end: end + delay,
                started: false,
                power_mw,
                senses_busy,
                success,
                frame: decodable.then(|| frame.clone()),
                slot,
            });
        }
        Ok(())
    }

    /// Switches `radio`'s receiver on (listening) or off at `now`. Switching
    /// off aborts a reception in progress; a radio switched on in the middle
    /// of an arriving frame cannot lock onto it.
    pub fn set_listening(&mut self, now: SimTime, radio: RadioId, on: bool) {
        let now = self.advance(now);
        self.radios[radio.index()].listening = on;
        if !on {
            self.abort_reception(radio, now);
        }
        self.settle(radio, now);
    }

    /// Clear channel assessment at `radio` at `now`: `false` when the
    /// channel is busy. Unit disk: busy while a signal from within the CCA
    /// range is arriving. Log-distance: busy when the noise floor plus
    /// every arriving signal reaches the CCA threshold. The radio's own
    /// transmission does not count. The answer does not depend on whether
    /// the radio is listening: a MAC turns it on before assessing.
    pub fn channel_clear(&self, now: SimTime, radio: RadioId) -> bool {
        let on_air = self
            .arrivals
            .iter()
            .filter(|a| a.to == radio && a.on_air(now));
        match &self.spec.propagation {
            Propagation::UnitDisk(_) => !on_air.into_iter().any(|a| a.senses_busy),
            Propagation::LogDistance(m) => {
                let total = dbm_to_mw(m.noise_floor_dbm) + on_air.map(|a| a.power_mw).sum::<f64>();
                total < dbm_to_mw(m.cca_threshold_dbm)
            }
            // Every signal heard reached CSThresh_ (ns-2's carrier sense).
            Propagation::Shadowing(_) => on_air.into_iter().next().is_none(),
        }
    }

    /// Handles everything due at or before `now` and appends what happened
    /// to `out`, in time order. Events are due at the instant
    /// [`poll_timeout`](Self::poll_timeout) gave; only a caller that skipped
    /// one gets events of an earlier instant.
    pub fn handle_timeout(&mut self, now: SimTime, out: &mut Vec<RadioEvent<P>>) {
        self.advance(now);
        out.append(&mut self.pending);
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let pending = (!self.pending.is_empty()).then_some(self.now);
        pending
            .into_iter()
            .chain(self.steps.peek().map(|Reverse(((at, ..), _))| *at))
            .min()
    }

    /// Counters and state times of every radio, with times counted up to
    /// `now`.
    pub fn stats(&self, now: SimTime) -> MediumStats {
        let now = now.max(self.now);
        MediumStats {
            radios: self
                .radios
                .iter()
                .map(|r| {
                    let mut stats = r.stats;
                    stats.time.add(r.state, (now - r.since).as_nanos());
                    stats.duty_cycle = stats.time.duty_cycle();
                    stats.energy_j = self.spec.energy.energy_j(&stats.time);
                    stats
                })
                .collect(),
        }
    }

    /// Handles every step due at or before `now` (never going back in
    /// time); returns the medium's time.
    fn advance(&mut self, now: SimTime) -> SimTime {
        let now = now.max(self.now);
        while self
            .steps
            .peek()
            .is_some_and(|Reverse(((at, ..), _))| *at <= now)
        {
            let Some(Reverse(((at, step, tx, to), slot))) = self.steps.pop() else {
                break;
            };
            match step {
                Step::ArrivalEnd => self.arrival_end(self.arrival_slots.position[slot], at),
                Step::TxEnd => self.tx_end(self.transmission_slots.position[slot], at),
                Step::ArrivalStart => {
                    // An arrival always starts before it ends (airtime is
                    // never zero), so its start is never left behind; the
                    // check keeps a stale step harmless all the same.
                    let index = self.arrival_slots.position[slot];
                    if self
                        .arrivals
                        .get(index)
                        .is_some_and(|a| a.tx == tx && a.to == to && !a.started)
                    {
                        self.arrival_start(index, at);
                    }
                }
            }
        }
        self.now = now;
        now
    }

    fn tx_end(&mut self, index: usize, at: SimTime) {
        let tx = self.transmissions.swap_remove(index);
        self.transmission_slots.free.push(tx.slot);
        if let Some(moved) = self.transmissions.get(index) {
            // The last one took its place.
            self.transmission_slots.position[moved.slot] = index;
        }
        self.radios[tx.from.index()].transmitting = None;
        self.settle(tx.from, at);
        self.pending.push(RadioEvent::TxEnd { radio: tx.from });
    }

    fn arrival_end(&mut self, index: usize, at: SimTime) {
        let arrival = self.arrivals.swap_remove(index);
        self.arrival_slots.free.push(arrival.slot);
        if let Some(moved) = self.arrivals.get(index) {
            // The last one took its place.
            self.arrival_slots.position[moved.slot] = index;
        }
        let radio = &mut self.radios[arrival.to.index()];
        if !radio.receiving.as_ref().is_some_and(|r| r.tx == arrival.tx) {
            return;
        }
        let Some(rx) = radio.receiving.take() else {
            return;
        };
        let outcome = if rx.corrupted {
            radio.stats.collisions += 1;
            RxOutcome::Collision
        } else {
            radio.stats.received += 1;
            RxOutcome::Ok
        };
        self.settle(arrival.to, at);
        self.pending.push(RadioEvent::RxEnd {
            radio: arrival.to,
            from: rx.from,
            frame: rx.frame,
            outcome,
        });
    }

    fn arrival_start(&mut self, index: usize, at: SimTime) {
        self.arrivals[index].started = true;
        let (to, tx) = (self.arrivals[index].to, self.arrivals[index].tx);
        let decodable = self.arrivals[index].frame.is_some();
        let radio = &self.radios[to.index()];
        if radio.transmitting.is_some() {
            if decodable {
                self.radios[to.index()].stats.missed_transmitting += 1;
            }
            return;
        }
        if let Some(rx) = &radio.receiving {
            let survives = self.survives(to, rx.tx, rx.power_mw, at);
            let radio = &mut self.radios[to.index()];
            if let Some(rx) = radio.receiving.as_mut() {
                rx.corrupted |= !survives;
            }
            if decodable {
                radio.stats.collisions += 1;
            }
            return;
        }
        if !radio.listening {
            if decodable {
                self.radios[to.index()].stats.missed_off += 1;
            }
            return;
        }
        if !decodable {
            return;
        }
        let power_mw = self.arrivals[index].power_mw;
        if !self.survives(to, tx, power_mw, at) {
            self.radios[to.index()].stats.collisions += 1;
            return;
        }
        let success = self.arrivals[index].success;
        if success < 1.0 && self.rng.gen::<f64>() >= success {
            self.radios[to.index()].stats.lost += 1;
            return;
        }
        let arrival = &mut self.arrivals[index];
        let Some(frame) = arrival.frame.take() else {
            return;
        };
        let from = arrival.from;
        self.radios[to.index()].receiving = Some(Receiving {
            tx,
            from,
            power_mw,
            corrupted: false,
            frame,
        });
        self.settle(to, at);
        self.pending.push(RadioEvent::RxStart { radio: to, from });
    }

    /// Whether the frame of transmission `tx` at `radio`, of power
    /// `power_mw`, survives what else is on air there at `at`.
    fn survives(&self, radio: RadioId, tx: u64, power_mw: f64, at: SimTime) -> bool {
        let mut others = self
            .arrivals
            .iter()
            .filter(|a| a.to == radio && a.tx != tx && a.on_air(at));
        let noise_floor_dbm = match &self.spec.propagation {
            Propagation::LogDistance(m) => Some(m.noise_floor_dbm),
            Propagation::Shadowing(s) => Some(s.noise_floor_dbm),
            Propagation::UnitDisk(_) => None,
        };
        match (&self.spec.reception, noise_floor_dbm) {
            (
                Reception::Sinr {
                    capture_threshold_db,
                },
                Some(noise_floor_dbm),
            ) => {
                let interference =
                    dbm_to_mw(noise_floor_dbm) + others.map(|a| a.power_mw).sum::<f64>();
                10.0 * (power_mw / interference).log10() >= *capture_threshold_db
            }
            // Without received powers (unit disk) any overlap destroys.
            _ => others.next().is_none(),
        }
    }

    /// Ends `radio`'s reception in progress, if any, as aborted.
    fn abort_reception(&mut self, radio: RadioId, at: SimTime) {
        let r = &mut self.radios[radio.index()];
        if let Some(rx) = r.receiving.take() {
            r.stats.aborted += 1;
            self.settle(radio, at);
            self.pending.push(RadioEvent::RxEnd {
                radio,
                from: rx.from,
                frame: rx.frame,
                outcome: RxOutcome::Aborted,
            });
        }
    }

    /// Moves `radio` to the state its flags say, counting the time spent in
    /// the one it leaves.
    fn settle(&mut self, radio: RadioId, at: SimTime) {
        let r = &mut self.radios[radio.index()];
        let state = if r.transmitting.is_some() {
            RadioState::Transmit
        } else if r.receiving.is_some() {
            RadioState::Receive
        } else if r.listening {
            RadioState::Listen
        } else {
            RadioState::Off
        };
        if state != r.state {
            r.stats.time.add(r.state, (at - r.since).as_nanos());
            r.since = at;
            r.state = state;
        }
    }
}
