//! The received-power channel of a `fading` link (`signal = { .. }`) and
//! the base station's predictor of its fades (`predictor = { .. }`).
//!
//! **The channel.** A mobile moves back and forth along `path` (distances
//! from the base station, metres) at `speed`. Every [`STEP`] the received
//! power is
//!
//! ```text
//! P = tx_power − PL(d) + S + 10 log10 g
//! PL(d) = reference_loss + 10 · exponent · log10(d / reference_distance)
//! ```
//!
//! with `S` log-normal shadowing correlated over the distance travelled
//! as Gudmundson measured it (M. Gudmundson, "Correlation model for shadow
//! fading in mobile radio systems", Electronics Letters 27(23), 1991): an
//! exponential autocorrelation `R(Δx) = exp(−Δx / decorrelation_distance)`,
//! generated as the first-order autoregression that has exactly that
//! autocorrelation; and `g` the power of Rayleigh fast fading averaged over
//! the step (off with `fast_fading = false`), from a sum of sinusoids with
//! random arrival angles and phases (Y. R. Zheng and C. Xiao, "Simulation
//! models with correct statistical properties for Rayleigh fading
//! channels", IEEE Trans. Communications 51(6), 2003), whose
//! autocorrelation is Clarke's `J0(2π f_d τ)` with the Doppler frequency
//! `f_d = speed · carrier / c`. The link is down from the step at which the
//! power averaged over `average` falls below `threshold_dbm` until the one
//! at which it is back at `threshold_dbm + hysteresis_db`.
//!
//! Defaults, and where they come from:
//!
//! | field | default | source |
//! |---|---|---|
//! | `tx_power_dbm` | 23 | a handset's maximum (3GPP power class 3): the uplink limits the link |
//! | `reference_distance`, `reference_loss_db`, `exponent` | 1 m, 15.3 dB, 3.76 | 3GPP TR 36.942's macro-cell path loss at 2 GHz, `128.1 + 37.6 log10(R/km)`, in metres |
//! | `shadowing_sigma_db` | 8 | macro-cell shadowing in 3GPP's system simulations (TR 25.814); Gudmundson measured 7.5 dB |
//! | `decorrelation_distance` | 50 m | 3GPP's macro-cell shadowing decorrelation distance (TR 25.814) |
//! | `carrier_hz` | 2 GHz | the frequency of the path loss above |
//! | `speed` | 10 m/s | a vehicle in town (36 km/h); a 50 m shadow fade then lasts seconds |
//! | `path` | 500 m and 1200 m | open: chosen so that fades of seconds come every tens of seconds |
//! | `threshold_dbm` | −110 | thermal noise in 5 MHz (−107 dBm) plus a 5 dB base-station noise figure (TR 36.942), at the −8 dB SINR where LTE declares a link out of sync (Qout, TS 36.133) |
//! | `hysteresis_db` | 2 | LTE's gap between out of sync (Qout) and back in sync (Qin) |
//! | `average` | 1 s | LTE's T310 default (TS 36.331): a link is declared lost after a second out of sync, so shorter dips are ridden out; a one-second mean stands in for that rule |
//!
//! **The predictor.** The base station's link layer reads the received
//! power every `sample` (a beacon's RSSI: the power of one step, fast
//! fading included), smooths each reading into the mean power (in mW) of
//! the readings of the last `smooth` (the link's own averaging, so that the
//! trend is that of the power the link's state follows, without fast
//! fading's dips; zero keeps the raw readings), fits a straight line by
//! least squares to the smoothed readings of the last `window`, and raises
//! `going_down` when the line reaches the threshold within `horizon`. The duration it announces is the mean of
//! the outages the link has had so far, `prior` before the first: the
//! trend says when the signal will cross the threshold, but not how deep
//! or long the fade is, which depends on the obstacle's extent and the
//! mobile's speed; the outages already seen on the same path at the same
//! speed are the base station's best evidence of that. An alarm whose line
//! no longer reaches the threshold within the horizon, or that is older
//! than twice the horizon with no outage, is withdrawn with `up` (a false
//! alarm): the schemes that hold or freeze at `going_down` then resume.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use crate::config::{Duration, ScenarioError};
use crate::radio::propagation::{dbm_to_mw, standard_normal, LogDistance, SPEED_OF_LIGHT};
use crate::rng::SimRng;

/// The channel's time step: the power is computed, averaged and compared
/// with the threshold every 10 ms.
pub const STEP: SimDuration = SimDuration::from_millis(10);

/// Points at which fast fading is evaluated within a step (1 ms apart).
const SUBSTEPS: u32 = 10;

/// Highest Doppler frequency the 1 ms points resolve with margin (a
/// quarter of their rate).
pub const MAX_DOPPLER_HZ: f64 = 250.0;

/// Sinusoids per quadrature component of the fast fading.
const SINUSOIDS: usize = 16;

/// The fields of a `signal` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSignal {
    /// Transmit power (a handset's maximum, 3GPP power class 3). Unit: dBm. Default: 23.
    tx_power_dbm: Option<f64>,
    /// Distance at which the path loss is `reference_loss_db`. Unit: m. Default: 1.
    reference_distance: Option<f64>,
    /// Path loss at `reference_distance` (3GPP TR 36.942's macro-cell law at 2 GHz). Unit: dB.
    /// Default: 15.3.
    reference_loss_db: Option<f64>,
    /// Path-loss exponent. Default: 3.76.
    exponent: Option<f64>,
    /// Standard deviation of the shadowing. Unit: dB. Default: 8.
    shadowing_sigma_db: Option<f64>,
    /// Distance over which the shadowing's correlation falls to 1/e. Unit: m. Default: 50.
    decorrelation_distance: Option<f64>,
    /// Whether Rayleigh fast fading is added. Default: true.
    fast_fading: Option<bool>,
    /// Carrier frequency, which sets the fast fading's Doppler. Unit: Hz. Default: 2e9.
    carrier_hz: Option<f64>,
    /// Speed of the mobile along `path`. Unit: m/s. Default: 10.
    speed: Option<f64>,
    /// Distances from the base station the mobile drives back and forth between. Unit: m.
    /// Default: `[500.0, 1200.0]`.
    path: Option<Vec<f64>>,
    /// Averaged received power below which the link goes down. Unit: dBm. Default: -110.
    threshold_dbm: Option<f64>,
    /// How far above the threshold the power must be for the link to come back. Unit: dB.
    /// Default: 2.
    hysteresis_db: Option<f64>,
    /// Window the received power is averaged over. Default: `"1s"`.
    average: Option<Duration>,
}

/// The fields of a `predictor` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPredictor {
    /// Time between two readings of the received power. Default: `"100ms"`.
    sample: Option<Duration>,
    /// Span of the readings the trend line is fitted to. Default: `"1s"`.
    window: Option<Duration>,
    /// How far ahead the trend must reach the threshold for `going_down`. Default: `"1s"`.
    horizon: Option<Duration>,
    /// Announced duration of the first outage (later ones: the mean of those so far). Default:
    /// `"5s"`.
    prior: Option<Duration>,
    /// Span over which readings are averaged (in mW) before the fit. Default: `"1s"`.
    smooth: Option<Duration>,
}

/// A validated received-power channel.
#[derive(Clone, Debug, PartialEq)]
pub struct SignalConfig {
    /// Transmit power, dBm.
    pub tx_power_dbm: f64,
    /// Mean path loss over distance (its shadowing and receiver fields are
    /// not used: shadowing is correlated here, the threshold is below).
    pub path_loss: LogDistance,
    /// Standard deviation of the shadowing, dB.
    pub shadowing_sigma_db: f64,
    /// Distance over which the shadowing's correlation falls to 1/e, m.
    pub decorrelation_distance: f64,
    /// Whether Rayleigh fast fading is applied.
    pub fast_fading: bool,
    /// Carrier frequency, Hz (sets the Doppler frequency).
    pub carrier_hz: f64,
    /// The mobile's speed, m/s.
    pub speed: f64,
    /// Distances from the base station the mobile passes, back and forth.
    pub path: Vec<f64>,
    /// The link is down below this averaged power, dBm.
    pub threshold_dbm: f64,
    /// How far above the threshold the averaged power must get back for
    /// the link to be up again, dB.
    pub hysteresis_db: f64,
    /// Window of the averaged power.
    pub average: SimDuration,
}

impl Default for SignalConfig {
    fn default() -> Self {
        SignalConfig {
            tx_power_dbm: 23.0,
            path_loss: LogDistance {
                // TR 36.942's law in metres: 128.1 − 37.6 · 3 dB at 1 m.
                reference_distance: 1.0,
                reference_loss_db: 15.3,
                exponent: 3.76,
                ..LogDistance::default()
            },
            shadowing_sigma_db: 8.0,
            decorrelation_distance: 50.0,
            fast_fading: true,
            carrier_hz: 2.0e9,
            speed: 10.0,
            path: vec![500.0, 1200.0],
            threshold_dbm: -110.0,
            hysteresis_db: 2.0,
            average: SimDuration::from_secs(1),
        }
    }
}

impl SignalConfig {
    /// The maximum Doppler frequency of the fast fading, Hz.
    pub fn doppler_hz(&self) -> f64 {
        self.speed * self.carrier_hz / SPEED_OF_LIGHT
    }

    /// Mean received power at `distance` metres (no shadowing or fading),
    /// dBm.
    pub fn mean_power_dbm(&self, distance: f64) -> f64 {
        self.tx_power_dbm - self.path_loss.mean_path_loss_db(distance)
    }

    /// Length of one pass along the path, metres.
    fn pass_length(&self) -> f64 {
        self.path.windows(2).map(|w| (w[1] - w[0]).abs()).sum()
    }

    /// Whether the mobile moves at all.
    fn moving(&self) -> bool {
        self.speed > 0.0 && self.pass_length() > 0.0
    }

    /// The distance from the base station after travelling `travelled`
    /// metres back and forth along the path.
    pub fn distance_after(&self, travelled: f64) -> f64 {
        let pass = self.pass_length();
        if pass <= 0.0 {
            return self.path[0];
        }
        let mut u = travelled.rem_euclid(2.0 * pass);
        if u > pass {
            u = 2.0 * pass - u;
        }
        for w in self.path.windows(2) {
            let leg = (w[1] - w[0]).abs();
            if u <= leg {
                return w[0] + (w[1] - w[0]) * if leg > 0.0 { u / leg } else { 0.0 };
            }
            u -= leg;
        }
        self.path[self.path.len() - 1]
    }

    /// Checks a `signal` table (`path` is where it sits, for errors).
    pub fn validate(raw: RawSignal, at: &str) -> Result<SignalConfig, ScenarioError> {
        let d = SignalConfig::default();
        let field = |name: &str| format!("{at}.{name}");
        let finite = |value: Option<f64>, name: &str, default: f64| match value {
            Some(v) if !v.is_finite() => Err(ScenarioError::new(
                field(name),
                format!("must be a finite number, got {v}"),
            )),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        let positive = |value: Option<f64>, name: &str, default: f64| {
            let v = finite(value, name, default)?;
            if v > 0.0 {
                Ok(v)
            } else {
                Err(ScenarioError::new(
                    field(name),
                    format!("must be positive, got {v}"),
                ))
            }
        };
        let not_negative = |value: Option<f64>, name: &str, default: f64| {
            let v = finite(value, name, default)?;
            if v >= 0.0 {
                Ok(v)
            } else {
                Err(ScenarioError::new(
                    field(name),
                    format!("must not be negative, got {v}"),
                ))
            }
        };
        let path = raw.path.unwrap_or_else(|| d.path.clone());
        if path.is_empty() {
            return Err(ScenarioError::new(
                field("path"),
                "needs at least one distance in metres",
            ));
        }
        for (i, &x) in path.iter().enumerate() {
            if !x.is_finite() || x <= 0.0 {
                return Err(ScenarioError::new(
                    format!("{at}.path[{i}]"),
                    format!("must be a positive distance in metres, got {x}"),
                ));
            }
        }
        let average = raw.average.map_or(d.average, |a| a.0);
        if average < STEP {
            return Err(ScenarioError::new(
                field("average"),
                "must be at least 10ms (the channel's step)",
            ));
        }
        let config = SignalConfig {
            tx_power_dbm: finite(raw.tx_power_dbm, "tx_power_dbm", d.tx_power_dbm)?,
            path_loss: LogDistance {
                reference_distance: positive(
                    raw.reference_distance,
                    "reference_distance",
                    d.path_loss.reference_distance,
                )?,
                reference_loss_db: finite(
                    raw.reference_loss_db,
                    "reference_loss_db",
                    d.path_loss.reference_loss_db,
                )?,
                exponent: positive(raw.exponent, "exponent", d.path_loss.exponent)?,
                ..d.path_loss
            },
            shadowing_sigma_db: not_negative(
                raw.shadowing_sigma_db,
                "shadowing_sigma_db",
                d.shadowing_sigma_db,
            )?,
            decorrelation_distance: positive(
                raw.decorrelation_distance,
                "decorrelation_distance",
                d.decorrelation_distance,
            )?,
            fast_fading: raw.fast_fading.unwrap_or(d.fast_fading),
            carrier_hz: positive(raw.carrier_hz, "carrier_hz", d.carrier_hz)?,
            speed: not_negative(raw.speed, "speed", d.speed)?,
            path,
            threshold_dbm: finite(raw.threshold_dbm, "threshold_dbm", d.threshold_dbm)?,
            hysteresis_db: not_negative(raw.hysteresis_db, "hysteresis_db", d.hysteresis_db)?,
            average,
        };
        if config.fast_fading && config.doppler_hz() > MAX_DOPPLER_HZ {
            return Err(ScenarioError::new(
                field("speed"),
                format!(
                    "gives a Doppler frequency of {:.0} Hz at carrier_hz = {}, above the {MAX_DOPPLER_HZ} Hz \
                     the channel's 1 ms points resolve (lower the speed or the carrier, or set fast_fading = false)",
                    config.doppler_hz(),
                    config.carrier_hz
                ),
            ));
        }
        Ok(config)
    }
}

/// A validated predictor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PredictorConfig {
    /// Time between received-power readings.
    pub sample: SimDuration,
    /// Readings of the last `window` enter the fit.
    pub window: SimDuration,
    /// An alarm is raised when the fit reaches the threshold within this.
    pub horizon: SimDuration,
    /// The announced duration before any outage has been seen.
    pub prior: SimDuration,
    /// Each reading is replaced by the mean power (in mW) of the readings
    /// of the last `smooth` before the fit (zero: the raw readings).
    pub smooth: SimDuration,
}

impl Default for PredictorConfig {
    fn default() -> Self {
        PredictorConfig {
            // A beacon every 100 ms (the usual 802.11 and LTE measurement
            // cadence).
            sample: SimDuration::from_millis(100),
            // Ten readings: enough to average fast fading out of the slope.
            window: SimDuration::from_secs(1),
            // Long enough to hold ACKs before a fixed host's 1 s floor
            // would fire (see DEFAULT_WARNING), short enough not to act
            // on distant extrapolations.
            horizon: SimDuration::from_secs(1),
            // A 50 m shadow fade crossed at 10 m/s (the signal defaults).
            prior: SimDuration::from_secs(5),
            // The signal's default `average`: the trend of the power the
            // link's own decision follows, fast fading averaged out.
            smooth: SimDuration::from_secs(1),
        }
    }
}

impl PredictorConfig {
    /// Checks a `predictor` table.
    pub fn validate(raw: RawPredictor, at: &str) -> Result<PredictorConfig, ScenarioError> {
        let d = PredictorConfig::default();
        let config = PredictorConfig {
            sample: raw.sample.map_or(d.sample, |v| v.0),
            window: raw.window.map_or(d.window, |v| v.0),
            horizon: raw.horizon.map_or(d.horizon, |v| v.0),
            prior: raw.prior.map_or(d.prior, |v| v.0),
            smooth: raw.smooth.map_or(d.smooth, |v| v.0),
        };
        let steps = config.sample.as_nanos() / STEP.as_nanos();
        if steps == 0 || config.sample.as_nanos() % STEP.as_nanos() != 0 {
            return Err(ScenarioError::new(
                format!("{at}.sample"),
                "must be a positive multiple of 10ms (the channel's step)",
            ));
        }
        if config.window < config.sample.saturating_mul(3) {
            return Err(ScenarioError::new(
                format!("{at}.window"),
                "must hold at least three samples for a fit",
            ));
        }
        if config.prior.is_zero() {
            return Err(ScenarioError::new(
                format!("{at}.prior"),
                "must be positive",
            ));
        }
        Ok(config)
    }
}

/// Sum-of-sinusoids Rayleigh fading: `h(t) = h_I(t) + j h_Q(t)` with
/// `h_I = Σ cos(ω_d t cos α_n + φ_n) / √M`, `h_Q = Σ cos(ω_d t sin α_n +
/// ψ_n) / √M`, `α_n = (2πn − π + θ) / 4M` (Zheng and Xiao), so that
/// `E|h|² = 1` and the autocorrelation tends to `J0(ω_d τ)`.
#[derive(Clone, Debug)]
pub struct Rayleigh {
    cos_freq: [f64; SINUSOIDS],
    sin_freq: [f64; SINUSOIDS],
    phi: [f64; SINUSOIDS],
    psi: [f64; SINUSOIDS],
}

impl Rayleigh {
    /// A fading process of maximum Doppler `doppler_hz`, its angles and
    /// phases drawn from `rng`.
    pub fn new(doppler_hz: f64, rng: &mut SimRng) -> Self {
        use std::f64::consts::PI;
        let omega = 2.0 * PI * doppler_hz;
        let theta: f64 = rng.gen_range(-PI..PI);
        let mut r = Rayleigh {
            cos_freq: [0.0; SINUSOIDS],
            sin_freq: [0.0; SINUSOIDS],
            phi: [0.0; SINUSOIDS],
            psi: [0.0; SINUSOIDS],
        };
        let m = SINUSOIDS as f64;
        for n in 0..SINUSOIDS {
            let alpha = (2.0 * PI * (n as f64 + 1.0) - PI + theta) / (4.0 * m);
            r.cos_freq[n] = omega * alpha.cos();
            r.sin_freq[n] = omega * alpha.sin();
            r.phi[n] = rng.gen_range(-PI..PI);
            r.psi[n] = rng.gen_range(-PI..PI);
        }
        r
    }

    /// The complex gain at `t` seconds, (in phase, quadrature).
    pub fn gain(&self, t: f64) -> (f64, f64) {
        let mut i = 0.0;
        let mut q = 0.0;
        for n in 0..SINUSOIDS {
            i += (self.cos_freq[n] * t + self.phi[n]).cos();
            q += (self.sin_freq[n] * t + self.psi[n]).cos();
        }
        let norm = (SINUSOIDS as f64).sqrt();
        (i / norm, q / norm)
    }

    /// The power gain `|h(t)|²`.
    pub fn power(&self, t: f64) -> f64 {
        let (i, q) = self.gain(t);
        i * i + q * q
    }
}

/// One reading of the received power the base station's link layer makes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// When.
    pub at: SimTime,
    /// The power of the step ending then, dBm.
    pub dbm: f64,
}

/// The received-power channel, computed step by step ahead of the link as
/// far as the link needs to know its next outage.
#[derive(Debug)]
pub struct Channel {
    config: SignalConfig,
    rng: SimRng,
    fading: Option<Rayleigh>,
    /// Steps computed so far: the channel is known up to `steps · STEP`.
    steps: u64,
    shadow_db: f64,
    /// Linear powers (mW) of the last steps, for the averaged power.
    recent: VecDeque<f64>,
    recent_sum: f64,
    average_steps: usize,
    down: bool,
    /// Steps between readings (0: no readings kept).
    sample_steps: u64,
    readings: VecDeque<Reading>,
}

impl Channel {
    /// A channel drawing from `rng`; it keeps a reading every `sample`
    /// (`None`: none).
    pub fn new(config: SignalConfig, sample: Option<SimDuration>, mut rng: SimRng) -> Self {
        let fading = config
            .fast_fading
            .then(|| Rayleigh::new(config.doppler_hz(), &mut rng));
        let shadow_db = config.shadowing_sigma_db * standard_normal(&mut rng);
        let average_steps = (config.average.as_nanos() / STEP.as_nanos()).max(1) as usize;
        Channel {
            sample_steps: sample.map_or(0, |s| s.as_nanos() / STEP.as_nanos()),
            config,
            rng,
            fading,
            steps: 0,
            shadow_db,
            recent: VecDeque::with_capacity(average_steps),
            recent_sum: 0.0,
            average_steps,
            down: false,
            readings: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SignalConfig {
        &self.config
    }

    /// How far the channel is known.
    pub fn front(&self) -> SimTime {
        SimTime::ZERO + STEP.saturating_mul(self.steps)
    }

    /// Whether the link is down at the front.
    #[cfg(test)]
    pub fn is_down(&self) -> bool {
        self.down
    }

    /// Computes one more step; returns (its end, its power in dBm, the
    /// averaged power in dBm).
    pub fn step(&mut self) -> (SimTime, f64, f64) {
        let c = &self.config;
        let start_s = (self.steps as f64) * STEP.as_secs_f64();
        self.steps += 1;
        let end = self.front();
        let end_s = end.as_nanos() as f64 / 1e9;
        if c.moving() && c.shadowing_sigma_db > 0.0 {
            // An AR(1) in distance travelled: correlation exp(−Δx/d_c)
            // between successive steps, variance σ² throughout.
            let rho = (-(c.speed * STEP.as_secs_f64()) / c.decorrelation_distance).exp();
            self.shadow_db = rho * self.shadow_db
                + c.shadowing_sigma_db * (1.0 - rho * rho).sqrt() * standard_normal(&mut self.rng);
        }
        let distance = c.distance_after(c.speed * end_s);
        let mut dbm = c.mean_power_dbm(distance) + self.shadow_db;
        if let Some(f) = &self.fading {
            let dt = STEP.as_secs_f64() / f64::from(SUBSTEPS);
            let g: f64 = (1..=SUBSTEPS)
                .map(|j| f.power(start_s + f64::from(j) * dt))
                .sum::<f64>()
                / f64::from(SUBSTEPS);
            dbm += 10.0 * g.max(1e-12).log10();
        }
        let mw = dbm_to_mw(dbm);
        if self.recent.len() == self.average_steps {
            if let Some(old) = self.recent.pop_front() {
                self.recent_sum -= old;
            }
        }
        self.recent.push_back(mw);
        self.recent_sum += mw;
        // Recomputed from the window now and then, so rounding in the
        // running sum cannot build up over a long run.
        if self.steps % 4096 == 0 {
            self.recent_sum = self.recent.iter().sum();
        }
        let averaged = 10.0 * (self.recent_sum / self.recent.len() as f64).log10();
        if self.down {
            if averaged >= c.threshold_dbm + c.hysteresis_db {
                self.down = false;
            }
        } else if averaged < c.threshold_dbm {
            self.down = true;
        }
        if self.sample_steps > 0 && self.steps % self.sample_steps == 0 {
            self.readings.push_back(Reading { at: end, dbm });
        }
        (end, dbm, averaged)
    }

    /// Computes steps until the link is `down` (or up, when false), and
    /// returns when that happens; `None` if not by `limit`.
    pub fn next_change(&mut self, down: bool, limit: SimTime) -> Option<SimTime> {
        while self.down != down {
            if self.front() >= limit {
                return None;
            }
            self.step();
        }
        Some(self.front())
    }

    /// Computes steps until the channel is known at `t`.
    pub fn advance_to(&mut self, t: SimTime) {
        while self.front() < t {
            self.step();
        }
    }

    /// The readings made in `(from, to]`, forgetting those at or before
    /// `from`.
    pub fn readings(&mut self, from: SimTime, to: SimTime) -> impl Iterator<Item = &Reading> {
        while self.readings.front().is_some_and(|r| r.at <= from) {
            self.readings.pop_front();
        }
        self.readings.iter().take_while(move |r| r.at <= to)
    }
}

/// A line fitted by least squares to `(t, y)` points: its value at `at`
/// and its slope per second; `None` with fewer than two distinct times.
pub fn fit_line(points: &[(f64, f64)], at: f64) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let stt: f64 = points.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
    if stt <= 0.0 {
        return None;
    }
    let sty: f64 = points.iter().map(|p| (p.0 - mean_t) * (p.1 - mean_y)).sum();
    let slope = sty / stt;
    Some((mean_y + slope * (at - mean_t), slope))
}

/// When a line of value `value` (dBm) now and `slope` (dB/s) reaches
/// `threshold`, seconds from now: 0 if it is already below, `None` if it
/// never does.
pub fn time_to_threshold(value: f64, slope: f64, threshold: f64) -> Option<f64> {
    if value <= threshold {
        Some(0.0)
    } else if slope < 0.0 {
        Some((threshold - value) / slope)
    } else {
        None
    }
}

/// An alarm the predictor has raised.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Alarm {
    /// When `going_down` went out.
    pub raised: SimTime,
    /// The outage duration it announced.
    pub predicted: SimDuration,
}

/// What a predictor's look at the readings decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// Nothing to say.
    Quiet,
    /// Raise `going_down` announcing this duration.
    Raise(SimDuration),
    /// Withdraw the alarm.
    Withdraw,
}

/// The base station's fade predictor: its state between readings.
#[derive(Clone, Debug)]
pub struct Predictor {
    /// Its settings.
    pub config: PredictorConfig,
    /// When it next reads the power.
    pub next_sample: SimTime,
    /// The alarm standing, if any.
    pub alarm: Option<Alarm>,
    seen_outages: u64,
    seen_down: SimDuration,
}

impl Predictor {
    /// A predictor reading first at `sample`.
    pub fn new(config: PredictorConfig) -> Self {
        Predictor {
            next_sample: SimTime::ZERO + config.sample,
            config,
            alarm: None,
            seen_outages: 0,
            seen_down: SimDuration::ZERO,
        }
    }

    /// The duration it would announce now.
    pub fn estimate(&self) -> SimDuration {
        self.seen_down
            .as_nanos()
            .checked_div(self.seen_outages)
            .map_or(self.config.prior, SimDuration::from_nanos)
    }

    /// Learns the duration of an outage that ended.
    pub fn learn(&mut self, duration: SimDuration) {
        self.seen_outages += 1;
        self.seen_down += duration;
    }

    /// How far back the readings it looks at at `now` go.
    pub fn oldest(&self, now: SimTime) -> SimTime {
        now.saturating_sub(self.config.window)
            .saturating_sub(self.config.smooth)
    }

    /// Looks at the readings since [`Predictor::oldest`] (the link is up).
    pub fn judge(&self, now: SimTime, readings: &[Reading], threshold: f64) -> Verdict {
        let at = now.as_nanos() as f64 / 1e9;
        let points = smoothed(
            readings,
            self.config.smooth,
            now.saturating_sub(self.config.window),
        );
        let within = points.len() >= 3
            && fit_line(&points, at)
                .and_then(|(value, slope)| time_to_threshold(value, slope, threshold))
                .is_some_and(|t| t <= self.config.horizon.as_secs_f64());
        match (self.alarm, within) {
            (None, true) => Verdict::Raise(self.estimate()),
            (Some(alarm), true)
                if now.saturating_since(alarm.raised) > self.config.horizon.saturating_mul(2) =>
            {
                Verdict::Withdraw
            }
            (Some(_), false) => Verdict::Withdraw,
            _ => Verdict::Quiet,
        }
    }
}

/// The readings after `from` as (seconds, dBm) points, each the mean power
/// in mW of the readings in the `smooth` up to it (itself alone when
/// `smooth` is zero).
pub fn smoothed(readings: &[Reading], smooth: SimDuration, from: SimTime) -> Vec<(f64, f64)> {
    readings
        .iter()
        .enumerate()
        .filter(|(_, r)| r.at > from)
        .map(|(i, r)| {
            let since = r.at.saturating_sub(smooth);
            let (sum, n) = readings[..=i]
                .iter()
                .rev()
                .take_while(|x| x.at > since || x.at == r.at)
                .fold((0.0, 0u32), |(s, n), x| (s + dbm_to_mw(x.dbm), n + 1));
            (
                r.at.as_nanos() as f64 / 1e9,
                10.0 * (sum / f64::from(n)).log10(),
            )
        })
        .collect()
}

/// A channel's own stream, seeded from the link's so that the link's other
/// draws are not shifted by how many steps the channel computes.
pub fn channel_stream(link_rng: &mut SimRng) -> SimRng {
    SimRng::seed_from_u64(link_rng.gen())
}

/// One outage as the predictor met it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FadeRecord {
    /// When it started, ns.
    pub start_ns: u64,
    /// When it ended, ns.
    pub end_ns: u64,
    /// When `going_down` came for it, ns (`None`: missed, no warning).
    pub warned_ns: Option<u64>,
    /// The duration announced, ns.
    pub predicted_ns: Option<u64>,
}

/// An alarm withdrawn with no outage.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FalseAlarm {
    /// When `going_down` came, ns.
    pub raised_ns: u64,
    /// When it was withdrawn (`up`), ns.
    pub withdrawn_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::component_stream;

    fn still(distance: f64) -> SignalConfig {
        SignalConfig {
            speed: 0.0,
            path: vec![distance],
            shadowing_sigma_db: 0.0,
            fast_fading: false,
            ..SignalConfig::default()
        }
    }

    #[test]
    fn path_loss_is_the_log_distance_law() {
        let c = SignalConfig::default();
        // 3GPP TR 36.942: 128.1 + 37.6 log10(R km) at 2 GHz.
        assert!((c.mean_power_dbm(1000.0) - (23.0 - 128.1)).abs() < 1e-9);
        assert!((c.mean_power_dbm(2000.0) - (23.0 - 128.1 - 37.6 * 2f64.log10())).abs() < 1e-9);
        // Ten times farther: 10 · exponent dB weaker.
        assert!((c.mean_power_dbm(100.0) - c.mean_power_dbm(1000.0) - 37.6).abs() < 1e-9);
        // A still mobile with neither shadowing nor fading reads that power.
        let mut ch = Channel::new(still(1500.0), None, component_stream(1, "x"));
        let (_, dbm, averaged) = ch.step();
        assert!((dbm - c.mean_power_dbm(1500.0)).abs() < 1e-9);
        assert!((averaged - dbm).abs() < 1e-9);
    }

    #[test]
    fn the_mobile_goes_back_and_forth_along_the_path() {
        let c = SignalConfig {
            path: vec![500.0, 1200.0, 900.0],
            ..SignalConfig::default()
        };
        // One pass is 700 + 300 = 1000 m.
        assert_eq!(c.distance_after(0.0), 500.0);
        assert_eq!(c.distance_after(350.0), 850.0);
        assert_eq!(c.distance_after(700.0), 1200.0);
        assert_eq!(c.distance_after(850.0), 1050.0);
        assert_eq!(c.distance_after(1000.0), 900.0);
        // And back: 1150 m is 850 m along the path.
        assert_eq!(c.distance_after(1150.0), 1050.0);
        assert_eq!(c.distance_after(2000.0), 500.0);
    }

    #[test]
    fn shadowing_has_the_gudmundson_autocorrelation() {
        // No fading, a path so short that distance does not matter, 1 m a
        // step: estimate the correlation of the shadowing at lags of 25, 50
        // and 100 m over many realisations.
        let c = SignalConfig {
            fast_fading: false,
            path: vec![1000.0, 1000.0 + 1e-9],
            speed: 100.0,
            ..SignalConfig::default()
        };
        let steps_per_m = 1.0 / (c.speed * STEP.as_secs_f64());
        let lags_m = [25.0, 50.0, 100.0];
        let mut sums = [0.0; 3];
        let mut var = 0.0;
        let mut count = 0.0;
        let mean = c.mean_power_dbm(1000.0);
        for seed in 0..40 {
            let mut ch = Channel::new(c.clone(), None, component_stream(seed, "shadow"));
            let series: Vec<f64> = (0..4000).map(|_| ch.step().1 - mean).collect();
            for (k, lag) in lags_m.iter().enumerate() {
                let l = (lag * steps_per_m).round() as usize;
                sums[k] += series[..series.len() - l]
                    .iter()
                    .zip(&series[l..])
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
                    / (series.len() - l) as f64;
            }
            var += series.iter().map(|x| x * x).sum::<f64>() / series.len() as f64;
            count += 1.0;
        }
        let var = var / count;
        assert!((var.sqrt() - 8.0).abs() < 0.5, "sigma {}", var.sqrt());
        for (k, lag) in lags_m.iter().enumerate() {
            let r = sums[k] / count / var;
            let want = (-lag / 50.0f64).exp();
            assert!((r - want).abs() < 0.06, "lag {lag} m: {r} vs {want}");
        }
    }

    /// J0 from its integral, J0(x) = (1/π) ∫_0^π cos(x sin θ) dθ.
    fn bessel_j0(x: f64) -> f64 {
        let n = 2000;
        let h = std::f64::consts::PI / n as f64;
        (0..n)
            .map(|i| (x * ((i as f64 + 0.5) * h).sin()).cos())
            .sum::<f64>()
            * h
            / std::f64::consts::PI
    }

    #[test]
    fn fast_fading_has_clarkes_doppler_autocorrelation() {
        let c = SignalConfig::default();
        // 10 m/s at 2 GHz.
        let fd = c.doppler_hz();
        assert!((fd - 10.0 * 2.0e9 / 299_792_458.0).abs() < 1e-9);
        assert!((fd - 66.7).abs() < 0.1);
        let first_zero = 2.404_825_557_695_773 / (2.0 * std::f64::consts::PI * fd);
        let lags = [0.002, first_zero, 0.01, 0.02];
        let mut sums = [0.0; 4];
        let mut power = 0.0;
        let realisations = 200;
        for seed in 0..realisations {
            let f = Rayleigh::new(fd, &mut component_stream(seed, "rayleigh"));
            let mut p = 0.0;
            for k in 0..200 {
                let t = k as f64 * 0.005;
                let (i0, q0) = f.gain(t);
                p += i0 * i0 + q0 * q0;
                for (j, lag) in lags.iter().enumerate() {
                    let (i1, q1) = f.gain(t + lag);
                    sums[j] += i0 * i1 + q0 * q1;
                }
            }
            power += p / 200.0;
        }
        let n = (realisations * 200) as f64;
        assert!(
            (power / realisations as f64 - 1.0).abs() < 0.05,
            "E|h|² {power}"
        );
        for (j, lag) in lags.iter().enumerate() {
            let r = sums[j] / n;
            let want = bessel_j0(2.0 * std::f64::consts::PI * fd * lag);
            assert!((r - want).abs() < 0.05, "lag {lag}: {r} vs J0 {want}");
        }
        assert!((sums[1] / n).abs() < 0.05);
    }

    #[test]
    fn the_link_is_down_while_the_averaged_power_is_below_the_threshold() {
        // A mobile driving from 500 m to 3 km with no shadowing or fading:
        // the mean power crosses −110 dBm at 10^((23 − 128.1 + 110)/37.6)
        // km = 1.35 km; back above −108 dBm (hysteresis) at 1.19 km.
        let c = SignalConfig {
            path: vec![500.0, 3000.0],
            speed: 10.0,
            shadowing_sigma_db: 0.0,
            fast_fading: false,
            average: SimDuration::from_millis(200),
            ..SignalConfig::default()
        };
        let d_down = 10f64.powf((23.0 - 128.1 + 110.0) / 37.6) * 1000.0;
        let d_up = 10f64.powf((23.0 - 128.1 + 108.0) / 37.6) * 1000.0;
        let mut ch = Channel::new(c.clone(), None, component_stream(1, "x"));
        let down = ch.next_change(true, SimTime::from_secs(1000)).unwrap();
        // The averaged power lags the mobile by about half the window.
        let t_down = (d_down - 500.0) / 10.0;
        assert!(
            (down.as_secs_f64() - t_down).abs() < 0.2,
            "{down:?} vs {t_down}"
        );
        let up = ch.next_change(false, SimTime::from_secs(1000)).unwrap();
        // Out to 3 km (250 s) and back to d_up.
        let t_up = 250.0 + (3000.0 - d_up) / 10.0;
        assert!((up.as_secs_f64() - t_up).abs() < 0.2, "{up:?} vs {t_up}");
        // Every step between the two has an averaged power below the
        // hysteresis level, and the link is down throughout.
        let mut ch = Channel::new(c, None, component_stream(1, "x"));
        while ch.front() < up {
            let (t, _, averaged) = ch.step();
            assert_eq!(ch.is_down(), t >= down && t < up, "{t:?}");
            if ch.is_down() {
                assert!(averaged < -108.0);
            }
        }
    }

    #[test]
    fn a_fitted_line_reaches_the_threshold_when_the_formula_says() {
        let points: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64 * 0.1, -100.0 - 5.0 * i as f64 * 0.1))
            .collect();
        let (value, slope) = fit_line(&points, 0.9).unwrap();
        assert!((value - (-104.5)).abs() < 1e-9);
        assert!((slope - (-5.0)).abs() < 1e-9);
        assert!((time_to_threshold(value, slope, -110.0).unwrap() - 1.1).abs() < 1e-9);
        assert_eq!(time_to_threshold(-111.0, 1.0, -110.0), Some(0.0));
        assert_eq!(time_to_threshold(-100.0, 1.0, -110.0), None);
    }

    #[test]
    fn the_predictor_raises_withdraws_and_learns() {
        let mut p = Predictor::new(PredictorConfig {
            smooth: SimDuration::ZERO,
            ..PredictorConfig::default()
        });
        let falling: Vec<Reading> = (1..=10)
            .map(|i| Reading {
                at: SimTime::from_millis(100 * i),
                dbm: -100.0 - 1.0 * i as f64,
            })
            .collect();
        // −110 dBm at 1.0 s, reached now: within the horizon.
        assert_eq!(
            p.judge(SimTime::from_secs(1), &falling[..9], -110.5),
            Verdict::Raise(SimDuration::from_secs(5))
        );
        p.alarm = Some(Alarm {
            raised: SimTime::from_secs(1),
            predicted: SimDuration::from_secs(5),
        });
        // A flat signal no longer reaches the threshold: withdrawn.
        let flat: Vec<Reading> = falling
            .iter()
            .map(|r| Reading { dbm: -100.0, ..*r })
            .collect();
        assert_eq!(
            p.judge(SimTime::from_secs(1), &flat, -110.0),
            Verdict::Withdraw
        );
        p.learn(SimDuration::from_secs(2));
        p.learn(SimDuration::from_secs(4));
        assert_eq!(p.estimate(), SimDuration::from_secs(3));
    }
}

#[cfg(test)]
mod smoothing_tests {
    use super::*;

    #[test]
    fn readings_are_smoothed_as_a_mean_of_power() {
        // −100 and −110 dBm in turn: the mean of 1e-10 and 1e-11 mW.
        let readings: Vec<Reading> = (1..=6)
            .map(|i| Reading {
                at: SimTime::from_millis(100 * i),
                dbm: if i % 2 == 0 { -110.0 } else { -100.0 },
            })
            .collect();
        let points = smoothed(
            &readings,
            SimDuration::from_millis(200),
            SimTime::from_millis(250),
        );
        assert_eq!(points.len(), 4);
        let mean = 10.0 * ((1e-10 + 1e-11) / 2.0f64).log10();
        for (t, dbm) in points {
            assert!((dbm - mean).abs() < 1e-9, "{t}: {dbm} vs {mean}");
        }
        // Unsmoothed, each reading is itself.
        let raw = smoothed(&readings, SimDuration::ZERO, SimTime::ZERO);
        assert_eq!(raw.len(), 6);
        assert!(raw.iter().zip(&readings).all(|(p, r)| p.1 == r.dbm));
    }
}
