//! The link-aware RTO through the engine: a path hint handed to
//! `Stack::try_connect` reaches the policy, whose first timer times the
//! SYN; without a hint the connection runs on the fallback.

use std::net::{Ipv6Addr, SocketAddr};
use std::sync::Arc;

use rtolab_tcp::profile::RtoChoice;
use rtolab_tcp::rto::PathHint;
use rtolab_tcp::{Config, Profile, Stack};
use rtolab_time::{SimDuration, SimTime};

fn uip_link_aware() -> Profile {
    let mut p = Profile::uip();
    p.rto = toml::from_str("policy = \"link_aware\"").expect("registered");
    p
}

fn stack(p: Profile) -> Stack {
    let local: Ipv6Addr = "fd00::4".parse().unwrap();
    Stack::new(Arc::new(Config::from_profile(p)), local, 7)
}

fn server() -> SocketAddr {
    SocketAddr::new("fd00:1::1".parse::<Ipv6Addr>().unwrap().into(), 80)
}

/// Three hops of ContikiMAC at 8 Hz (see the module's unit tests).
const HINT: PathHint = PathHint {
    hops: 3,
    hop_time: SimDuration::from_nanos(135_903_516),
};

#[test]
fn the_hint_times_the_syn_and_its_absence_leaves_the_fallback() {
    let mut s = stack(uip_link_aware());
    let id = s.try_connect(SimTime::ZERO, server(), Some(HINT)).unwrap();
    let c = s.conn(id).unwrap();
    assert_eq!(c.path_hint(), Some(HINT));
    // 2 · 3 · 135.9 ms · 2 = 1.63 s: 4 pulses, plus one.
    assert_eq!(c.rto_estimate().rto, SimDuration::from_millis(2500));
    // The SYN goes out and its timer is armed on uIP's 500 ms pulse: five
    // pulses after time zero.
    let mut buf = Vec::new();
    while s.poll_transmit(SimTime::ZERO, &mut buf).is_some() {}
    assert_eq!(s.poll_timeout(), Some(SimTime::from_millis(2500)));

    let mut plain = stack(uip_link_aware());
    let id = plain.try_connect(SimTime::ZERO, server(), None).unwrap();
    let c = plain.conn(id).unwrap();
    assert_eq!(c.path_hint(), None);
    assert_eq!(c.rto_estimate().rto, SimDuration::from_secs(3));
    while plain.poll_transmit(SimTime::ZERO, &mut buf).is_some() {}
    assert_eq!(plain.poll_timeout(), Some(SimTime::from_secs(3)));

    // Other policies ignore the hint.
    let mut lim = stack(Profile {
        rto: toml::from_str("policy = \"lim2024\"").unwrap(),
        ..Profile::uip()
    });
    let id = lim
        .try_connect(SimTime::ZERO, server(), Some(HINT))
        .unwrap();
    assert_eq!(
        lim.conn(id).unwrap().rto_estimate().rto,
        SimDuration::from_secs(3)
    );
}

#[test]
fn the_policy_reads_as_a_profile_rto_table_and_is_validated() {
    let c: RtoChoice = toml::from_str(
        "policy = \"link_aware\"\nfactor_percent = 300\nmargin_periods = 2\nmax = \"60s\"",
    )
    .expect("reads");
    let RtoChoice::LinkAware(c) = c else {
        panic!("{c:?}")
    };
    assert_eq!((c.factor_percent, c.margin_periods), (300, 2));
    assert_eq!(c.lim.max, SimDuration::from_secs(60));
    assert!(c.lim.modified_dithering && c.lim.half_rtt_first_mdev);
    let mut p = uip_link_aware();
    assert_eq!(p.validate(), Ok(()));
    for (table, field) in [
        ("factor_percent = 0", "rto.factor_percent"),
        ("initial = \"0s\"", "rto.initial"),
        ("srtt_gain = 0", "rto.srtt_gain"),
    ] {
        p.rto = toml::from_str(&format!("policy = \"link_aware\"\n{table}")).expect("reads");
        assert_eq!(p.validate().unwrap_err().field, field, "{table}");
    }
    assert!(toml::from_str::<RtoChoice>("policy = \"link_aware\"\nhops = 3").is_err());
}
