//! Our TCP traces against tshark's TCP analysis of our own captures.
//!
//! For each capture of a lossy run, at a host that runs TCP:
//! * the segments the host sent that tshark flags as retransmitted are
//!   exactly the retransmissions the host's engine traced (same ports and
//!   sequence numbers), and every one tshark calls a fast retransmission
//!   is one we traced as caused by duplicate ACKs or SACK;
//! * the ACKs the host sent that tshark flags as duplicates are exactly the
//!   duplicate ACKs it traced as sent, and those it received are exactly
//!   the ones it traced as received.
//!
//! Definitional differences, accounted for rather than hidden:
//! * tshark labels a resent segment "out-of-order" instead of
//!   "retransmission" when it leaves less than one handshake RTT after the
//!   highest segment so far (it cannot tell reordering from recovery in a
//!   capture taken mid-path), and "spurious retransmission" when its data
//!   was already acknowledged. At the sender's own interface nothing it
//!   sends is reordered, so all three labels are retransmissions to us.
//! * tshark judges "fast retransmission" by timing: a resend of the
//!   segment the duplicate ACKs ask for, within 20 ms of the last of them.
//!   Later repairs of the same recovery (other SACK holes, NewReno partial
//!   ACKs) are plain retransmissions to tshark but loss recovery to us; and
//!   a timer-driven resend that happens to leave within 20 ms of a
//!   duplicate ACK (after a timeout, RFC 6582 keeps duplicate ACKs from
//!   starting a new fast retransmit, so they keep coming) is "fast" to
//!   tshark but a timeout to us, since we know which timer fired. So every
//!   tshark fast retransmission must be one of our loss-recovery
//!   retransmissions, or one of our timeout retransmissions that followed
//!   a duplicate ACK for it by less than 20 ms.
//! * RFC 5681, which the engine follows, counts an incoming ACK as a
//!   duplicate only while the host has unacknowledged data; tshark also
//!   flags repeats that arrive after everything was acknowledged (late
//!   duplicates at the end of a connection). Those are left out of the
//!   "received" comparison, judged from the capture itself: nothing the
//!   host sent before the ACK lies beyond its acknowledgment number.
//! * Window probes and keep-alives are not retransmissions in either
//!   view; tshark names them separately and our counts keep them apart.
//!   The answer to one repeats the previous ACK exactly, so the engine
//!   counts it as a duplicate ACK sent; tshark checks the same conditions
//!   but labels it "ACK to a TCP keep-alive segment" instead (the engine's
//!   probe carries an old sequence number and no data, which tshark calls
//!   a keep-alive), so that label counts as a duplicate ACK here.
//!
//! A capture records what crosses the link, so a segment dropped by the
//! sender's own full queue would be missing from it; every run here checks
//! that no queue overflowed.

use std::collections::BTreeMap;
use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario};

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn scenario_text(name: &str) -> String {
    fs::read_to_string(scenarios_dir().join(name)).unwrap()
}

fn tshark_available() -> bool {
    Command::new("tshark").arg("--version").output().is_ok()
}

/// What one host's engine traced, keyed by local port.
#[derive(Default, Debug)]
struct Traced {
    /// (local port, seq) of every retransmission, its cause and time.
    retx: Vec<((u16, u32), String, u64)>,
    /// (local port, ack) of every duplicate ACK sent.
    dup_sent: Vec<(u16, u32)>,
    /// (local port, ack) of every duplicate ACK received, and its time.
    dup_received: Vec<((u16, u32), u64)>,
}

/// Reads `traces.jsonl` into per-node records.
fn traced(dir: &Path, report: &RunReport) -> BTreeMap<u64, Traced> {
    let local_port: Vec<u16> = report
        .flows
        .iter()
        .map(|f| f.local.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    let mut out: BTreeMap<u64, Traced> = BTreeMap::new();
    for line in fs::read_to_string(dir.join("traces.jsonl"))
        .unwrap()
        .lines()
    {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        if e["event"] != "tcp" {
            continue;
        }
        let node = e["node"].as_u64().unwrap();
        let port = local_port[e["flow"].as_u64().unwrap() as usize];
        let t = out.entry(node).or_default();
        let num = |key: &str| e[key].as_u64().unwrap() as u32;
        let time = e["t_ns"].as_u64().unwrap();
        match e["tcp_event"].as_str().unwrap() {
            "retransmission" => {
                let cause = e["cause"].as_str().unwrap().to_string();
                if cause == "timeout" || cause == "fast_retransmit" {
                    t.retx.push(((port, num("seq")), cause, time));
                }
            }
            "dup_ack_sent" => t.dup_sent.push((port, num("ack"))),
            "dup_ack_received" => t.dup_received.push(((port, num("ack")), time)),
            _ => {}
        }
    }
    out
}

/// A TCP packet of a capture with tshark's analysis of it.
#[derive(Debug)]
struct Flagged {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: u32,
    /// Sequence space: payload plus SYN and FIN.
    seq_len: u32,
    retransmission: bool,
    fast: bool,
    dup_ack: bool,
}

fn tshark_flags(pcap: &Path) -> Vec<Flagged> {
    let out = Command::new("tshark")
        .args(["-n", "-o", "tcp.relative_sequence_numbers:FALSE", "-r"])
        .arg(pcap)
        .args(["-Y", "tcp", "-T", "fields", "-E", "aggregator=|"])
        .args(["-e", "ip.src", "-e", "ip.dst", "-e", "tcp.srcport"])
        .args(["-e", "tcp.dstport", "-e", "tcp.seq", "-e", "tcp.ack"])
        .args(["-e", "_ws.expert.message", "-e", "tcp.len"])
        .args(["-e", "tcp.flags.syn", "-e", "tcp.flags.fin"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let messages = f[6];
            let flag = |i: usize| u32::from(f[i] == "1" || f[i] == "True");
            Flagged {
                seq_len: f[7].parse::<u32>().unwrap() + flag(8) + flag(9),
                src: f[0].parse().unwrap(),
                dst: f[1].parse().unwrap(),
                src_port: f[2].parse().unwrap(),
                dst_port: f[3].parse().unwrap(),
                seq: f[4].parse().unwrap(),
                ack: f[5].parse().unwrap_or(0),
                retransmission: messages.contains("(suspected) retransmission")
                    || messages.contains("(suspected) out-of-order segment")
                    || messages.contains("(suspected) spurious retransmission"),
                fast: messages.contains("(suspected) fast retransmission"),
                dup_ack: messages.contains("Duplicate ACK")
                    || messages.contains("ACK to a TCP keep-alive segment"),
            }
        })
        .collect()
}

/// Sum of every `dropped_queue_full` counter in a JSON tree.
fn queue_drops(v: &serde_json::Value) -> u64 {
    match v {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| match (k.as_str(), v.as_u64()) {
                ("dropped_queue_full", Some(n)) => n,
                _ => queue_drops(v),
            })
            .sum(),
        serde_json::Value::Array(items) => items.iter().map(queue_drops).sum(),
        _ => 0,
    }
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

/// Totals over every comparison made, to show the runs were not trivial.
#[derive(Default, Debug)]
struct Totals {
    retransmissions: usize,
    fast: usize,
    timeout: usize,
    dup_acks: usize,
}

/// Runs `text` with `seed` and compares every capture at a TCP host.
fn check(label: &str, text: &str, seed: u64, totals: &mut Totals) {
    let scenario = Scenario::from_toml_str(text).unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("tshark-tcp")
        .join(format!("{label}-{seed}"));
    let _ = fs::remove_dir_all(&dir);
    let opts = RunOptions {
        seed: Some(seed),
        out_dir: Some(dir.clone()),
        duration: None,
        write_traces: true,
        ..RunOptions::default()
    };
    let report = run_scenario(&scenario, &opts).unwrap();
    let links = serde_json::to_value(&report.links).unwrap();
    assert_eq!(
        queue_drops(&links),
        0,
        "{label} seed {seed}: a queue overflowed, so captures miss segments"
    );
    let traced = traced(&dir, &report);
    for capture in &scenario.captures {
        let node = report
            .nodes
            .iter()
            .position(|n| n.name == capture.host)
            .unwrap();
        let Some(ours) = traced.get(&(node as u64)) else {
            continue; // a router: it runs no TCP
        };
        let mine: Vec<Ipv4Addr> = report.nodes[node]
            .interfaces
            .iter()
            .map(|i| i.address.addr)
            .collect();
        let flags = tshark_flags(&dir.join(&capture.file));
        let sent = |f: &&Flagged| mine.contains(&f.src);
        let what = format!("{label} seed {seed}, {} at {}", capture.file, capture.host);

        let theirs_retx = sorted(
            flags
                .iter()
                .filter(sent)
                .filter(|f| f.retransmission)
                .map(|f| (f.src_port, f.seq))
                .collect(),
        );
        let ours_retx = sorted(ours.retx.iter().map(|(k, _, _)| *k).collect());
        assert_eq!(ours_retx, theirs_retx, "{what}: retransmissions");
        for f in flags.iter().filter(sent).filter(|f| f.fast) {
            let key = (f.src_port, f.seq);
            let dup_ack_just_before = |t: u64| {
                ours.dup_received
                    .iter()
                    .any(|(k, at)| *k == key && *at <= t && t - at < 20_000_000)
            };
            assert!(
                ours.retx.iter().any(|(k, cause, t)| *k == key
                    && (cause == "fast_retransmit"
                        || (cause == "timeout" && dup_ack_just_before(*t)))),
                "{what}: tshark's fast retransmission {f:?} is not one of ours: {:?}",
                ours.retx
            );
        }

        let theirs_dup_sent = sorted(
            flags
                .iter()
                .filter(sent)
                .filter(|f| f.dup_ack)
                .map(|f| (f.src_port, f.ack))
                .collect(),
        );
        assert_eq!(
            sorted(ours.dup_sent.clone()),
            theirs_dup_sent,
            "{what}: duplicate ACKs sent"
        );
        // The end of what the host sent so far, per local port, to tell
        // whether an incoming ACK left data outstanding.
        let mut sent_end: BTreeMap<u16, u32> = BTreeMap::new();
        let mut theirs_dup_received = Vec::new();
        for f in &flags {
            if mine.contains(&f.src) {
                let end = f.seq.wrapping_add(f.seq_len);
                let e = sent_end.entry(f.src_port).or_insert(end);
                if (end.wrapping_sub(*e) as i32) > 0 {
                    *e = end;
                }
            } else if mine.contains(&f.dst) && f.dup_ack {
                let outstanding = sent_end
                    .get(&f.dst_port)
                    .is_some_and(|end| (end.wrapping_sub(f.ack) as i32) > 0);
                if outstanding {
                    theirs_dup_received.push((f.dst_port, f.ack));
                }
            }
        }
        let theirs_dup_received = sorted(theirs_dup_received);
        assert_eq!(
            sorted(ours.dup_received.iter().map(|(k, _)| *k).collect()),
            theirs_dup_received,
            "{what}: duplicate ACKs received"
        );

        totals.retransmissions += ours_retx.len();
        totals.fast += flags.iter().filter(sent).filter(|f| f.fast).count();
        totals.timeout += ours.retx.iter().filter(|(_, c, _)| c == "timeout").count();
        totals.dup_acks += theirs_dup_sent.len() + theirs_dup_received.len();
    }
}

#[test]
fn retransmissions_and_duplicate_acks_match_tshark() {
    if !tshark_available() {
        eprintln!("tshark not installed: skipping the cross-check with its TCP analysis");
        return;
    }
    let mut totals = Totals::default();
    let bulk = scenario_text("p2p-bulk.toml");
    for seed in 1..=4 {
        check("p2p-bulk", &bulk, seed, &mut totals);
    }
    // Heavy loss: timeouts and go-back resends, not only fast recovery.
    let heavy = bulk
        .replace("loss = 0.02", "loss = 0.1")
        .replace("bytes = 2_000_000", "bytes = 300_000")
        .replace("duration = \"10s\"", "duration = \"30s\"");
    for seed in 1..=2 {
        check("p2p-bulk-heavy-loss", &heavy, seed, &mut totals);
    }
    for profile in ["rfc", "uip", "lwip"] {
        let text = bulk
            .replace("profile = \"linux\"", &format!("profile = \"{profile}\""))
            .replace("loss = 0.02", "loss = 0.05")
            .replace("bytes = 2_000_000", "bytes = 200_000")
            .replace("duration = \"10s\"", "duration = \"60s\"");
        check(&format!("p2p-bulk-{profile}"), &text, 1, &mut totals);
    }
    let exchange = scenario_text("exchange.toml");
    for seed in 1..=3 {
        check("exchange", &exchange, seed, &mut totals);
    }
    check("default", &scenario_text("default.toml"), 2, &mut totals);
    eprintln!("compared with tshark: {totals:?}");
    assert!(totals.fast > 0, "no fast retransmission was exercised");
    assert!(totals.timeout > 0, "no timeout was exercised");
    assert!(totals.retransmissions > totals.fast + totals.timeout);
    assert!(totals.dup_acks > 0);
}
