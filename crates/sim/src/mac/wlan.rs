//! DCF stations on a shared [`RadioMedium`]: the glue that puts each
//! station's frames on air, hands it what its radio received and tells it
//! when its carrier sense changes. Collisions, capture and propagation are
//! the medium's; channel access, acknowledgements and retries are the
//! stations' ([`super::dcf`]).
//!
//! Sans-IO like its parts: [`Wlan::handle_timeout`] at the instants
//! [`Wlan::poll_timeout`] gives. At one instant the stations act first
//! (their frames go on air), then the medium's steps run and carrier sense
//! is read: two stations whose backoffs end in the same slot both send and
//! collide, as in the standard, where sensing takes part of a slot.

use rtolab_time::{SimDuration, SimTime};

use super::dcf::{Dcf, DcfEvent, DcfFrame, DcfSpec, StationId, TxRequest};
use crate::event::earliest;
use crate::radio::{Mobility, RadioEvent, RadioId, RadioMedium, RadioSpec, RxOutcome};
use crate::rng::SimRng;

/// What a [`Wlan`] reports, in time order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WlanEvent<P> {
    /// `station` put a frame on air.
    OnAir {
        /// The sender.
        station: StationId,
        /// The frame, its airtime and (data) its time since the first
        /// attempt.
        request: TxRequest<P>,
    },
    /// `station` received a frame intact (any frame, for captures).
    Heard {
        /// The receiver.
        station: StationId,
        /// The frame.
        frame: DcfFrame<P>,
    },
    /// What `station`'s DCF reported.
    Dcf {
        /// The station.
        station: StationId,
        /// Its report.
        event: DcfEvent<P>,
    },
}

/// DCF stations on a radio medium. Station `i` is radio `i`.
#[derive(Debug)]
pub struct Wlan<P> {
    medium: RadioMedium<DcfFrame<P>>,
    stations: Vec<Dcf<P>>,
    spec: DcfSpec,
    rng: SimRng,
    radio_events: Vec<RadioEvent<DcfFrame<P>>>,
}

impl<P: Clone> Wlan<P> {
    /// No stations yet; the medium draws from `medium_rng`, the stations'
    /// backoffs from `rng`.
    pub fn new(radio: RadioSpec, spec: DcfSpec, medium_rng: SimRng, rng: SimRng) -> Self {
        Wlan {
            medium: RadioMedium::new(radio, medium_rng),
            stations: Vec::new(),
            spec,
            rng,
            radio_events: Vec::new(),
        }
    }

    /// Adds a station that moves as `mobility`, its receiver on.
    pub fn add_station(&mut self, mobility: Mobility) -> StationId {
        let radio = self.medium.add_radio(mobility);
        self.medium.set_listening(SimTime::ZERO, radio, true);
        let id = radio.0 as StationId;
        self.stations.push(Dcf::new(self.spec, id));
        id
    }

    /// The stations.
    pub fn stations(&self) -> &[Dcf<P>] {
        &self.stations
    }

    /// The medium.
    pub fn medium(&self) -> &RadioMedium<DcfFrame<P>> {
        &self.medium
    }

    /// Hands `payload` (`len` bytes) to `from` for `to`.
    ///
    /// # Panics
    ///
    /// If `from` is not a station of this BSS.
    pub fn enqueue(
        &mut self,
        now: SimTime,
        from: StationId,
        to: StationId,
        payload: P,
        len: u32,
        out: &mut Vec<WlanEvent<P>>,
    ) {
        self.handle_timeout(now, out);
        self.stations[usize::from(from)].enqueue(now, to, payload, len, &mut self.rng);
        self.settle(now, out);
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        self.stations
            .iter()
            .fold(self.medium.poll_timeout(), |min, s| {
                earliest(min, s.poll_timeout())
            })
    }

    /// Handles everything due at or before `now`, appending reports to `out`.
    pub fn handle_timeout(&mut self, now: SimTime, out: &mut Vec<WlanEvent<P>>) {
        while let Some(at) = self.poll_timeout().filter(|&t| t <= now) {
            self.step(at, out);
        }
    }

    /// One instant: stations first, then the medium, until quiet.
    fn step(&mut self, now: SimTime, out: &mut Vec<WlanEvent<P>>) {
        for station in &mut self.stations {
            if station.poll_timeout().is_some_and(|t| t <= now) {
                station.handle_timeout(now, &mut self.rng);
            }
        }
        self.settle(now, out);
    }

    /// Puts requested frames on air, runs the medium's steps due at `now`,
    /// feeds their results and carrier sense to the stations, and repeats
    /// until nothing more happens at `now`.
    fn settle(&mut self, now: SimTime, out: &mut Vec<WlanEvent<P>>) {
        loop {
            let mut sent = false;
            for (i, station) in self.stations.iter_mut().enumerate() {
                while let Some(request) = station.poll_transmit() {
                    sent = true;
                    let radio = RadioId(i as u32);
                    // A DCF sends only when its own radio is idle, so the
                    // medium does not refuse; were it to, the frame is
                    // lost at once and the response timeout recovers.
                    let refused = self
                        .medium
                        .transmit(
                            now,
                            radio,
                            request.frame.clone(),
                            request.airtime.max(SimDuration::from_nanos(1)),
                        )
                        .is_err();
                    if refused {
                        station.handle_tx_end(now);
                        continue;
                    }
                    out.push(WlanEvent::OnAir {
                        station: i as StationId,
                        request,
                    });
                }
            }
            self.medium.handle_timeout(now, &mut self.radio_events);
            let progressed = sent || !self.radio_events.is_empty();
            // Drained rather than taken, so the buffer keeps its capacity
            // from one pass to the next.
            let mut events = std::mem::take(&mut self.radio_events);
            for event in events.drain(..) {
                match event {
                    RadioEvent::RxStart { .. } => {}
                    RadioEvent::RxEnd {
                        radio,
                        frame,
                        outcome,
                        ..
                    } => {
                        let station = &mut self.stations[radio.index()];
                        match outcome {
                            RxOutcome::Ok => {
                                out.push(WlanEvent::Heard {
                                    station: radio.0 as StationId,
                                    frame: frame.clone(),
                                });
                                station.handle_frame(now, Some(frame), &mut self.rng);
                            }
                            RxOutcome::Collision => station.handle_frame(now, None, &mut self.rng),
                            // Its own sending cut the frame short: nothing
                            // was heard in error.
                            RxOutcome::Aborted => {}
                        }
                    }
                    RadioEvent::TxEnd { radio } => {
                        self.stations[radio.index()].handle_tx_end(now);
                    }
                }
            }
            self.radio_events = events;
            for (i, station) in self.stations.iter_mut().enumerate() {
                let busy = !self.medium.channel_clear(now, RadioId(i as u32));
                station.set_channel_busy(now, busy);
                while let Some(event) = station.poll_event() {
                    out.push(WlanEvent::Dcf {
                        station: i as StationId,
                        event,
                    });
                }
            }
            if !progressed && self.stations.iter().all(|s| !s.has_transmit()) {
                break;
            }
        }
    }
}
