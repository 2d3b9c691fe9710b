//! Scenario tests on the in-memory pair.

mod common;

use common::{pattern, Pair, Transfer};
use rtolab_tcp::trace::{RetransmitCause, TraceEvent};
use rtolab_tcp::{Event, Profile};
use rtolab_time::SimDuration;

fn short_time_wait(mut p: Profile) -> Profile {
    p.time_wait = SimDuration::from_secs(1);
    p
}

fn transfer_ok(profile: Profile, len: usize) -> (Pair, Transfer) {
    let mut pair = Pair::with_profile(short_time_wait(profile), 7);
    let mut t = Transfer::start(&mut pair, pattern(len));
    assert!(t.run(&mut pair, 100_000), "transfer did not finish");
    assert_eq!(t.received, t.data);
    (pair, t)
}

#[test]
fn every_profile_transfers_and_closes_on_a_clean_link() {
    for name in Profile::NAMES {
        let profile = Profile::named(name).expect("profile");
        let (pair, _) = transfer_ok(profile, 50_000);
        let retransmissions = pair
            .events
            .iter()
            .filter(|(_, _, e)| matches!(e, Event::Trace(t) if matches!(t.event, TraceEvent::Retransmission { .. })))
            .count();
        assert_eq!(retransmissions, 0, "{name} retransmitted on a clean link");
    }
}

#[test]
fn linux_profile_negotiates_options() {
    let mut pair = Pair::with_profile(short_time_wait(Profile::linux()), 1);
    let mut t = Transfer::start(&mut pair, pattern(10));
    assert!(pair.drive_until(1000, |p| {
        t.pump(p);
        t.server.is_some()
    }));
    let c = pair.client.conn(t.client).expect("client");
    assert_eq!(c.agreed_options(), (true, true, true, false));
    assert_eq!(c.send_mss(), 1460);
}

#[test]
fn lost_segment_is_recovered_by_timeout_with_lwip() {
    let mut pair = Pair::with_profile(short_time_wait(Profile::lwip()), 3);
    pair.faults.loss = 0.1;
    let mut t = Transfer::start(&mut pair, pattern(20_000));
    assert!(t.run(&mut pair, 200_000));
    assert_eq!(t.received, t.data);
    let timeouts = pair
        .events
        .iter()
        .filter(|(_, _, e)| {
            matches!(e, Event::Trace(t) if matches!(t.event, TraceEvent::Retransmission { cause: RetransmitCause::Timeout, .. }))
        })
        .count();
    assert!(timeouts > 0, "10% loss should need a timeout");
}

#[test]
fn zero_window_is_probed_until_the_reader_drains() {
    let mut profile = short_time_wait(Profile::rfc());
    profile.recv_buffer = 2000;
    let mut pair = Pair::with_profile(profile, 5);
    pair.server.listen(common::PORT);
    let client = pair.client.connect(pair.time, Pair::server_addr());
    let data = pattern(10_000);
    let mut sent = 0;
    // Fill the receiver without reading for 10 s.
    let reached = pair.drive_until(5_000, |p| {
        if let Some(c) = p.client.conn_mut(client) {
            sent += c.send(&data[sent..]).unwrap_or(0);
        }
        let _ = p.server.accept(common::PORT);
        p.time > rtolab_time::SimTime::from_secs(10)
    });
    assert!(reached, "the sender went idle against a zero window");
    let probes = pair
        .events
        .iter()
        .filter(|(_, _, e)| matches!(e, Event::Trace(t) if matches!(t.event, TraceEvent::Retransmission { cause: RetransmitCause::Probe, .. })))
        .count();
    assert!(probes > 0, "a zero window must be probed");
}
