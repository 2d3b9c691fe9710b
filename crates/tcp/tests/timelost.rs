//! The timelost option seen from the sender (timelost spec §2): a scripted
//! receiver acknowledges every data segment after a round trip of which a
//! scripted part was spent in 802.11 retransmissions, and echoes that part
//! in its ACKs. Time is explicit: ACKs and the sender's timers are handled
//! in the order their times fall.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use rtolab_tcp::cc::{InitialWindow, RenoConfig, VegasConfig};
use rtolab_tcp::profile::{CcChoice, RtoChoice};
use rtolab_tcp::rto::Rfc6298Config;
use rtolab_tcp::trace::TraceEvent;
use rtolab_tcp::{Config, Connection, Event, Profile, TIMELOST_UNIT};
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

const SENDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const MSS: usize = 1460;
const BASE_RTT: SimDuration = SimDuration::from_millis(50);
/// When the receiver starts losing frames (the mobile leaves the area
/// where every frame arrives at the first attempt).
const RETRIES_FROM: SimTime = SimTime::from_secs(5);
/// Extra round-trip time spent in MAC retransmissions from then on.
const MAC_DELAY: SimDuration = SimDuration::from_millis(30);
const WINDOW_CAP: usize = 40 * MSS;
const END: SimTime = SimTime::from_secs(15);

/// What the receiver's path does to a round trip that starts at `t`: the
/// part spent in MAC retransmissions.
type MacDelay = fn(SimTime) -> SimDuration;

fn no_retries(_: SimTime) -> SimDuration {
    SimDuration::ZERO
}

fn retries_after_five_seconds(t: SimTime) -> SimDuration {
    if t >= RETRIES_FROM {
        MAC_DELAY
    } else {
        SimDuration::ZERO
    }
}

fn profile(correct: bool, rto: RtoChoice) -> Profile {
    let mut p = Profile::rfc();
    p.timelost = true;
    p.rtt_correction = correct;
    p.send_buffer = 1 << 20;
    p.rto = rto;
    p.cc = CcChoice::Vegas(VegasConfig {
        window: RenoConfig {
            initial_window: InitialWindow::Segments(2),
            // The path has no bottleneck: without a cap slow start never
            // ends. The cap stands for the receiver's window.
            max_window: Some(WINDOW_CAP),
            ..RenoConfig::default()
        },
        ..VegasConfig::default()
    });
    p.validate().expect("valid profile");
    p
}

/// What a run ends with.
#[derive(Debug)]
struct Outcome {
    final_cwnd: usize,
    /// Largest Vegas queue estimate after the retries started.
    max_diff_with_retries: f64,
    /// RTT samples traced after the retries started: (raw, corrected, echoed).
    samples_with_retries: Vec<(SimDuration, SimDuration, Option<SimDuration>)>,
    timeouts: u64,
    srtt: Option<SimDuration>,
    rto: SimDuration,
    bytes_acked: u64,
}

fn ip(src: Ipv4Addr, dst: Ipv4Addr, tcp: &TcpRepr) -> Ipv4Repr {
    Ipv4Repr {
        src,
        dst,
        protocol: protocol::TCP,
        ttl: 64,
        ident: 0,
        dont_fragment: true,
        tos: 0,
        payload_len: tcp.buffer_len(),
    }
}

/// Runs one bulk transfer against the scripted receiver.
fn run(profile: Profile, mac_delay: MacDelay) -> Outcome {
    let mut c = Connection::connect(
        Arc::new(Config::from_profile(profile)),
        SimTime::ZERO,
        SocketAddrV4::new(SENDER, 40_000),
        SocketAddrV4::new(RECEIVER, 80),
        SeqNumber(1000),
        7,
    );
    c.set_trace_level(rtolab_tcp::trace::TraceLevel::All);
    // The application always has more to send (a bulk source).
    let chunk = vec![0x5a; 64 * 1024];
    let peer_iss = SeqNumber(5000);
    // ACKs on their way back: (arrival, ack number, echoed rets).
    let mut acks: BinaryHeap<Reverse<(SimTime, u32, u32)>> = BinaryHeap::new();
    let mut highest_acked = 0u32;
    let mut outcome = Outcome {
        final_cwnd: 0,
        max_diff_with_retries: 0.0,
        samples_with_retries: Vec::new(),
        timeouts: 0,
        srtt: None,
        rto: SimDuration::ZERO,
        bytes_acked: 0,
    };
    let mut now = SimTime::ZERO;
    let mut buf = Vec::new();
    loop {
        // Everything the sender has to send now leaves now.
        while let Some(n) = c.poll_transmit(now, &mut buf) {
            let parsed = packet::parse(&buf[..n]).expect("valid datagram");
            let Transport::Tcp(seg) = parsed.transport else {
                panic!("not TCP");
            };
            let lost = mac_delay(now);
            let rets = u32::try_from(lost.as_nanos() / TIMELOST_UNIT.as_nanos()).unwrap();
            if seg.flags.contains(TcpFlags::SYN) {
                assert_eq!(seg.options.timelost, Some(0), "the SYN offers timelost");
                acks.push(Reverse((now + BASE_RTT, u32::MAX, 0)));
            } else if !seg.payload.is_empty() {
                let end = (seg.seq + seg.payload.len()).0;
                acks.push(Reverse((now + BASE_RTT + lost, end, rets)));
            }
        }
        while let Some(event) = c.poll_event() {
            let Event::Trace(t) = event else {
                continue;
            };
            if t.time < RETRIES_FROM {
                continue;
            }
            if let TraceEvent::RttSample {
                raw,
                corrected,
                timelost,
                ..
            } = t.event
            {
                outcome
                    .samples_with_retries
                    .push((raw, corrected, timelost));
            }
        }
        if now >= RETRIES_FROM {
            if let Some(d) = c.cc_metrics().queue_estimate {
                outcome.max_diff_with_retries = outcome.max_diff_with_retries.max(d);
            }
        }
        if c.agreed_options().3 && c.send_capacity() > 0 {
            c.send(&chunk[..c.send_capacity().min(chunk.len())])
                .expect("open");
            continue;
        }
        let next_ack = acks.peek().map(|Reverse((t, ..))| *t);
        let next_timer = c.poll_timeout();
        let Some(next) = [next_ack, next_timer].into_iter().flatten().min() else {
            break;
        };
        if next > END {
            break;
        }
        now = next;
        if next_timer.is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        while acks.peek().is_some_and(|Reverse((t, ..))| *t <= now) {
            let Reverse((_, ack, rets)) = acks.pop().expect("peeked");
            let seg = if ack == u32::MAX {
                TcpRepr {
                    src_port: 80,
                    dst_port: 40_000,
                    seq: peer_iss,
                    ack: SeqNumber(1001),
                    flags: TcpFlags::SYN | TcpFlags::ACK,
                    window: 65_535,
                    urgent: 0,
                    options: TcpOptions {
                        mss: Some(MSS as u16),
                        timelost: Some(0),
                        ..TcpOptions::default()
                    },
                    payload: &[],
                }
            } else {
                // Cumulative: an ACK that moves nothing is not sent again.
                if ack.wrapping_sub(highest_acked) as i32 <= 0 && highest_acked != 0 {
                    continue;
                }
                highest_acked = ack;
                TcpRepr {
                    src_port: 80,
                    dst_port: 40_000,
                    seq: peer_iss + 1u32,
                    ack: SeqNumber(ack),
                    flags: TcpFlags::ACK,
                    window: 65_535,
                    urgent: 0,
                    options: TcpOptions {
                        timelost: Some(rets),
                        ..TcpOptions::default()
                    },
                    payload: &[],
                }
            };
            c.handle_segment(now, &ip(RECEIVER, SENDER, &seg), &seg);
        }
    }
    outcome.final_cwnd = c.cwnd();
    outcome.timeouts = c.stats().timeouts;
    outcome.bytes_acked = c.stats().bytes_acked;
    let e = c.rto_estimate();
    outcome.srtt = e.srtt;
    outcome.rto = e.rto;
    outcome
}

fn vegas_rto() -> RtoChoice {
    // RFC 6298 as written (1 s minimum): no timeout interferes with what
    // Vegas does with its window.
    RtoChoice::Rfc6298(Rfc6298Config::default())
}

#[test]
fn vegas_with_correction_behaves_as_on_the_path_without_retries() {
    let reference = run(profile(true, vegas_rto()), no_retries);
    let corrected = run(profile(true, vegas_rto()), retries_after_five_seconds);
    let raw = run(profile(false, vegas_rto()), retries_after_five_seconds);
    for o in [&reference, &corrected, &raw] {
        assert_eq!(o.timeouts, 0, "{o:?}");
    }
    // Without retries the window reaches the cap and Vegas sees no queue.
    assert_eq!(reference.final_cwnd, WINDOW_CAP);
    assert_eq!(reference.max_diff_with_retries, 0.0);
    // With the correction, 30 ms of retries per round trip change nothing.
    assert_eq!(corrected.final_cwnd, reference.final_cwnd);
    assert_eq!(corrected.max_diff_with_retries, 0.0);
    // Without it Vegas takes the retries for a queue of its own segments
    // (40 segments x 30/80 = 15 > beta) and backs off until diff <= beta:
    // cwnd x 30/80 <= 4, at most 10 segments, plus the one a round may add.
    assert!(raw.max_diff_with_retries > 4.0, "{raw:?}");
    assert!(raw.final_cwnd <= 11 * MSS, "{raw:?}");
    // Its throughput suffers: fewer bytes acknowledged by the end.
    assert!(
        raw.bytes_acked < corrected.bytes_acked,
        "{raw:?} {corrected:?}"
    );
}

#[test]
fn rtt_samples_are_traced_raw_corrected_and_echoed() {
    let corrected = run(profile(true, vegas_rto()), retries_after_five_seconds);
    let raw = run(profile(false, vegas_rto()), retries_after_five_seconds);
    // Samples of round trips that started once the retries had begun.
    let late = |o: &Outcome| -> Vec<_> {
        o.samples_with_retries
            .iter()
            .copied()
            .filter(|(raw, ..)| *raw > BASE_RTT)
            .collect()
    };
    let with = late(&corrected);
    assert!(!with.is_empty());
    for (raw, corrected, echoed) in with {
        assert_eq!(raw, BASE_RTT + MAC_DELAY);
        assert_eq!(corrected, BASE_RTT);
        assert_eq!(echoed, Some(MAC_DELAY));
    }
    // A host that does not correct still records what was echoed.
    let without = late(&raw);
    assert!(!without.is_empty());
    for (raw, corrected, echoed) in without {
        assert_eq!(corrected, raw);
        assert_eq!(echoed, Some(MAC_DELAY));
    }
}

#[test]
fn rfc6298_estimates_from_corrected_or_raw_samples() {
    let rto = || {
        RtoChoice::Rfc6298(Rfc6298Config {
            min: SimDuration::from_millis(1),
            ..Rfc6298Config::default()
        })
    };
    let corrected = run(profile(true, rto()), retries_after_five_seconds);
    let raw = run(profile(false, rto()), retries_after_five_seconds);
    // Every corrected sample is the 50 ms path: SRTT is exactly that.
    assert_eq!(corrected.srtt, Some(BASE_RTT));
    // The raw estimate follows the 80 ms the ACKs take.
    let srtt = raw.srtt.expect("samples");
    assert!(
        srtt.as_nanos().abs_diff((BASE_RTT + MAC_DELAY).as_nanos()) < 1_000_000,
        "{raw:?}"
    );
    // A timer from corrected samples is shorter than the round trip the
    // ACKs really take, so it expires before they arrive; the raw one
    // covers them once it has adapted.
    assert!(corrected.rto < BASE_RTT + MAC_DELAY, "{corrected:?}");
    assert!(raw.rto >= BASE_RTT + MAC_DELAY, "{raw:?}");
    assert!(corrected.timeouts > raw.timeouts, "{corrected:?} {raw:?}");
}

#[test]
fn rtt_correction_is_a_profile_setting_on_unless_set() {
    let off: Profile = toml::from_str(
        &toml::to_string(&Profile::rfc())
            .expect("serialises")
            .replace(
                "timelost = false",
                "timelost = true\nrtt_correction = false",
            ),
    )
    .expect("parses");
    assert!(off.timelost && !off.rtt_correction);
    // Written out only when off.
    assert!(toml::to_string(&off)
        .expect("serialises")
        .contains("rtt_correction = false"));
    assert!(!toml::to_string(&Profile::rfc())
        .expect("serialises")
        .contains("rtt_correction"));
    let wrong = toml::from_str::<Profile>(
        &toml::to_string(&Profile::rfc())
            .expect("serialises")
            .replace("timelost = false", "timelost = false\nrtt_correction = 1"),
    )
    .expect_err("not a boolean");
    assert!(wrong.to_string().contains("rtt_correction"), "{wrong}");
}
