use proptest::prelude::*;

use super::*;
use crate::rng::component_stream;

const A: RadioId = RadioId(0);
const B: RadioId = RadioId(1);
const C: RadioId = RadioId(2);

const AIRTIME: SimDuration = SimDuration::from_millis(1);

fn us(n: u64) -> SimTime {
    SimTime::from_micros(n)
}

fn unit_disk() -> RadioSpec {
    RadioSpec::default()
}

/// Log-distance without shadowing: 40.2 dB at 1 m, exponent 3, so
/// -70.2 dBm at 10 m, -84.5 dBm at 30 m, -93.5 dBm at 60 m.
fn log_distance(reception: Reception) -> RadioSpec {
    RadioSpec {
        propagation: Propagation::LogDistance(LogDistance {
            shadowing_sigma_db: 0.0,
            ..LogDistance::default()
        }),
        reception,
        energy: EnergyModel::default(),
    }
}

fn medium(spec: RadioSpec, xs: &[f64]) -> RadioMedium<u32> {
    let mut m = RadioMedium::new(spec, component_stream(1, "radio"));
    for &x in xs {
        m.add_radio(Mobility::Static(Position { x, y: 0.0 }));
    }
    m
}

fn listen_all(m: &mut RadioMedium<u32>) {
    for i in 0..m.radio_count() {
        m.set_listening(SimTime::ZERO, RadioId(i as u32), true);
    }
}

/// Drives the medium until it has nothing left to do; returns every event
/// with its instant.
fn run(m: &mut RadioMedium<u32>) -> Vec<(SimTime, RadioEvent<u32>)> {
    run_until(m, SimTime::MAX)
}

fn run_until(m: &mut RadioMedium<u32>, until: SimTime) -> Vec<(SimTime, RadioEvent<u32>)> {
    let mut log = Vec::new();
    while let Some(t) = m.poll_timeout().filter(|&t| t <= until) {
        let mut out = Vec::new();
        m.handle_timeout(t, &mut out);
        log.extend(out.into_iter().map(|e| (t, e)));
    }
    log
}

fn events(log: &[(SimTime, RadioEvent<u32>)]) -> Vec<RadioEvent<u32>> {
    log.iter().map(|(_, e)| e.clone()).collect()
}

fn rx_end(radio: RadioId, from: RadioId, frame: u32, outcome: RxOutcome) -> RadioEvent<u32> {
    RadioEvent::RxEnd {
        radio,
        from,
        frame,
        outcome,
    }
}

#[test]
fn hidden_terminals_collide_at_the_receiver_only() {
    // A and C are 80 m apart: out of each other's transmission range
    // (50 m), inside each other's interference range (100 m); B is in the
    // middle.
    let mut m = medium(unit_disk(), &[0.0, 40.0, 80.0]);
    listen_all(&mut m);
    m.transmit(SimTime::ZERO, A, 1, AIRTIME).unwrap();
    assert!(m.channel_clear(us(100), C), "C cannot sense A by default");
    m.transmit(us(500), C, 2, AIRTIME).unwrap();
    let log = run(&mut m);
    assert_eq!(
        events(&log),
        [
            RadioEvent::RxStart { radio: B, from: A },
            RadioEvent::TxEnd { radio: A },
            rx_end(B, A, 1, RxOutcome::Collision),
            RadioEvent::TxEnd { radio: C },
        ]
    );
    let stats = m.stats(us(2000)).radios;
    assert_eq!((stats[1].collisions, stats[1].received), (2, 0));
    for sender in [&stats[0], &stats[2]] {
        assert_eq!(sender.sent, 1);
        let heard = sender.received
            + sender.collisions
            + sender.lost
            + sender.missed_off
            + sender.missed_transmitting;
        assert_eq!(heard, 0, "{sender:?}");
    }
}

#[test]
fn hidden_terminals_back_to_back_are_both_received() {
    let mut m = medium(unit_disk(), &[0.0, 40.0, 80.0]);
    listen_all(&mut m);
    m.transmit(SimTime::ZERO, A, 1, AIRTIME).unwrap();
    // A's frame leaves B's antenna at 1 ms + 133 ns, exactly when C's,
    // sent at 1 ms from 40 m away, arrives: they touch without overlapping.
    m.transmit(us(1000), C, 2, AIRTIME).unwrap();
    let log = run(&mut m);
    let at_b: Vec<_> = events(&log)
        .into_iter()
        .filter(|e| matches!(e, RadioEvent::RxEnd { .. }))
        .collect();
    assert_eq!(
        at_b,
        [
            rx_end(B, A, 1, RxOutcome::Ok),
            rx_end(B, C, 2, RxOutcome::Ok)
        ]
    );
    assert_eq!(m.stats(us(3000)).radios[1].received, 2);
}

#[test]
fn frames_arrive_after_the_propagation_delay() {
    let spec = RadioSpec {
        propagation: Propagation::UnitDisk(UnitDisk {
            tx_range: 1000.0,
            interference_range: 1000.0,
            cca_range: 1000.0,
            ..UnitDisk::default()
        }),
        ..RadioSpec::default()
    };
    // Light takes 1 µs over 299.792458 m.
    let mut m = medium(spec, &[0.0, 299.792458]);
    listen_all(&mut m);
    m.transmit(SimTime::ZERO, A, 7, AIRTIME).unwrap();
    assert_eq!(
        run(&mut m),
        [
            (us(1), RadioEvent::RxStart { radio: B, from: A }),
            (us(1000), RadioEvent::TxEnd { radio: A }),
            (us(1001), rx_end(B, A, 7, RxOutcome::Ok)),
        ]
    );
}

#[test]
fn unit_disk_cca_is_busy_within_the_cca_range() {
    let xs = [0.0, 30.0, 70.0, 120.0];
    let busy = |cca_range: f64| {
        let spec = RadioSpec {
            propagation: Propagation::UnitDisk(UnitDisk {
                cca_range,
                ..UnitDisk::default()
            }),
            ..RadioSpec::default()
        };
        let mut m = medium(spec, &xs);
        m.transmit(SimTime::ZERO, A, 1, AIRTIME).unwrap();
        let during: Vec<bool> = (0..4)
            .map(|i| !m.channel_clear(us(10), RadioId(i)))
            .collect();
        let after: Vec<bool> = (0..4)
            .map(|i| !m.channel_clear(us(1001), RadioId(i)))
            .collect();
        (during, after)
    };
    // The sender's own signal never counts; 30 m is in range; 70 m only
    // interferes; 120 m is beyond interference.
    assert_eq!(busy(50.0).0, [false, true, false, false]);
    assert_eq!(busy(100.0).0, [false, true, true, false]);
    assert_eq!(busy(100.0).1, [false; 4]);
}

#[test]
fn log_distance_cca_compares_total_power_with_the_threshold() {
    // -77 dBm is reached at 16.9 m; two senders at 30 m (-84.5 dBm each)
    // add up to -81.5 dBm, still clear.
    let mut m = medium(
        log_distance(Reception::Collision),
        &[0.0, 10.0, 30.0, -30.0],
    );
    m.transmit(SimTime::ZERO, B, 1, AIRTIME).unwrap();
    assert!(!m.channel_clear(us(10), A));
    assert!(m.channel_clear(us(10), B));
    assert!(m.channel_clear(us(1001), A));
    m.transmit(us(2000), C, 2, AIRTIME).unwrap();
    m.transmit(us(2000), RadioId(3), 3, AIRTIME).unwrap();
    assert!(m.channel_clear(us(2010), A));
}

#[test]
fn sinr_capture_keeps_a_strong_frame_the_collision_rule_does_not() {
    // R at 0, strong sender S at 10 m (-70.2 dBm), weak one W at 60 m
    // (-93.5 dBm, still above the -95 dBm sensitivity).
    let (r, s, w) = (A, B, C);
    let outcome = |spec: RadioSpec, first: RadioId, second: RadioId| {
        let mut m = medium(spec, &[0.0, 10.0, 60.0]);
        listen_all(&mut m);
        m.transmit(SimTime::ZERO, first, 1, AIRTIME).unwrap();
        m.transmit(us(200), second, 2, AIRTIME).unwrap();
        let log = events(&run(&mut m));
        let ends: Vec<_> = log
            .into_iter()
            .filter_map(|e| match e {
                RadioEvent::RxEnd {
                    radio,
                    frame,
                    outcome,
                    ..
                } if radio == r => Some((frame, outcome)),
                _ => None,
            })
            .collect();
        (ends, m.stats(us(3000)).radios[0].collisions)
    };
    let sinr = || {
        log_distance(Reception::Sinr {
            capture_threshold_db: 3.0,
        })
    };
    // About 23 dB above the weak frame: captured.
    assert_eq!(outcome(sinr(), s, w), (vec![(1, RxOutcome::Ok)], 1));
    assert_eq!(
        outcome(log_distance(Reception::Collision), s, w),
        (vec![(1, RxOutcome::Collision)], 2)
    );
    // Locked onto the weak frame, the receiver loses it to the strong one
    // and does not switch over.
    assert_eq!(outcome(sinr(), w, s), (vec![(1, RxOutcome::Collision)], 2));
}

#[test]
fn a_radio_that_is_off_misses_frames_and_cannot_join_one_midway() {
    let mut m = medium(unit_disk(), &[0.0, 20.0]);
    m.transmit(SimTime::ZERO, A, 1, AIRTIME).unwrap();
    // Switched on halfway through: the frame's start was missed.
    m.set_listening(us(500), B, true);
    m.transmit(us(2000), A, 2, AIRTIME).unwrap();
    let receptions: Vec<_> = events(&run(&mut m))
        .into_iter()
        .filter(|e| !matches!(e, RadioEvent::TxEnd { .. }))
        .collect();
    assert_eq!(
        receptions,
        [
            RadioEvent::RxStart { radio: B, from: A },
            rx_end(B, A, 2, RxOutcome::Ok)
        ]
    );
    let b = m.stats(us(4000)).radios[1];
    assert_eq!((b.missed_off, b.received), (1, 1));
}

#[test]
fn switching_off_or_transmitting_aborts_a_reception() {
    let mut m = medium(unit_disk(), &[0.0, 20.0]);
    listen_all(&mut m);
    m.transmit(SimTime::ZERO, A, 1, AIRTIME).unwrap();
    let mut log = run_until(&mut m, us(100));
    assert_eq!(m.state(B), RadioState::Receive);
    m.set_listening(us(300), B, false);
    assert_eq!(m.state(B), RadioState::Off);
    log.extend(run_until(&mut m, us(300)));
    m.transmit(us(2000), A, 2, AIRTIME).unwrap();
    m.set_listening(us(2000), B, true);
    log.extend(run_until(&mut m, us(2100)));
    m.transmit(us(2300), B, 3, AIRTIME).unwrap();
    log.extend(run(&mut m));
    let aborted: Vec<_> = log
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                RadioEvent::RxEnd {
                    outcome: RxOutcome::Aborted,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(
        aborted,
        [
            &(us(300), rx_end(B, A, 1, RxOutcome::Aborted)),
            &(us(2300), rx_end(B, A, 2, RxOutcome::Aborted)),
        ]
    );
    assert_eq!(m.stats(us(5000)).radios[1].aborted, 2);
}

#[test]
fn state_times_add_up_to_the_elapsed_time() {
    let mut m = medium(unit_disk(), &[0.0, 10.0]);
    m.set_listening(SimTime::ZERO, B, true);
    m.set_listening(us(1000), A, true);
    m.transmit(us(2000), A, 1, AIRTIME).unwrap();
    m.set_listening(us(5000), A, false);
    // Sent while off: on for the frame, off again after.
    m.transmit(us(6000), A, 2, AIRTIME).unwrap();
    m.set_listening(us(8000), A, true);
    run(&mut m);
    let stats = m.stats(us(10_000)).radios;
    let ms = |n: u64| n * 1_000_000;
    assert_eq!(
        stats[0].time,
        StateTimes {
            off_ns: ms(3),
            listen_ns: ms(5),
            receive_ns: 0,
            transmit_ns: ms(2),
        }
    );
    assert!((stats[0].duty_cycle - 0.7).abs() < 1e-12);
    // B, 10 m away, receives both frames 33 ns after they were sent.
    assert_eq!(
        stats[1].time,
        StateTimes {
            off_ns: 0,
            listen_ns: ms(8),
            receive_ns: ms(2),
            transmit_ns: 0,
        }
    );
    for s in &stats {
        assert_eq!(s.time.total_ns(), ms(10));
    }
    let expected_a = (0.0195 * 0.002 + 0.0218 * 0.005) * 3.0;
    assert!((stats[0].energy_j - expected_a).abs() < 1e-12);
}

#[test]
fn positions_are_taken_at_transmission_time() {
    // B drives away from A at 10 m/s: 20 m away at 2 s, 120 m at 12 s.
    let mut m = RadioMedium::new(unit_disk(), component_stream(1, "radio"));
    m.add_radio(Mobility::Static(Position::default()));
    m.add_radio(
        Mobility::waypoints(
            vec![
                Waypoint {
                    at: SimTime::ZERO,
                    position: Position { x: 0.0, y: 0.0 },
                },
                Waypoint {
                    at: SimTime::from_secs(20),
                    position: Position { x: 200.0, y: 0.0 },
                },
            ],
            "w",
        )
        .unwrap(),
    );
    listen_all(&mut m);
    m.transmit(SimTime::from_secs(2), A, 1, AIRTIME).unwrap();
    m.transmit(SimTime::from_secs(12), A, 2, AIRTIME).unwrap();
    run(&mut m);
    assert_eq!(m.position(B, SimTime::from_secs(12)).x, 120.0);
    assert_eq!(m.stats(SimTime::from_secs(13)).radios[1].received, 1);
}

#[test]
fn udgm_success_ratios_lose_frames_as_cooja_draws_them() {
    // success_ratio_rx 0: certain at 0 m, impossible at the range's edge.
    let spec = |tx: f64, rx: f64| RadioSpec {
        propagation: Propagation::UnitDisk(UnitDisk {
            success_ratio_tx: tx,
            success_ratio_rx: rx,
            ..UnitDisk::default()
        }),
        ..RadioSpec::default()
    };
    let mut m = medium(spec(1.0, 0.0), &[0.0, 0.0, 50.0]);
    listen_all(&mut m);
    m.transmit(SimTime::ZERO, A, 1, AIRTIME).unwrap();
    run(&mut m);
    let stats = m.stats(us(2000)).radios;
    assert_eq!((stats[1].received, stats[2].received), (1, 0));
    assert_eq!(stats[2].lost, 1);

    // success_ratio_tx 0: nobody hears anything, the channel stays clear.
    let mut m = medium(spec(0.0, 1.0), &[0.0, 10.0]);
    listen_all(&mut m);
    m.transmit(SimTime::ZERO, A, 1, AIRTIME).unwrap();
    assert!(m.channel_clear(us(10), B));
    run(&mut m);
    let stats = m.stats(us(2000)).radios;
    assert_eq!((stats[0].sent_erased, stats[1].received), (1, 0));

    // At R/sqrt(2) with success_ratio_rx 0.5: 1 - 0.5 * 0.5 = 0.75.
    let mut m = medium(spec(1.0, 0.5), &[0.0, 50.0 / 2f64.sqrt()]);
    listen_all(&mut m);
    let n = 4000;
    for i in 0..n {
        m.transmit(us(2000 * i), A, i as u32, AIRTIME).unwrap();
        run(&mut m);
    }
    let received = m.stats(us(2000 * n)).radios[1].received as f64 / n as f64;
    // Standard error 0.0068.
    assert!((received - 0.75).abs() < 0.03, "{received}");
}

#[test]
fn refused_transmissions_say_why() {
    let mut m = medium(unit_disk(), &[0.0, 10.0]);
    m.transmit(SimTime::ZERO, A, 1, AIRTIME).unwrap();
    assert_eq!(
        m.transmit(us(10), A, 2, AIRTIME),
        Err(TransmitError::Busy(0))
    );
    assert_eq!(
        m.transmit(us(10), B, 2, SimDuration::ZERO),
        Err(TransmitError::ZeroAirtime)
    );
    let log = run(&mut m);
    assert_eq!(
        log.iter()
            .filter(|(_, e)| matches!(e, RadioEvent::TxEnd { .. }))
            .count(),
        1
    );
}

#[test]
fn shadowing_is_drawn_per_pair_from_the_seed() {
    let spec = RadioSpec {
        propagation: Propagation::LogDistance(LogDistance::default()),
        ..RadioSpec::default()
    };
    let draws = |seed: u64| {
        let mut m: RadioMedium<u32> =
            RadioMedium::new(spec.clone(), component_stream(seed, "radio"));
        for x in [0.0, 10.0, 20.0] {
            m.add_radio(Mobility::Static(Position { x, y: 0.0 }));
        }
        assert_eq!(m.shadowing_db(A, B), m.shadowing_db(B, A));
        [
            m.shadowing_db(A, B),
            m.shadowing_db(A, C),
            m.shadowing_db(B, C),
        ]
    };
    assert_eq!(draws(3), draws(3));
    assert_ne!(draws(3), draws(4));
    assert!(draws(3).iter().all(|d| *d != 0.0));
}

#[test]
fn radio_spec_tables_are_read_and_checked() {
    let parse = |text: &str| RadioSpec::parse(text.parse().unwrap(), "radio");
    assert_eq!(parse("").unwrap(), RadioSpec::default());
    let spec = parse(
        "propagation = { kind = \"log-distance\", exponent = 2.5 }\n\
         reception = { kind = \"sinr\", capture_threshold_db = 4 }\n\
         energy = { voltage = 3.3 }",
    )
    .unwrap();
    assert_eq!(spec.reception.kind(), "sinr");
    assert_eq!(spec.energy.voltage, 3.3);
    let e = parse("reception = { kind = \"sinr\", capture_threshold_db = 4 }").unwrap_err();
    assert_eq!(e.path, "radio.reception.kind");
    let e = parse("propagation = { kind = \"unit-disk\", tx_range = -1 }").unwrap_err();
    assert_eq!(e.path, "radio.propagation.tx_range");
    let e = parse("antenna = 1").unwrap_err();
    assert_eq!(e.path, "radio.antenna");
    let e = parse("energy = { tx_current_ma = \"a lot\" }").unwrap_err();
    assert_eq!(e.path, "radio.energy.tx_current_ma");
}

/// One input of the property test.
#[derive(Clone, Debug)]
enum Op {
    Transmit { radio: usize, airtime_us: u64 },
    Listen { radio: usize, on: bool },
    Cca { radio: usize },
}

fn op(radios: usize) -> impl Strategy<Value = (u64, Op)> {
    let r = 0..radios;
    let kind = prop_oneof![
        (r.clone(), 1u64..5000).prop_map(|(radio, airtime_us)| Op::Transmit { radio, airtime_us }),
        (r.clone(), any::<bool>()).prop_map(|(radio, on)| Op::Listen { radio, on }),
        r.prop_map(|radio| Op::Cca { radio }),
    ];
    (0u64..3000, kind)
}

fn any_spec() -> impl Strategy<Value = RadioSpec> {
    prop_oneof![
        (0.0..=1.0f64, 0.0..=1.0f64, 20.0..80.0f64).prop_map(|(tx, rx, range)| RadioSpec {
            propagation: Propagation::UnitDisk(UnitDisk {
                tx_range: range,
                interference_range: range * 2.0,
                cca_range: range,
                success_ratio_tx: tx,
                success_ratio_rx: rx,
            }),
            ..RadioSpec::default()
        }),
        (0.0..8.0f64, any::<bool>()).prop_map(|(sigma, sinr)| RadioSpec {
            propagation: Propagation::LogDistance(LogDistance {
                shadowing_sigma_db: sigma,
                ..LogDistance::default()
            }),
            reception: if sinr {
                Reception::Sinr {
                    capture_threshold_db: 3.0,
                }
            } else {
                Reception::Collision
            },
            energy: EnergyModel::default(),
        }),
    ]
}

proptest! {
    #[test]
    fn every_frame_ends_once_and_every_reception_once(
        spec in any_spec(),
        xs in proptest::collection::vec((0.0..120.0f64, 0.0..120.0f64), 2..6),
        ops in proptest::collection::vec(op(6), 0..120),
        seed in any::<u64>(),
    ) {
        let mut m: RadioMedium<u32> = RadioMedium::new(spec, component_stream(seed, "radio"));
        for (i, &(x, y)) in xs.iter().enumerate() {
            // Every other radio moves, to cover mobility too.
            let mobility = if i % 2 == 0 {
                Mobility::Static(Position { x, y })
            } else {
                Mobility::waypoints(vec![
                    Waypoint { at: SimTime::ZERO, position: Position { x, y } },
                    Waypoint { at: SimTime::from_millis(100), position: Position { x: y, y: x } },
                ], "w").unwrap()
            };
            m.add_radio(mobility);
        }
        let n = xs.len();
        let mut accepted = vec![0u64; n];
        let mut t = SimTime::ZERO;
        let mut log = Vec::new();
        for (dt, op) in ops {
            t += SimDuration::from_micros(dt);
            log.extend(run_until(&mut m, t));
            match op {
                Op::Transmit { radio, airtime_us } => {
                    let id = RadioId((radio % n) as u32);
                    let airtime = SimDuration::from_micros(airtime_us);
                    if m.transmit(t, id, 0, airtime).is_ok() {
                        accepted[radio % n] += 1;
                    }
                }
                Op::Listen { radio, on } => m.set_listening(t, RadioId((radio % n) as u32), on),
                Op::Cca { radio } => {
                    m.channel_clear(t, RadioId((radio % n) as u32));
                }
            }
        }
        log.extend(run(&mut m));
        prop_assert_eq!(m.poll_timeout(), None);

        let mut tx_ends = vec![0u64; n];
        let mut receiving = vec![false; n];
        let mut ok = vec![0u64; n];
        let mut last = SimTime::ZERO;
        for (at, event) in &log {
            prop_assert!(*at >= last, "events out of order");
            last = *at;
            match event {
                RadioEvent::TxEnd { radio } => tx_ends[radio.index()] += 1,
                RadioEvent::RxStart { radio, from } => {
                    prop_assert!(radio != from);
                    prop_assert!(!receiving[radio.index()], "two receptions at once");
                    receiving[radio.index()] = true;
                }
                RadioEvent::RxEnd { radio, outcome, .. } => {
                    prop_assert!(receiving[radio.index()], "an end without a start");
                    receiving[radio.index()] = false;
                    ok[radio.index()] += u64::from(*outcome == RxOutcome::Ok);
                }
            }
        }
        prop_assert_eq!(&tx_ends, &accepted);
        prop_assert!(receiving.iter().all(|r| !r));
        // Later than anything the medium was driven to (an arrival that
        // nobody receives ends without an event).
        let end = last.max(t) + SimDuration::from_secs(1);
        let stats = m.stats(end).radios;
        for (i, s) in stats.iter().enumerate() {
            prop_assert_eq!(s.time.total_ns(), end.as_nanos());
            prop_assert_eq!(s.received, ok[i]);
            prop_assert_eq!(s.sent, accepted[i]);
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_events(
        xs in proptest::collection::vec(0.0..150.0f64, 2..6),
        ops in proptest::collection::vec(op(6), 0..60),
        seed in any::<u64>(),
    ) {
        let spec = RadioSpec {
            propagation: Propagation::UnitDisk(UnitDisk {
                success_ratio_tx: 0.9,
                success_ratio_rx: 0.5,
                ..UnitDisk::default()
            }),
            ..RadioSpec::default()
        };
        let go = || {
            let mut m: RadioMedium<u32> = RadioMedium::new(spec.clone(), component_stream(seed, "radio"));
            for &x in &xs {
                m.add_radio(Mobility::Static(Position { x, y: 0.0 }));
            }
            let n = xs.len();
            let mut t = SimTime::ZERO;
            let mut log = Vec::new();
            for (i, (dt, op)) in ops.iter().enumerate() {
                t += SimDuration::from_micros(*dt);
                log.extend(run_until(&mut m, t));
                match op {
                    Op::Transmit { radio, airtime_us } => {
                        let _ = m.transmit(t, RadioId((radio % n) as u32), i as u32, SimDuration::from_micros(*airtime_us));
                    }
                    Op::Listen { radio, on } => m.set_listening(t, RadioId((radio % n) as u32), *on),
                    Op::Cca { .. } => {}
                }
            }
            log.extend(run(&mut m));
            (log, m.stats(t + SimDuration::from_secs(1)))
        };
        prop_assert_eq!(go(), go());
    }
}

#[test]
fn ns2_shadowing_draws_every_frame_anew() {
    let s = Shadowing {
        path_loss_exponent: 2.7,
        ..Shadowing::default()
    };
    let m = s.log_distance();
    // Where the mean power is exactly RXThresh_: each frame arrives with
    // probability 1/2, independently of the one before.
    let d = 10f64.powf(
        (m.tx_power_dbm - m.sensitivity_dbm - m.reference_loss_db) / (10.0 * s.path_loss_exponent),
    );
    assert!((s.reception_probability(d) - 0.5).abs() < 1e-6);
    let spec = RadioSpec {
        propagation: Propagation::Shadowing(s),
        ..RadioSpec::default()
    };
    let mut m = medium(spec, &[0.0, d]);
    listen_all(&mut m);
    let n = 4000u64;
    let mut received = Vec::new();
    for i in 0..n {
        let at = SimTime::from_millis(2 * i);
        m.transmit(at, A, i as u32, AIRTIME).unwrap();
        for (_, e) in run(&mut m) {
            if let RadioEvent::RxEnd {
                outcome: RxOutcome::Ok,
                frame,
                ..
            } = e
            {
                received.push(frame);
            }
        }
    }
    let share = received.len() as f64 / n as f64;
    // Five binomial standard errors: 5 * sqrt(0.25 / 4000) = 0.04.
    assert!((share - 0.5).abs() < 0.04, "{share}");
    // Per-frame draws: runs of successes are as short as coin flips', so
    // about half the successes are followed by a success (a per-pair draw
    // would give all or none).
    let follows = received.windows(2).filter(|w| w[1] == w[0] + 1).count() as f64;
    let ratio = follows / received.len() as f64;
    assert!((ratio - 0.5).abs() < 0.06, "{ratio}");
}
