//! A TCP transfer over a `slip` serial line: every byte arrives, and every
//! datagram takes exactly the time of its SLIP encoding at the line's
//! baud rate.

use std::io::Write;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use rtolab_sim::app::AppStats;
use rtolab_sim::link::LinkStats;
use rtolab_sim::node::{IfaceId, NodeId};
use rtolab_sim::run::build_simulator;
use rtolab_sim::{run_scenario, CaptureDirection, RunOptions, Scenario, SimTime};
use rtolab_wire::pcap::PcapWriter;
use rtolab_wire::slip;

const BYTES: u64 = 20_000;

/// A bulk sender on `a` and a sink on `b`, over a 115 200 baud 8N1 line.
const SCENARIO: &str = r#"
name = "slip-bulk"
duration = "10s"

[[host]]
name = "a"

[[host]]
name = "b"

[[link]]
name = "serial"
kind = "slip"
ends = [
  { host = "a", address = "10.0.0.1/24" },
  { host = "b", address = "10.0.0.2/24" },
]
baud = 115200

[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 5001

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "a"
peer = "10.0.0.2:5001"
bytes = 20_000
"#;

/// A `Write` the test reads back after the run.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The records of a nanosecond pcap: (time in ns, datagram).
fn records(pcap: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let word = |at: usize| u64::from(u32::from_le_bytes(pcap[at..at + 4].try_into().unwrap()));
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let time = word(at) * 1_000_000_000 + word(at + 4);
        let len = word(at + 8) as usize;
        at += 16;
        out.push((time, pcap[at..at + len].to_vec()));
        at += len;
    }
    out
}

#[test]
fn a_bulk_transfer_crosses_the_line_at_its_baud_rate() {
    let scenario = Scenario::from_toml_str(SCENARIO).unwrap();
    let report = run_scenario(&scenario, &RunOptions::default()).unwrap();
    let find = |name: &str| &report.apps.iter().find(|a| a.name == name).unwrap().stats;
    let AppStats::TcpBulk(bulk) = find("bulk") else {
        panic!("not a bulk sender")
    };
    let AppStats::TcpSink(sink) = find("sink") else {
        panic!("not a sink")
    };
    assert!(bulk.completed && bulk.failure.is_none(), "{bulk:?}");
    assert_eq!(sink.bytes_received, BYTES);
    assert_eq!(sink.bytes_corrupt, 0);

    let LinkStats::Slip(line) = &report.links[0].stats else {
        panic!("not a slip link")
    };
    let there = line.directions[0];
    // Nothing is lost or left behind on an idle line with a deep queue.
    assert_eq!(there.delivered_packets, there.sent_packets);
    assert_eq!(there.delivered_bytes, there.sent_bytes);
    assert_eq!(there.dropped_queue_full + there.dropped_random_loss, 0);
    // Counters are in IP bytes; the line also carried two `END`s per
    // frame and the escapes the pattern's 0xC0 and 0xDB bytes need.
    let framing = there.sent_bytes + 2 * there.sent_packets;
    assert!(line.line_bytes_sent[0] > framing, "{line:?}");
    assert_eq!(line.line_bytes_delivered, line.line_bytes_sent);
    // The time on the line is the line bytes' at 115 200 baud, 8N1, each
    // frame rounded up to the nanosecond.
    let exact = (line.line_bytes_sent[0] * 10 * 1_000_000_000).div_ceil(115_200);
    assert!(
        (exact..exact + there.sent_packets).contains(&there.busy_ns),
        "{line:?}"
    );
    // The transfer cannot beat the line (20 kB of data alone is 1.74 s of
    // it), and keeps it busy: the handshake and the last acknowledgement
    // add a few ms, acknowledgements cross in the other direction.
    let completion = bulk.completion_time_ns.unwrap();
    assert!(completion > there.busy_ns, "{completion} ns");
    assert!(completion < there.busy_ns + 50_000_000, "{completion} ns");
    // Below the line's 92 160 bit/s of bytes, by the headers and framing.
    let goodput = bulk.goodput_bps.unwrap();
    assert!((85_000.0..92_160.0).contains(&goodput), "{goodput} bit/s");
}

/// Each datagram from `a` arrives at `b` exactly the serial time of its
/// encoding after it started to leave (the line has no delay).
#[test]
fn each_datagram_takes_the_time_of_its_encoding() {
    let scenario = Scenario::from_toml_str(SCENARIO).unwrap();
    let mut sim = build_simulator(&scenario, 1).unwrap();
    let (sent, received) = (Shared::default(), Shared::default());
    for (node, direction, pcap) in [
        (0, CaptureDirection::Tx, &sent),
        (1, CaptureDirection::Rx, &received),
    ] {
        let iface = IfaceId {
            node: NodeId(node),
            index: 0,
        };
        let writer = PcapWriter::from_writer(Box::new(pcap.clone())).unwrap();
        sim.add_capture(iface, direction, "serial", writer);
    }
    sim.run_until(SimTime::ZERO + scenario.duration).unwrap();
    drop(sim);

    let sent = records(&sent.0.lock().unwrap());
    let received = records(&received.0.lock().unwrap());
    assert!(sent.len() > 15, "{} datagrams", sent.len());
    assert_eq!(sent.len(), received.len());
    let baud = NonZeroU32::new(115_200).unwrap();
    let mut escaped = 0;
    for ((start, datagram), (arrival, got)) in sent.iter().zip(&received) {
        assert_eq!(datagram, got);
        let line = slip::encoded_len(datagram);
        escaped += line - datagram.len() - 2;
        let serial = slip::serial_time_ns(line, baud, slip::BITS_PER_BYTE_8N1);
        assert_eq!(arrival - start, serial, "{} bytes", datagram.len());
    }
    assert!(escaped > 0, "the transfer carried nothing to escape");
}
