//! Vegas on a fixed-delay bottleneck keeps its queue estimate between
//! alpha and beta once slow start is over; ns-2's Vegas also recovers from
//! loss its own way.

mod common;

use common::{pattern, Pair, Transfer};
use rtolab_tcp::cc::vegas_ns2::{VegasNs2Config, NS2_WINDOW};
use rtolab_tcp::cc::{InitialWindow, RenoConfig, VegasConfig};
use rtolab_tcp::profile::CcChoice;
use rtolab_tcp::Profile;
use rtolab_time::{SimDuration, SimTime};

#[test]
fn vegas_queue_estimate_stays_between_alpha_and_beta() {
    let (alpha, beta) = (2.0, 4.0);
    let mut profile = Profile::linux();
    profile.cc = CcChoice::Vegas(VegasConfig {
        alpha,
        beta,
        gamma: 1.0,
        window: RenoConfig {
            initial_window: InitialWindow::Segments(2),
            ..RenoConfig::default()
        },
        ..VegasConfig::default()
    });
    profile.time_wait = SimDuration::from_secs(1);
    let mut pair = Pair::with_profile(profile, 11);
    // A 2 Mbit/s bottleneck with a fixed 20 ms one-way delay and an
    // unbounded queue: the only queue is the one Vegas builds itself.
    pair.latency = SimDuration::from_millis(20);
    pair.bandwidth = Some(2_000_000);
    let total = 3_000_000;
    let mut t = Transfer::start(&mut pair, pattern(total));
    let steady = SimTime::from_secs(3);
    let mut estimates = Vec::new();
    for _ in 0..2_000_000 {
        if t.pump(&mut pair) || !pair.step() {
            break;
        }
        let Some(c) = pair.client.conn(t.client) else {
            break;
        };
        // Steady state: after slow start, while the sender is still
        // backlogged (not application-limited at the end).
        if pair.time > steady && c.send_queue_len() > 100_000 {
            if let Some(q) = c.cc_metrics().queue_estimate {
                estimates.push(q);
            }
        }
    }
    assert_eq!(t.received, t.data);
    assert!(
        estimates.len() > 1000,
        "too few samples: {}",
        estimates.len()
    );
    let outside: Vec<f64> = estimates
        .iter()
        .copied()
        .filter(|q| !(alpha..=beta).contains(q))
        .collect();
    assert!(
        outside.is_empty(),
        "queue estimate left [alpha, beta]: {outside:?}"
    );
    // The path is used: at least 80% of 2 Mbit/s over the transfer.
    let elapsed = pair.time.as_secs_f64() - 1.0;
    assert!(
        (total as f64) * 8.0 / elapsed > 0.8 * 2_000_000.0,
        "took {elapsed} s"
    );
}

/// ns-2's Vegas with the `ns2` profile: deciding on the mean of a round's
/// samples, it settles with one to three segments queued, under ns-2's
/// 20-packet window, and the sink answers each segment with one ACK and
/// nothing else (ns-2's `TCPSink` sends no window updates).
#[test]
fn ns2_vegas_settles_between_its_thresholds_under_the_window_cap() {
    let mut profile = Profile::ns2();
    profile.cc = CcChoice::VegasNs2(VegasNs2Config::default());
    profile.time_wait = SimDuration::from_secs(1);
    let mut pair = Pair::with_profile(profile, 7);
    pair.latency = SimDuration::from_millis(20);
    pair.bandwidth = Some(2_000_000);
    pair.wire_log = Some(Vec::new());
    let total = 2_000_000;
    let mut t = Transfer::start(&mut pair, pattern(total));
    let steady = SimTime::from_secs(2);
    let (mut estimates, mut largest_window) = (Vec::new(), 0);
    for _ in 0..2_000_000 {
        if t.pump(&mut pair) || !pair.step() {
            break;
        }
        let Some(c) = pair.client.conn(t.client) else {
            break;
        };
        largest_window = largest_window.max(c.cwnd());
        // Backlogged: more queued than the window can hold.
        if pair.time > steady && c.send_queue_len() > NS2_WINDOW {
            if let Some(q) = c.cc_metrics().queue_estimate {
                estimates.push(q);
            }
        }
    }
    assert_eq!(t.received, t.data);
    assert!(largest_window <= NS2_WINDOW, "window {largest_window}");
    // Queueing one to three segments keeps the bottleneck busy: at least
    // 90 % of 2 Mbit/s over the transfer.
    let elapsed = pair.time.as_secs_f64() - 1.0;
    assert!(
        (total as f64) * 8.0 / elapsed > 0.9 * 2_000_000.0,
        "took {elapsed} s"
    );
    assert!(
        estimates.len() > 100,
        "too few samples: {}",
        estimates.len()
    );
    // A decision moves the window by one segment a round, so the estimate
    // may pass a threshold by about one segment before it is corrected.
    let (alpha, beta) = (1.0, 3.0);
    let outside = estimates
        .iter()
        .filter(|q| !(alpha - 1.0..=beta + 1.0).contains(*q))
        .count();
    assert_eq!(outside, 0, "queue estimates: {estimates:?}");
    let mut sorted = estimates.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    assert!((alpha..=beta).contains(&median), "median {median}");

    // The sink's segments: one ACK per data segment that reached it, plus
    // its SYN-ACK, its FIN and the ACK of the client's FIN.
    let server_port = pair.server_end.port();
    let log = pair.wire_log.take().expect("logged");
    let segments: Vec<_> = log.iter().filter_map(|d| common::tcp_of(d)).collect();
    let data = segments
        .iter()
        .filter(|s| s.dst_port == server_port && !s.payload.is_empty())
        .count();
    let from_sink = segments
        .iter()
        .filter(|s| s.src_port == server_port)
        .count();
    assert!(
        from_sink <= data + 3,
        "{from_sink} segments from the sink for {data} data segments"
    );
}

/// One ns-2 Vegas transfer of 400 kB over a 2 Mbit/s, 20 ms path losing
/// 3 % of datagrams; its stats once complete.
fn ns2_vegas_over_loss(fine_retransmit: bool, seed: u64) -> rtolab_tcp::ConnectionStats {
    let mut profile = Profile::ns2();
    profile.cc = CcChoice::VegasNs2(VegasNs2Config {
        fine_retransmit,
        ..VegasNs2Config::default()
    });
    profile.time_wait = SimDuration::from_secs(1);
    let mut pair = Pair::with_profile(profile, seed);
    pair.latency = SimDuration::from_millis(20);
    pair.bandwidth = Some(2_000_000);
    pair.faults.loss = 0.03;
    let mut t = Transfer::start(&mut pair, pattern(400_000));
    let mut stats = None;
    for _ in 0..5_000_000 {
        if let Some(c) = pair.client.conn(t.client) {
            stats = Some(c.stats());
        }
        if t.pump(&mut pair) || !pair.step() {
            break;
        }
    }
    assert_eq!(t.received, t.data, "fine_retransmit {fine_retransmit}");
    stats.expect("connection seen")
}

/// ns-2's loss handling in the engine: on a lossy path the transfer still
/// completes intact, and segments waiting longer than the fine-grained
/// timeout go out on early duplicate ACKs instead of waiting for the
/// retransmission timer, so fewer timeouts than NewReno's recovery
/// needs on the same losses.
#[test]
fn ns2_vegas_fine_retransmit_resends_before_the_timer() {
    let (mut on_timeouts, mut off_timeouts) = (0, 0);
    for seed in 1..=3 {
        let on = ns2_vegas_over_loss(true, seed);
        let off = ns2_vegas_over_loss(false, seed);
        assert!(on.fast_retransmits > 0, "seed {seed}: {on:?}");
        on_timeouts += on.timeouts;
        off_timeouts += off.timeouts;
    }
    assert!(
        on_timeouts < off_timeouts,
        "{on_timeouts} timeouts against {off_timeouts}"
    );
}
