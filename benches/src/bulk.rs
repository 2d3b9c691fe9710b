//! Bulk TCP over one point-to-point link, timed: the scenario of
//! `ns3_bulk.py` (shared benchmark folder) in rtolab, for side-by-side
//! comparison with ns-3.
//!
//! Two nodes, one point-to-point link (`--rate`, `--delay`), a drop-tail
//! queue of `--queue` packets at each end, `--flows` bulk TCP NewReno flows
//! from node 0 to node 1 carrying `--segment`-byte segments, `--seconds` of
//! simulated time. The TCP settings are ns-3.44's defaults (see
//! [`ns3_profile`]).
//!
//! Prints one JSON line with the fields `ns3_bulk.py` prints: wall seconds
//! of the run alone (set-up excluded), bytes and segments delivered to the
//! sinks, microseconds per delivered segment. `--pcap DIR` captures every
//! interface (both ends of the link, both directions) into `DIR`, as ns-3's
//! `EnablePcapAll` would. `--send copy` makes the sender copy its bytes
//! into the connection instead of handing over a shared chunk.

use rtolab_benches::stopwatch;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;

use rtolab_sim::app::{
    AnyApp, App, AppContext, AppCx, AppId, AppStats, TcpBulkApp, TcpBulkConfig, TcpSinkApp,
    TcpSinkConfig,
};
use rtolab_sim::link::P2pConfig;
use rtolab_sim::tcp_layer::{FlowId, TcpEvent};
use rtolab_sim::units::{parse_duration, parse_rate};
use rtolab_sim::{CaptureDirection, Ipv4Cidr, SimDuration, SimTime, Simulator};
use rtolab_tcp::ack::{DelayedAckConfig, DelayedAckTimer};
use rtolab_tcp::cc::{InitialWindow, RenoConfig};
use rtolab_tcp::clock::Granularity;
use rtolab_tcp::profile::{AckChoice, CcChoice, RtoChoice};
use rtolab_tcp::rto::Rfc6298Config;
use rtolab_tcp::Bytes;
use rtolab_tcp::{Config, Profile};
use rtolab_wire::pcap::PcapWriter;
use serde_json::json;

/// Bytes handed to TCP per call, and read per call.
const CHUNK: usize = 16 * 1024;

/// Bytes of the TCP timestamps option as sent on data segments (10, padded
/// to 12).
const TIMESTAMPS_OPTION_LEN: u16 = 12;

/// The payload of every [`BulkSend`].
static ZEROS: [u8; CHUNK] = [0; CHUNK];

/// ns-3's `BulkSendApplication`: connects at time zero and keeps the send
/// buffer full. Like ns-3's, its payload is zeros: the stream content is
/// not checked at the other end, so generating it would be work ns-3 does
/// not do. The bytes are still real: in datagrams with checksums, and
/// copied out again at the receiver. By default the sender hands the
/// connection one shared chunk of zeros again and again (as an application
/// sending a file with `sendfile` would) and each segment is copied from
/// it; with `copy`, each write is copied into the connection's buffer
/// first.
struct BulkSend {
    peer: SocketAddrV4,
    flow: Option<FlowId>,
    send: SendMode,
}

impl BulkSend {
    fn fill(&mut self, cx: &mut AppContext<'_>, flow: FlowId) {
        while let Ok(room) = cx.tcp_connection(flow).map(|c| c.send_capacity()) {
            let n = room.min(CHUNK);
            let queued = match self.send {
                SendMode::Shared => cx.tcp_send_shared(flow, Bytes::from_static(&ZEROS[..n])),
                SendMode::Copy => cx.tcp_send(flow, &ZEROS[..n]),
            };
            if n == 0 || queued.is_err() {
                break;
            }
        }
    }
}

/// How [`BulkSend`] hands its bytes to TCP.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SendMode {
    /// A shared chunk, referenced by the connection.
    Shared,
    /// A copy into the connection's send buffer.
    Copy,
}

impl App<AppContext<'_>> for BulkSend {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        if let Ok(flow) = cx.tcp_connect(self.peer) {
            self.flow = Some(flow);
            self.fill(cx, flow);
        }
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn on_tcp(&mut self, cx: &mut AppContext<'_>, flow: FlowId, event: TcpEvent) {
        if matches!(event, TcpEvent::Connected | TcpEvent::Writable) {
            self.fill(cx, flow);
        }
    }
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::Value::Null)
    }
}

/// ns-3's `PacketSink`: accepts connections on a port, reads everything and
/// counts it.
struct PacketSink {
    port: u16,
    buf: Vec<u8>,
    received: u64,
}

impl App<AppContext<'_>> for PacketSink {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        // The only listener on its port.
        let _ = cx.tcp_listen(self.port);
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn on_tcp(&mut self, cx: &mut AppContext<'_>, flow: FlowId, event: TcpEvent) {
        if matches!(
            event,
            TcpEvent::Connected | TcpEvent::Readable | TcpEvent::PeerClosed
        ) {
            while let Ok(n) = cx.tcp_recv(flow, &mut self.buf) {
                self.received += n as u64;
                // A short read took everything there was.
                if n < self.buf.len() {
                    break;
                }
            }
        }
    }
    fn stats(&self) -> AppStats {
        AppStats::Custom(json!({ "bytes_received": self.received }))
    }
}

/// Which apps carry the traffic.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Apps {
    /// [`BulkSend`] and [`PacketSink`], doing what ns-3's apps do.
    Ns3,
    /// rtolab's `tcp-bulk` and `tcp-sink`, which write a hashed byte
    /// pattern and check every byte received against it.
    Builtin,
}

struct Args {
    flows: u32,
    rate: String,
    delay: String,
    queue: usize,
    segment: u16,
    seconds: f64,
    pcap: Option<PathBuf>,
    apps: Apps,
    send: SendMode,
}

const USAGE: &str = "usage: bulk [--flows N] [--rate 10Mbps] [--delay 5ms] [--queue 100] \
[--segment 1448] [--seconds 60] [--pcap DIR] [--apps ns3|builtin] [--send shared|copy]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        flows: 1,
        rate: "10Mbps".into(),
        delay: "5ms".into(),
        queue: 100,
        segment: 1448,
        seconds: 60.0,
        pcap: None,
        apps: Apps::Ns3,
        send: SendMode::Shared,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value:?}: {e}");
        match flag.as_str() {
            "--flows" => args.flows = value.parse().map_err(|e| bad(&e))?,
            "--rate" => args.rate = value,
            "--delay" => args.delay = value,
            "--queue" => args.queue = value.parse().map_err(|e| bad(&e))?,
            "--segment" => args.segment = value.parse().map_err(|e| bad(&e))?,
            "--seconds" => args.seconds = value.parse().map_err(|e| bad(&e))?,
            "--pcap" => args.pcap = Some(PathBuf::from(value)),
            "--apps" => {
                args.apps = match value.as_str() {
                    "ns3" => Apps::Ns3,
                    "builtin" => Apps::Builtin,
                    _ => return Err(bad(&"expected ns3 or builtin")),
                }
            }
            "--send" => {
                args.send = match value.as_str() {
                    "shared" => SendMode::Shared,
                    "copy" => SendMode::Copy,
                    _ => return Err(bad(&"expected shared or copy")),
                }
            }
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    if args.flows == 0 || args.flows > 16_000 {
        return Err(format!("--flows must be in 1..=16000, got {}", args.flows));
    }
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        return Err(format!("--seconds must be positive, got {}", args.seconds));
    }
    if args.segment == 0 || args.segment > u16::MAX - TIMESTAMPS_OPTION_LEN {
        return Err(format!("--segment out of range: {}", args.segment));
    }
    Ok(args)
}

/// ns-3.44's TCP defaults, the settings that matter for goodput:
///
/// * `SegmentSize` = `segment` payload bytes per data segment. ns-3 does not
///   subtract options from it; our engine does (RFC 9293 §3.7.1), so the
///   announced MSS is `segment` + 12 for the timestamps option, which gives
///   the same 1448-byte payloads and 1500-byte datagrams;
/// * `SndBufSize` = `RcvBufSize` = 131072 bytes; window scaling on, and
///   ns-3's shift for that buffer is 2;
/// * `InitialCwnd` 10 segments, `InitialSlowStartThreshold` unlimited;
/// * `Sack`, `Timestamp`, `WindowScaling` true; `LimitedTransmit` true;
///   `ReTxThreshold` 3; `TcpNoDelay` true (no Nagle);
/// * `DelAckCount` 2 (any segment size), `DelAckTimeout` 200 ms;
/// * `MinRto` 1 s, initial RTO 1 s, `ClockGranularity` 1 ms, RFC 6298
///   estimator (`RttMeanDeviation`, alpha 1/8, beta 1/4);
/// * `DataRetries` 6, `ConnCount` 6.
fn ns3_profile(segment: u16) -> Profile {
    Profile {
        name: "ns3-defaults".into(),
        mss: segment + TIMESTAMPS_OPTION_LEN,
        send_buffer: 131_072,
        recv_buffer: 131_072,
        rto: RtoChoice::Rfc6298(Rfc6298Config {
            initial: SimDuration::from_secs(1),
            min: SimDuration::from_secs(1),
            max: SimDuration::from_secs(60),
            granularity: SimDuration::from_millis(1),
            syn_timeout_rule: false,
            ..Rfc6298Config::default()
        }),
        rto_timer: Granularity::Fine,
        max_retransmissions: 6,
        max_syn_retransmissions: 6,
        cc: CcChoice::Newreno(RenoConfig {
            initial_window: InitialWindow::Segments(10),
            initial_ssthresh: None,
            ..RenoConfig::default()
        }),
        ack: AckChoice::Delayed(DelayedAckConfig {
            segments: 2,
            full_sized_only: false,
            timer: DelayedAckTimer::Fixed {
                delay: SimDuration::from_millis(200),
                granularity: Granularity::Fine,
            },
        }),
        nagle: false,
        window_scale: Some(2),
        timestamps: true,
        sack: true,
        limited_transmit: true,
        ..Profile::rfc()
    }
}

fn run(args: &Args) -> Result<serde_json::Value, String> {
    let rate_bps = parse_rate(&args.rate).map_err(|e| format!("--rate: {e}"))?;
    let delay = parse_duration(&args.delay).map_err(|e| format!("--delay: {e}"))?;
    let mut sim = Simulator::new(1);
    let sender = sim.add_node("n0");
    let receiver = sim.add_node("n1");
    let link = sim.add_point_to_point(
        "p2p",
        P2pConfig {
            rate_bps,
            delay,
            queue_capacity: args.queue,
            loss: 0.0,
        },
    );
    let cidr = |text: &str| text.parse::<Ipv4Cidr>().expect("valid literal");
    let ends = [
        sim.attach(sender, link, cidr("10.1.1.1/24"))
            .map_err(|e| e.to_string())?,
        sim.attach(receiver, link, cidr("10.1.1.2/24"))
            .map_err(|e| e.to_string())?,
    ];
    let config = sim.add_tcp_config(Config::from_profile(ns3_profile(args.segment)));
    sim.set_host_tcp_config(sender, config);
    sim.set_host_tcp_config(receiver, config);
    if let Some(dir) = &args.pcap {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (i, iface) in ends.into_iter().enumerate() {
            let path = dir.join(format!("p2p-n{i}.pcap"));
            let writer =
                PcapWriter::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let name = path.display().to_string();
            sim.add_capture(iface, CaptureDirection::Both, &name, writer);
        }
    }
    let mut sinks: Vec<AppId> = Vec::new();
    for f in 0..args.flows {
        let port = 9000 + f as u16;
        let peer = SocketAddrV4::new(Ipv4Addr::new(10, 1, 1, 2), port);
        let (sink, bulk) = match args.apps {
            Apps::Ns3 => (
                AnyApp::Custom(Box::new(PacketSink {
                    port,
                    buf: vec![0; CHUNK],
                    received: 0,
                })),
                AnyApp::Custom(Box::new(BulkSend {
                    peer,
                    flow: None,
                    send: args.send,
                })),
            ),
            Apps::Builtin => (
                AnyApp::TcpSink(TcpSinkApp::new(TcpSinkConfig { port })),
                AnyApp::TcpBulk(TcpBulkApp::new(TcpBulkConfig {
                    peer: peer.into(),
                    bytes: None,
                    start: SimTime::ZERO,
                    stop: None,
                    reconnect: None,
                })),
            ),
        };
        sinks.push(sim.add_app(receiver, &format!("sink{f}"), sink));
        sim.add_app(sender, &format!("bulk{f}"), bulk);
    }
    let end = SimTime::ZERO + SimDuration::from_nanos((args.seconds * 1e9).round() as u64);
    let start = stopwatch();
    sim.run_until(end).map_err(|e| e.to_string())?;
    let wall = start.elapsed().as_secs_f64();
    sim.finish().map_err(|e| e.to_string())?;
    let mut bytes = 0u64;
    for sink in sinks {
        match sim.app_stats(sink) {
            AppStats::TcpSink(s) if s.bytes_corrupt != 0 => {
                return Err(format!("sink received {} corrupt bytes", s.bytes_corrupt));
            }
            AppStats::TcpSink(s) => bytes += s.bytes_received,
            AppStats::Custom(v) => bytes += v["bytes_received"].as_u64().unwrap_or(0),
            _ => {}
        }
    }
    // Work that delivered nothing new, to explain the cost per delivered
    // segment: resent segments, retransmission-timer expiries, and the
    // duplicate ACKs sent for segments that arrived out of order.
    let (mut retransmissions, mut timeouts, mut dup_acks) = (0u64, 0u64, 0u64);
    for id in 0..sim.flow_count() {
        let counts = sim.flow(FlowId(id as u32)).counts;
        retransmissions += counts.retransmissions;
        timeouts += counts.timeouts;
        dup_acks += counts.dup_acks_sent;
    }
    let segments = bytes as f64 / f64::from(args.segment);
    let us_per_segment = (segments > 0.0).then(|| (wall / segments * 1e9).round() / 1e3);
    Ok(json!({
        "simulator": "rtolab",
        "flows": args.flows,
        "rate": args.rate,
        "delay": args.delay,
        "queue_packets": args.queue,
        "segment": args.segment,
        "sim_seconds": args.seconds,
        "wall_seconds": (wall * 1e4).round() / 1e4,
        "bytes_delivered": bytes,
        "segments_delivered": segments.round() as u64,
        "us_per_segment": us_per_segment,
        "events": sim.events_processed(),
        "retransmissions": retransmissions,
        "timeouts": timeouts,
        "dup_acks_sent": dup_acks,
        "packet_buffers": sim.packet_buffers(),
        "pcap": args.pcap.is_some(),
        "apps": match args.apps {
            Apps::Ns3 => "ns3",
            Apps::Builtin => "builtin",
        },
        "send": match args.send {
            SendMode::Shared => "shared",
            SendMode::Copy => "copy",
        },
    }))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bulk: {e}");
            ExitCode::FAILURE
        }
    }
}
