//! Property test: over random loss, reordering, duplication and delay on a
//! point-to-point link, every byte arrives exactly once and in order, both
//! ends close cleanly, and nothing panics.

mod common;

use common::{pattern, Faults, Outcome, Pair, SendMode, Side, Transfer};
use proptest::prelude::*;
use rtolab_tcp::cc::VegasConfig;
use rtolab_tcp::profile::{CcChoice, KeepAlive, RtoChoice};
use rtolab_tcp::{ConnId, Event, Profile};
use rtolab_time::{SimDuration, SimTime};

/// Seed of the case generator when `PROPTEST_RNG_SEED` is not set, so CI
/// runs the same cases every time; set the variable to explore others.
const CASE_SEED: u64 = 0x7274_6f6c_6162;
/// Cases per run (more with `PROPTEST_CASES`).
const CASES: u32 = 1000;

/// The named profiles, then two with every optional mechanism switched on.
const PROFILES: usize = Profile::NAMES.len() + 2;

fn profile(index: usize) -> Profile {
    let named = |name| Profile::named(name).expect("profile");
    let mut p = match index % PROFILES {
        i if i < Profile::NAMES.len() => named(Profile::NAMES[i]),
        4 => Profile {
            limited_transmit: true,
            eifel_response: true,
            ..named("linux")
        },
        _ => Profile {
            window_scale: Some(2),
            timestamps: true,
            sack: true,
            timelost: true,
            nagle: false,
            limited_transmit: true,
            eifel_response: true,
            cc: CcChoice::Vegas(VegasConfig::default()),
            // Probes answered within the stalls of a lossy transfer; enough
            // of them that the loss cannot drop the connection.
            keepalive: Some(KeepAlive {
                idle: SimDuration::from_secs(2),
                interval: SimDuration::from_secs(1),
                probes: 40,
            }),
            ..named("rfc")
        },
    };
    // Enough retries that heavy random loss cannot exhaust them.
    p.max_retransmissions = 40;
    p.max_syn_retransmissions = 40;
    // TIME-WAIT outlasts the peer's whole FIN retransmission schedule, so a
    // lost last ACK is always answered by a re-ACK, never by the RST of a
    // forgotten connection (simulated time costs nothing).
    p.time_wait = longest_timer(&p).saturating_mul(u64::from(p.max_retransmissions) + 1);
    p
}

/// The longest interval a timer of `p` can reach once fully backed off.
fn longest_timer(p: &Profile) -> SimDuration {
    let rto = match p.rto {
        RtoChoice::Rfc6298(c) => c.max,
        // lwIP shifts its estimate by at most 7 (`tcp_backoff`); on these
        // paths the estimate stays well below 4 times the initial value,
        // which is where `sv` starts.
        RtoChoice::Lwip(c) => c.initial.saturating_mul(4 << 7),
        // uIP's retransmission timer is `UIP_RTO << min(nrtx, 4)`.
        RtoChoice::Uip(c) => c.uip_rto.saturating_mul(1 << 4),
        RtoChoice::Lim2020(c) => lim_longest(&c.0),
        RtoChoice::Lim2024(c) => lim_longest(&c.0),
        // Without a path hint its first timer is `initial`, like Lim's.
        RtoChoice::LinkAware(c) => lim_longest(&c.lim),
        RtoChoice::Bridge(c) => c.max,
        RtoChoice::PerByte(c) => c.max,
        RtoChoice::Fixed(c) => c.max,
    };
    rto.max(p.persist_max)
}

/// Lim's timers: a fresh one is `SRTT + k·MDEV` (MDEV starting at
/// `initial_mdev`, these paths' round trips well under a second), a
/// backed-off one at most `max`, the initial one `initial`; dithering adds
/// at most as much again with the published percentages.
fn lim_longest(c: &rtolab_tcp::rto::LimRtoConfig) -> SimDuration {
    let fresh = SimDuration::from_secs(1) + c.initial_mdev.saturating_mul(u64::from(c.k));
    fresh.max(c.max).max(c.initial).saturating_mul(2)
}

/// Simulated time by which a live transfer of `len` bytes must be over:
/// each segment (plus SYN and the two FINs) may stall for as long as the
/// abort rule allows, every retransmission at the longest backed-off timer.
/// A connection that stalls longer aborts, which the assertions catch; this
/// bound only stops livelocks in which timers fire without ever aborting.
fn time_limit(p: &Profile, len: usize) -> SimTime {
    let segments = len.div_ceil(usize::from(p.mss).min(536)) as u64 + 3;
    let per_stall = longest_timer(p).saturating_mul(u64::from(p.max_retransmissions) + 1);
    SimTime::ZERO + per_stall.saturating_mul(segments) + p.time_wait
}

struct Case {
    seed: u64,
    which: usize,
    len: usize,
    faults: Faults,
    latency: SimDuration,
}

fn check(case: &Case) -> Result<(), TestCaseError> {
    let profile = profile(case.which);
    let deadline = time_limit(&profile, case.len);
    let mut pair = Pair::with_profile(profile, case.seed);
    pair.latency = case.latency;
    pair.faults = case.faults;
    let mut transfer = Transfer::start(&mut pair, pattern(case.len));
    // Copied, shared and interleaved sends must all deliver the same bytes.
    transfer.mode = [SendMode::Copy, SendMode::Shared, SendMode::Mixed][(case.seed % 3) as usize];
    // A step goes to the next arrival or deadline; transfers here take
    // around a hundred, so this only cuts livelocks short.
    let outcome = transfer.run_until(&mut pair, deadline, 100_000);
    prop_assert_eq!(
        outcome,
        Outcome::Finished,
        "at {} (received {} of {})",
        pair.time,
        transfer.received.len(),
        case.len
    );
    prop_assert_eq!(&transfer.received, &transfer.data);
    prop_assert_eq!(pair.beyond_window, 0, "data sent past the peer's window");
    // Only the transfer's own connections: an old duplicate SYN may open a
    // stray half-open one on the server, which is rightly reset.
    let ends = [
        (Side::Client, Some(transfer.client)),
        (Side::Server, transfer.server),
    ];
    for (side, id) in ends {
        let mine = |s: &Side, i: &ConnId| *s == side && Some(*i) == id;
        let abnormal = pair
            .events
            .iter()
            .find(|(s, i, e)| mine(s, i) && matches!(e, Event::Reset | Event::TimedOut));
        prop_assert!(abnormal.is_none(), "{:?} ended with {:?}", side, abnormal);
        let closed = pair
            .events
            .iter()
            .any(|(s, i, e)| mine(s, i) && *e == Event::Closed);
        prop_assert!(closed, "{:?} never reported Closed", side);
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::proptest_config(CASES, CASE_SEED))]

    #[test]
    fn bytes_arrive_once_in_order_and_both_ends_close(
        seed in any::<u64>(),
        which in 0usize..PROFILES,
        len in 0usize..30_000,
        loss in 0.0f64..0.15,
        duplicate in 0.0f64..0.1,
        reorder in 0.0f64..0.2,
        latency_ms in 1u64..80,
        reorder_ms in 0u64..100,
    ) {
        check(&Case {
            seed,
            which,
            len,
            faults: Faults {
                loss,
                duplicate,
                reorder,
                reorder_delay: SimDuration::from_millis(reorder_ms),
            },
            latency: SimDuration::from_millis(latency_ms),
        })?;
    }
}

/// The case proptest first found: with uIP's one-segment receive buffer a
/// reordered zero-window ACK closed the window after the last segment (data
/// and FIN) was sent and lost. The retransmission timer fired, the zero
/// window blocked the resend and no timer was left, so the last byte was
/// never delivered.
#[test]
fn retransmission_blocked_by_a_zero_window_is_probed() {
    let case = Case {
        seed: 1235703399227716192,
        which: 1,
        len: 13421,
        faults: Faults {
            loss: 0.13222187110876146,
            duplicate: 0.08256236415512931,
            reorder: 0.1999638765122701,
            reorder_delay: SimDuration::from_millis(63),
        },
        latency: SimDuration::from_millis(1),
    };
    check(&case).expect("transfer completes");
}

/// A SYN duplicated and delayed past the whole transfer reached the server
/// after it had closed and opened a half-open connection there. Its SYN-ACK
/// drew an ACK from the client in TIME-WAIT, which the half-open connection
/// answered with an ACK (out of window), and so on forever. A half-open
/// connection now resets on an ACK that is not for its SYN.
#[test]
fn old_duplicate_syn_does_not_start_an_ack_war_with_time_wait() {
    let case = Case {
        seed: 4593241561682080597,
        which: 0,
        len: 8095,
        faults: Faults {
            loss: 0.0,
            duplicate: 0.029347973717981275,
            reorder: 0.07874206161507054,
            reorder_delay: SimDuration::from_millis(15),
        },
        latency: SimDuration::from_millis(1),
    };
    check(&case).expect("transfer completes");
}

/// With SACK, bytes the receiver has SACKed leave the sender's flight but
/// still fill the receiver's window: a sender limited by that window, not
/// by its congestion window, must still stop at its right edge.
#[test]
fn sacked_bytes_do_not_let_new_data_past_the_receive_window() {
    for seed in 1..=20 {
        let profile = Profile {
            sack: true,
            timestamps: true,
            recv_buffer: 8 * 1460,
            send_buffer: 256 * 1024,
            ..Profile::named("linux").expect("profile")
        };
        let mut pair = Pair::with_profile(profile, seed);
        pair.faults = Faults {
            loss: 0.08,
            ..Faults::default()
        };
        pair.bandwidth = Some(10_000_000);
        let mut transfer = Transfer::start(&mut pair, pattern(300_000));
        let outcome = transfer.run_until(&mut pair, SimTime::from_secs(3600), 200_000);
        assert_eq!(outcome, Outcome::Finished, "seed {seed}");
        assert_eq!(transfer.received, transfer.data, "seed {seed}");
        assert_eq!(pair.beyond_window, 0, "seed {seed}: data past the window");
    }
}
