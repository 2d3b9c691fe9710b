//! The release schedule of ACK holding (ack-holding spec §3): when a base
//! station holding `N` ACKs through an outage of `T` seconds lets each one
//! go, so that the fixed host (FH) sees ACKs often enough not to time out
//! and has a small RTO when the mobile is back.
//!
//! The FH's timer is Jacobson's estimator with gains 1/8 and 1/4 and
//! `RTO = μ + 4σ`. The first `n` ACKs leave as late as the FH's timer
//! allows (the gap before each equals the RTO in force), which multiplies
//! σ by 7/4 per ACK; the other `N − n` share what is left of the outage
//! at a constant gap θ, which pulls the RTO back towards θ. Everything here
//! is pure arithmetic on seconds as `f64`; the closed forms and the
//! step-by-step estimator are both provided so that each checks the other.
//!
//! # Exactness of the closed forms
//!
//! They are exact, not approximations, for every valid problem: after the
//! first `n` ACKs, every gap is θ, so `μ − θ` shrinks by 7/8 per ACK and
//! never changes sign, and `|δ|` is exactly `(7/8)^(k−1) |μ_n − θ|` for the
//! `k`-th paced ACK whichever side of θ the mean starts on. Summing that
//! geometric input through `σ ← (3/4)σ + |δ|/4` gives
//! `σ_N = bσ_n + 2(a − b)|μ_n − θ|` with no case split. In the stretching
//! phase `δ_i = 4σ_{i−1} ≥ 0`. The tests check both against the estimator.
//!
//! # Feasibility is not the same as timeout-free
//!
//! The spec calls `n` feasible when `S(n) ≤ T` and `n < N`. That does not
//! promise the FH never times out: the first paced gap θ can exceed the RTO
//! the stretching left, `RTO_n`. That comparison is the only one that
//! matters: once the first paced ACK is on time every later one is too,
//! because `RTO_{n+k} − θ = (7a_k − 8b_k)|μ_n − θ| + 4b_kσ_n > 0` for
//! `k ≥ 1` when `θ ≥ μ_n` (and `RTO ≥ μ > θ` when `θ < μ_n`).
//! [`timeout_free`] reports it. The spec's two searches ignore it; a
//! third, [`timeout_free_minimum`], keeps to the n that pass. Such an n
//! exists exactly when S(N) ≥ T: when N ACKs each released at the last
//! moment end before the outage does, every schedule leaves a gap longer
//! than the FH's RTO somewhere.
//!
//! # Rounding
//!
//! The closed forms keep their precision (the Python tests check them
//! against exact rational arithmetic). The step-by-step estimator in
//! floating point does not when σ0 ≪ μ0: in the stretching phase
//! δ = x − μ subtracts two numbers that differ only by 4σ, which costs σ
//! about ε·μ0/σ0 of its relative precision (μ0 = 1 s, σ0 = 1 ns: S(36) is
//! off by 5·10⁻⁸ s, while the closed form is exact to the last digit).

use serde::{Deserialize, Serialize};

/// Gain of the mean (g).
const MEAN_GAIN: f64 = 1.0 / 8.0;
/// Gain of the deviation (h).
const DEVIATION_GAIN: f64 = 1.0 / 4.0;
/// How many deviations the RTO adds to the mean.
const DEVIATIONS: f64 = 4.0;
/// How much each stretched ACK multiplies σ by: 1 + h(4 − 1).
const STRETCH: f64 = 7.0 / 4.0;

/// Most ACKs a problem may hold: far more than one window's worth, and it
/// bounds the schedule's memory (a gap and an RTO per ACK).
pub const MAX_ACKS: u32 = 100_000;
/// Longest duration a problem may give, in seconds (about 32 years); it
/// keeps every intermediate value finite.
pub const MAX_SECONDS: f64 = 1e9;

/// A problem whose parameters are out of range; the message starts with
/// the parameter's name.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PacingError {
    /// A duration that is not a finite number of seconds in range.
    #[error(
        "{parameter}: must be a finite number of seconds from 0 to {MAX_SECONDS:e}, got {value}"
    )]
    Seconds {
        /// `outage`, `mean` or `deviation`.
        parameter: &'static str,
        /// What was given.
        value: f64,
    },
    /// No ACKs, or too many.
    #[error("acks: must be a whole number from 1 to {MAX_ACKS}, got {value}")]
    Acks {
        /// What was given.
        value: i64,
    },
    /// [`Search::TimeoutFree`] on a problem with no timeout-free schedule.
    #[error(
        "no schedule keeps the fixed host from timing out: {acks} ACKs, each released when \
         its timer is due, span only {span} s of the {outage} s outage"
    )]
    NoTimeoutFreeSchedule {
        /// N.
        acks: u32,
        /// S(N).
        span: f64,
        /// T.
        outage: f64,
    },
}

impl PacingError {
    /// The name of the offending parameter, if one parameter is to blame.
    pub fn parameter(&self) -> Option<&'static str> {
        match self {
            PacingError::Seconds { parameter, .. } => Some(parameter),
            PacingError::Acks { .. } => Some("acks"),
            PacingError::NoTimeoutFreeSchedule { .. } => None,
        }
    }
}

/// What the base station knows when the link goes: the outage and the
/// FH's estimator.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PacingProblem {
    /// T: how long the mobile will be out of reach, in seconds.
    pub outage: f64,
    /// N: how many ACKs are held.
    pub acks: u32,
    /// μ0: the FH's smoothed RTT when holding starts, in seconds.
    pub mean: f64,
    /// σ0: the FH's RTT deviation when holding starts, in seconds.
    pub deviation: f64,
}

impl PacingProblem {
    /// Checks every parameter, naming the first one out of range.
    pub fn validate(&self) -> Result<(), PacingError> {
        for (parameter, value) in [
            ("outage", self.outage),
            ("mean", self.mean),
            ("deviation", self.deviation),
        ] {
            if !(value.is_finite() && (0.0..=MAX_SECONDS).contains(&value)) {
                return Err(PacingError::Seconds { parameter, value });
            }
        }
        if self.acks == 0 || self.acks > MAX_ACKS {
            return Err(PacingError::Acks {
                value: self.acks.into(),
            });
        }
        Ok(())
    }
}

/// The FH's estimator at one moment: mean μ, deviation σ and RTO, seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// μ.
    pub mean: f64,
    /// σ.
    pub deviation: f64,
    /// μ + 4σ.
    pub rto: f64,
}

impl Estimate {
    fn new(mean: f64, deviation: f64) -> Estimate {
        Estimate {
            mean,
            deviation,
            rto: mean + DEVIATIONS * deviation,
        }
    }

    /// The estimator after one more sample, the gap before an ACK.
    fn after(self, gap: f64) -> Estimate {
        let delta = gap - self.mean;
        Estimate::new(
            self.mean + MEAN_GAIN * delta,
            self.deviation + DEVIATION_GAIN * (delta.abs() - self.deviation),
        )
    }
}

/// The step-by-step estimator: its state after each gap in turn, starting
/// from `mean` and `deviation`.
pub fn simulate_estimator(mean: f64, deviation: f64, gaps: &[f64]) -> Vec<Estimate> {
    let mut state = Estimate::new(mean, deviation);
    gaps.iter()
        .map(|&gap| {
            state = state.after(gap);
            state
        })
        .collect()
}

/// The first ACK (numbered from 1) whose gap is longer than the RTO the FH
/// had just before it, that is the first ACK after which the FH would
/// already have timed out; `None` when every ACK is on time.
pub fn first_timeout(mean: f64, deviation: f64, gaps: &[f64]) -> Option<u32> {
    let mut state = Estimate::new(mean, deviation);
    for (i, &gap) in gaps.iter().enumerate() {
        if gap > state.rto {
            return Some(u32::try_from(i + 1).unwrap_or(u32::MAX));
        }
        state = state.after(gap);
    }
    None
}

/// (7/4)^n times `deviation`, as 0 when the deviation is 0 even where the
/// power overflows (0 × ∞ would be NaN).
fn grown(deviation: f64, n: u32) -> f64 {
    if deviation == 0.0 {
        0.0
    } else {
        deviation * STRETCH.powf(f64::from(n))
    }
}

/// The estimator after the first `n` ACKs were each released when the FH's
/// timer was due: μ_n, σ_n and RTO_n.
pub fn stretched(problem: &PacingProblem, n: u32) -> Estimate {
    let sigma0 = problem.deviation;
    let deviation = grown(sigma0, n);
    let mean = problem.mean + (2.0 / 3.0) * (deviation - sigma0);
    Estimate::new(mean, deviation)
}

/// S(n): how long the first `n` stretched ACKs take, Σ_{i<n} RTO_i.
pub fn stretch_time(problem: &PacingProblem, n: u32) -> f64 {
    let n_f = f64::from(n);
    let sigma0 = problem.deviation;
    n_f * problem.mean + (56.0 / 9.0) * (grown(sigma0, n) - sigma0) - (2.0 / 3.0) * n_f * sigma0
}

/// Whether `n` stretched ACKs fit: `n < N` and S(n) ≤ T.
pub fn feasible(problem: &PacingProblem, n: u32) -> bool {
    n < problem.acks && stretch_time(problem, n) <= problem.outage
}

/// θ: the constant gap of the other `N − n` ACKs, (T − S(n)) / (N − n);
/// `None` when `n` is not feasible.
pub fn theta(problem: &PacingProblem, n: u32) -> Option<f64> {
    feasible(problem, n)
        .then(|| (problem.outage - stretch_time(problem, n)) / f64::from(problem.acks - n))
}

/// The estimator after all N ACKs, closed form: μ_N(n), σ_N(n) and
/// RTO_N(n); `None` when `n` is not feasible.
pub fn final_estimate(problem: &PacingProblem, n: u32) -> Option<Estimate> {
    let theta = theta(problem, n)?;
    let paced = f64::from(problem.acks - n);
    let a = (1.0 - MEAN_GAIN).powf(paced);
    let b = (1.0 - DEVIATION_GAIN).powf(paced);
    let at_n = stretched(problem, n);
    let distance = (at_n.mean - theta).abs();
    Some(Estimate::new(
        a * at_n.mean + (1.0 - a) * theta,
        b * at_n.deviation + 2.0 * (a - b) * distance,
    ))
}

/// RTO_N(n), the FH's RTO when the mobile is back if `n` ACKs are
/// stretched; `None` when `n` is not feasible.
pub fn final_rto(problem: &PacingProblem, n: u32) -> Option<f64> {
    final_estimate(problem, n).map(|e| e.rto)
}

/// Whether the schedule with `n` stretched ACKs keeps the FH from timing
/// out: θ ≤ RTO_n (see the module's notes); `None` when `n` is not
/// feasible.
pub fn timeout_free(problem: &PacingProblem, n: u32) -> Option<bool> {
    theta(problem, n).map(|theta| theta <= stretched(problem, n).rto)
}

/// The largest feasible `n`; every smaller one is feasible too, because
/// S grows with n. `None` for an invalid problem.
fn last_feasible(problem: &PacingProblem) -> Option<u32> {
    problem.validate().ok()?;
    // n = 0 is feasible: S(0) = 0 ≤ T and N ≥ 1.
    let mut last = 0;
    while feasible(problem, last + 1) {
        last += 1;
    }
    Some(last)
}

/// RTO_N(n) of each feasible n, from n = 0.
fn feasible_values(problem: &PacingProblem) -> Option<Vec<f64>> {
    let last = last_feasible(problem)?;
    (0..=last).map(|n| final_rto(problem, n)).collect()
}

/// The publication's search: the first feasible n whose RTO_N is no larger
/// than that of either feasible neighbour. n = 0 has no left neighbour and
/// the last feasible n no right one, so this is the same as starting at
/// n = 0 and stepping forward while the next value is smaller. It can stop
/// at a local minimum. `None` only for an invalid problem.
pub fn step_forward(problem: &PacingProblem) -> Option<u32> {
    step_forward_index(&feasible_values(problem)?)
}

/// The first index whose value is no larger than either neighbour's;
/// `None` for no values.
fn step_forward_index(values: &[f64]) -> Option<u32> {
    let last = values.len().checked_sub(1)?;
    let stop = (0..=last).find(|&n| {
        (n == 0 || values[n] <= values[n - 1]) && (n == last || values[n] <= values[n + 1])
    })?;
    u32::try_from(stop).ok()
}

/// The index of the smallest value among those `allowed` (the first on a
/// tie); `None` when none is allowed.
fn minimum_index(values: &[f64], allowed: impl Fn(u32) -> bool) -> Option<u32> {
    let mut best: Option<(u32, f64)> = None;
    for (n, &value) in (0..).zip(values) {
        let better = best.map_or(true, |(_, least)| value < least);
        if better && allowed(n) {
            best = Some((n, value));
        }
    }
    best.map(|(n, _)| n)
}

/// The feasible n with the smallest RTO_N (the smallest such n on a tie).
/// `None` only for an invalid problem.
pub fn global_minimum(problem: &PacingProblem) -> Option<u32> {
    minimum_index(&feasible_values(problem)?, |_| true)
}

/// The feasible n with the smallest RTO_N among those whose schedule keeps
/// the FH from timing out ([`timeout_free`]); `None` for an invalid problem
/// or when there is no such n (S(N) < T).
pub fn timeout_free_minimum(problem: &PacingProblem) -> Option<u32> {
    minimum_index(&feasible_values(problem)?, |n| {
        timeout_free(problem, n) == Some(true)
    })
}

/// How n is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Search {
    /// The publication's rule, [`step_forward`].
    StepForward,
    /// Every feasible n, [`global_minimum`].
    #[default]
    GlobalMinimum,
    /// Every feasible n whose schedule is on time, [`timeout_free_minimum`]
    /// (not in the spec; see the module's notes).
    TimeoutFree,
}

/// When each held ACK goes out, and what the FH's estimator makes of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Schedule {
    /// How many ACKs are stretched.
    pub n: u32,
    /// The gap of the other ACKs, in seconds.
    pub theta: f64,
    /// x_1 … x_N: the gap before each ACK, the first from the start of the
    /// outage, in seconds. They add up to T.
    pub gaps: Vec<f64>,
    /// The FH's RTO just after each ACK, from the step-by-step estimator.
    pub rto_after: Vec<f64>,
    /// The first ACK that would arrive after the FH timed out
    /// ([`first_timeout`]); `None` when none would.
    pub first_timeout: Option<u32>,
}

/// The schedule `search` picks. The stretched gaps come from running the
/// estimator (what a base station tracking the FH would do), so the paced
/// gap is what remains of T after them. Only [`Search::TimeoutFree`] can
/// fail on a valid problem, when no schedule is on time.
pub fn schedule(problem: &PacingProblem, search: Search) -> Result<Schedule, PacingError> {
    problem.validate()?;
    let n = match search {
        // A valid problem always has n = 0.
        Search::StepForward => step_forward(problem).unwrap_or(0),
        Search::GlobalMinimum => global_minimum(problem).unwrap_or(0),
        Search::TimeoutFree => {
            timeout_free_minimum(problem).ok_or_else(|| PacingError::NoTimeoutFreeSchedule {
                acks: problem.acks,
                span: stretch_time(problem, problem.acks),
                outage: problem.outage,
            })?
        }
    };
    schedule_with(problem, n)
}

/// The schedule that stretches `n` ACKs; `n` is clamped to the feasible
/// range.
pub fn schedule_with(problem: &PacingProblem, n: u32) -> Result<Schedule, PacingError> {
    problem.validate()?;
    let n = n.min(last_feasible(problem).unwrap_or(0));
    let acks = problem.acks as usize;
    let mut gaps = Vec::with_capacity(acks);
    let mut state = Estimate::new(problem.mean, problem.deviation);
    for _ in 0..n {
        gaps.push(state.rto);
        state = state.after(state.rto);
    }
    let elapsed: f64 = gaps.iter().sum();
    // Rounding can leave the estimator's sum a hair above a closed-form
    // S(n) that just fits.
    let theta = ((problem.outage - elapsed) / f64::from(problem.acks - n)).max(0.0);
    gaps.resize(acks, theta);
    let rto_after = simulate_estimator(problem.mean, problem.deviation, &gaps)
        .iter()
        .map(|e| e.rto)
        .collect();
    Ok(Schedule {
        n,
        theta,
        first_timeout: first_timeout(problem.mean, problem.deviation, &gaps),
        gaps,
        rto_after,
    })
}

// ----- A fixed host beyond the spec's model -----

/// What the FH takes as a round-trip sample when a released ACK arrives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Samples {
    /// The gap before the ACK, the spec's model (§3).
    #[default]
    Gaps,
    /// The age of the segment the ACK acknowledges: how long the base
    /// station held the ACK plus a round trip. This is what a sender that
    /// times the acknowledged segment measures (RFC 6298 hosts, Linux,
    /// ns-2), since every held ACK acknowledges data sent before the
    /// outage.
    Hold,
}

/// How the FH turns its estimator and its floor into an RTO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FixedHost {
    /// RFC 6298 §2.4: `RTO = max(μ + 4σ, floor)`, the floor a lower bound
    /// on the whole RTO; with no floor, the spec's model (§3).
    #[default]
    Rfc6298,
    /// Linux (`tcp_rtt_estimator` and `tcp_set_rto` in
    /// net/ipv4/tcp_input.c): `RTO = μ + rttvar`, where `rttvar` is at
    /// least the floor (`tcp_rto_min`, 200 ms) and at least the largest
    /// `4σ` since it last decayed, so the floor is added to the mean
    /// rather than bounding the sum. `rttvar` decays only once a whole
    /// flight sent after its last decay is acknowledged; data the FH sends
    /// while the base station holds is acknowledged only after the
    /// return, so through a hold `rttvar` only grows. The deviation falls
    /// with a gain of 1/32 rather than 1/4 when a sample is below the mean
    /// by more than σ, and the RTO is at most [`LINUX_RTO_MAX`].
    ///
    /// When its timer fires also follows Linux (net/ipv4/tcp_output.c,
    /// `tcp_schedule_loss_probe`; tcp_input.c, `tcp_rearm_rto`), with its
    /// tail loss probe on (the default with SACK): after an ACK of new
    /// data the timer is due an RTO after the oldest unacknowledged
    /// segment was sent, not an RTO after the ACK. Every held ACK
    /// acknowledges data sent before the outage, so that segment is as old
    /// as the ACK's hold plus a round trip, and the FH waits only
    /// `RTO − age` ([`HostModel::due`]). Only a loss probe restarts the RTO
    /// from its own sending: the first one goes `min(2 srtt, RTO − age)`
    /// after an ACK; the FH sends one per episode, and a probe sent during
    /// the outage is acknowledged only after the return, so after it every
    /// later ACK leaves the FH only `RTO − age`.
    Linux,
}

/// Linux's loss probe timeout in smoothed round trips (`tcp_schedule_loss_probe`:
/// 2 srtt, plus two jiffies that the model leaves out).
const LINUX_PROBE_SRTTS: f64 = 2.0;

/// Linux's ceiling on the RTO (`TCP_RTO_MAX`), seconds.
pub const LINUX_RTO_MAX: f64 = 120.0;

/// The deviation's gain in Linux when a sample is below the mean by more
/// than the deviation (`m >>= 3` on top of the 1/4 gain).
const LINUX_FALLING_GAIN: f64 = 1.0 / 32.0;

impl Estimate {
    /// The estimator after one more sample, as Linux updates it: the
    /// mean as Jacobson's, the deviation with [`LINUX_FALLING_GAIN`] when
    /// the sample is below the mean by more than σ.
    fn after_linux(self, sample: f64) -> Estimate {
        let delta = sample - self.mean;
        let error = delta.abs() - self.deviation;
        let gain = if delta < 0.0 && error > 0.0 {
            LINUX_FALLING_GAIN
        } else {
            DEVIATION_GAIN
        };
        Estimate::new(self.mean + MEAN_GAIN * delta, self.deviation + gain * error)
    }
}

/// The FH's retransmission timer as the base station models it when it
/// plans a schedule step by step: the spec's estimator, with a lower
/// bound on the RTO, the FH's form of the RTO, a choice of what each ACK
/// samples, and which releases are duplicates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostModel {
    /// Lowest RTO the FH arms, seconds (0: no bound, the spec's model);
    /// with [`FixedHost::Linux`], the least variance term added to the
    /// mean.
    pub min_rto: f64,
    /// How the RTO follows from the estimator and `min_rto`.
    pub fixed_host: FixedHost,
    /// What each ACK samples.
    pub samples: Samples,
    /// When each released ACK reached the base station, in seconds after
    /// the schedule's start (the FH's last ACK): the age of what it
    /// acknowledges, for [`Samples::Hold`] and [`FixedHost::Linux`]'s
    /// timer; an ACK past the end of the list counts as held from the
    /// start.
    pub held_at: Vec<f64>,
    /// Releases per held ACK: the ACK itself, then `copies − 1`
    /// duplicates of it (0 counts as 1). A duplicate neither restarts the
    /// FH's timer nor gives it a sample (RFC 6298 §5.3: only an ACK of
    /// new data does; Linux and ns-2 alike), so the FH times out when the
    /// gap between two ACKs of new data exceeds its RTO, whatever
    /// duplicates come between.
    pub copies: u32,
}

impl HostModel {
    /// Releases per held ACK, at least 1.
    fn copies(&self) -> u32 {
        self.copies.max(1)
    }

    /// The RTO the FH arms with estimator `e` and, for Linux, variance
    /// term `rttvar`.
    fn rto(&self, e: Estimate, rttvar: f64) -> f64 {
        match self.fixed_host {
            FixedHost::Rfc6298 => e.rto.max(self.min_rto),
            FixedHost::Linux => (e.mean + rttvar).min(LINUX_RTO_MAX),
        }
    }

    /// How long after the last ACK of new data the FH's timer fires, with
    /// RTO `rto`, the oldest unacknowledged segment `age` old at that ACK,
    /// smoothed round trip `srtt`, and `probed` when the FH has already
    /// sent its loss probe (Linux: [`FixedHost::Linux`]).
    pub fn due(&self, rto: f64, age: f64, srtt: f64, probed: bool) -> f64 {
        match self.fixed_host {
            FixedHost::Rfc6298 => rto,
            FixedHost::Linux => {
                let rearmed = (rto - age).max(0.0);
                if probed {
                    rearmed
                } else {
                    Self::probe_after(rto, age, srtt) + rto
                }
            }
        }
    }

    /// When Linux's loss probe goes after an ACK: `min(2 srtt, RTO − age)`
    /// (the probe timeout, or the RTO from the oldest segment if sooner).
    fn probe_after(rto: f64, age: f64, srtt: f64) -> f64 {
        (LINUX_PROBE_SRTTS * srtt).min((rto - age).max(0.0))
    }

    /// Linux's variance term when the schedule starts: at least the floor.
    fn first_rttvar(&self, e: Estimate) -> f64 {
        (DEVIATIONS * e.deviation).max(self.min_rto)
    }

    /// The estimator and variance term after `sample`.
    fn after(&self, e: Estimate, rttvar: f64, sample: f64) -> (Estimate, f64) {
        match self.fixed_host {
            FixedHost::Rfc6298 => (e.after(sample), rttvar),
            FixedHost::Linux => {
                let next = e.after_linux(sample);
                (next, rttvar.max(DEVIATIONS * next.deviation))
            }
        }
    }

    /// The sample of release `i` (from 0), released `at` seconds after the
    /// start after a gap of `gap` since the last ACK of new data, on a
    /// path of round trip `mean`.
    fn sample(&self, i: usize, at: f64, gap: f64, mean: f64) -> f64 {
        match self.samples {
            Samples::Gaps => gap,
            Samples::Hold => self.age(i, at, mean),
        }
    }

    /// How long before release `i` (from 0, `at` seconds after the start)
    /// the segment it acknowledges was sent, on a path of round trip
    /// `mean`: how long the ACK was held plus a round trip. The next
    /// segment, the oldest the FH still waits for, left just after it.
    fn age(&self, i: usize, at: f64, mean: f64) -> f64 {
        (at - self.held_at.get(i).copied().unwrap_or(0.0)).max(0.0) + mean
    }

    /// Whether release `i` (from 0) is an ACK of new data rather than a
    /// duplicate of the one before.
    fn is_new(&self, i: usize) -> bool {
        i % self.copies() as usize == 0
    }

    /// Held ACKs among `releases` releases.
    fn held(&self, releases: u32) -> u32 {
        releases.div_ceil(self.copies())
    }

    /// Releases that stretch `n` held ACKs: the first ACK, then for each
    /// later one the duplicates of the one before and itself.
    fn stretched_releases(&self, n: u32) -> u32 {
        if n == 0 {
            0
        } else {
            1 + (n - 1) * self.copies()
        }
    }
}

/// The FH's timer through a schedule, one ACK at a time.
struct Tracker<'a> {
    model: &'a HostModel,
    mean: f64,
    state: Estimate,
    /// Linux's variance term (unused for RFC 6298).
    rttvar: f64,
    at: f64,
    /// Time since the last ACK of new data (or the start).
    since_new: f64,
    /// Age of the oldest unacknowledged segment at the last ACK of new
    /// data (at the start: sent a round trip before).
    age: f64,
    /// Whether the FH has sent its loss probe (Linux).
    probed: bool,
    released: usize,
}

impl<'a> Tracker<'a> {
    fn new(problem: &PacingProblem, model: &'a HostModel) -> Self {
        let state = Estimate::new(problem.mean, problem.deviation);
        Tracker {
            model,
            mean: problem.mean,
            state,
            rttvar: model.first_rttvar(state),
            at: 0.0,
            since_new: 0.0,
            age: problem.mean,
            probed: false,
            released: 0,
        }
    }

    /// The RTO in force.
    fn rto(&self) -> f64 {
        self.model.rto(self.state, self.rttvar)
    }

    /// How long after the last ACK of new data the FH's timer fires.
    fn due(&self) -> f64 {
        self.model
            .due(self.rto(), self.age, self.state.mean, self.probed)
    }

    /// Releases the next ACK after `gap`; returns whether it came on time
    /// (an ACK of new data no later than the RTO after the last one; a
    /// duplicate is always on time, the next ACK of new data is judged)
    /// and the RTO the FH arms after it.
    fn release(&mut self, gap: f64) -> (bool, f64) {
        self.at += gap;
        self.since_new += gap;
        let i = self.released;
        self.released += 1;
        if !self.model.is_new(i) {
            return (true, self.rto());
        }
        let on_time = self.since_new <= self.due();
        if self.model.fixed_host == FixedHost::Linux && !self.probed {
            let probe = HostModel::probe_after(self.rto(), self.age, self.state.mean);
            self.probed = self.since_new > probe;
        }
        let sample = self.model.sample(i, self.at, self.since_new, self.mean);
        (self.state, self.rttvar) = self.model.after(self.state, self.rttvar, sample);
        self.age = self.model.age(i, self.at, self.mean);
        self.since_new = 0.0;
        (on_time, self.rto())
    }
}

/// A schedule planned step by step under a [`HostModel`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// How many held ACKs are stretched.
    pub n: u32,
    /// How many releases the stretching takes (n without duplicates).
    pub stretched: u32,
    /// The gap of the other ACKs, in seconds.
    pub theta: f64,
    /// x_1 … x_N, seconds; they add up to T.
    pub gaps: Vec<f64>,
    /// The modelled FH's RTO just after each ACK (bounded below), seconds.
    pub rto_after: Vec<f64>,
    /// The first ACK (from 1) that would come after the modelled FH timed
    /// out; `None` when every one is on time.
    pub first_timeout: Option<u32>,
}

impl Plan {
    /// The modelled RTO when the mobile is back.
    pub fn final_rto(&self) -> f64 {
        self.rto_after.last().copied().unwrap_or(0.0)
    }
}

/// The modelled FH's RTO after each of `gaps`, and the first release
/// (from 1) that would come late: an ACK of new data after the FH timed
/// out, or the last release when duplicates after the last ACK of new
/// data leave the FH waiting past its RTO before the return.
pub fn evaluate(
    problem: &PacingProblem,
    model: &HostModel,
    gaps: &[f64],
) -> (Vec<f64>, Option<u32>) {
    let mut tracker = Tracker::new(problem, model);
    let mut late = None;
    let rto_after = (1..)
        .zip(gaps)
        .map(|(i, &gap)| {
            let (on_time, rto) = tracker.release(gap);
            if !on_time && late.is_none() {
                late = Some(i);
            }
            rto
        })
        .collect();
    if late.is_none() && tracker.since_new > tracker.due() {
        late = Some(u32::try_from(gaps.len()).unwrap_or(u32::MAX));
    }
    (rto_after, late)
}

/// The schedule that stretches `n` held ACKs under `model`: each of them
/// released when the modelled FH's timer is due, with the duplicates of
/// the one before spread evenly ahead of it, and the remaining releases
/// at a constant gap; `None` when `n` is not feasible (n ≥ the ACKs held,
/// or the stretched ACKs outlast T). `problem.acks` counts releases,
/// duplicates included.
pub fn plan(problem: &PacingProblem, model: &HostModel, n: u32) -> Option<Plan> {
    problem.validate().ok()?;
    if n >= model.held(problem.acks) {
        return None;
    }
    let stretched = model.stretched_releases(n);
    let mut tracker = Tracker::new(problem, model);
    let mut gaps = Vec::with_capacity(problem.acks as usize);
    for k in 0..n {
        // The releases up to this ACK of new data share the time until
        // the FH's timer is due: the ACK alone first, then each ACK with
        // the duplicates of the one before it.
        let share = if k == 0 { 1 } else { model.copies() };
        let due = tracker.due();
        if tracker.at + due > problem.outage {
            return None;
        }
        for _ in 0..share {
            let gap = due / f64::from(share);
            tracker.release(gap);
            gaps.push(gap);
        }
    }
    let theta = ((problem.outage - tracker.at) / f64::from(problem.acks - stretched)).max(0.0);
    gaps.resize(problem.acks as usize, theta);
    let (rto_after, first_timeout) = evaluate(problem, model, &gaps);
    Some(Plan {
        n,
        stretched,
        theta,
        gaps,
        rto_after,
        first_timeout,
    })
}

/// Every feasible plan under `model`, from n = 0: the feasible n are 0 up
/// to some largest one, since each stretched ACK adds a positive gap.
pub fn plans(problem: &PacingProblem, model: &HostModel) -> Vec<Plan> {
    (0..problem.acks.min(MAX_ACKS))
        .map_while(|n| plan(problem, model, n))
        .collect()
}

/// The n `search` picks among `plans` (as [`step_forward`],
/// [`global_minimum`] and [`timeout_free_minimum`] do with the spec's
/// model); `None` when there is none.
pub fn choose(plans: &[Plan], search: Search) -> Option<u32> {
    let values: Vec<f64> = plans.iter().map(Plan::final_rto).collect();
    match search {
        Search::StepForward => step_forward_index(&values),
        Search::GlobalMinimum => minimum_index(&values, |_| true),
        Search::TimeoutFree => {
            minimum_index(&values, |n| plans[n as usize].first_timeout.is_none())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(outage: f64, acks: u32, mean: f64, deviation: f64) -> PacingProblem {
        PacingProblem {
            outage,
            acks,
            mean,
            deviation,
        }
    }

    /// The example of the spec's evaluation (ack-holding spec §4).
    const SPEC_EXAMPLE: PacingProblem = PacingProblem {
        outage: 1000.0,
        acks: 30,
        mean: 1.0,
        deviation: 0.3,
    };

    /// `actual` equals `expected` up to rounding at the scale of the
    /// problem's largest quantity.
    fn close(actual: f64, expected: f64, scale: f64) -> bool {
        (actual - expected).abs() <= 1e-9 * scale.max(1e-12)
    }

    /// How many times the usual rounding the float estimator may be off
    /// `p`'s closed forms: δ = x − μ cancels when σ0 ≪ μ0 (module notes).
    fn cancellation(p: &PacingProblem) -> f64 {
        if p.deviation == 0.0 {
            1.0
        } else {
            1.0 + 1e9 * f64::EPSILON * p.mean / p.deviation
        }
    }

    /// A grid of problems from short outages with few ACKs to long ones
    /// with many, with zero and large deviations.
    fn grid() -> Vec<PacingProblem> {
        let mut problems = Vec::new();
        for outage in [0.0, 0.5, 3.0, 10.0, 77.0, 250.0, 500.0, 1000.0, 5000.0] {
            for acks in [1, 2, 3, 7, 20, 30, 64] {
                for mean in [0.0, 0.01, 0.2, 1.0, 3.0] {
                    for deviation in [0.0, 0.005, 0.1, 0.3, 2.0] {
                        problems.push(problem(outage, acks, mean, deviation));
                    }
                }
            }
        }
        problems
    }

    /// Checks every closed form of `p` with `n` stretched ACKs against the
    /// step-by-step estimator; returns a description of the first mismatch.
    fn closed_forms_match(p: &PacingProblem, n: u32) -> Result<(), String> {
        // Stretching phase: each gap is the RTO in force.
        let mut state = Estimate::new(p.mean, p.deviation);
        let mut elapsed = 0.0;
        for _ in 0..n {
            elapsed += state.rto;
            state = state.after(state.rto);
        }
        let at_n = stretched(p, n);
        let scale = (p.outage + at_n.rto + p.mean + p.deviation) * cancellation(p);
        for (what, closed, stepped) in [
            ("μ_n", at_n.mean, state.mean),
            ("σ_n", at_n.deviation, state.deviation),
            ("RTO_n", at_n.rto, state.rto),
            ("S(n)", stretch_time(p, n), elapsed),
        ] {
            if !close(closed, stepped, scale) {
                return Err(format!("{p:?} n={n}: {what} {closed} vs {stepped}"));
            }
        }
        let Some(theta) = theta(p, n) else {
            return Ok(());
        };
        // Paced phase: δ never changes sign, so |δ| never folds.
        let sign = (theta - state.mean).signum();
        for _ in n..p.acks {
            let delta = theta - state.mean;
            if delta != 0.0 && delta.signum() != sign {
                return Err(format!("{p:?} n={n}: δ changed sign"));
            }
            state = state.after(theta);
        }
        let last = final_estimate(p, n).expect("feasible");
        for (what, closed, stepped) in [
            ("μ_N", last.mean, state.mean),
            ("σ_N", last.deviation, state.deviation),
            ("RTO_N", last.rto, state.rto),
        ] {
            if !close(closed, stepped, scale) {
                return Err(format!("{p:?} n={n}: {what} {closed} vs {stepped}"));
            }
        }
        Ok(())
    }

    #[test]
    fn closed_forms_match_the_estimator_on_a_grid() {
        let mut checked = 0;
        for p in grid() {
            // Infeasible n too: μ_n, σ_n, RTO_n and S(n) hold for any n.
            for n in 0..p.acks.min(40) {
                closed_forms_match(&p, n).unwrap();
                checked += u32::from(feasible(&p, n));
            }
        }
        assert!(checked > 5_000, "only {checked} feasible cases");
    }

    #[test]
    fn sigma_n_is_exact_whether_the_mean_falls_or_rises_to_theta() {
        // μ_n above θ (the mean falls), below θ (it rises) and equal.
        let falls = problem(10.0, 30, 3.0, 0.0);
        assert!(stretched(&falls, 0).mean > theta(&falls, 0).unwrap());
        let rises = problem(1000.0, 30, 1.0, 0.3);
        assert!(stretched(&rises, 9).mean < theta(&rises, 9).unwrap());
        let equal = problem(30.0, 30, 1.0, 0.5);
        assert_eq!(theta(&equal, 0), Some(equal.mean));
        for (p, n) in [(falls, 0), (rises, 9), (equal, 0)] {
            closed_forms_match(&p, n).unwrap();
        }
        // With θ = μ_0, σ only decays: σ_N = (3/4)^N σ_0.
        let last = final_estimate(&equal, 0).unwrap();
        assert!(close(last.deviation, 0.75f64.powi(30) * 0.5, 1.0));
    }

    #[test]
    fn timeout_free_is_the_first_paced_gap_against_rto_n() {
        let mut both = [0, 0];
        for p in grid() {
            for n in 0..p.acks {
                let Some(free) = timeout_free(&p, n) else {
                    break;
                };
                let theta = theta(&p, n).unwrap();
                let rto_n = stretched(&p, n).rto;
                // Ties within rounding could go either way.
                if close(theta, rto_n, p.outage + rto_n) {
                    continue;
                }
                let s = schedule_with(&p, n).unwrap();
                assert_eq!(s.first_timeout.is_none(), free, "{p:?} n={n}");
                if let Some(ack) = s.first_timeout {
                    // Stretched ACKs are on time by construction.
                    assert_eq!(ack, n + 1, "{p:?} n={n}");
                }
                both[usize::from(free)] += 1;
            }
        }
        assert!(both[0] > 100 && both[1] > 100, "{both:?}");
    }

    #[test]
    fn a_timeout_free_schedule_exists_when_n_stretched_acks_outlast_the_outage() {
        let mut seen = [0, 0];
        for p in grid() {
            let span = stretch_time(&p, p.acks);
            // Ties within rounding could go either way.
            if close(span, p.outage, p.outage + span) {
                continue;
            }
            let found = timeout_free_minimum(&p);
            assert_eq!(found.is_some(), span >= p.outage, "{p:?}");
            seen[usize::from(found.is_some())] += 1;
            match schedule(&p, Search::TimeoutFree) {
                Ok(s) => {
                    let n = found.unwrap();
                    assert_eq!((s.n, s.first_timeout), (n, None), "{p:?}");
                    // The smallest final RTO among the on-time n.
                    for m in (0..p.acks).take_while(|&m| feasible(&p, m)) {
                        if timeout_free(&p, m) == Some(true) {
                            assert!(final_rto(&p, n) <= final_rto(&p, m), "{p:?}");
                        }
                    }
                }
                Err(e) => {
                    assert!(found.is_none());
                    assert_eq!(e.parameter(), None);
                    // And indeed every schedule has a late ACK.
                    for m in (0..p.acks).take_while(|&m| feasible(&p, m)) {
                        let s = schedule_with(&p, m).unwrap();
                        assert!(s.first_timeout.is_some(), "{p:?} n={m}");
                    }
                }
            }
        }
        assert!(seen[0] > 100 && seen[1] > 100, "{seen:?}");
    }

    #[test]
    fn the_spec_example() {
        let p = SPEC_EXAMPLE;
        let global = global_minimum(&p).unwrap();
        let forward = step_forward(&p).unwrap();
        let values: Vec<_> = (0..p.acks).map(|n| final_rto(&p, n)).collect();
        let feasible_count = values.iter().take_while(|v| v.is_some()).count();
        // Feasibility is a prefix of 0..N, as S grows with n.
        assert!(values[feasible_count..].iter().all(Option::is_none));
        assert!(feasible_count > 1 && feasible_count < 30);
        for n in [global, forward] {
            assert!((n as usize) < feasible_count);
            assert!(stretch_time(&p, n) <= p.outage);
        }
        let best = values[global as usize].unwrap();
        for value in values.iter().flatten() {
            assert!(best <= *value);
        }
        eprintln!(
            "spec example: step-forward n = {forward} (RTO_N {:.4} s), global minimum n = \
             {global} (RTO_N {best:.4} s)",
            values[forward as usize].unwrap()
        );
        // The schedules add up to the outage and the estimator agrees with
        // the closed form.
        for search in [Search::StepForward, Search::GlobalMinimum] {
            let s = schedule(&p, search).unwrap();
            assert_eq!(s.gaps.len(), 30);
            assert!(close(s.gaps.iter().sum(), p.outage, p.outage));
            assert!(close(s.theta, theta(&p, s.n).unwrap(), p.outage));
            let rto = *s.rto_after.last().unwrap();
            assert!(close(rto, final_rto(&p, s.n).unwrap(), p.outage));
        }
    }

    #[test]
    fn the_searches_differ_on_the_spec_example() {
        // Found by listing RTO_N(n) for n = 0..11 (the feasible ones) with
        // the closed forms and, separately, a step-by-step estimator:
        // RTO_N rises from 37.41 s at n = 0 to 48.39 s at n = 6, then falls
        // to 34.97 s at n = 9. The step-forward rule stops at n = 0, the
        // first value no larger than its neighbour.
        let p = SPEC_EXAMPLE;
        assert_eq!(step_forward(&p), Some(0));
        assert_eq!(global_minimum(&p), Some(9));
        assert!((final_rto(&p, 0).unwrap() - 37.408).abs() < 1e-3);
        assert!((final_rto(&p, 9).unwrap() - 34.969).abs() < 1e-3);
        // And the rule's n = 0 is a schedule the FH times out on: its
        // first ACK comes T/N = 33.3 s after the start, when the FH's RTO
        // is μ0 + 4σ0 = 2.2 s.
        assert_eq!(timeout_free(&p, 0), Some(false));
        assert_eq!(
            schedule(&p, Search::StepForward).unwrap().first_timeout,
            Some(1)
        );
        assert_eq!(timeout_free(&p, 9), Some(true));
        assert_eq!(
            schedule(&p, Search::GlobalMinimum).unwrap().first_timeout,
            None
        );
        assert_eq!(timeout_free_minimum(&p), Some(9));
    }

    #[test]
    fn the_global_minimum_can_time_out() {
        // The spec's second example (ack-holding spec §4): 20 ACKs over
        // 500 s. RTO_N(0) = 36.02 s is the lowest of n = 0..9, but paced at
        // 25 s from the start the first ACK is 22.8 s late for an RTO of
        // 2.2 s. The on-time n are 6 to 9, and RTO_N(8) = 41.60 s is their
        // lowest (values from the closed forms, listed in a separate script
        // that also ran the estimator step by step).
        let p = problem(500.0, 20, 1.0, 0.3);
        assert_eq!(global_minimum(&p), Some(0));
        assert_eq!(
            schedule(&p, Search::GlobalMinimum).unwrap().first_timeout,
            Some(1)
        );
        let on_time: Vec<u32> = (0..20)
            .filter(|&n| timeout_free(&p, n) == Some(true))
            .collect();
        assert_eq!(on_time, [6, 7, 8, 9]);
        assert_eq!(timeout_free_minimum(&p), Some(8));
        assert!((final_rto(&p, 8).unwrap() - 41.604).abs() < 1e-3);
    }

    #[test]
    fn the_step_forward_rule_only_misses_by_stopping_at_zero_on_the_grid() {
        // An observation, not a theorem: on this grid RTO_N(n) has at most
        // one local minimum besides n = 0, so the rule differs from the
        // global minimum only when it stops at n = 0.
        let mut differ = 0;
        for p in grid() {
            if p.deviation == 0.0 {
                // Stretching changes nothing: values differ by rounding.
                continue;
            }
            let (forward, global) = (step_forward(&p).unwrap(), global_minimum(&p).unwrap());
            if forward != global {
                differ += 1;
                assert_eq!(forward, 0, "{p:?}: stopped at {forward}, best {global}");
            }
        }
        assert!(differ > 10, "{differ}");
    }

    #[test]
    fn searches_pick_a_feasible_minimum() {
        for p in grid() {
            let global = global_minimum(&p).unwrap();
            let forward = step_forward(&p).unwrap();
            let value = |n: u32| final_rto(&p, n);
            let best = value(global).unwrap();
            let mut n = 0;
            while let Some(v) = value(n) {
                assert!(best <= v, "{p:?}");
                n += 1;
            }
            // The step-forward answer is a local minimum over the feasible n.
            let here = value(forward).unwrap();
            if forward > 0 {
                assert!(here <= value(forward - 1).unwrap(), "{p:?}");
            }
            if let Some(next) = value(forward + 1) {
                assert!(here <= next, "{p:?}");
            }
        }
    }

    #[test]
    fn n_zero_is_always_feasible() {
        for p in [problem(0.0, 1, 0.0, 0.0), problem(0.0, 5, 2.0, 1.0)] {
            assert_eq!(global_minimum(&p), Some(0));
            assert_eq!(step_forward(&p), Some(0));
            let s = schedule(&p, Search::default()).unwrap();
            assert_eq!(s.n, 0);
            assert_eq!(s.gaps, vec![0.0; p.acks as usize]);
        }
        // With nothing to stretch (μ0 = σ0 = 0) every n < N is feasible.
        let p = problem(10.0, 4, 0.0, 0.0);
        assert_eq!((0..4).filter(|&n| feasible(&p, n)).count(), 4);
        assert!(!feasible(&p, 4));
    }

    #[test]
    fn invalid_problems_name_the_parameter() {
        let good = problem(10.0, 5, 1.0, 0.2);
        assert_eq!(good.validate(), Ok(()));
        for (bad, parameter) in [
            (problem(-1.0, 5, 1.0, 0.2), "outage"),
            (problem(f64::NAN, 5, 1.0, 0.2), "outage"),
            (problem(f64::INFINITY, 5, 1.0, 0.2), "outage"),
            (problem(10.0, 0, 1.0, 0.2), "acks"),
            (problem(10.0, MAX_ACKS + 1, 1.0, 0.2), "acks"),
            (problem(10.0, 5, -0.1, 0.2), "mean"),
            (problem(10.0, 5, 2e9, 0.2), "mean"),
            (problem(10.0, 5, 1.0, f64::NEG_INFINITY), "deviation"),
        ] {
            let err = bad.validate().unwrap_err();
            assert_eq!(err.parameter(), Some(parameter));
            assert!(err.to_string().starts_with(parameter), "{err}");
            // Compared as text: a NaN value is not equal to itself.
            let from_schedule = schedule(&bad, Search::StepForward).unwrap_err();
            assert_eq!(from_schedule.to_string(), err.to_string());
            assert_eq!(global_minimum(&bad), None);
            assert_eq!(step_forward(&bad), None);
            assert_eq!(timeout_free_minimum(&bad), None);
        }
    }

    #[test]
    fn search_names() {
        assert_eq!(Search::default(), Search::GlobalMinimum);
        for (search, name) in [
            (Search::StepForward, "\"step-forward\""),
            (Search::GlobalMinimum, "\"global-minimum\""),
            (Search::TimeoutFree, "\"timeout-free\""),
        ] {
            assert_eq!(serde_json::to_string(&search).unwrap(), name);
            assert_eq!(serde_json::from_str::<Search>(name).unwrap(), search);
        }
    }

    #[test]
    fn extreme_problems_stay_finite() {
        for p in [
            problem(MAX_SECONDS, MAX_ACKS, MAX_SECONDS, MAX_SECONDS),
            problem(MAX_SECONDS, MAX_ACKS, 0.0, 1e-300),
            problem(MAX_SECONDS, MAX_ACKS, 0.0, 0.0),
            problem(0.0, MAX_ACKS, MAX_SECONDS, 0.0),
        ] {
            for search in [
                Search::StepForward,
                Search::GlobalMinimum,
                Search::TimeoutFree,
            ] {
                let Ok(s) = schedule(&p, search) else {
                    assert_eq!(search, Search::TimeoutFree);
                    continue;
                };
                assert!(s.gaps.iter().chain(&s.rto_after).all(|x| x.is_finite()));
                assert!(final_rto(&p, s.n).unwrap().is_finite());
            }
        }
    }

    #[test]
    fn plans_under_the_spec_model_are_the_closed_forms_and_searches() {
        let spec = HostModel::default();
        let mut compared = 0;
        for p in grid() {
            let plans = plans(&p, &spec);
            let feasible = last_feasible(&p).unwrap() as usize + 1;
            if plans.len() != feasible {
                // S(n) within rounding of T: the float sum and the closed
                // form may disagree on the last n.
                assert!(
                    (stretch_time(&p, plans.len() as u32) - p.outage).abs() < 1e-9 * p.outage,
                    "{p:?}"
                );
                continue;
            }
            for plan in &plans {
                let closed = final_rto(&p, plan.n).unwrap();
                let scale = (p.outage + closed + p.mean + p.deviation) * cancellation(&p);
                assert!(close(plan.final_rto(), closed, scale), "{p:?} {plan:?}");
                assert_eq!(
                    plan.first_timeout.is_none(),
                    timeout_free(&p, plan.n).unwrap(),
                    "{p:?} n={}",
                    plan.n
                );
            }
            assert_eq!(
                choose(&plans, Search::StepForward),
                step_forward(&p),
                "{p:?}"
            );
            assert_eq!(
                choose(&plans, Search::GlobalMinimum),
                global_minimum(&p),
                "{p:?}"
            );
            assert_eq!(
                choose(&plans, Search::TimeoutFree),
                timeout_free_minimum(&p),
                "{p:?}"
            );
            compared += 1;
        }
        assert!(compared > 1_500, "only {compared}");
    }

    /// Our steady path: 15 ACKs over 10.5 s, μ0 = 0.1 s, σ0 = 0.
    const STEADY: PacingProblem = PacingProblem {
        outage: 10.5,
        acks: 15,
        mean: 0.1,
        deviation: 0.0,
    };

    #[test]
    fn a_floor_makes_an_even_gap_below_it_on_time() {
        let spec = plans(&STEADY, &HostModel::default());
        // With σ0 = 0 the model's RTO is μ0 = 0.1 s: every schedule is late.
        assert!(spec.iter().all(|p| p.first_timeout.is_some()), "{spec:?}");
        let floored = HostModel {
            min_rto: 1.0,
            ..HostModel::default()
        };
        let plans = plans(&STEADY, &floored);
        // Each stretched ACK waits at least the floor.
        let last = plans.last().unwrap();
        assert!(
            last.gaps[..last.n as usize].iter().all(|&g| g >= 1.0),
            "{last:?}"
        );
        assert!(plans.len() <= 11, "{}", plans.len());
        // Even 0.7 s gaps are on time under a 1 s floor.
        let even = &plans[0];
        assert_eq!(even.first_timeout, None);
        assert!((even.theta - 0.7).abs() < 1e-12);
        assert!(even.rto_after.iter().all(|&r| r >= 1.0), "{even:?}");
        let on_time = choose(&plans, Search::TimeoutFree).unwrap();
        assert_eq!(plans[on_time as usize].first_timeout, None);
    }

    #[test]
    fn hold_samples_let_few_acks_cover_a_long_outage() {
        // Six ACKs, held from 0.1 s to 0.6 s after the FH's last one, over
        // 10.5 s; a Linux-like RTO of at least 0.345 s.
        let problem = PacingProblem {
            outage: 10.5,
            acks: 6,
            mean: 0.145,
            deviation: 0.0002,
        };
        let gaps_model = HostModel {
            min_rto: 0.345,
            ..HostModel::default()
        };
        assert_eq!(
            choose(&plans(&problem, &gaps_model), Search::TimeoutFree),
            None
        );
        let hold = HostModel {
            samples: Samples::Hold,
            held_at: vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
            ..gaps_model
        };
        let plans = plans(&problem, &hold);
        let n = choose(&plans, Search::TimeoutFree).expect("an on-time schedule");
        let plan = &plans[n as usize];
        assert_eq!(plan.first_timeout, None);
        // Each ACK samples its age, so the RTO grows with the hold: the
        // first gap is the floor and every later one is longer.
        assert_eq!(plan.gaps[0], 0.345);
        assert!(
            plan.gaps.windows(2).take(n as usize).all(|w| w[1] > w[0]),
            "{plan:?}"
        );
        assert!((plan.gaps.iter().sum::<f64>() - 10.5).abs() < 1e-9);
        // The sample of the k-th ACK is its age: its release less its
        // arrival, plus the round trip (checked by hand for the first).
        let first = Estimate::new(0.145, 0.0002).after(0.345 - 0.1 + 0.145);
        assert!((plan.rto_after[0] - first.rto.max(0.345)).abs() < 1e-12);
    }

    /// Our path to a Linux fixed host: μ0 = 0.145 s, a tiny deviation.
    const LINUX_PATH: PacingProblem = PacingProblem {
        outage: 10.5,
        acks: 6,
        mean: 0.145,
        deviation: 0.0002,
    };

    #[test]
    fn linux_adds_the_floor_to_the_mean() {
        let linux = HostModel {
            min_rto: 0.2,
            fixed_host: FixedHost::Linux,
            ..HostModel::default()
        };
        let rfc = HostModel {
            fixed_host: FixedHost::Rfc6298,
            ..linux.clone()
        };
        // The RTO the FH has armed when the schedule starts.
        let first = |model: &HostModel| Tracker::new(&LINUX_PATH, model).rto();
        // srtt + max(4σ, floor) = 0.145 + max(0.0008, 0.2)...
        assert!((first(&linux) - 0.345).abs() < 1e-12, "{}", first(&linux));
        // ...where RFC 6298 bounds the sum: max(0.145 + 0.0008, 0.2).
        assert!((first(&rfc) - 0.2).abs() < 1e-12, "{}", first(&rfc));
        // A deviation above the floor: srtt + 4σ in both.
        let wide = PacingProblem {
            deviation: 0.1,
            ..LINUX_PATH
        };
        let rto = |model: &HostModel| Tracker::new(&wide, model).rto();
        assert!((rto(&linux) - 0.545).abs() < 1e-12);
        assert!((rto(&rfc) - 0.545).abs() < 1e-12);
        // The RFC 6298 host's first stretched ACK goes when that RTO is up.
        assert!((plan(&LINUX_PATH, &rfc, 1).unwrap().gaps[0] - 0.2).abs() < 1e-12);
    }

    #[test]
    fn linux_probes_first_then_times_out_an_rto_after_the_oldest_segment() {
        let linux = HostModel {
            min_rto: 0.2,
            fixed_host: FixedHost::Linux,
            samples: Samples::Hold,
            held_at: vec![0.0; 6],
            ..HostModel::default()
        };
        let problem = PacingProblem {
            deviation: 0.0,
            ..LINUX_PATH
        };
        // At the start the oldest segment left a round trip ago (0.145 s)
        // and the RTO is 0.345 s: the loss probe goes after
        // min(2 × 0.145, 0.345 − 0.145) = 0.2 s and restarts the RTO, so
        // the timer is due 0.2 + 0.345 = 0.545 s after the last ACK (the
        // emulator's Linux timed out 0.57–0.64 s after it).
        let gaps = plan(&problem, &linux, 2).unwrap().gaps;
        assert!((gaps[0] - 0.545).abs() < 1e-12, "{gaps:?}");
        // The first ACK, held from the start, samples 0.545 + 0.145 =
        // 0.69 s: srtt 0.145 + 0.545/8 = 0.213125, σ = 0.545/4, rttvar =
        // max(0.2, 0.545), RTO 0.758125 s. The segment the FH now waits
        // for is as old as that sample, the probe is spent, so the second
        // ACK is due 0.758125 − 0.69 = 0.068125 s later.
        assert!((gaps[1] - 0.068125).abs() < 1e-12, "{gaps:?}");
        let (rto, late) = evaluate(&problem, &linux, &gaps[..2]);
        assert!((rto[0] - 0.758125).abs() < 1e-12, "{rto:?}");
        assert_eq!(late, None);
        let (_, late) = evaluate(&problem, &linux, &[gaps[0], 0.07]);
        assert_eq!(late, Some(2));
        // An ACK before the probe leaves it to come: after an ACK at 0.1 s
        // (sample 0.245 s: srtt 0.1575, σ 0.025, rttvar 0.2, RTO 0.3575 s;
        // the oldest segment 0.245 s old) the probe goes after
        // min(0.315, 0.1125) and the RTO after it: due 0.47 s later.
        let (_, late) = evaluate(&problem, &linux, &[0.1, 0.47 - 1e-9]);
        assert_eq!(late, None);
        let (_, late) = evaluate(&problem, &linux, &[0.1, 0.47 + 1e-9]);
        assert_eq!(late, Some(2));
        // An RFC 6298 host counts its RTO from the ACK alone.
        let rfc = HostModel {
            fixed_host: FixedHost::Rfc6298,
            ..linux.clone()
        };
        assert_eq!(rfc.due(0.7, 0.69, 0.2, true), 0.7);
        assert!((linux.due(0.7, 0.69, 0.2, true) - 0.01).abs() < 1e-12);
        assert_eq!(linux.due(0.7, 0.9, 0.2, true), 0.0);
    }

    #[test]
    fn linux_lowers_the_deviation_slowly_on_a_sample_below_the_mean() {
        let e = Estimate::new(1.0, 0.1);
        // 0.5 s below a 1 s mean: |δ| − σ = 0.4, at 1/32 in Linux, 1/4 in
        // RFC 6298; the mean moves by δ/8 in both.
        let linux = e.after_linux(0.5);
        assert!((linux.mean - 0.9375).abs() < 1e-12);
        assert!((linux.deviation - (0.1 + 0.4 / 32.0)).abs() < 1e-12);
        assert!((e.after(0.5).deviation - 0.2).abs() < 1e-12);
        // Above the mean, or below it by less than σ: the gain is 1/4.
        assert!((e.after_linux(1.5).deviation - 0.2).abs() < 1e-12);
        assert!((e.after_linux(0.95).deviation - (0.1 - 0.05 / 4.0)).abs() < 1e-12);
    }

    #[test]
    fn linux_s_variance_term_only_grows_through_a_hold() {
        let problem = PacingProblem {
            outage: 0.7,
            acks: 2,
            mean: 0.1,
            deviation: 0.0,
        };
        let linux = HostModel {
            min_rto: 0.2,
            fixed_host: FixedHost::Linux,
            ..HostModel::default()
        };
        let (rto, late) = evaluate(&problem, &linux, &[0.5, 0.1]);
        // The first gap is just inside the loss probe (after
        // min(0.2, 0.3 − 0.1)) plus the RTO of 0.1 + max(0, 0.2); at that
        // ACK the segment the FH waits for is 0.6 s old, past the new RTO
        // of 0.55 s, so it times out at once and the second is late.
        assert_eq!(late, Some(2));
        // 0.5 s: δ = 0.4, μ = 0.15, σ = 0.1, so rttvar = max(0.2, 0.4).
        assert!((rto[0] - 0.55).abs() < 1e-12, "{rto:?}");
        // 0.1 s: μ = 0.14375 and σ = 0.0875, but rttvar keeps 0.4.
        assert!((rto[1] - (0.14375 + 0.4)).abs() < 1e-12, "{rto:?}");
        let rfc = HostModel {
            fixed_host: FixedHost::Rfc6298,
            ..linux.clone()
        };
        let (rto, _) = evaluate(&problem, &rfc, &[0.5, 0.1]);
        assert!((rto[1] - (0.14375 + 4.0 * 0.0875)).abs() < 1e-12, "{rto:?}");
        // Linux's ceiling.
        let long = PacingProblem {
            outage: 1000.0,
            acks: 1,
            mean: 100.0,
            deviation: 10.0,
        };
        assert_eq!(evaluate(&long, &linux, &[1000.0]).0[0], LINUX_RTO_MAX);
    }

    #[test]
    fn duplicates_neither_restart_the_timer_nor_sample() {
        // 5 held ACKs with two duplicates each over 10.5 s, a 1 s floor.
        let problem = PacingProblem { acks: 15, ..STEADY };
        let model = HostModel {
            min_rto: 1.0,
            copies: 3,
            ..HostModel::default()
        };
        let even = plan(&problem, &model, 0).unwrap();
        assert!((even.theta - 0.7).abs() < 1e-12);
        // The first ACK of new data comes after 0.7 s, the second 2.1 s
        // later, past the floor: release 4 is late, though no release is
        // more than 0.7 s after the one before.
        assert_eq!(even.first_timeout, Some(4));
        // A duplicate leaves the modelled RTO as it was.
        assert_eq!(even.rto_after[1], even.rto_after[0]);
        assert_eq!(even.rto_after[2], even.rto_after[0]);
        // Stretching places the ACKs of new data where they go without
        // duplicates, and the duplicates of each between it and the next.
        let alone = HostModel {
            copies: 1,
            ..model.clone()
        };
        let single = PacingProblem { acks: 5, ..STEADY };
        let with = plan(&problem, &model, 3).unwrap();
        let without = plan(&single, &alone, 3).unwrap();
        assert_eq!(with.stretched, 7);
        let times = |gaps: &[f64]| -> Vec<f64> {
            gaps.iter()
                .scan(0.0, |at, g| {
                    *at += g;
                    Some(*at)
                })
                .collect()
        };
        let new_with: Vec<f64> = times(&with.gaps).into_iter().step_by(3).take(3).collect();
        let new_without: Vec<f64> = times(&without.gaps).into_iter().take(3).collect();
        for (a, b) in new_with.iter().zip(&new_without) {
            assert!((a - b).abs() < 1e-12, "{new_with:?} {new_without:?}");
        }
        // The next ACK of new data is due when the RTO after the first
        // runs out; it and the first's two duplicates share that time.
        for gap in &with.gaps[1..4] {
            assert!((gap - with.rto_after[0] / 3.0).abs() < 1e-12, "{with:?}");
        }
        // Duplicates after the last ACK of new data leave the FH waiting
        // 2θ before the return: late when that exceeds its RTO.
        let short = HostModel {
            min_rto: 1.5,
            ..model.clone()
        };
        let single_ack = PacingProblem {
            acks: 3,
            outage: 3.0,
            ..STEADY
        };
        assert_eq!(plan(&single_ack, &short, 0).unwrap().first_timeout, Some(3));
    }

    proptest::proptest! {
        #[test]
        fn closed_forms_match_the_estimator(
            outage in 0.0f64..5000.0,
            acks in 1u32..80,
            mean in 0.0f64..5.0,
            deviation in 0.0f64..3.0,
            pick in 0.0f64..1.0,
        ) {
            let p = problem(outage, acks, mean, deviation);
            let last = last_feasible(&p).unwrap();
            // Any feasible n, and the first infeasible one.
            let n = ((f64::from(last + 1) * pick) as u32).min(last + 1).min(acks - 1);
            if let Err(e) = closed_forms_match(&p, n) {
                return Err(proptest::test_runner::TestCaseError::fail(e));
            }
            let s = schedule_with(&p, n.min(last)).unwrap();
            let expected = final_rto(&p, s.n).unwrap();
            let scale = (outage + expected) * cancellation(&p);
            proptest::prop_assert!(close(*s.rto_after.last().unwrap(), expected, scale));
            proptest::prop_assert!(close(s.gaps.iter().sum(), outage, outage));
        }
    }
}
