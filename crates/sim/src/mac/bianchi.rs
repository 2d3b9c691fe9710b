//! Saturation throughput of the DCF: Bianchi's analytical model (G.
//! Bianchi, "Performance Analysis of the IEEE 802.11 Distributed
//! Coordination Function", IEEE JSAC 18(3), 2000) and the same quantity
//! measured on our stations ([`simulate_saturation`]), for validation.
//!
//! The model: each of `n` stations always has a packet; a station sends in
//! a slot with probability τ, and its frame collides with probability
//! p = 1 - (1 - τ)^(n-1), the same at every attempt. From the Markov chain
//! of the backoff stages (W = CWmin + 1, m doublings up to CWmax + 1):
//!
//! τ = 2 (1 - 2p) / ((1 - 2p)(W + 1) + p W (1 - (2p)^m)),
//!
//! a fixed point in τ solved by bisection. The throughput is then
//! S = Ps Ptr E[P] / ((1 - Ptr) σ + Ptr Ps Ts + Ptr (1 - Ps) Tc), with
//! Ptr = 1 - (1 - τ)^n the probability that a slot is used, Ps = n τ
//! (1 - τ)^(n-1) / Ptr that a used slot carries one frame only, σ the slot
//! time, Ts and Tc the time the medium is taken by a success and by a
//! collision.
//!
//! Ts and Tc as the standard's timing has them (the paper's δ, the
//! propagation delay, is zero here). Basic access: Ts = DATA + SIFS +
//! ACK + DIFS and Tc = DATA + EIFS (stations that heard the collision wait
//! EIFS; the paper's Tc = DATA + DIFS predates the rule). RTS/CTS:
//! Ts = RTS + CTS + DATA + ACK + 3 SIFS + DIFS and Tc = RTS + EIFS.

use rtolab_time::{SimDuration, SimTime};

use super::dcf::{DcfEvent, DcfSpec, PhyRate, ACK_LEN, RTS_LEN};
use super::wlan::{Wlan, WlanEvent};
use crate::position::Position;
use crate::radio::{Mobility, RadioSpec};
use crate::rng::component_stream;

/// The model's answer for one number of stations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Saturation {
    /// Probability that a station sends in a slot.
    pub tau: f64,
    /// Probability that a frame collides.
    pub p: f64,
    /// Saturation throughput of MSDU bytes, bit/s.
    pub throughput_bps: f64,
}

/// τ as a function of p (the paper's eq. 7), written with
/// `(1 - (2p)^m) / (1 - 2p) = Σ_{k<m} (2p)^k` so that p = 1/2 is no
/// special case.
fn tau_of_p(p: f64, w: f64, m: u32) -> f64 {
    let stages: f64 = (0..m).map(|k| (2.0 * p).powi(k as i32)).sum();
    2.0 / (1.0 + w + p * w * stages)
}

/// Backoff doublings from CWmin + 1 to CWmax + 1.
fn doublings(spec: &DcfSpec) -> u32 {
    let mut m = 0;
    let mut w = spec.cw_min + 1;
    while w < spec.cw_max + 1 {
        w *= 2;
        m += 1;
    }
    m
}

/// Solves the model for `n` stations sending `msdu_len`-byte packets with
/// `spec`'s timing (RTS/CTS when the frame is above its threshold).
pub fn saturation(spec: &DcfSpec, n: u32, msdu_len: u32) -> Saturation {
    let w = f64::from(spec.cw_min + 1);
    let m = doublings(spec);
    let collision_p = |tau: f64| 1.0 - (1.0 - tau).powi(n as i32 - 1);
    // g(τ) = τ - τ(p(τ)) rises from negative at 0 to positive at 1.
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if mid - tau_of_p(collision_p(mid), w, m) > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let tau = 0.5 * (lo + hi);
    let p = collision_p(tau);
    let nf = f64::from(n);
    let p_tr = 1.0 - (1.0 - tau).powf(nf);
    let p_s = nf * tau * (1.0 - tau).powf(nf - 1.0) / p_tr;
    let secs = |d: SimDuration| d.as_secs_f64();
    let data = secs(spec.data_airtime(msdu_len));
    let ack = secs(spec.ack_airtime());
    let (sifs, difs, eifs) = (secs(spec.sifs), secs(spec.difs()), secs(spec.eifs()));
    let (ts, tc) = if spec.uses_rts(msdu_len) {
        let rts = secs(spec.basic_rate.airtime(RTS_LEN));
        let cts = secs(spec.basic_rate.airtime(ACK_LEN));
        (rts + cts + data + ack + 3.0 * sifs + difs, rts + eifs)
    } else {
        (data + sifs + ack + difs, data + eifs)
    };
    let payload_bits = f64::from(msdu_len) * 8.0;
    let slot_mean = (1.0 - p_tr) * secs(spec.slot) + p_tr * p_s * ts + p_tr * (1.0 - p_s) * tc;
    Saturation {
        tau,
        p,
        throughput_bps: p_s * p_tr * payload_bits / slot_mean,
    }
}

/// What [`simulate_saturation`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// MSDU bytes delivered per second, as bits, after the warm-up.
    pub throughput_bps: f64,
    /// Share of data frames sent that were not acknowledged.
    pub collision_share: f64,
}

/// Runs `n` saturated stations sending `msdu_len`-byte packets to one
/// receiver, all within range of each other at one spot (no hidden
/// terminals, no propagation delay, as the model assumes), for `duration`
/// after a warm-up of `warmup`, and measures the throughput.
pub fn simulate_saturation(
    spec: &DcfSpec,
    n: u16,
    msdu_len: u32,
    warmup: SimDuration,
    duration: SimDuration,
    seed: u64,
) -> Measured {
    let spec = DcfSpec {
        // Two packets each keep every station backlogged: a new one is
        // queued whenever one leaves.
        queue_limit: 2,
        ..*spec
    };
    let mut w: Wlan<()> = Wlan::new(
        RadioSpec::default(),
        spec,
        component_stream(seed, "bianchi-medium"),
        component_stream(seed, "bianchi-dcf"),
    );
    let spot = Mobility::Static(Position { x: 0.0, y: 0.0 });
    let sink = w.add_station(spot.clone());
    let mut out = Vec::new();
    for _ in 0..n {
        let s = w.add_station(spot.clone());
        for _ in 0..2 {
            w.enqueue(SimTime::ZERO, s, sink, (), msdu_len, &mut out);
        }
    }
    let start = SimTime::ZERO + warmup;
    let end = start + duration;
    let (mut delivered, mut attempts) = (0u64, 0u64);
    while let Some(t) = w.poll_timeout().filter(|&t| t <= end) {
        w.handle_timeout(t, &mut out);
        for event in std::mem::take(&mut out) {
            let WlanEvent::Dcf { station, event } = event else {
                continue;
            };
            let counted = t >= start;
            match event {
                DcfEvent::Received { .. } if counted => delivered += 1,
                DcfEvent::Attempt { .. } if counted => attempts += 1,
                DcfEvent::Acked { .. } | DcfEvent::RetryLimit { .. } => {
                    w.enqueue(t, station, sink, (), msdu_len, &mut out);
                }
                _ => {}
            }
        }
    }
    let timeouts_after_warmup = attempts.saturating_sub(delivered);
    Measured {
        throughput_bps: (delivered * u64::from(msdu_len) * 8) as f64 / duration.as_secs_f64(),
        collision_share: if attempts == 0 {
            0.0
        } else {
            timeouts_after_warmup as f64 / attempts as f64
        },
    }
}

/// The 802.11b DSSS parameters of the validation: 11 Mbit/s data, 1
/// Mbit/s control frames.
pub fn dsss_11b() -> DcfSpec {
    DcfSpec {
        data_rate: PhyRate::Mbps11,
        basic_rate: PhyRate::Mbps1,
        ..DcfSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_station_never_collides_and_sends_with_the_mean_backoff() {
        let spec = dsss_11b();
        let s = saturation(&spec, 1, 1500);
        // p = 0, τ = 2 / (W + 1) with W = 32.
        assert_eq!(s.p, 0.0);
        assert!((s.tau - 2.0 / 33.0).abs() < 1e-12);
        // S = payload / (mean backoff + Ts): the mean backoff of
        // (1 - τ)/τ = 15.5 slots.
        let ts =
            (spec.data_airtime(1500) + spec.sifs + spec.ack_airtime() + spec.difs()).as_secs_f64();
        let expected = 12_000.0 / (15.5 * 20e-6 + ts);
        assert!((s.throughput_bps - expected).abs() < 1e-6 * expected);
    }

    #[test]
    fn the_fixed_point_holds_and_matches_the_paper_s_closed_form() {
        let spec = dsss_11b();
        for n in [2, 5, 10, 20, 50] {
            let s = saturation(&spec, n, 1500);
            // The two equations of the model hold together.
            assert!((s.p - (1.0 - (1.0 - s.tau).powi(n as i32 - 1))).abs() < 1e-12);
            let (w, m, p) = (32.0, 5, s.p);
            let paper = 2.0 * (1.0 - 2.0 * p)
                / ((1.0 - 2.0 * p) * (w + 1.0) + p * w * (1.0 - (2.0 * p).powi(m)));
            assert!((s.tau - paper).abs() < 1e-9, "n {n}: {} vs {paper}", s.tau);
        }
    }

    #[test]
    fn more_stations_collide_more_and_basic_access_loses_throughput() {
        let spec = dsss_11b();
        let mut last = saturation(&spec, 2, 1500);
        for n in [5, 10, 20, 50] {
            let s = saturation(&spec, n, 1500);
            assert!(s.p > last.p && s.tau < last.tau);
            assert!(s.throughput_bps < last.throughput_bps);
            last = s;
        }
        // RTS/CTS makes collisions short, so its throughput falls less
        // with the number of stations (Bianchi's §V).
        let rts = DcfSpec {
            rts_threshold: 0,
            ..spec
        };
        let fall = |spec: &DcfSpec| {
            saturation(spec, 5, 1500).throughput_bps / saturation(spec, 50, 1500).throughput_bps
        };
        assert!(fall(&rts) < fall(&spec), "{} {}", fall(&rts), fall(&spec));
    }
}
