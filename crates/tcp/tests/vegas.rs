//! Vegas on a fixed-delay bottleneck keeps its queue estimate between
//! alpha and beta once slow start is over.

mod common;

use common::{pattern, Pair, Transfer};
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
