//! `kind = "fading"`: a full-duplex point-to-point radio link that goes
//! out for whole seconds at a time (a mobile in a tunnel, behind a
//! building, in a deep fade), and whose link layer says so to both of its
//! nodes ahead of time.
//!
//! Outages come from a schedule (`outages`), from a fading process
//! (`fading`): a two-state channel that stays up for an exponentially
//! distributed time of mean `mean_up`, then down for one of mean
//! `mean_down` (the continuous-time Gilbert–Elliott channel), or from the
//! received power of a mobile moving through path loss, shadowing and
//! fast fading (`signal`, see [`super::signal`]). A frame is
//! lost if any part of its time on the link, from its first bit leaving
//! the sender to its last bit arriving, falls in an outage: packets sent
//! into an outage are lost, and so are those in flight when it starts.
//!
//! The link layer's indications, delivered to the node at each end as
//! [`LinkIndication`]s (and traced as `link_indication` events):
//!
//! * `going_down`, `warning` before the outage starts, with the link's
//!   round trip and the outage duration it predicts: the true duration
//!   times `1 + duration_error`, times a further uniform random factor in
//!   `1 ± duration_spread` when that is set, so a study can ask what a
//!   wrong prediction costs;
//! * `gone`, when the outage starts;
//! * `up`, when it ends.
//!
//! With `predictor` (a `signal` link only), `going_down` comes instead from
//! the base station's predictor, which reads the received power and
//! extrapolates its trend ([`super::signal`]): it may come early, late, not
//! at all (the outage starts with `gone` alone), or for an outage that
//! never comes, in which case `up` withdraws it. Each outage's warning and
//! predicted duration, and each withdrawn alarm, are in the link's
//! counters (`fades`, `false_alarms`).
//!
//! The round trip it reports is what the link layer knows of itself: twice
//! the propagation delay plus the transmission of a full-size frame one way
//! and of an acknowledgement-sized one back.
//!
//! ```toml
//! [[link]]
//! name = "radio"
//! kind = "fading"
//! ends = [ { host = "base-station", address = "10.0.1.1/24" },
//!          { host = "mobile", address = "10.0.1.2/24" } ]
//! rate = "2Mbps"
//! delay = "10ms"
//! outages = [ { start = "10s", duration = "10s" } ]   # or:
//! # fading = { mean_up = "30s", mean_down = "5s" }
//! # signal = { speed = 10.0, path = [500.0, 1200.0] }   # every field optional
//! # predictor = { sample = "100ms", window = "1s", horizon = "1s", prior = "5s", smooth = "1s" }
//! warning = "500ms"          # optional, lead time of going_down
//! duration_error = 0.0       # optional, relative error of the prediction
//! duration_spread = 0.0      # optional, random part of that error
//! ```

use std::collections::VecDeque;

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::p2p::{count_as_lost, WiredSpec};
use super::signal::{
    channel_stream, Alarm, Channel, FadeRecord, FalseAlarm, Predictor, PredictorConfig,
    RawPredictor, RawSignal, Reading, SignalConfig, Verdict,
};
use super::{
    DirectionStats, Frame, LinkCheck, LinkIndication, LinkModel, LinkOut, LinkOutput, P2pConfig,
    P2pLink, Port, RawEnd, ScenarioLink,
};
use crate::config::{Attachment, Duration, Rate, ScenarioError};
use crate::pool::PacketId;
use crate::rng::SimRng;
use crate::trace::DropReason;

/// Default lead time of `going_down`: below the one second a fixed host's
/// retransmission timer can never go under (RFC 6298 §2.4), so a base
/// station that starts holding ACKs at the warning can release the first
/// before the sender times out; above a few round trips of a cellular
/// path, so it has ACKs to hold.
pub const DEFAULT_WARNING: SimDuration = SimDuration::from_millis(500);

/// Shortest mean up or down time of a fading process: below it the
/// process would re-arm its timer faster than any link layer reports.
pub const MIN_MEAN_SOJOURN: SimDuration = SimDuration::from_millis(1);

/// How far ahead a `signal` link looks for the start or the end of an
/// outage; one not found within it never comes.
const MAX_SCAN: SimDuration = SimDuration::from_secs(3600);

/// Size of a full-size frame and of an acknowledgement, for the round trip
/// the link reports.
const FULL_FRAME: u64 = 1500;
const ACK_FRAME: u64 = 52;

/// One scheduled outage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOutage {
    /// When it starts, since the run began. Required.
    start: Duration,
    /// How long it lasts. Required.
    duration: Duration,
}

/// An outage: from `start` (since the run began) for `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    /// When it starts, since the run began.
    pub start: SimDuration,
    /// How long it lasts.
    pub duration: SimDuration,
}

/// Where outages come from.
#[derive(Clone, Debug, PartialEq)]
pub enum OutageSource {
    /// A fixed list, sorted and not overlapping.
    Schedule(Vec<Outage>),
    /// Exponential up and down times (continuous-time two-state channel).
    TwoState {
        /// Mean time the link stays up.
        mean_up: SimDuration,
        /// Mean duration of an outage.
        mean_down: SimDuration,
    },
    /// Down while a received power is below a threshold.
    Signal(SignalConfig),
}

/// How the link layer predicts an outage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// How long before the outage `going_down` comes.
    pub warning: SimDuration,
    /// Relative error of the predicted duration (0.2: 20 % too long).
    pub duration_error: f64,
    /// Half-width of a uniform random relative error added to it.
    pub duration_spread: f64,
}

/// The outage fields of a fading link.
#[derive(Clone, Debug, PartialEq)]
pub struct FadingConfig {
    /// Where outages come from.
    pub source: OutageSource,
    /// How they are announced (when there is no predictor).
    pub prediction: Prediction,
    /// The base station's predictor, which announces them instead (with a
    /// `Signal` source only).
    pub predictor: Option<PredictorConfig>,
}

/// Counters of a [`FadingLink`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FadingStats {
    /// What a point-to-point link counts, indexed by sending port; frames
    /// lost to outages are `dropped_random_loss`.
    pub directions: [DirectionStats; 2],
    /// Outages that started.
    pub outages: u64,
    /// Time spent in outages so far, ns.
    pub down_ns: u64,
    /// Sum of the predicted durations announced, ns.
    pub predicted_down_ns: u64,
    /// Every outage that started, with its warning.
    pub fades: Vec<FadeRecord>,
    /// Warnings withdrawn with no outage.
    pub false_alarms: Vec<FalseAlarm>,
}

/// An outage the link has decided on.
#[derive(Clone, Copy, Debug)]
struct Planned {
    start: SimTime,
    end: SimTime,
    predicted: SimDuration,
}

/// The next indication due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// `going_down` of the planned outage is due.
    Warn,
    /// `gone` is due.
    Gone,
    /// `up` is due.
    Up,
    /// Nothing more will happen.
    Done,
}

/// A point-to-point link with outages and link-layer indications.
#[derive(Debug)]
pub struct FadingLink<P> {
    inner: P2pLink<P>,
    config: FadingConfig,
    rng: SimRng,
    /// Index of the next scheduled outage to plan.
    next_scheduled: usize,
    /// The outage in progress or coming.
    planned: Option<Planned>,
    phase: Phase,
    /// Outages that started, newest last, to judge frames in flight.
    past: VecDeque<(SimTime, SimTime)>,
    /// The longest a frame can spend on the link: its longest transmission
    /// plus the delay.
    max_span: SimDuration,
    link_rtt: SimDuration,
    /// Frames and bytes lost to outages, per sending port.
    dropped: [(u64, u64); 2],
    outages: u64,
    predicted_down: SimDuration,
    /// Time spent in outages that have ended.
    ended_down: SimDuration,
    /// The received-power channel (a `Signal` source).
    channel: Option<Channel>,
    predictor: Option<Predictor>,
    /// The `going_down` standing (when, the duration it announced).
    warned: Option<(SimTime, SimDuration)>,
    fades: Vec<FadeRecord>,
    false_alarms: Vec<FalseAlarm>,
}

impl<P: Copy> FadingLink<P> {
    /// A new idle link; `rng` draws the fading process and the prediction
    /// errors.
    pub fn new(link: P2pConfig, config: FadingConfig, mut rng: SimRng) -> Self {
        let link_rtt = link.delay.saturating_mul(2)
            + SimDuration::transmission(FULL_FRAME, link.rate_bps)
            + SimDuration::transmission(ACK_FRAME, link.rate_bps);
        let max_span = link.delay + SimDuration::transmission(u64::from(u16::MAX), link.rate_bps);
        let channel = match &config.source {
            OutageSource::Signal(signal) => Some(Channel::new(
                signal.clone(),
                config.predictor.map(|p| p.sample),
                channel_stream(&mut rng),
            )),
            _ => None,
        };
        let predictor = config.predictor.map(Predictor::new);
        let mut fading = FadingLink {
            // The wrapped link loses nothing, so it never draws from its
            // copy of the stream.
            inner: P2pLink::new(P2pConfig { loss: 0.0, ..link }, rng.clone()),
            config,
            rng,
            next_scheduled: 0,
            planned: None,
            phase: Phase::Done,
            past: VecDeque::new(),
            max_span,
            link_rtt,
            dropped: [(0, 0); 2],
            outages: 0,
            predicted_down: SimDuration::ZERO,
            ended_down: SimDuration::ZERO,
            channel,
            predictor,
            warned: None,
            fades: Vec::new(),
            false_alarms: Vec::new(),
        };
        fading.plan_next(SimTime::ZERO);
        fading
    }

    /// The round trip the link reports with `going_down`.
    pub fn link_rtt(&self) -> SimDuration {
        self.link_rtt
    }

    /// Decides the next outage, starting no earlier than `after`.
    fn plan_next(&mut self, after: SimTime) {
        let outage = match &self.config.source {
            OutageSource::Schedule(list) => {
                let Some(o) = list.get(self.next_scheduled) else {
                    self.planned = None;
                    self.phase = Phase::Done;
                    return;
                };
                self.next_scheduled += 1;
                let start = (SimTime::ZERO + o.start).max(after);
                (start, start + o.duration)
            }
            &OutageSource::TwoState { mean_up, mean_down } => {
                let up = self.exponential(mean_up);
                let down = self.exponential(mean_down);
                (after + up, after + up + down)
            }
            OutageSource::Signal(_) => {
                let Some(channel) = self.channel.as_mut() else {
                    return;
                };
                let Some(start) = channel.next_change(true, after + MAX_SCAN) else {
                    self.planned = None;
                    self.phase = Phase::Done;
                    return;
                };
                let end = channel
                    .next_change(false, start + MAX_SCAN)
                    .unwrap_or(SimTime::MAX);
                (start, end)
            }
        };
        let truth = outage.1.saturating_since(outage.0).as_secs_f64();
        let p = self.config.prediction;
        let noise = if p.duration_spread > 0.0 {
            self.rng.gen_range(-p.duration_spread..=p.duration_spread)
        } else {
            0.0
        };
        let predicted =
            SimDuration::from_secs_f64((truth * (1.0 + p.duration_error + noise)).max(0.0));
        self.planned = Some(Planned {
            start: outage.0,
            end: outage.1,
            predicted,
        });
        // A predictor warns on its own readings, not ahead of the truth.
        self.phase = if self.predictor.is_some() {
            Phase::Gone
        } else {
            Phase::Warn
        };
    }

    /// An exponential draw of the given mean, at least one nanosecond so
    /// time always moves.
    fn exponential(&mut self, mean: SimDuration) -> SimDuration {
        crate::rng::exponential(&mut self.rng, mean)
    }

    /// When the next indication is due.
    fn next_indication(&self) -> Option<SimTime> {
        let planned = self.planned?;
        match self.phase {
            Phase::Warn => Some(planned.start.saturating_sub(self.config.prediction.warning)),
            Phase::Gone => Some(planned.start),
            Phase::Up => Some(planned.end),
            Phase::Done => None,
        }
    }

    /// When the predictor next reads the power.
    fn next_sample(&self) -> Option<SimTime> {
        self.predictor.as_ref().map(|p| p.next_sample)
    }

    /// Emits every indication due at or before `now`, to both ends; the
    /// link's own events come before a reading due at the same instant.
    fn indicate(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        loop {
            let truth = self.next_indication().filter(|&at| at <= now);
            let sample = self.next_sample().filter(|&at| at <= now);
            let indication = match (truth, sample) {
                (Some(a), Some(b)) if b < a => self.read_power(b),
                (Some(a), _) => self.advance(a),
                (None, Some(b)) => self.read_power(b),
                (None, None) => break,
            };
            if let Some(indication) = indication {
                for port in 0..2 {
                    out.push(LinkOutput::Indication { port, indication });
                }
            }
        }
    }

    /// The link's next own event, due at `at`.
    fn advance(&mut self, at: SimTime) -> Option<LinkIndication> {
        let planned = self.planned?;
        Some(match self.phase {
            Phase::Warn => {
                self.phase = Phase::Gone;
                self.warn(at, planned.predicted)
            }
            Phase::Gone => {
                self.phase = Phase::Up;
                self.outages += 1;
                self.past.push_back((planned.start, planned.end));
                let warned = self.warned.take();
                if let Some(p) = self.predictor.as_mut() {
                    p.alarm = None;
                }
                self.fades.push(FadeRecord {
                    start_ns: planned.start.as_nanos(),
                    end_ns: planned.end.as_nanos(),
                    warned_ns: warned.map(|w| w.0.as_nanos()),
                    predicted_ns: warned.map(|w| w.1.as_nanos()),
                });
                LinkIndication::Gone
            }
            Phase::Up => {
                let duration = planned.end.saturating_since(planned.start);
                self.ended_down += duration;
                if let Some(p) = self.predictor.as_mut() {
                    p.learn(duration);
                }
                self.plan_next(at);
                LinkIndication::Up
            }
            Phase::Done => return None,
        })
    }

    /// `going_down` now, announcing `predicted`.
    fn warn(&mut self, at: SimTime, predicted: SimDuration) -> LinkIndication {
        self.predicted_down += predicted;
        self.warned = Some((at, predicted));
        LinkIndication::GoingDown {
            rtt: self.link_rtt,
            expected_outage: predicted,
        }
    }

    /// The predictor's reading due at `at`, and what it makes of it.
    fn read_power(&mut self, at: SimTime) -> Option<LinkIndication> {
        let (Some(predictor), Some(channel)) = (self.predictor.as_mut(), self.channel.as_mut())
        else {
            return None;
        };
        predictor.next_sample = at + predictor.config.sample;
        channel.advance_to(at);
        let from = predictor.oldest(at);
        let readings: Vec<Reading> = channel.readings(from, at).copied().collect();
        // Nothing to predict while the link is out.
        if self.phase == Phase::Up {
            return None;
        }
        let threshold = channel.config().threshold_dbm;
        match predictor.judge(at, &readings, threshold) {
            Verdict::Quiet => None,
            Verdict::Raise(predicted) => {
                predictor.alarm = Some(Alarm {
                    raised: at,
                    predicted,
                });
                Some(self.warn(at, predicted))
            }
            Verdict::Withdraw => {
                predictor.alarm = None;
                if let Some((raised, _)) = self.warned.take() {
                    self.false_alarms.push(FalseAlarm {
                        raised_ns: raised.as_nanos(),
                        withdrawn_ns: at.as_nanos(),
                    });
                }
                Some(LinkIndication::Up)
            }
        }
    }

    /// Whether a frame whose transmission started at `sent` and that
    /// arrives now met an outage.
    fn met_outage(&self, sent: SimTime, now: SimTime) -> bool {
        self.past
            .iter()
            .rev()
            .any(|&(start, end)| start <= now && end > sent)
    }

    /// Turns each delivery in `out[first..]` that met an outage into a drop
    /// at the receiver.
    fn apply_outages(&mut self, now: SimTime, first: usize, out: &mut [LinkOutput<P>]) {
        // Outages that ended before anything still in flight was sent can
        // no longer matter: forgotten once per call, not per delivery.
        let horizon = now.saturating_sub(self.max_span);
        while self.past.front().is_some_and(|&(_, end)| end < horizon) {
            self.past.pop_front();
        }
        let c = *self.inner.config();
        for output in &mut out[first..] {
            let LinkOutput::Delivered { port, frame } = *output else {
                continue;
            };
            let sent = now
                .saturating_sub(c.delay)
                .saturating_sub(SimDuration::transmission(u64::from(frame.len), c.rate_bps));
            if self.met_outage(sent, now) {
                let from = (1 - port) as usize;
                self.dropped[from].0 += 1;
                self.dropped[from].1 += u64::from(frame.len);
                *output = LinkOutput::Dropped {
                    port,
                    frame,
                    reason: DropReason::LinkDown,
                };
            }
        }
    }
}

impl<P: Copy> LinkModel<P> for FadingLink<P> {
    type Stats = FadingStats;

    fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        _to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    ) {
        self.indicate(now, out);
        let first = out.len();
        self.inner.transmit(now, from, frame, out);
        self.apply_outages(now, first, out);
    }

    fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        // Indications first: a frame arriving at the instant an outage
        // starts is judged with that outage known.
        self.indicate(now, out);
        let first = out.len();
        self.inner.handle_timeout(now, out);
        self.apply_outages(now, first, out);
    }

    fn poll_timeout(&self) -> Option<SimTime> {
        [
            self.inner.poll_timeout(),
            self.next_indication(),
            self.next_sample(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn stats(&self, now: SimTime) -> FadingStats {
        let mut directions = self.inner.stats(now).directions;
        count_as_lost(&mut directions, self.dropped);
        let mut down = SimDuration::ZERO;
        if let (Some(p), Phase::Up) = (self.planned, self.phase) {
            down = now.min(p.end).saturating_since(p.start);
        }
        FadingStats {
            directions,
            outages: self.outages,
            down_ns: (self.ended_down + down).as_nanos(),
            predicted_down_ns: self.predicted_down.as_nanos(),
            fades: self.fades.clone(),
            false_alarms: self.false_alarms.clone(),
        }
    }

    fn set_start_notices(&mut self, on: bool) {
        self.inner.set_start_notices(on);
    }
}

/// The `[[link]]` fields of a fading link.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFading {
    /// The two ends, as on a point-to-point link. Required.
    ends: Option<Vec<RawEnd>>,
    /// Bit rate each way, like `"10Mbps"`. Required.
    rate: Option<Rate>,
    /// One-way propagation delay, like `"5ms"`. Required.
    delay: Option<Duration>,
    /// Frames that may wait at each end. Unit: packets. Default: 100.
    queue: Option<usize>,
    /// Scheduled outages, `{ start, duration }` each, sorted and not overlapping; one of
    /// `outages`, `fading` and `signal` sets when the link is out. Default: none.
    outages: Option<Vec<RawOutage>>,
    /// A two-state process, `{ mean_up, mean_down }`: exponential up and down times with these
    /// means (at least 1 ms). Default: none.
    fading: Option<RawTwoState>,
    /// Outages from the received power of a moving mobile (path loss, shadowing, fast fading, a
    /// threshold with hysteresis); its fields are in ack-holding.md. Default: none.
    signal: Option<RawSignal>,
    /// With `signal`: the base station predicts fades from the power's trend, `{ sample,
    /// window, horizon, prior, smooth }` (ack-holding.md). Default: none (warnings come ahead
    /// of the true outages).
    predictor: Option<RawPredictor>,
    /// How long before each outage both ends hear `going_down`. Default: `"500ms"`.
    warning: Option<Duration>,
    /// Relative error of the predicted outage duration: the prediction is the true one times `1
    /// + duration_error`. Default: 0.
    duration_error: Option<f64>,
    /// Spread of the predicted duration: it is further multiplied by a random `1 ±
    /// duration_spread`, below 1. Default: 0.
    duration_spread: Option<f64>,
}

/// The `fading` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTwoState {
    /// Mean of the exponential up times, at least 1 ms. Required.
    mean_up: Option<Duration>,
    /// Mean of the exponential down times, at least 1 ms. Required.
    mean_down: Option<Duration>,
}

/// A validated fading link.
#[derive(Clone, Debug, PartialEq)]
pub struct FadingSpec {
    /// Ends, rate, delay and queue, as on a point-to-point link (its
    /// `loss` is zero).
    pub wired: WiredSpec,
    /// Outages and their prediction.
    pub fading: FadingConfig,
}

impl ScenarioLink for FadingSpec {
    const KIND: &'static str = "fading";
    type Raw = RawFading;
    type Model = FadingLink<PacketId>;

    fn validate(raw: RawFading, cx: &mut LinkCheck<'_>) -> Result<Self, ScenarioError> {
        let wired = WiredSpec::validate_lossless(raw.ends, raw.rate, raw.delay, raw.queue, cx)?;
        let given = [
            ("outages", raw.outages.is_some()),
            ("fading", raw.fading.is_some()),
            ("signal", raw.signal.is_some()),
        ];
        let second = given.iter().filter(|g| g.1).nth(1).map(|g| g.0);
        let source = match (raw.outages, raw.fading, raw.signal) {
            (None, None, Some(signal)) => {
                OutageSource::Signal(SignalConfig::validate(signal, &cx.at("signal"))?)
            }
            (None, None, None) => {
                return Err(ScenarioError::new(
                    cx.at("outages"),
                    format!(
                    "required for {} (or fading = {{ mean_up, mean_down }}, or signal = {{ .. }})",
                    cx.what
                ),
                ))
            }
            (Some(list), None, None) => {
                let mut outages = Vec::with_capacity(list.len());
                let mut end = SimDuration::ZERO;
                for (i, o) in list.iter().enumerate() {
                    let at = |field: &str| cx.at(&format!("outages[{i}].{field}"));
                    if o.duration.0.is_zero() {
                        return Err(ScenarioError::new(at("duration"), "must be positive"));
                    }
                    if i > 0 && o.start.0 < end {
                        return Err(ScenarioError::new(
                            at("start"),
                            "must not be before the end of the previous outage",
                        ));
                    }
                    end = o.start.0 + o.duration.0;
                    outages.push(Outage {
                        start: o.start.0,
                        duration: o.duration.0,
                    });
                }
                OutageSource::Schedule(outages)
            }
            (None, Some(two), None) => {
                let mean = |value: Option<Duration>, field: &str| {
                    let path = cx.at(&format!("fading.{field}"));
                    let d = value
                        .ok_or_else(|| ScenarioError::new(&path, "required for a fading process"))?
                        .0;
                    if d < MIN_MEAN_SOJOURN {
                        return Err(ScenarioError::new(path, "must be at least 1ms"));
                    }
                    Ok(d)
                };
                OutageSource::TwoState {
                    mean_up: mean(two.mean_up, "mean_up")?,
                    mean_down: mean(two.mean_down, "mean_down")?,
                }
            }
            _ => {
                return Err(ScenarioError::new(
                    cx.at(second.unwrap_or("signal")),
                    "give one of outages, fading and signal",
                ))
            }
        };
        let predictor = match raw.predictor {
            None => None,
            Some(_) if !matches!(source, OutageSource::Signal(_)) => {
                return Err(ScenarioError::new(
                    cx.at("predictor"),
                    "needs signal = { .. }: it reads the received power",
                ))
            }
            Some(_) if raw.warning.is_some() || raw.duration_error.is_some() || raw.duration_spread.is_some() => {
                return Err(ScenarioError::new(
                    cx.at("predictor"),
                    "announces outages itself: give no warning, duration_error or duration_spread with it",
                ))
            }
            Some(p) => Some(PredictorConfig::validate(p, &cx.at("predictor"))?),
        };
        let duration_error = raw.duration_error.unwrap_or(0.0);
        if !duration_error.is_finite() || duration_error <= -1.0 {
            return Err(ScenarioError::new(
                cx.at("duration_error"),
                format!("must be a number above -1 (a prediction of a positive duration), got {duration_error}"),
            ));
        }
        let duration_spread = raw.duration_spread.unwrap_or(0.0);
        if !(0.0..1.0).contains(&duration_spread) {
            return Err(ScenarioError::new(
                cx.at("duration_spread"),
                format!("must be at least 0 and below 1, got {duration_spread}"),
            ));
        }
        Ok(FadingSpec {
            wired,
            fading: FadingConfig {
                source,
                prediction: Prediction {
                    warning: raw.warning.map_or(DEFAULT_WARNING, |d| d.0),
                    duration_error,
                    duration_spread,
                },
                predictor,
            },
        })
    }

    fn rate_bps(&self) -> u64 {
        self.wired.rate_bps
    }

    fn attachments(&self) -> Vec<Attachment> {
        self.wired.attachments()
    }

    fn build(&self, rng: SimRng) -> FadingLink<PacketId> {
        FadingLink::new(self.wired.lossless(), self.fading.clone(), rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::component_stream;

    fn link(source: OutageSource, prediction: Prediction) -> FadingLink<u32> {
        FadingLink::new(
            P2pConfig {
                rate_bps: 8_000_000,
                delay: SimDuration::from_millis(10),
                queue_capacity: 1000,
                loss: 0.0,
            },
            FadingConfig {
                source,
                prediction,
                predictor: None,
            },
            component_stream(1, "link/radio"),
        )
    }

    fn exact(warning_ms: u64) -> Prediction {
        Prediction {
            warning: SimDuration::from_millis(warning_ms),
            duration_error: 0.0,
            duration_spread: 0.0,
        }
    }

    fn one_outage(start_s: u64, secs: u64) -> OutageSource {
        OutageSource::Schedule(vec![Outage {
            start: SimDuration::from_secs(start_s),
            duration: SimDuration::from_secs(secs),
        }])
    }

    /// Runs the link to `until`, sending a 1000-byte frame from port 0
    /// every `every`; returns (time, output) pairs.
    fn drive(
        l: &mut FadingLink<u32>,
        until: SimTime,
        every: SimDuration,
    ) -> Vec<(SimTime, LinkOutput<u32>)> {
        let mut seen = Vec::new();
        let mut out = LinkOut::new();
        let mut next_send = SimTime::ZERO;
        let mut id = 0;
        loop {
            let wake = l.poll_timeout().unwrap_or(until).min(next_send);
            if wake > until {
                break;
            }
            if wake == next_send {
                l.transmit(
                    wake,
                    0,
                    1,
                    Frame {
                        packet: id,
                        len: 1000,
                    },
                    &mut out,
                );
                id += 1;
                next_send += every;
            } else {
                l.handle_timeout(wake, &mut out);
            }
            seen.extend(out.drain(..).map(|o| (wake, o)));
        }
        seen
    }

    fn indications(
        seen: &[(SimTime, LinkOutput<u32>)],
        port: Port,
    ) -> Vec<(SimTime, LinkIndication)> {
        seen.iter()
            .filter_map(|&(t, ref o)| match *o {
                LinkOutput::Indication {
                    port: p,
                    indication,
                } if p == port => Some((t, indication)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn indications_come_at_the_warning_the_start_and_the_end_at_both_ends() {
        let mut l = link(one_outage(10, 5), exact(500));
        let seen = drive(
            &mut l,
            SimTime::from_secs(20),
            SimDuration::from_millis(100),
        );
        for port in 0..2 {
            let got = indications(&seen, port);
            assert_eq!(got.len(), 3, "{got:?}");
            assert_eq!(got[0].0, SimTime::from_millis(9_500));
            let LinkIndication::GoingDown {
                rtt,
                expected_outage,
            } = got[0].1
            else {
                panic!("{got:?}")
            };
            assert_eq!(expected_outage, SimDuration::from_secs(5));
            // 2 × 10 ms + 1500 B and 52 B at 8 Mbit/s.
            assert_eq!(rtt, SimDuration::from_micros(20_000 + 1_500 + 52));
            assert_eq!(got[1], (SimTime::from_secs(10), LinkIndication::Gone));
            assert_eq!(got[2], (SimTime::from_secs(15), LinkIndication::Up));
        }
    }

    #[test]
    fn frames_that_meet_the_outage_are_lost_and_the_others_arrive() {
        let mut l = link(one_outage(10, 5), exact(500));
        let seen = drive(
            &mut l,
            SimTime::from_secs(20),
            SimDuration::from_millis(100),
        );
        let mut lost = 0;
        for &(t, ref o) in &seen {
            match *o {
                LinkOutput::Delivered { frame, .. } => {
                    // Sent at packet × 100 ms, on the link for 11 ms.
                    let sent = SimTime::from_millis(u64::from(frame.packet) * 100);
                    assert!(
                        t <= SimTime::from_secs(10) || sent >= SimTime::from_secs(15),
                        "{t:?}"
                    );
                }
                LinkOutput::Dropped { reason, .. } => {
                    assert_eq!(reason, DropReason::LinkDown);
                    lost += 1;
                }
                _ => {}
            }
        }
        // Frames sent from 9.99 s (in flight at 10 s) to 14.9 s.
        assert_eq!(lost, 50);
        let stats = l.stats(SimTime::from_secs(20));
        assert_eq!(stats.directions[0].dropped_random_loss, 50);
        assert_eq!(stats.outages, 1);
        assert_eq!(stats.down_ns, 5_000_000_000);
    }

    #[test]
    fn the_prediction_is_off_by_the_configured_error() {
        let mut l = link(
            one_outage(10, 10),
            Prediction {
                warning: SimDuration::from_millis(200),
                duration_error: -0.3,
                duration_spread: 0.0,
            },
        );
        let seen = drive(&mut l, SimTime::from_secs(30), SimDuration::from_secs(1));
        let got = indications(&seen, 1);
        assert_eq!(got[0].0, SimTime::from_millis(9_800));
        assert!(matches!(
            got[0].1,
            LinkIndication::GoingDown { expected_outage, .. } if expected_outage == SimDuration::from_secs(7)
        ));
    }

    #[test]
    fn a_two_state_channel_is_down_for_its_long_run_share() {
        let mut l = link(
            OutageSource::TwoState {
                mean_up: SimDuration::from_secs(3),
                mean_down: SimDuration::from_secs(1),
            },
            exact(100),
        );
        let end = SimTime::from_secs(4000);
        drive(&mut l, end, SimDuration::from_secs(1));
        let stats = l.stats(end);
        let share = stats.down_ns as f64 / end.as_nanos() as f64;
        assert!((share - 0.25).abs() < 0.03, "down {share}");
        // About 4000 / 4 = 1000 outages.
        assert!((900..1100).contains(&stats.outages), "{}", stats.outages);
    }
}

#[cfg(test)]
mod signal_tests {
    use super::*;
    use crate::rng::component_stream;

    fn signal_link(seed: u64, predictor: Option<PredictorConfig>) -> FadingLink<u32> {
        FadingLink::new(
            P2pConfig {
                rate_bps: 2_000_000,
                delay: SimDuration::from_millis(10),
                queue_capacity: 100,
                loss: 0.0,
            },
            FadingConfig {
                source: OutageSource::Signal(SignalConfig::default()),
                prediction: Prediction {
                    warning: DEFAULT_WARNING,
                    duration_error: 0.0,
                    duration_spread: 0.0,
                },
                predictor,
            },
            component_stream(seed, "link/radio"),
        )
    }

    fn run(l: &mut FadingLink<u32>, until: SimTime) -> Vec<(SimTime, LinkIndication)> {
        let mut out = LinkOut::new();
        let mut seen = Vec::new();
        while let Some(t) = l.poll_timeout().filter(|&t| t <= until) {
            l.handle_timeout(t, &mut out);
            seen.extend(out.drain(..).filter_map(|o| match o {
                LinkOutput::Indication {
                    port: 0,
                    indication,
                } => Some((t, indication)),
                _ => None,
            }));
        }
        seen
    }

    #[test]
    fn the_default_signal_fades_for_seconds_and_the_same_seed_fades_alike() {
        let end = SimTime::from_secs(600);
        let mut l = signal_link(1, None);
        let seen = run(&mut l, end);
        let stats = l.stats(end);
        let durations: Vec<f64> = stats
            .fades
            .iter()
            .map(|f| (f.end_ns - f.start_ns) as f64 / 1e9)
            .collect();
        assert!(durations.len() >= 5, "{durations:?}");
        let mean = durations.iter().sum::<f64>() / durations.len() as f64;
        assert!((1.0..30.0).contains(&mean), "mean outage {mean} s");
        // The oracle warns 500 ms ahead of each, with the true duration.
        for f in &stats.fades {
            let warned = f.warned_ns.expect("the oracle warns every outage");
            assert!(f.start_ns - warned <= DEFAULT_WARNING.as_nanos());
            assert_eq!(f.predicted_ns, Some(f.end_ns - f.start_ns));
        }
        let mut again = signal_link(1, None);
        assert_eq!(run(&mut again, end), seen);
        let mut other = signal_link(2, None);
        assert_ne!(run(&mut other, end), seen);
    }

    #[test]
    fn smoothing_the_readings_removes_most_false_alarms() {
        let end = SimTime::from_secs(600);
        let count = |smooth: SimDuration| {
            let mut l = signal_link(
                4,
                Some(PredictorConfig {
                    smooth,
                    ..PredictorConfig::default()
                }),
            );
            run(&mut l, end);
            let stats = l.stats(end);
            let warned = stats.fades.iter().filter(|f| f.warned_ns.is_some()).count();
            (stats.fades.len(), warned, stats.false_alarms.len())
        };
        let (fades, raw_warned, raw_false) = count(SimDuration::ZERO);
        let (same, warned, false_alarms) = count(SimDuration::from_secs(1));
        assert_eq!(fades, same, "the channel does not depend on the predictor");
        assert!(
            false_alarms * 3 < raw_false,
            "{false_alarms} vs {raw_false}"
        );
        assert!(
            warned * 10 >= raw_warned * 8,
            "{warned} vs {raw_warned} of {fades}"
        );
    }

    #[test]
    fn the_predictor_warns_of_most_fades_ahead_and_withdraws_false_alarms() {
        let end = SimTime::from_secs(1200);
        let mut l = signal_link(3, Some(PredictorConfig::default()));
        let seen = run(&mut l, end);
        let stats = l.stats(end);
        assert!(stats.fades.len() >= 10, "{}", stats.fades.len());
        let warned: Vec<&FadeRecord> = stats
            .fades
            .iter()
            .filter(|f| f.warned_ns.is_some())
            .collect();
        // A trend over a second foresees most fades, never all.
        assert!(
            warned.len() * 2 > stats.fades.len(),
            "{} of {}",
            warned.len(),
            stats.fades.len()
        );
        for f in &warned {
            assert!(f.warned_ns.unwrap() < f.start_ns);
        }
        // Every going_down is followed by gone (a fade) or by up (a
        // withdrawal), and every withdrawal is a recorded false alarm.
        let mut withdrawals = 0;
        let mut raised = 0;
        for pair in seen.windows(2) {
            if let LinkIndication::GoingDown { .. } = pair[0].1 {
                raised += 1;
                assert!(matches!(
                    pair[1].1,
                    LinkIndication::Gone | LinkIndication::Up
                ));
                if pair[1].1 == LinkIndication::Up {
                    withdrawals += 1;
                }
            }
        }
        assert_eq!(withdrawals, stats.false_alarms.len());
        assert_eq!(raised, warned.len() + withdrawals);
        // A warning before any outage announces the prior, later ones the
        // mean of the outages seen before them.
        for (i, f) in stats.fades.iter().enumerate() {
            let Some(predicted) = f.predicted_ns else {
                continue;
            };
            let before: u64 = stats.fades[..i].iter().map(|f| f.end_ns - f.start_ns).sum();
            let want = if i == 0 {
                5_000_000_000
            } else {
                before / i as u64
            };
            assert_eq!(predicted, want, "fade {i}");
        }
    }
}
