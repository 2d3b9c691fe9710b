//! Decoding capture files into columns, with the same wire parser the
//! simulator uses, so that the Python tables and the Rust core agree on
//! every field; and the TCP segments `rtolab compare` reads. Files are
//! read by `rtolab_wire::capture` (pcap and pcapng, any link type that
//! carries IP).

use std::net::SocketAddr;
use std::path::Path;

use pcap_file::DataLink;
use pyo3::prelude::*;
use rtolab_wire::capture;
use rtolab_wire::ipv4::{self, Ipv4Repr};
use rtolab_wire::ipv6::{self, Ipv6Repr, Transport6};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::{TcpFlags, TcpRepr};
use serde::Serialize;

use crate::NativeCaptureError;

/// Why a capture could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct CaptureError {
    /// The file.
    pub path: String,
    /// What went wrong, on one line.
    pub message: String,
}

/// One column per field, one row per captured packet. Fields a packet does
/// not have (ports of an unknown protocol, TCP fields of a UDP datagram)
/// are `None`.
#[derive(Debug, Default, Serialize)]
pub struct CaptureColumns {
    /// Position of the packet in the file, from 0.
    pub index: Vec<u64>,
    /// Capture timestamp, ns since the start of the run.
    pub time_ns: Vec<u64>,
    /// Bytes captured (the whole IPv4 datagram).
    pub len: Vec<u32>,
    /// Source address.
    pub src: Vec<Option<String>>,
    /// Destination address.
    pub dst: Vec<Option<String>>,
    /// `tcp`, `udp` or the IP protocol number.
    pub protocol: Vec<Option<String>>,
    /// IPv4 identification.
    pub ip_id: Vec<Option<u16>>,
    /// Time to live.
    pub ttl: Vec<Option<u8>>,
    /// Transport source port.
    pub src_port: Vec<Option<u16>>,
    /// Transport destination port.
    pub dst_port: Vec<Option<u16>>,
    /// TCP sequence number.
    pub seq: Vec<Option<u32>>,
    /// TCP acknowledgment number.
    pub ack: Vec<Option<u32>>,
    /// TCP flags as `SYN,ACK`.
    pub flags: Vec<Option<String>>,
    /// TCP window field (unscaled).
    pub window: Vec<Option<u16>>,
    /// Transport payload bytes.
    pub payload_len: Vec<Option<u32>>,
    /// TCP sequence space: payload plus SYN and FIN.
    pub segment_len: Vec<Option<u32>>,
    /// MSS option.
    pub mss: Vec<Option<u16>>,
    /// Window-scale option.
    pub window_scale: Vec<Option<u8>>,
    /// SACK-permitted option present.
    pub sack_permitted: Vec<Option<bool>>,
    /// SACK blocks as `left-right` pairs separated by spaces.
    pub sack: Vec<Option<String>>,
    /// Timestamps option: TSval.
    pub tsval: Vec<Option<u32>>,
    /// Timestamps option: TSecr.
    pub tsecr: Vec<Option<u32>>,
    /// Timelost option: retransmission time lost, in 20 µs units.
    pub timelost: Vec<Option<u32>>,
    /// Why the packet did not parse (bad checksum, truncated...).
    pub error: Vec<Option<String>>,
}

/// The fields of one packet, before they are pushed as a row.
#[derive(Default)]
struct Row {
    src: Option<String>,
    dst: Option<String>,
    protocol: Option<String>,
    ip_id: Option<u16>,
    ttl: Option<u8>,
    src_port: Option<u16>,
    dst_port: Option<u16>,
    payload_len: Option<u32>,
    tcp: Option<TcpRow>,
    error: Option<String>,
}

struct TcpRow {
    seq: u32,
    ack: u32,
    flags: String,
    window: u16,
    segment_len: u32,
    mss: Option<u16>,
    window_scale: Option<u8>,
    sack_permitted: bool,
    sack: Option<String>,
    tsval: Option<u32>,
    tsecr: Option<u32>,
    timelost: Option<u32>,
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn tcp_row(tcp: &TcpRepr<'_>) -> TcpRow {
    let sack: Vec<String> = tcp
        .options
        .sack_blocks()
        .map(|b| format!("{}-{}", b.left.0, b.right.0))
        .collect();
    TcpRow {
        seq: tcp.seq.0,
        ack: tcp.ack.0,
        flags: tcp.flags.to_string(),
        window: tcp.window,
        segment_len: count(tcp.segment_len()),
        mss: tcp.options.mss,
        window_scale: tcp.options.window_scale,
        sack_permitted: tcp.options.sack_permitted,
        sack: (!sack.is_empty()).then(|| sack.join(" ")),
        tsval: tcp.options.timestamps.map(|t| t.tsval),
        tsecr: tcp.options.timestamps.map(|t| t.tsecr),
        timelost: tcp.options.timelost,
    }
}

/// One IPv6 datagram's row: `ip_id` stays empty (IPv6 has none), `ttl` is
/// the hop limit.
fn decode_v6(data: &[u8]) -> Row {
    let parsed = match ipv6::parse(data) {
        Ok(parsed) => parsed,
        Err(err) => {
            let mut row = Row {
                error: Some(err.to_string()),
                ..Row::default()
            };
            if let Ok((ip, _)) = Ipv6Repr::parse(data) {
                row.src = Some(ip.src.to_string());
                row.dst = Some(ip.dst.to_string());
                row.ttl = Some(ip.hop_limit);
            }
            return row;
        }
    };
    let mut row = Row {
        src: Some(parsed.ip.src.to_string()),
        dst: Some(parsed.ip.dst.to_string()),
        ttl: Some(parsed.ip.hop_limit),
        ..Row::default()
    };
    match parsed.transport {
        Transport6::Tcp(tcp) => {
            row.protocol = Some("tcp".into());
            row.src_port = Some(tcp.src_port);
            row.dst_port = Some(tcp.dst_port);
            row.payload_len = Some(count(tcp.payload.len()));
            row.tcp = Some(tcp_row(&tcp));
        }
        Transport6::Udp(udp) => {
            row.protocol = Some("udp".into());
            row.src_port = Some(udp.src_port);
            row.dst_port = Some(udp.dst_port);
            row.payload_len = Some(count(udp.payload.len()));
        }
        Transport6::Icmpv6(_) => {
            row.protocol = Some("icmpv6".into());
            row.payload_len = Some(count(data.len().saturating_sub(ipv6::HEADER_LEN)));
        }
        Transport6::Other {
            next_header,
            payload,
        } => {
            row.protocol = Some(next_header.to_string());
            row.payload_len = Some(count(payload.len()));
        }
    }
    row
}

fn decode(data: &[u8]) -> Row {
    // Raw captures carry both families; the version nibble tells them apart.
    if data.first().is_some_and(|b| b >> 4 == 6) {
        return decode_v6(data);
    }
    match packet::parse(data) {
        Ok(parsed) => {
            let mut row = Row {
                src: Some(parsed.ip.src.to_string()),
                dst: Some(parsed.ip.dst.to_string()),
                ip_id: Some(parsed.ip.ident),
                ttl: Some(parsed.ip.ttl),
                ..Row::default()
            };
            match parsed.transport {
                Transport::Tcp(tcp) => {
                    row.protocol = Some("tcp".into());
                    row.src_port = Some(tcp.src_port);
                    row.dst_port = Some(tcp.dst_port);
                    row.payload_len = Some(count(tcp.payload.len()));
                    row.tcp = Some(tcp_row(&tcp));
                }
                Transport::Udp(udp) => {
                    row.protocol = Some("udp".into());
                    row.src_port = Some(udp.src_port);
                    row.dst_port = Some(udp.dst_port);
                    row.payload_len = Some(count(udp.payload.len()));
                }
                Transport::Other { protocol, payload } => {
                    row.protocol = Some(protocol.to_string());
                    row.payload_len = Some(count(payload.len()));
                }
            }
            row
        }
        Err(err) => {
            // Keep whatever the IPv4 header still tells, so a corrupt packet
            // can be located in the table.
            let mut row = Row {
                error: Some(err.to_string()),
                ..Row::default()
            };
            if let Ok(view) = ipv4::Packet::new_checked(data) {
                if let Ok(ip) = Ipv4Repr::parse(&view) {
                    row.src = Some(ip.src.to_string());
                    row.dst = Some(ip.dst.to_string());
                    row.ip_id = Some(ip.ident);
                    row.ttl = Some(ip.ttl);
                }
            }
            row
        }
    }
}

impl CaptureColumns {
    fn push(&mut self, time_ns: u64, data: &[u8]) {
        self.push_row(time_ns, data, decode(data));
    }

    /// A row for a frame that holds no datagram, saying why.
    fn push_error(&mut self, time_ns: u64, frame: &[u8], why: &str) {
        let row = Row {
            error: Some(why.to_string()),
            ..Row::default()
        };
        self.push_row(time_ns, frame, row);
    }

    fn push_row(&mut self, time_ns: u64, data: &[u8], row: Row) {
        self.index.push(self.index.len() as u64);
        self.time_ns.push(time_ns);
        self.len.push(count(data.len()));
        self.src.push(row.src);
        self.dst.push(row.dst);
        self.protocol.push(row.protocol);
        self.ip_id.push(row.ip_id);
        self.ttl.push(row.ttl);
        self.src_port.push(row.src_port);
        self.dst_port.push(row.dst_port);
        self.payload_len.push(row.payload_len);
        self.error.push(row.error);
        let tcp = row.tcp;
        let tcp = tcp.as_ref();
        self.seq.push(tcp.map(|t| t.seq));
        self.ack.push(tcp.map(|t| t.ack));
        self.flags.push(tcp.map(|t| t.flags.clone()));
        self.window.push(tcp.map(|t| t.window));
        self.segment_len.push(tcp.map(|t| t.segment_len));
        self.mss.push(tcp.and_then(|t| t.mss));
        self.window_scale.push(tcp.and_then(|t| t.window_scale));
        self.sack_permitted.push(tcp.map(|t| t.sack_permitted));
        self.sack.push(tcp.and_then(|t| t.sack.clone()));
        self.tsval.push(tcp.and_then(|t| t.tsval));
        self.tsecr.push(tcp.and_then(|t| t.tsecr));
        self.timelost.push(tcp.and_then(|t| t.timelost));
    }
}

/// The bytes of the capture file at `path`, or an error naming it.
fn read_file(path: &Path) -> Result<Vec<u8>, CaptureError> {
    std::fs::read(path).map_err(|e| CaptureError {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// Calls `each` with the timestamp (ns), bytes and length on the wire of
/// every record of the pcap or pcapng file at `path`, whose link types must
/// pass `accepted` (`described` names them in the error otherwise).
fn for_each_record(
    path: &Path,
    accepted: impl Fn(u32) -> bool,
    described: &str,
    mut each: impl FnMut(u64, u32, &[u8], u32),
) -> Result<(), CaptureError> {
    let fail = |message: String| CaptureError {
        path: path.display().to_string(),
        message,
    };
    let data = read_file(path)?;
    let records = capture::records(&data).map_err(|e| fail(e.message))?;
    let refused = |link: u32| format!("link type {link} is not supported ({described} only)");
    // A pcap file says its link type once, even without records.
    if let Some(link) = records.pcap_link_type().filter(|&l| !accepted(l)) {
        return Err(fail(refused(link)));
    }
    for record in records {
        let record = record.map_err(|e| fail(e.message))?;
        if !accepted(record.link_type) {
            let number = record.number;
            return Err(fail(format!(
                "{} (packet {number})",
                refused(record.link_type)
            )));
        }
        let time_ns = u64::try_from(record.time_ns).unwrap_or(u64::MAX);
        each(time_ns, record.link_type, &record.data, record.orig_len);
    }
    Ok(())
}

/// Whether frames of `link` carry IP datagrams this reader can find.
fn carries_ip(link: u32) -> bool {
    capture::network_layer(link, &[]).is_ok()
}

/// Reads a capture of IP traffic into columns: what the simulator writes
/// at IP-level captures (raw IP), or a pcap or pcapng file of any link
/// type [`capture::network_layer`] reads. A frame without an IP datagram
/// (ARP) gets a row with the reason in `error`.
pub fn read_capture(path: &Path) -> Result<CaptureColumns, CaptureError> {
    let mut columns = CaptureColumns::default();
    for_each_record(
        path,
        carries_ip,
        "IP",
        |time_ns, link, frame, _| match capture::network_layer(link, frame) {
            Ok(Some(datagram)) => columns.push(time_ns, datagram),
            _ => columns.push_error(time_ns, frame, "no IP datagram in the frame"),
        },
    )?;
    Ok(columns)
}

/// The TCP segments of a capture as `rtolab compare` reads them, one tuple
/// per segment: `(packet number, seconds since the first packet, "source
/// address:port", "destination address:port", flags as "SYN,ACK", seq, ack
/// (with ACK only), payload bytes)`; with the number of packets that are
/// not TCP.
type Segment = (u64, f64, String, String, String, u32, Option<u32>, u32);

/// Reads the TCP segments of a pcap or pcapng capture held in `data` (see
/// [`Segment`]), at most `max_segments` of them. Checksums are not
/// verified (real captures hold offloaded ones) and a segment cut by the
/// snapshot length counts whole. The error names the packet or the byte
/// offset; the caller names the file.
pub fn tcp_segments(data: &[u8], max_segments: usize) -> Result<(Vec<Segment>, u64), String> {
    let mut segments = Vec::new();
    let mut ignored = 0u64;
    let mut origin = None;
    for record in capture::records(data).map_err(|e| e.message)? {
        let record = record.map_err(|e| e.message)?;
        let time_ns = i128::try_from(record.time_ns).unwrap_or(i128::MAX);
        // Times count from the file's first packet: seconds since 1970 as
        // floats would lose the sub-microsecond digits.
        let origin = *origin.get_or_insert(time_ns);
        let datagram = capture::network_layer(record.link_type, &record.data)
            .map_err(|e| format!("{e} (packet {})", record.number))?;
        let Some(tcp) = datagram.and_then(capture::tcp_header) else {
            ignored += 1;
            continue;
        };
        if segments.len() == max_segments {
            return Err(format!("more than {max_segments} TCP packets"));
        }
        let flags = if tcp.flags.is_empty() {
            String::new()
        } else {
            tcp.flags.to_string()
        };
        segments.push((
            record.number,
            (time_ns - origin) as f64 / 1e9,
            SocketAddr::new(tcp.src, tcp.src_port).to_string(),
            SocketAddr::new(tcp.dst, tcp.dst_port).to_string(),
            flags,
            tcp.seq.0,
            tcp.flags.contains(TcpFlags::ACK).then_some(tcp.ack.0),
            count(tcp.payload_len),
        ));
    }
    Ok((segments, ignored))
}

/// Reads the TCP segments of a capture held in `data` for `rtolab
/// compare`: a list of `(no, time_s, src, dst, flags, seq, ack, len)` and
/// the number of packets that are not TCP. Raises `NativeCaptureError`
/// with an empty path and the reason (the caller knows the file).
#[pyfunction]
pub fn read_tcp_segments(
    py: Python<'_>,
    data: &[u8],
    max_segments: usize,
) -> PyResult<(Vec<Segment>, u64)> {
    py.detach(|| tcp_segments(data, max_segments))
        .map_err(|message| NativeCaptureError::new_err((String::new(), message)))
}

/// The frames of an 802.11 capture (LINKTYPE_IEEE802_11_RADIOTAP, what a
/// wifi link's `[[capture]]` writes), one row each: what its analysis
/// needs without a dissector run over every frame.
#[derive(Debug, Default, Serialize)]
pub struct WlanColumns {
    /// Capture timestamp, ns since the start of the run.
    pub time_ns: Vec<u64>,
    /// The frame's length on the wire, radiotap header included.
    pub len: Vec<u32>,
    /// `data`, `ack`, `rts`, `cts`, or `None` for a frame of another
    /// type or one too short to say.
    pub kind: Vec<Option<&'static str>>,
    /// The Retry bit (`None` when the frame is too short to say).
    pub retry: Vec<Option<bool>>,
}

/// Reads an 802.11 radiotap capture into columns.
pub fn read_wlan_capture(path: &Path) -> Result<WlanColumns, CaptureError> {
    use rtolab_wire::ieee80211::{parse_radiotap, FrameKind};
    let mut columns = WlanColumns::default();
    for_each_record(
        path,
        |link| link == u32::from(DataLink::IEEE802_11_RADIOTAP),
        "802.11 with radiotap",
        |time_ns, _, data, len| {
            let frame = parse_radiotap(data);
            columns.time_ns.push(time_ns);
            columns.len.push(len);
            columns
                .kind
                .push(frame.and_then(|f| f.kind).map(|k| match k {
                    FrameKind::Data => "data",
                    FrameKind::Ack => "ack",
                    FrameKind::Rts => "rts",
                    FrameKind::Cts => "cts",
                }));
            columns.retry.push(frame.map(|f| f.retry));
        },
    )?;
    Ok(columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtolab_wire::ipv4::protocol;
    use rtolab_wire::pcap::PcapWriter;
    use rtolab_wire::tcp::{SackBlock, SeqNumber, TcpFlags, TcpOptions, Timestamps};
    use rtolab_wire::udp::UdpRepr;
    use rtolab_wire::Ipv4Addr;

    fn ip() -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: protocol::TCP,
            ttl: 64,
            ident: 7,
            dont_fragment: true,
            tos: 0,
            payload_len: 0,
        }
    }

    fn temp_file(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rtolab-py-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn tcp_and_udp_fields_round_trip_through_a_file() {
        let path = temp_file("two.pcap");
        let mut options = TcpOptions {
            timestamps: Some(Timestamps { tsval: 5, tsecr: 6 }),
            timelost: Some(3),
            ..TcpOptions::default()
        };
        options.sack_blocks[0] = Some(SackBlock {
            left: SeqNumber(100),
            right: SeqNumber(200),
        });
        let tcp = TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq: SeqNumber(1000),
            ack: SeqNumber(2000),
            flags: TcpFlags::ACK | TcpFlags::FIN,
            window: 512,
            urgent: 0,
            options,
            payload: b"hello",
        };
        let udp = UdpRepr {
            src_port: 5000,
            dst_port: 9000,
            payload: &[0u8; 30],
        };
        let mut writer = PcapWriter::create(&path).unwrap();
        let mut buf = Vec::new();
        packet::emit_tcp(&mut buf, &ip(), &tcp).unwrap();
        writer.write_packet(1_500, &buf).unwrap();
        packet::emit_udp(&mut buf, &ip(), &udp).unwrap();
        let mut corrupt = buf.clone();
        writer.write_packet(2_000_000_001, &buf).unwrap();
        corrupt[25] ^= 0xff; // inside the UDP header: the checksum no longer matches
        writer.write_packet(3_000_000_000, &corrupt).unwrap();
        writer.flush().unwrap();
        drop(writer);

        let cols = read_capture(&path).unwrap();
        assert_eq!(cols.index, [0, 1, 2]);
        assert_eq!(cols.time_ns, [1_500, 2_000_000_001, 3_000_000_000]);
        assert_eq!(cols.protocol[0].as_deref(), Some("tcp"));
        assert_eq!(cols.seq[0], Some(1000));
        assert_eq!(cols.ack[0], Some(2000));
        assert_eq!(cols.flags[0].as_deref(), Some("FIN,ACK"));
        assert_eq!(cols.payload_len[0], Some(5));
        assert_eq!(cols.segment_len[0], Some(6));
        assert_eq!(cols.sack[0].as_deref(), Some("100-200"));
        assert_eq!((cols.tsval[0], cols.tsecr[0]), (Some(5), Some(6)));
        assert_eq!(cols.timelost[0], Some(3));
        assert_eq!(cols.protocol[1].as_deref(), Some("udp"));
        assert_eq!(
            (cols.src_port[1], cols.dst_port[1]),
            (Some(5000), Some(9000))
        );
        assert_eq!(cols.payload_len[1], Some(30));
        assert_eq!(cols.seq[1], None);
        assert_eq!(cols.error[1], None);
        assert!(cols.error[2].as_deref().unwrap().contains("udp"));
        assert_eq!(cols.src[2].as_deref(), Some("10.0.0.1"));
        std::fs::remove_file(&path).unwrap();
    }

    /// An Ethernet pcap (microseconds) of `frames`, one per `(time_us, frame)`.
    fn ethernet_pcap(link: DataLink, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
        use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
        let header = PcapHeader {
            datalink: link,
            ..PcapHeader::default()
        };
        let mut writer = PcapWriter::with_header(Vec::new(), header).unwrap();
        for (time_us, frame) in frames {
            let time = std::time::Duration::from_micros(*time_us);
            let packet = PcapPacket::new(time, frame.len() as u32, frame);
            writer.write_packet(&packet).unwrap();
        }
        writer.into_writer()
    }

    fn in_ethernet(ethertype: [u8; 2], payload: &[u8]) -> Vec<u8> {
        [&[0u8; 12][..], &ethertype, payload].concat()
    }

    fn tcp_datagram(flags: TcpFlags, payload: &[u8]) -> Vec<u8> {
        let tcp = TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq: rtolab_wire::tcp::SeqNumber(1000),
            ack: rtolab_wire::tcp::SeqNumber(2000),
            flags,
            window: 512,
            urgent: 0,
            options: rtolab_wire::tcp::TcpOptions::default(),
            payload,
        };
        let mut buf = Vec::new();
        packet::emit_tcp(&mut buf, &ip(), &tcp).unwrap();
        buf
    }

    #[test]
    fn compare_reads_the_tcp_segments_of_an_ethernet_capture() {
        let ipv4 = [0x08, 0x00];
        let frames = [
            (
                1_000_000,
                in_ethernet(ipv4, &tcp_datagram(TcpFlags::SYN, b"")),
            ),
            (1_500_000, in_ethernet([0x08, 0x06], &[0; 28])), // ARP
            (
                2_000_001,
                in_ethernet(ipv4, &tcp_datagram(TcpFlags::ACK, b"hello")),
            ),
        ];
        let file = ethernet_pcap(DataLink::ETHERNET, &frames);
        let (segments, ignored) = tcp_segments(&file, 10).unwrap();
        let (src, dst) = ("10.0.0.1:40000".to_string(), "10.0.0.2:80".to_string());
        assert_eq!(
            segments,
            [
                (
                    1,
                    0.0,
                    src.clone(),
                    dst.clone(),
                    "SYN".into(),
                    1000,
                    None,
                    0
                ),
                (3, 1.000001, src, dst, "ACK".into(), 1000, Some(2000), 5),
            ]
        );
        assert_eq!(ignored, 1);
        let err = tcp_segments(&file, 1).unwrap_err();
        assert_eq!(err, "more than 1 TCP packets");
        let unknown = ethernet_pcap(DataLink::from(147), &frames);
        let err = tcp_segments(&unknown, 10).unwrap_err();
        assert_eq!(err, "link type 147 is not supported (packet 1)");
        let cut = tcp_segments(&file[..file.len() - 1], 10).unwrap_err();
        assert!(cut.starts_with("truncated: packet 3 (byte "), "{cut}");

        // The frames table reads the same file, the ARP frame as an error row.
        let path = temp_file("ethernet.pcap");
        std::fs::write(&path, &file).unwrap();
        let cols = read_capture(&path).unwrap();
        assert_eq!(cols.seq, [Some(1000), None, Some(1000)]);
        assert_eq!(
            cols.error[1].as_deref(),
            Some("no IP datagram in the frame")
        );
        assert_eq!(cols.len[2], 45);
        std::fs::write(&path, &unknown).unwrap();
        let err = read_capture(&path).unwrap_err();
        assert!(
            err.message
                .contains("link type 147 is not supported (IP only)"),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_pcap_is_an_error_naming_it() {
        let path = temp_file("junk.pcap");
        std::fs::write(&path, b"not a capture at all").unwrap();
        let err = read_capture(&path).unwrap_err();
        assert!(err.to_string().contains("junk.pcap"), "{err}");
        assert!(err.message.contains("not a pcap"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn wlan_captures_read_back_kind_length_and_retry() {
        use rtolab_wire::ieee80211::{emit_radiotap, station_addr, Ds, FrameHeader, FrameKind};
        use rtolab_wire::pcap::LinkType;
        let path = temp_file("wlan.pcap");
        let mut writer = PcapWriter::create_with(&path, LinkType::Ieee80211Radiotap).unwrap();
        let header = |kind, retry| FrameHeader {
            kind,
            receiver: station_addr(0),
            transmitter: station_addr(1),
            bssid: station_addr(0),
            ds: Ds::ToAp,
            duration_us: 0,
            seq: 1,
            retry,
        };
        let mut data = Vec::new();
        emit_radiotap(&mut data, &header(FrameKind::Data, true), 22, &[0x45; 40]);
        writer.write_packet(7, &data).unwrap();
        let mut ack = Vec::new();
        emit_radiotap(&mut ack, &header(FrameKind::Ack, false), 2, &[]);
        writer.write_packet(9, &ack).unwrap();
        writer.write_packet(11, &[0, 0]).unwrap();
        writer.flush().unwrap();
        drop(writer);
        let cols = read_wlan_capture(&path).unwrap();
        assert_eq!(cols.time_ns, [7, 9, 11]);
        assert_eq!(cols.len, [data.len() as u32, ack.len() as u32, 2]);
        assert_eq!(cols.kind, [Some("data"), Some("ack"), None]);
        assert_eq!(cols.retry, [Some(true), Some(false), None]);
        // An IP-level capture is not an 802.11 one.
        let ip_level = temp_file("ip.pcap");
        PcapWriter::create(&ip_level).unwrap().flush().unwrap();
        let e = read_wlan_capture(&ip_level).unwrap_err();
        assert!(
            e.message.contains("802.11 with radiotap only"),
            "{}",
            e.message
        );
    }
}
