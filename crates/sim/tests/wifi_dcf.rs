//! IEEE 802.11 DCF timing on a shared radio medium, checked with explicit
//! times: DIFS, backoff slots, SIFS, ACK, ACK timeout, retry limit,
//! RTS/CTS with the NAV, and contention between saturated stations.

use rtolab_sim::mac::dcf::{DcfEvent, DcfSpec, FrameKind, PhyRate};
use rtolab_sim::mac::wlan::{Wlan, WlanEvent};
use rtolab_sim::position::Position;
use rtolab_sim::radio::{Mobility, RadioSpec};
use rtolab_sim::rng::component_stream;
use rtolab_time::{SimDuration, SimTime};

fn us(n: u64) -> SimTime {
    SimTime::from_micros(n)
}

/// Stations at the given x (metres) on the default unit-disk medium
/// (50 m range); stations at the same spot have no propagation delay.
fn wlan(spec: DcfSpec, xs: &[f64], seed: u64) -> Wlan<u32> {
    let mut w = Wlan::new(
        RadioSpec::default(),
        spec,
        component_stream(seed, "medium"),
        component_stream(seed, "dcf"),
    );
    for &x in xs {
        w.add_station(Mobility::Static(Position { x, y: 0.0 }));
    }
    w
}

fn run_until(w: &mut Wlan<u32>, until: SimTime, log: &mut Vec<(SimTime, WlanEvent<u32>)>) {
    while let Some(t) = w.poll_timeout().filter(|&t| t <= until) {
        let mut out = Vec::new();
        w.handle_timeout(t, &mut out);
        log.extend(out.into_iter().map(|e| (t, e)));
    }
}

/// (start, end, kind, sender, retry) of every frame put on air.
fn on_air(log: &[(SimTime, WlanEvent<u32>)]) -> Vec<(u64, u64, FrameKind, u16, bool)> {
    log.iter()
        .filter_map(|(t, e)| match e {
            WlanEvent::OnAir { station, request } => Some((
                t.as_nanos() / 1000,
                (*t + request.airtime).as_nanos() / 1000,
                request.frame.kind,
                *station,
                request.frame.retry,
            )),
            _ => None,
        })
        .collect()
}

fn dcf_events(log: &[(SimTime, WlanEvent<u32>)]) -> Vec<(u64, u16, DcfEvent<u32>)> {
    log.iter()
        .filter_map(|(t, e)| match e {
            WlanEvent::Dcf { station, event } => {
                Some((t.as_nanos() / 1000, *station, event.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn airtimes_follow_the_long_preamble_and_the_rate() {
    // 192 µs of PLCP, then the MPDU rounded up to a microsecond.
    assert_eq!(PhyRate::Mbps1.airtime(14), SimDuration::from_micros(304));
    assert_eq!(PhyRate::Mbps2.airtime(14), SimDuration::from_micros(248));
    // 1036 bytes at 5.5 Mbit/s: 8288 / 5.5 = 1506.9 µs.
    assert_eq!(
        PhyRate::Mbps5_5.airtime(1036),
        SimDuration::from_micros(1699)
    );
    assert_eq!(PhyRate::Mbps11.airtime(1036), SimDuration::from_micros(946));
    let s = DcfSpec::default();
    assert_eq!(s.difs(), SimDuration::from_micros(50));
    assert_eq!(s.eifs(), SimDuration::from_micros(364));
    assert_eq!(s.data_airtime(1000), SimDuration::from_micros(946));
}

#[test]
fn one_station_s_frames_follow_difs_sifs_ack_and_backoff_slots() {
    let mut w = wlan(DcfSpec::default(), &[0.0, 0.0], 1);
    let mut log = Vec::new();
    let mut out = Vec::new();
    for packet in 0..3 {
        w.enqueue(SimTime::ZERO, 0, 1, packet, 1000, &mut out);
    }
    run_until(&mut w, SimTime::from_millis(100), &mut log);
    let frames = on_air(&log);
    // The medium has been idle since time zero: the first frame waits
    // DIFS, 50 µs, and goes without a backoff. 946 µs on air; the ACK
    // SIFS (10 µs) after its end, 304 µs at 1 Mbit/s.
    assert_eq!(frames[0], (50, 996, FrameKind::Data, 0, false));
    assert_eq!(frames[1], (1006, 1310, FrameKind::Ack, 1, false));
    // The next frame: DIFS after the ACK, then a backoff of 0..=31 slots.
    for pair in [(1, 2), (3, 4)] {
        let ack_end = frames[pair.0].1;
        let (start, end, kind, from, retry) = frames[pair.1];
        assert_eq!((kind, from, retry), (FrameKind::Data, 0, false));
        assert_eq!(end - start, 946);
        let backoff = start - (ack_end + 50);
        assert_eq!(backoff % 20, 0, "{frames:?}");
        assert!(backoff / 20 <= 31, "{frames:?}");
        let (ack_start, _, kind, from, _) = frames[pair.1 + 1];
        assert_eq!((ack_start, kind, from), (end + 10, FrameKind::Ack, 1));
    }
    assert_eq!(frames.len(), 6);
    let events = dcf_events(&log);
    let acked: Vec<_> = events
        .iter()
        .filter_map(|(t, _, e)| match e {
            DcfEvent::Acked { payload, retries } => Some((*t, *payload, *retries)),
            _ => None,
        })
        .collect();
    assert_eq!(acked[0], (1310, 0, 0));
    assert_eq!(acked.iter().map(|a| a.1).collect::<Vec<_>>(), [0, 1, 2]);
    let received: Vec<_> = events
        .iter()
        .filter_map(|(t, s, e)| match e {
            DcfEvent::Received { payload, src } => Some((*t, *s, *src, *payload)),
            _ => None,
        })
        .collect();
    assert_eq!(received[0], (996, 1, 0, 0));
    assert_eq!(received.len(), 3);
    let stats = w.stations()[0].stats();
    assert_eq!((stats.data_attempts, stats.retries, stats.acked), (3, 0, 3));
}

#[test]
fn an_unanswered_frame_is_retried_with_doubling_windows_then_dropped() {
    // The receiver is out of range: no ACK ever comes.
    let mut w = wlan(DcfSpec::default(), &[0.0, 1000.0], 2);
    let mut log = Vec::new();
    let mut out = Vec::new();
    w.enqueue(SimTime::ZERO, 0, 1, 7, 1000, &mut out);
    run_until(&mut w, SimTime::from_secs(1), &mut log);
    let frames = on_air(&log);
    // dot11ShortRetryLimit = 7 attempts, the Retry bit on all but the first.
    assert_eq!(frames.len(), 7, "{frames:?}");
    assert_eq!(frames[0].0, 50);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.4, i > 0);
        assert_eq!(f.1 - f.0, 946);
    }
    // After each end: ACKTimeout = SIFS + slot + ACK airtime = 334 µs,
    // DIFS, then 0..=CW slots, CW = 63, 127, 255, 511, 1023, 1023.
    for (i, cw) in [63u64, 127, 255, 511, 1023, 1023].into_iter().enumerate() {
        let gap = frames[i + 1].0 - (frames[i].1 + 334 + 50);
        assert_eq!(gap % 20, 0, "{frames:?}");
        assert!(gap / 20 <= cw, "attempt {}: {gap} µs", i + 2);
    }
    let events = dcf_events(&log);
    let dropped: Vec<_> = events
        .iter()
        .filter_map(|(t, _, e)| match e {
            DcfEvent::RetryLimit { payload, retries } => Some((*t, *payload, *retries)),
            _ => None,
        })
        .collect();
    assert_eq!(dropped, [(frames[6].1 + 334, 7, 6)]);
    let stats = w.stations()[0].stats();
    assert_eq!(
        (stats.data_attempts, stats.retries, stats.response_timeouts),
        (7, 6, 7)
    );
    assert_eq!(stats.dropped_retry_limit, 1);
    assert_eq!(w.stations()[0].cw(), 31);
}

#[test]
fn rts_cts_reserves_the_medium_through_the_nav() {
    let spec = DcfSpec {
        rts_threshold: 500,
        ..DcfSpec::default()
    };
    // All three in range: station 2 learns the reservation from the RTS.
    let mut w = wlan(spec, &[0.0, 0.0, 0.0], 3);
    let mut log = Vec::new();
    let mut out = Vec::new();
    w.enqueue(SimTime::ZERO, 0, 1, 1, 1000, &mut out);
    run_until(&mut w, us(500), &mut log);
    // Station 2 gets a packet while the CTS is on air.
    w.enqueue(us(500), 2, 1, 2, 100, &mut out);
    log.extend(out.drain(..).map(|e| (us(500), e)));
    run_until(&mut w, SimTime::from_millis(50), &mut log);
    let frames = on_air(&log);
    // RTS (20 bytes at 1 Mbit/s: 352 µs) after DIFS; CTS, data and ACK
    // each SIFS after the frame before.
    assert_eq!(
        frames[..4],
        [
            (50, 402, FrameKind::Rts, 0, false),
            (412, 716, FrameKind::Cts, 1, false),
            (726, 1672, FrameKind::Data, 0, false),
            (1682, 1986, FrameKind::Ack, 1, false),
        ]
    );
    // The RTS reserved 3 SIFS + CTS + data + ACK = 1584 µs after its end,
    // to 1986 µs: station 2 sends no earlier than DIFS after that, after
    // its backoff.
    let (start, _, kind, from, _) = frames[4];
    assert_eq!((kind, from), (FrameKind::Data, 2));
    assert!(start >= 1986 + 50, "{frames:?}");
    assert_eq!((start - 2036) % 20, 0, "{frames:?}");
    let s0 = w.stations()[0].stats();
    assert_eq!((s0.rts_sent, s0.acked), (1, 1));
    assert_eq!(w.stations()[1].stats().cts_sent, 1);
}

#[test]
fn saturated_stations_collide_retry_and_deliver_each_packet_once() {
    let n = 6u16;
    let xs = vec![0.0; usize::from(n) + 1];
    let mut w = wlan(DcfSpec::default(), &xs, 4);
    let mut out = Vec::new();
    let per_station = 40u32;
    for s in 1..=n {
        for k in 0..per_station {
            w.enqueue(SimTime::ZERO, s, 0, u32::from(s) * 1000 + k, 1000, &mut out);
        }
    }
    // Queues of 50 hold them all.
    assert!(out.is_empty(), "{out:?}");
    let mut log = Vec::new();
    run_until(&mut w, SimTime::from_secs(5), &mut log);
    let events = dcf_events(&log);
    let mut received: Vec<u32> = events
        .iter()
        .filter_map(|(_, _, e)| match e {
            DcfEvent::Received { payload, .. } => Some(*payload),
            _ => None,
        })
        .collect();
    let acked = events
        .iter()
        .filter(|(_, _, e)| matches!(e, DcfEvent::Acked { .. }))
        .count();
    let dropped = events
        .iter()
        .filter(|(_, _, e)| matches!(e, DcfEvent::RetryLimit { .. }))
        .count();
    assert_eq!(acked + dropped, usize::from(n) * per_station as usize);
    // Collisions happened and were recovered by retries.
    let retries: u64 = w.stations().iter().map(|s| s.stats().retries).sum();
    assert!(retries > 0);
    assert!(w.medium().stats(SimTime::from_secs(5)).radios[0].collisions > 0);
    // Every packet acknowledged arrived, once; with the receiver's ACKs
    // never lost here, a dropped packet never arrived.
    received.sort_unstable();
    let before = received.len();
    received.dedup();
    assert_eq!(before, received.len());
    assert_eq!(received.len(), acked);
    // Each station's packets arrive in order (one frame in flight).
    for s in 1..=n {
        let base = u32::from(s) * 1000;
        let mine: Vec<u32> = events
            .iter()
            .filter_map(|(_, _, e)| match e {
                DcfEvent::Received { payload, src } if *src == s => Some(*payload - base),
                _ => None,
            })
            .collect();
        assert!(mine.windows(2).all(|p| p[0] < p[1]), "{mine:?}");
    }
}
