//! The MAC stacks together on the test bed's ideal channel.

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ieee802154::{airtime_ns, ACK_PSDU_LEN};

use super::contikimac::{
    cycle_time, strobe_time, CCA_CHECK_TIME, CCA_COUNT_MAX, CCA_COUNT_MAX_TX, CCA_SLEEP_TIME,
    CHECK_TIME_TX, GUARD_TIME, MAX_PHASE_STROBE_TIME,
};
use super::radio::TURNAROUND;
use super::testbed::{addr, Testbed, Trace};
use super::ticks::{rtimer, RTIMER_SECOND};
use super::*;

fn contikimac() -> MacConfig {
    MacConfig::default()
}

fn nullrdc() -> MacConfig {
    MacConfig {
        rdc: RdcConfig::NullRdc(NullRdcConfig::default()),
        ..MacConfig::default()
    }
}

fn ms(x: u64) -> SimTime {
    SimTime::from_millis(x)
}

fn cycle() -> SimDuration {
    rtimer(cycle_time(8))
}

/// A payload about the size of a compressed TCP segment with 48 bytes of
/// data.
fn payload(tag: u8) -> Vec<u8> {
    let mut p = vec![tag; 80];
    p[0] = 0x7a;
    p
}

fn received(tb: &Testbed, node: usize) -> Vec<(SimTime, Address, Vec<u8>)> {
    tb.events[node]
        .iter()
        .filter_map(|(t, e)| match e {
            MacEvent::Received { src, payload, .. } => Some((*t, *src, payload.clone())),
            _ => None,
        })
        .collect()
}

fn outcome(tb: &Testbed, node: usize, id: MacPacketId) -> Option<(SimTime, TxStatus, u32)> {
    tb.events[node].iter().find_map(|(t, e)| match e {
        MacEvent::TxOutcome {
            id: i,
            status,
            transmissions,
            ..
        } if *i == id => Some((*t, *status, *transmissions)),
        _ => None,
    })
}

#[test]
fn first_unicast_arrives_within_a_cycle_plus_the_strobe_time() {
    let strobe = rtimer(strobe_time(8));
    for (seed, offset) in [(1, 3), (2, 40), (3, 77), (4, 101), (5, 124)] {
        let mut tb = Testbed::line(&contikimac(), seed, &[ms(0), ms(offset)]);
        tb.run_until(ms(1000));
        let id = tb.send(0, addr(1), payload(1));
        tb.run_until(ms(2000));
        let got = received(&tb, 1);
        assert_eq!(got.len(), 1, "seed {seed}");
        let (at, src, data) = &got[0];
        assert_eq!((*src, data), (addr(0), &payload(1)));
        let delay = *at - ms(1000);
        assert!(delay <= cycle() + strobe, "seed {seed}: {delay}");
        // The frame goes out after the six clear channel checks at the
        // earliest, and the receiver catches it within one of its cycles.
        assert!(delay > rtimer(CHECK_TIME_TX), "seed {seed}: {delay}");
        let (_, status, transmissions) = outcome(&tb, 0, id).expect("an outcome");
        assert_eq!((status, transmissions), (TxStatus::Ok, 1));
        assert_eq!(tb.nodes[0].stats().phase_locked_sends, 0);
    }
}

#[test]
fn unicasts_to_a_locked_neighbour_arrive_within_a_check_interval_plus_the_phase_strobe_time() {
    let phase_strobe = rtimer(MAX_PHASE_STROBE_TIME);
    let mut tb = Testbed::line(&contikimac(), 7, &[ms(0), ms(61)]);
    tb.run_until(ms(1000));
    tb.send(0, addr(1), payload(0));
    tb.run_until(ms(1500));
    assert_eq!(received(&tb, 1).len(), 1);
    let unlocked = tb.nodes[0].stats().acked_unicast_strobes;
    let mut start = ms(1500);
    // Sends at assorted offsets into the receiver's cycle.
    for k in 1..=12u8 {
        start += SimDuration::from_millis(337);
        tb.run_until(start);
        let id = tb.send(0, addr(1), payload(k));
        tb.run_until(start + SimDuration::from_millis(330));
        let got = received(&tb, 1);
        assert_eq!(got.len(), 1 + usize::from(k), "send {k}");
        let (at, _, data) = got.last().unwrap();
        assert_eq!(data, &payload(k));
        let delay = *at - start;
        // The bound: one check interval plus the strobe time.
        assert!(
            delay <= cycle() + rtimer(strobe_time(8)),
            "send {k}: {delay}"
        );
        // The mechanism's: a wake-up less than GUARD_TIME away is too close
        // and the next one is aimed at, where a short strobe train
        // reaches the receiver.
        assert!(
            delay <= rtimer(GUARD_TIME) + cycle() + phase_strobe,
            "send {k}: {delay}"
        );
        assert_eq!(
            outcome(&tb, 0, id).map(|o| (o.1, o.2)),
            Some((TxStatus::Ok, 1))
        );
    }
    let s = tb.nodes[0].stats();
    assert_eq!(s.phase_locked_sends, 12);
    assert_eq!(s.phase_misses, 0);
    // Locked sends need a handful of strobes each, never a whole cycle's.
    let locked = (s.acked_unicast_strobes - unlocked) as f64 / 12.0;
    let period = airtime_ns(tb.transmissions[0][0].1.len()) as f64 / 1e9;
    assert!(locked < phase_strobe.as_secs_f64() / period, "{locked}");
    println!("strobes per unicast: first {unlocked}, locked {locked:.1}");
}

#[test]
fn the_ack_follows_one_turnaround_after_the_frame() {
    let mut tb = Testbed::line(&contikimac(), 3, &[ms(0), ms(50)]);
    tb.run_until(ms(1000));
    tb.send(0, addr(1), payload(1));
    tb.run_until(ms(1500));
    let acks: Vec<_> = tb.transmissions[1]
        .iter()
        .filter(|(_, p)| p.len() == ACK_PSDU_LEN)
        .collect();
    assert_eq!(acks.len(), 1);
    let (ack_at, ack) = acks[0];
    let (frame_at, frame) = tb.transmissions[0]
        .iter()
        .rfind(|(t, _)| t < ack_at)
        .unwrap();
    let frame_end = *frame_at + SimDuration::from_nanos(airtime_ns(frame.len()));
    assert_eq!(*ack_at - frame_end, TURNAROUND);
    // An ACK of the frame's sequence number.
    assert_eq!(ack[2], frame[2]);
    assert_eq!(tb.nodes[1].stats().acks_sent, 1);
    assert_eq!(tb.nodes[0].stats().acks_received, 1);
}

/// Node 0 in the middle of `n - 1` neighbours that do not hear each other.
fn star(config: &MacConfig, seed: u64, boots: &[SimTime]) -> Testbed {
    let n = boots.len();
    let adjacent = (0..n)
        .map(|i| (0..n).map(|j| i != j && (i == 0 || j == 0)).collect())
        .collect();
    Testbed::new(config, seed, boots, adjacent)
}

#[test]
fn a_broadcast_reaches_every_neighbour_once() {
    // Node 3 is woken by the train's first strobe and again, one cycle
    // later, by its last but one, and then receives the last one: it drops
    // that copy. With a 99-byte PSDU a strobe takes P = 128 µs (radio on)
    // + 192 µs (turnaround) + 3360 µs (on air) + 397 µs (gap) = 4076.7 µs,
    // so the 31st and last starts at 126.4 ms, within the strobe time
    // (127.4 ms); a wake-up 125.5 ms into the train senses the 30th.
    let data = vec![0x7a; 99 - 17];
    let send_at = ms(2000);
    let t0 = send_at + (rtimer(CCA_CHECK_TIME) + rtimer(CCA_SLEEP_TIME)) * CCA_COUNT_MAX_TX;
    let boot3 = (t0 + SimDuration::from_micros(500)).saturating_sub(cycle() * 12);
    let mut tb = star(&contikimac(), 5, &[ms(0), ms(20), ms(77), boot3]);
    tb.run_until(send_at);
    let id = tb.send(0, BROADCAST, data.clone());
    tb.run_until(send_at + SimDuration::from_millis(400));
    for node in 1..4 {
        let got = received(&tb, node);
        assert_eq!(got.len(), 1, "node {node}");
        assert_eq!((got[0].1, &got[0].2), (addr(0), &data));
    }
    assert_eq!(tb.nodes[3].stats().duplicates_dropped, 1);
    assert_eq!(tb.nodes[3].stats().frames_received, 2);
    // No ACKs for broadcasts; strobed for the whole strobe time.
    assert!(tb.transmissions[1..].iter().all(|t| t.is_empty()));
    let first = tb.transmissions[0][0].0;
    let last = tb.transmissions[0].last().unwrap().0;
    assert!(last - first > cycle(), "{}", last - first);
    assert!(last - first <= rtimer(strobe_time(8)));
    assert_eq!(outcome(&tb, 0, id).map(|o| o.1), Some(TxStatus::Ok));
}

#[test]
fn an_absent_neighbour_gives_no_ack_after_the_retry_limit() {
    let mut tb = Testbed::line(&contikimac(), 11, &[ms(0), ms(30)]);
    tb.run_until(ms(1000));
    let id = tb.send(0, addr(7), payload(1));
    tb.run_until(ms(10_000));
    let (at, status, transmissions) = outcome(&tb, 0, id).expect("an outcome");
    assert_eq!((status, transmissions), (TxStatus::NoAck, 3));
    let s = tb.nodes[0].stats();
    assert_eq!(s.unicasts_strobed, 3);
    assert_eq!(s.packets_no_ack, 1);
    // Three full strobe trains, and between them CSMA's backoffs: after
    // the first within [T, 3T), after the second [T, 5T), T = 125 ms.
    let strobe = rtimer(strobe_time(8));
    let elapsed = at - ms(1000);
    assert!(elapsed >= strobe * 3 + cycle() * 2, "{elapsed}");
    assert!(
        elapsed <= (strobe + rtimer(CHECK_TIME_TX)) * 3 + cycle() * 8,
        "{elapsed}"
    );
    assert!(received(&tb, 1).is_empty());
}

#[test]
fn a_full_queue_refuses_packets() {
    let mut tb = Testbed::line(&contikimac(), 2, &[ms(0), ms(30), ms(60)]);
    tb.run_until(ms(1000));
    let ids: Vec<_> = (0..5).map(|k| tb.send(1, addr(0), payload(k))).collect();
    // The queue holds 4 (the study's); the fifth is refused at once.
    assert_eq!(
        outcome(&tb, 1, ids[4]),
        Some((ms(1000), TxStatus::QueueFull, 0))
    );
    assert!(ids[..4].iter().all(|&id| outcome(&tb, 1, id).is_none()));
    // Two neighbour queues at most: a third neighbour is refused too.
    let mut tb = Testbed::line(&contikimac(), 2, &[ms(0), ms(30), ms(60)]);
    tb.run_until(ms(1000));
    tb.send(1, addr(0), payload(1));
    tb.send(1, addr(2), payload(2));
    let third = tb.send(1, BROADCAST, payload(3));
    assert_eq!(
        outcome(&tb, 1, third).map(|o| o.1),
        Some(TxStatus::QueueFull)
    );
    assert_eq!(tb.nodes[1].stats().queue_full, 1);
    tb.run_until(ms(3000));
    assert_eq!(received(&tb, 0).len(), 1);
    assert_eq!(received(&tb, 2).len(), 1);
}

#[test]
fn queued_packets_to_one_neighbour_go_as_a_burst() {
    let mut tb = Testbed::line(&contikimac(), 4, &[ms(0), ms(90)]);
    tb.run_until(ms(1000));
    let ids: Vec<_> = (0..3).map(|k| tb.send(0, addr(1), payload(k))).collect();
    tb.run_until(ms(1400));
    let got: Vec<_> = received(&tb, 1).into_iter().map(|r| r.2).collect();
    assert_eq!(got, vec![payload(0), payload(1), payload(2)]);
    for id in ids {
        assert_eq!(
            outcome(&tb, 0, id).map(|o| (o.1, o.2)),
            Some((TxStatus::Ok, 1))
        );
    }
    // The first two frames announce more (frame pending bit).
    let pending: Vec<bool> = tb.transmissions[0]
        .iter()
        .map(|(_, p)| p[0] & 0x10 != 0)
        .collect();
    assert!(pending.first() == Some(&true) && pending.last() == Some(&false));
}

#[test]
fn an_idle_node_is_on_two_channel_checks_per_cycle() {
    // Wake-ups come one cycle after boot, then (a quirk of contikimac.c's
    // loop) two cycles later, then every cycle: within 10.0625 s of boot
    // at 8 Hz, at cycles 1 and 3..=80.
    let mut tb = Testbed::new(&contikimac(), 1, &[SimTime::ZERO], vec![vec![false]]);
    let end = SimTime::ZERO + cycle() * 80 + SimDuration::from_nanos(cycle().as_nanos() / 2);
    tb.run_until(end);
    let wakeups = 1 + (3..=80).count() as u64;
    assert_eq!(tb.nodes[0].stats().wakeups, wakeups);
    assert_eq!(tb.nodes[0].stats().channel_checks, wakeups * CCA_COUNT_MAX);
    let per_wakeup = rtimer(CCA_CHECK_TIME) * CCA_COUNT_MAX;
    assert_eq!(tb.radio_on_time(0), per_wakeup * wakeups);
    // That is a duty cycle of CCA_COUNT_MAX × CCA_CHECK_TIME × 8 per
    // second: 64 / 32768 = 0.195 %.
    let duty = (CCA_COUNT_MAX * CCA_CHECK_TIME * 8) as f64 / RTIMER_SECOND as f64;
    assert_eq!(duty, 0.001953125);
    let measured = (tb.radio_on_time(0) - per_wakeup).as_secs_f64()
        / (end - (SimTime::ZERO + cycle() * 3)).as_secs_f64();
    assert!((measured - duty).abs() < 1e-4, "{measured}");
}

#[test]
fn nullrdc_keeps_the_radio_on_and_sends_once() {
    let mut tb = Testbed::line(&nullrdc(), 1, &[ms(0), ms(0)]);
    tb.run_until(ms(1000));
    let id = tb.send(0, addr(1), payload(1));
    tb.run_until(ms(2000));
    for node in 0..2 {
        assert!(tb.radio_is_on(node));
        assert_eq!(tb.radio_on_time(node), SimDuration::from_secs(2));
    }
    let got = received(&tb, 1);
    assert_eq!(got.len(), 1);
    // CCA, turnaround, the frame: well under a millisecond per 30 bytes.
    let frame = &tb.transmissions[0][0].1;
    assert_eq!(
        got[0].0 - ms(1000),
        TURNAROUND + SimDuration::from_nanos(airtime_ns(frame.len()))
    );
    assert_eq!(
        outcome(&tb, 0, id).map(|o| (o.1, o.2)),
        Some((TxStatus::Ok, 1))
    );
    assert_eq!(tb.transmissions[0].len(), 1);
    // An absent neighbour: three transmissions, then NoAck.
    let id = tb.send(0, addr(5), payload(2));
    tb.run_until(ms(4000));
    assert_eq!(
        outcome(&tb, 0, id).map(|o| (o.1, o.2)),
        Some((TxStatus::NoAck, 3))
    );
    assert_eq!(tb.transmissions[0].len(), 4);
}

#[test]
fn a_busy_channel_is_a_collision_and_both_packets_get_through() {
    // Nodes 0 and 2 both hear each other and node 1.
    let adjacent = vec![
        vec![false, true, true],
        vec![true, false, true],
        vec![true, true, false],
    ];
    let mut tb = Testbed::new(&contikimac(), 8, &[ms(0), ms(45), ms(90)], adjacent);
    tb.run_until(ms(1000));
    let a = tb.send(0, addr(1), payload(1));
    tb.run_until(ms(1010));
    let b = tb.send(2, addr(1), payload(2));
    tb.run_until(ms(4000));
    assert_eq!(outcome(&tb, 0, a).map(|o| o.1), Some(TxStatus::Ok));
    assert_eq!(outcome(&tb, 2, b).map(|o| o.1), Some(TxStatus::Ok));
    assert_eq!(received(&tb, 1).len(), 2);
    assert!(tb.nodes[2].stats().collisions_before_sending >= 1);
}

#[test]
fn a_phase_is_forgotten_after_sixteen_missed_acks() {
    let mut tb = Testbed::line(&contikimac(), 9, &[ms(0), ms(33)]);
    tb.run_until(ms(1000));
    tb.send(0, addr(1), payload(0));
    tb.run_until(ms(1500));
    assert_eq!(received(&tb, 1).len(), 1);
    // The neighbour goes away.
    tb.cut(0, 1);
    let mut t = ms(1500);
    let mut outcomes = Vec::new();
    for k in 0..6 {
        let id = tb.send(0, addr(1), payload(k));
        while outcome(&tb, 0, id).is_none() {
            t += SimDuration::from_millis(100);
            tb.run_until(t);
        }
        outcomes.push(outcome(&tb, 0, id).unwrap());
    }
    assert!(outcomes.iter().all(|o| (o.1, o.2) == (TxStatus::NoAck, 3)));
    let s = tb.nodes[0].stats();
    // 16 unacknowledged sends in under 30 s: forgotten at the 16th, so the
    // last two sends strobe without a phase.
    assert_eq!(s.phases_forgotten, 1);
    assert_eq!(s.phase_locked_sends, 16);
    assert_eq!(s.unicasts_strobed, 1 + 18);
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    let run = |seed: u64| {
        let mut tb = Testbed::line(&contikimac(), seed, &[ms(0), ms(17), ms(71), ms(113)]);
        tb.run_until(ms(1000));
        tb.send(0, BROADCAST, payload(1));
        tb.send(3, addr(2), payload(2));
        tb.run_until(ms(1100));
        for k in 0..4 {
            tb.send(1, addr(2), payload(k));
            tb.send(2, addr(1), payload(k));
        }
        tb.run_until(ms(6000));
        tb.trace
    };
    let a = run(21);
    assert!(a
        .iter()
        .any(|t| matches!(t, Trace::Event(_, _, MacEvent::Received { .. }))));
    assert_eq!(a, run(21));
    assert_ne!(a, run(22));
}

#[test]
fn an_overhearing_node_sleeps_as_soon_as_it_has_read_a_frame_for_another() {
    // Node 2 hears node 0 but is not addressed.
    let adjacent = vec![
        vec![false, true, true],
        vec![true, false, false],
        vec![true, false, false],
    ];
    // Node 2 wakes (at 1050 ms) in the middle of the train, node 1 later.
    let mut tb = Testbed::new(&contikimac(), 6, &[ms(0), ms(100), ms(50)], adjacent);
    tb.run_until(ms(1000));
    let before = tb.radio_on_time(2);
    let wakeups = tb.nodes[2].stats().wakeups;
    tb.send(0, addr(1), payload(1));
    tb.run_until(ms(1200));
    assert_eq!(received(&tb, 1).len(), 1);
    assert!(received(&tb, 2).is_empty());
    let s = tb.nodes[2].stats();
    assert_eq!(s.frames_received, 0);
    // Woken by the strobes at most once or twice, and then on for no more
    // than two strobes (the one it woke in, the one it read) each time,
    // besides its channel checks.
    let energy = s.wakeups_with_energy;
    assert!((1..=2).contains(&energy), "{energy}");
    let frame = &tb.transmissions[0][0].1;
    let strobe = TURNAROUND
        + SimDuration::from_nanos(airtime_ns(frame.len()))
        + rtimer(super::contikimac::INTER_PACKET_INTERVAL);
    let checks = rtimer(CCA_CHECK_TIME) * CCA_COUNT_MAX * (s.wakeups - wakeups);
    let on = tb.radio_on_time(2) - before;
    assert!(on <= checks + strobe * 2 * energy, "{on}");
}

proptest::proptest! {
    /// Whatever the radio reports, in whatever order, the stack neither
    /// panics nor leaves a deadline behind.
    #[test]
    fn arbitrary_radio_reports_never_panic(
        inputs in proptest::collection::vec(
            (0u8..6, 0u64..5_000_000, proptest::collection::vec(proptest::num::u8::ANY, 0..130)),
            0..60,
        ),
        null in proptest::bool::ANY,
    ) {
        let config = if null { nullrdc() } else { contikimac() };
        let mut mac = MacStack::new(&config, addr(0), crate::rng::component_stream(1, "mac"), SimTime::ZERO);
        let mut now = SimTime::ZERO;
        for (kind, step, bytes) in inputs {
            // Deadlines before the next report are handled first, as a
            // driver does; none is ever in the past.
            let target = now + SimDuration::from_nanos(step);
            while let Some(t) = mac.poll_timeout() {
                proptest::prop_assert!(t >= now, "{t} before {now}");
                if t > target {
                    break;
                }
                now = t;
                mac.handle_timeout(now);
                while mac.poll_radio().is_some() {}
                while mac.poll_event().is_some() {}
            }
            now = target;
            match kind {
                0 => mac.handle_rx(now, &bytes),
                1 => mac.handle_rx_start(now),
                2 => mac.handle_rx_failed(now),
                3 => mac.handle_cca(now, bytes.first().is_some_and(|b| b & 1 == 0)),
                4 => mac.handle_tx_done(now),
                _ => {
                    let dst = if bytes.len() % 2 == 0 { BROADCAST } else { addr(1) };
                    mac.send(now, dst, bytes);
                }
            }
            while mac.poll_radio().is_some() {}
            while mac.poll_event().is_some() {}
        }
    }
}
