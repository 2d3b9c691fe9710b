//! Saturation throughput of the 802.11b DCF against Bianchi's model, for
//! n = 1..=50 stations: prints a Markdown table.
//!
//! `cargo run --release -p rtolab-sim --example bianchi -- [SECONDS] [rts]`
//! (simulated seconds per point, default 10; `rts` for RTS/CTS access).

use rtolab_sim::mac::bianchi::{dsss_11b, saturation, simulate_saturation};
use rtolab_sim::mac::dcf::DcfSpec;
use rtolab_time::SimDuration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let rts = args.iter().any(|a| a == "rts");
    let spec = DcfSpec {
        rts_threshold: if rts { 0 } else { 2347 },
        ..dsss_11b()
    };
    let msdu = 1500;
    println!(
        "| n | model Mbit/s | simulated Mbit/s | difference | model p | simulated share not acknowledged |"
    );
    println!("|---|---|---|---|---|---|");
    for n in [1u16, 2, 3, 5, 7, 10, 15, 20, 25, 30, 40, 50] {
        let model = saturation(&spec, u32::from(n), msdu);
        let sim = simulate_saturation(
            &spec,
            n,
            msdu,
            SimDuration::from_secs(1),
            SimDuration::from_secs_f64(seconds),
            1,
        );
        println!(
            "| {n} | {:.3} | {:.3} | {:+.1} % | {:.3} | {:.3} |",
            model.throughput_bps / 1e6,
            sim.throughput_bps / 1e6,
            100.0 * (sim.throughput_bps / model.throughput_bps - 1.0),
            model.p,
            sim.collision_share,
        );
    }
}
