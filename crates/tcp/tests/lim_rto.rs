//! Lim's uIP timers (`lim2020`, `lim2024`) driving whole connections over a
//! lossy link: the bytes arrive intact, and one seed gives one set of
//! retransmission times.

mod common;

use common::{pattern, Pair, Transfer};
use rtolab_tcp::clock::Granularity;
use rtolab_tcp::profile::RtoChoice;
use rtolab_tcp::trace::{RetransmitCause, TraceEvent};
use rtolab_tcp::{Event, Profile};
use rtolab_time::{SimDuration, SimTime};

/// The `uip` profile with the named timer, as `tcp = { rto = { policy = … } }`
/// gives it in a scenario file.
fn profile(policy: &str, timer: Granularity) -> Profile {
    let mut p = Profile::uip();
    p.rto = toml::from_str(&format!("policy = {policy:?}")).expect("a registered policy");
    p.rto_timer = timer;
    // Enough retries that the loss cannot exhaust them.
    p.max_retransmissions = 30;
    p.max_syn_retransmissions = 30;
    p.time_wait = SimDuration::from_secs(1);
    p
}

/// What a run leaves behind: the data received, and every retransmission
/// by a timeout (time, sequence number) and armed timer (time, timeout).
struct Run {
    intact: bool,
    timeouts: Vec<(SimTime, u32)>,
    armed: Vec<(SimTime, SimDuration)>,
    policies: Vec<&'static str>,
}

fn run(policy: &str, timer: Granularity, loss: f64, seed: u64) -> Run {
    let mut pair = Pair::with_profile(profile(policy, timer), seed);
    pair.faults.loss = loss;
    let mut t = Transfer::start(&mut pair, pattern(30_000));
    assert!(
        t.run(&mut pair, 1_000_000),
        "{policy} seed {seed}: unfinished"
    );
    let mut out = Run {
        intact: t.received == t.data,
        timeouts: Vec::new(),
        armed: Vec::new(),
        policies: Vec::new(),
    };
    for (_, _, e) in &pair.events {
        let Event::Trace(tr) = e else { continue };
        match tr.event {
            TraceEvent::Retransmission {
                seq,
                cause: RetransmitCause::Timeout,
                ..
            } => out.timeouts.push((tr.time, seq)),
            TraceEvent::RtoArmed { rto, policy, .. } => {
                out.armed.push((tr.time, rto));
                if !out.policies.contains(&policy) {
                    out.policies.push(policy);
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn both_schemes_deliver_intact_through_loss_and_repeat_with_the_seed() {
    let pulse = Profile::uip().rto_timer;
    for policy in ["lim2020", "lim2024"] {
        for seed in [1, 2, 3] {
            let a = run(policy, pulse, 0.15, seed);
            assert!(a.intact, "{policy} seed {seed}: corrupted");
            assert!(!a.timeouts.is_empty(), "{policy} seed {seed}: no loss hit");
            assert_eq!(a.policies, [policy]);
            let b = run(policy, pulse, 0.15, seed);
            assert_eq!(a.timeouts, b.timeouts, "{policy} seed {seed}");
            assert_eq!(a.armed, b.armed, "{policy} seed {seed}");
        }
    }
}

#[test]
fn with_a_fine_timer_the_dithering_follows_the_connection_seed() {
    for policy in ["lim2020", "lim2024"] {
        // A clean link: only the timers' draws differ between seeds.
        let one = run(policy, Granularity::Fine, 0.0, 1);
        let again = run(policy, Granularity::Fine, 0.0, 1);
        let other = run(policy, Granularity::Fine, 0.0, 2);
        assert!(one.intact && other.intact);
        assert!(one.timeouts.is_empty());
        assert_eq!(one.armed, again.armed);
        assert_ne!(one.armed, other.armed, "{policy}: seeds 1 and 2 drew alike");
        // Not rounded to uIP's 500 ms pulse.
        let rtos: Vec<u64> = one.armed.iter().map(|(_, r)| r.as_nanos()).collect();
        assert!(rtos.iter().any(|r| r % 500_000_000 != 0), "{rtos:?}");
    }
}

#[test]
fn the_policies_read_as_profile_rto_tables() {
    let c: RtoChoice = toml::from_str("policy = \"lim2024\"\nmax = \"60s\"").expect("reads");
    let RtoChoice::Lim2024(c) = c else {
        panic!("{c:?}")
    };
    assert!(c.0.modified_dithering);
    assert_eq!(c.0.max, SimDuration::from_secs(60));
    let c: RtoChoice = toml::from_str("policy = \"lim2020\"").expect("reads");
    assert!(matches!(c, RtoChoice::Lim2020(c) if !c.0.modified_dithering));
    let mut p = Profile::uip();
    p.rto = c;
    assert_eq!(p.validate(), Ok(()));
    let bad: RtoChoice = toml::from_str("policy = \"lim2020\"\nsrtt_gain = 0").expect("reads");
    p.rto = bad;
    assert_eq!(p.validate().unwrap_err().field, "rto.srtt_gain");
    let zero: RtoChoice = toml::from_str("policy = \"lim2024\"\nmax = \"0s\"").expect("reads");
    p.rto = zero;
    assert_eq!(p.validate().unwrap_err().field, "rto.max");
    assert!(toml::from_str::<RtoChoice>("policy = \"lim2020\"\nrto = \"1s\"").is_err());
}
