//! Scenario files: TOML describing hosts, links, routes, captures and apps.
//!
//! ```toml
//! name = "p2p-cbr"
//! seed = 1                    # optional, default 1
//! duration = "10s"
//!
//! [[host]]
//! name = "a"
//! position = { x = 0, y = 0 } # optional, metres; used by broadcast links
//! profile = "lwip"            # optional TCP profile: lwip, uip, linux, rfc
//! [host.tcp]                  # optional overrides of any profile field
//! send_buffer = 8192
//!
//! [[link]]
//! name = "ab"
//! kind = "point-to-point"     # or "half-duplex" or "broadcast"
//! ends = [ { host = "a", address = "10.0.0.1/24" },
//!          { host = "b", address = "10.0.0.2/24" } ]
//! rate = "10Mbps"
//! delay = "5ms"
//! queue = 100                 # packets waiting per end, optional, default 100
//! loss = 0.01                 # optional, default 0
//!
//! [[host]]
//! name = "ptx"
//! bridge = true               # passes packets between its two links
//!                             # unchanged; its link ends take no address
//!
//! [[link]]
//! name = "nfc"
//! kind = "nfc"                # time-slotted NFC (bridge spec §1.1)
//! rate = "11.2kbps"           # or "24kbps"
//! ends = [ { host = "a", address = "10.0.0.1/24", sensing = true },
//!          { host = "ptx", sensing = true } ]   # sensing: optional, off
//! queue = 100                 # interface queue of sensing ends, optional
//! slot_phase = "3ms"          # optional; default drawn from the seed
//!
//! [[link]]
//! name = "air"
//! kind = "broadcast"
//! members = [ { host = "a", address = "10.1.0.1/24", position = { x = 0, y = 0 } } ]
//! rate = "250kbps"
//! tx_range = 50.0             # metres
//! interference_range = 100.0  # metres, at least tx_range
//! queue = 100                 # optional
//!
//! [[route]]
//! host = "a"
//! destination = "10.0.1.0/24" # or "default"
//! via = "10.0.0.2"
//!
//! [[capture]]
//! host = "a"
//! link = "ab"                 # or: interface = "10.0.0.1"
//! file = "a-ab.pcap"          # a plain file name in the output directory
//! direction = "both"          # or "tx" or "rx"; optional, default "both"
//!
//! [[app]]
//! kind = "cbr"
//! name = "video"              # optional, default "<kind><index>"
//! host = "a"
//! destination = "10.0.0.2:9000"
//! size = 1000                 # UDP payload bytes, 16..=65507
//! rate = "1Mbps"              # payload bit rate
//! start = "1s"                # optional, default 0s
//! stop = "9s"                 # optional, default: end of run
//! source_port = 5000          # optional, default 49152 + app index
//!
//! [[app]]
//! kind = "sink"
//! host = "b"
//! port = 9000
//!
//! [[app]]
//! kind = "tcp-sink"           # or "exchange-server": accepts TCP connections
//! host = "b"
//! port = 5001
//!
//! [[app]]
//! kind = "tcp-bulk"
//! host = "a"
//! peer = "10.0.0.2:5001"      # a tcp-sink
//! bytes = 1_000_000           # optional; without it, sends until stop
//! start = "1s"                # optional, default 0s
//! stop = "9s"                 # optional
//! profile = "linux"           # optional, default: the host's
//! [app.tcp]                   # optional overrides, merged onto the profile
//! mss = 536
//! rto = { initial = "3s" }    # merges into the profile's RTO policy; a
//!                             # different `policy` replaces it
//!
//! [[app]]
//! kind = "exchange"           # request/response, one connection each
//! host = "a"
//! peer = "10.0.0.2:80"        # an exchange-server
//! request = 200               # bytes, 8-byte header included
//! response = 4096             # bytes the server answers
//! count = 10                  # optional, default 1; one after the other
//! gap = "500ms"               # optional pause between exchanges
//! start = "100ms"             # optional
//!
//! [[app]]
//! kind = "message-series"
//! host = "a"
//! peer = "10.0.0.2:5001"      # a tcp-sink (an exchange-server with responses)
//! sizes = [100, 2000, 50]     # message sizes, sent in order
//! gaps = ["1s", "200ms"]      # pause after each message, used in turn
//! start = "0s"                # optional
//! responses = [10, 1500, 8]   # optional: each message is a request and
//!                             # asks the exchange-server for this answer
//! source_port = 49153         # optional local port (also for exchange)
//! connect_first = true        # optional (also for exchange): write only
//!                             # after the handshake, like a blocking
//!                             # socket client; default false
//! ```
//!
//! TCP apps use the app's `profile` (with its `[app.tcp]` overrides), or
//! else the host's (with `[host.tcp]`), or else `linux`. Overrides are
//! merged onto the named profile's own TOML form before it is read, so any
//! field of [`rtolab_tcp::Profile`] can be set and unknown ones are
//! rejected with their path (`app[2].tcp.rto.bogus: unknown field`).
//!
//! Quantities with units are strings: rates as in [`crate::units::parse_rate`]
//! (`"10Mbps"`, `"1.5 Mbit/s"`, `"250kbps"`), durations as in
//! [`crate::units::parse_duration`] (`"5ms"`, `"2s"`, `"250us"`). Distances
//! and positions are plain numbers in metres, loss a probability in [0, 1].
//!
//! Every table rejects unknown keys. Errors name the field:
//! `link[0].rate: must be positive, got "-5Mbps"`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;

use rtolab_tcp::Profile;
use rtolab_time::SimDuration;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::capture::CaptureDirection;
use crate::cidr::Ipv4Cidr;
use crate::link::Position;
use crate::units::{parse_duration, parse_rate};

/// Default seed when a scenario gives none.
pub const DEFAULT_SEED: u64 = 1;
/// Default queue capacity in packets.
pub const DEFAULT_QUEUE: usize = 100;
/// Largest UDP payload in an IPv4 datagram.
pub const MAX_UDP_PAYLOAD: usize = 65_507;
/// First default source port of CBR apps (the IANA dynamic range).
pub const DEFAULT_SOURCE_PORT_BASE: u16 = 49_152;

/// Why a scenario was rejected: the path of the offending field and what is
/// wrong with it. Displays on one line as `"{path}: {message}"`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ScenarioError {
    /// Where: `link[0].rate`, `host[1].name`, or a file path or `line L,
    /// column C` for errors that precede any field.
    pub path: String,
    /// What, on one line.
    pub message: String,
}

impl ScenarioError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        let message: String = message.into();
        ScenarioError {
            path: path.into(),
            message: one_line(&message),
        }
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

// ----- validated model -----

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Name, used in reports.
    pub name: String,
    /// Seed of the run's random streams.
    pub seed: u64,
    /// Simulated time to run.
    pub duration: SimDuration,
    /// Hosts, in file order (their index is the node id in traces).
    pub hosts: Vec<HostSpec>,
    /// Links, in file order.
    pub links: Vec<LinkSpec>,
    /// Static routes.
    pub routes: Vec<RouteSpec>,
    /// Captures.
    pub captures: Vec<CaptureSpec>,
    /// Apps, in file order.
    pub apps: Vec<AppSpec>,
}

/// A host (or router: every node forwards), or a link-layer bridge.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSpec {
    /// Whether it is a bridge between its two links (no address, no
    /// apps, no TCP).
    pub bridge: bool,
    /// Unique name.
    pub name: String,
    /// Position in metres, the default for its broadcast memberships.
    pub position: Option<Position>,
    /// The host's TCP profile (named profile with its overrides applied),
    /// when the host sets `profile` or `[host.tcp]`.
    pub tcp: Option<Profile>,
}

/// A link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// Unique name.
    pub name: String,
    /// Model and parameters.
    pub model: LinkModelSpec,
}

/// A link's model.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkModelSpec {
    /// Full-duplex point-to-point.
    PointToPoint(WiredSpec),
    /// Half-duplex point-to-point.
    HalfDuplex(WiredSpec),
    /// Shared broadcast medium.
    Broadcast(BroadcastSpec),
    /// Time-slotted NFC link.
    Nfc(NfcSpec),
}

/// Parameters of an NFC link.
#[derive(Clone, Debug, PartialEq)]
pub struct NfcSpec {
    /// The two ends.
    pub ends: [EndSpec; 2],
    /// Nominal rate: 11 200 or 24 000 bit/s.
    pub rate_bps: u64,
    /// Channel sensing at each end.
    pub sensing: [bool; 2],
    /// Packets the interface queue of a sensing end holds.
    pub queue: usize,
    /// Fixed slot phase, or `None` to draw it from the seed.
    pub slot_phase: Option<SimDuration>,
}

/// Parameters of a point-to-point or half-duplex link.
#[derive(Clone, Debug, PartialEq)]
pub struct WiredSpec {
    /// The two ends.
    pub ends: [EndSpec; 2],
    /// Bits per second.
    pub rate_bps: u64,
    /// Propagation delay.
    pub delay: SimDuration,
    /// Packets that may wait at each end.
    pub queue: usize,
    /// Loss probability.
    pub loss: f64,
}

/// One end of a wired link.
#[derive(Clone, Debug, PartialEq)]
pub struct EndSpec {
    /// Host name.
    pub host: String,
    /// Interface address; `None` for a bridge's port.
    pub address: Option<Ipv4Cidr>,
}

/// Parameters of a broadcast medium.
#[derive(Clone, Debug, PartialEq)]
pub struct BroadcastSpec {
    /// Attached interfaces.
    pub members: Vec<MemberSpec>,
    /// Bits per second.
    pub rate_bps: u64,
    /// Decoding range, metres.
    pub tx_range: f64,
    /// Interference range, metres.
    pub interference_range: f64,
    /// Packets that may wait at each member.
    pub queue: usize,
}

/// A member of a broadcast medium.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberSpec {
    /// Host name.
    pub host: String,
    /// Interface address.
    pub address: Ipv4Cidr,
    /// Position, metres (the host's if not given in the member).
    pub position: Position,
}

/// A static route.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteSpec {
    /// Host it is installed on.
    pub host: String,
    /// Destination prefix (`0.0.0.0/0` for "default").
    pub destination: Ipv4Cidr,
    /// Next-hop router.
    pub via: Ipv4Addr,
}

/// A capture point.
#[derive(Clone, Debug, PartialEq)]
pub struct CaptureSpec {
    /// Host whose interface is tapped.
    pub host: String,
    /// Link the tapped interface is attached to.
    pub link: String,
    /// File name in the output directory.
    pub file: String,
    /// Which packets.
    pub direction: CaptureDirection,
}

/// An app.
#[derive(Clone, Debug, PartialEq)]
pub struct AppSpec {
    /// Unique name.
    pub name: String,
    /// Host it runs on.
    pub host: String,
    /// What it is.
    pub kind: AppKindSpec,
    /// The TCP profile its connections use (TCP apps only), overrides
    /// applied.
    pub tcp: Option<Profile>,
}

/// An app's kind and parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum AppKindSpec {
    /// Constant-bit-rate UDP source.
    Cbr(CbrSpec),
    /// UDP sink.
    Sink {
        /// Port it listens on.
        port: u16,
    },
    /// TCP bulk sender.
    TcpBulk(TcpBulkSpec),
    /// TCP receiver that counts and checks bytes.
    TcpSink {
        /// Port it accepts connections on.
        port: u16,
    },
    /// TCP request/response client.
    Exchange(ExchangeSpec),
    /// TCP request/response server.
    ExchangeServer {
        /// Port it accepts connections on.
        port: u16,
    },
    /// TCP sender of a message series.
    MessageSeries(MessageSeriesSpec),
}

/// Parameters of a TCP bulk sender.
#[derive(Clone, Debug, PartialEq)]
pub struct TcpBulkSpec {
    /// The receiver's address and port.
    pub peer: SocketAddrV4,
    /// Bytes to send; `None` sends until `stop` (or the end of the run).
    pub bytes: Option<u64>,
    /// When to connect.
    pub start: SimDuration,
    /// When to stop sending and close.
    pub stop: Option<SimDuration>,
}

/// Parameters of a request/response client.
#[derive(Clone, Debug, PartialEq)]
pub struct ExchangeSpec {
    /// The server's address and port.
    pub peer: SocketAddrV4,
    /// Request bytes, its 8-byte header included.
    pub request: u32,
    /// Response bytes.
    pub response: u32,
    /// When the first exchange starts.
    pub start: SimDuration,
    /// Exchanges, one connection each, one after the other.
    pub count: u32,
    /// Pause between the end of one exchange and the start of the next.
    pub gap: SimDuration,
    /// Local port of the first connection.
    pub source_port: Option<u16>,
    /// Write the request only after the handshake.
    pub connect_first: bool,
}

/// Parameters of a message series.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageSeriesSpec {
    /// The receiver's address and port.
    pub peer: SocketAddrV4,
    /// Message sizes in bytes.
    pub sizes: Vec<u32>,
    /// Pauses between messages, used in turn.
    pub gaps: Vec<SimDuration>,
    /// When to connect and send the first message.
    pub start: SimDuration,
    /// Response sizes asked of an exchange server, one per message; empty
    /// for a tcp-sink peer.
    pub responses: Vec<u32>,
    /// Local port of the connection.
    pub source_port: Option<u16>,
    /// Write only after the handshake.
    pub connect_first: bool,
}

/// Parameters of a CBR source.
#[derive(Clone, Debug, PartialEq)]
pub struct CbrSpec {
    /// Destination address and port.
    pub destination: SocketAddrV4,
    /// UDP source port.
    pub source_port: u16,
    /// UDP payload bytes.
    pub size: usize,
    /// Payload bits per second.
    pub rate_bps: u64,
    /// When sending starts.
    pub start: SimDuration,
    /// When sending stops.
    pub stop: Option<SimDuration>,
}

/// A one-line overview of a scenario, for `validate` commands.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScenarioSummary {
    /// Scenario name.
    pub name: String,
    /// Seed.
    pub seed: u64,
    /// Simulated duration, seconds.
    pub duration_s: f64,
    /// Number of hosts.
    pub hosts: usize,
    /// Number of links.
    pub links: usize,
    /// Number of static routes.
    pub routes: usize,
    /// Number of captures.
    pub captures: usize,
    /// Number of apps.
    pub apps: usize,
}

impl Scenario {
    /// Counts of what the scenario holds.
    pub fn summary(&self) -> ScenarioSummary {
        ScenarioSummary {
            name: self.name.clone(),
            seed: self.seed,
            duration_s: self.duration.as_secs_f64(),
            hosts: self.hosts.len(),
            links: self.links.len(),
            routes: self.routes.len(),
            captures: self.captures.len(),
            apps: self.apps.len(),
        }
    }
}

// ----- raw file format -----

/// Deserializes any string, naming what was expected in type errors.
pub(crate) struct StrVisitor(pub(crate) &'static str);

impl Visitor<'_> for StrVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
}

/// A rate string, parsed on deserialization.
#[derive(Clone, Copy, Debug)]
struct Rate(u64);

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = d.deserialize_str(StrVisitor("a rate with a unit, like \"10Mbps\""))?;
        parse_rate(&text).map(Rate).map_err(de::Error::custom)
    }
}

/// A duration string, parsed on deserialization.
#[derive(Clone, Copy, Debug)]
struct Duration(SimDuration);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = d.deserialize_str(StrVisitor("a duration with a unit, like \"5ms\""))?;
        parse_duration(&text)
            .map(Duration)
            .map_err(de::Error::custom)
    }
}

/// `"default"` or a prefix.
#[derive(Clone, Copy, Debug)]
struct Destination(Ipv4Cidr);

impl<'de> Deserialize<'de> for Destination {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = d.deserialize_str(StrVisitor("\"default\" or a prefix like \"10.0.1.0/24\""))?;
        if text == "default" {
            return Ok(Destination(Ipv4Cidr::DEFAULT));
        }
        text.parse().map(Destination).map_err(de::Error::custom)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    seed: Option<u64>,
    duration: Duration,
    #[serde(default)]
    host: Vec<RawHost>,
    #[serde(default)]
    link: Vec<RawLink>,
    #[serde(default)]
    route: Vec<RawRoute>,
    #[serde(default)]
    capture: Vec<RawCapture>,
    #[serde(default)]
    app: Vec<RawApp>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: String,
    bridge: Option<bool>,
    position: Option<Position>,
    profile: Option<String>,
    tcp: Option<toml::Table>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum RawLinkKind {
    PointToPoint,
    HalfDuplex,
    Broadcast,
    Nfc,
}

impl RawLinkKind {
    fn describe(self) -> &'static str {
        match self {
            RawLinkKind::PointToPoint => "point-to-point",
            RawLinkKind::HalfDuplex => "half-duplex",
            RawLinkKind::Broadcast => "broadcast",
            RawLinkKind::Nfc => "nfc",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: String,
    kind: RawLinkKind,
    ends: Option<Vec<RawEnd>>,
    members: Option<Vec<RawMember>>,
    rate: Option<Rate>,
    delay: Option<Duration>,
    queue: Option<usize>,
    loss: Option<f64>,
    tx_range: Option<f64>,
    interference_range: Option<f64>,
    slot_phase: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnd {
    host: String,
    address: Option<Ipv4Cidr>,
    sensing: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMember {
    host: String,
    address: Ipv4Cidr,
    position: Option<Position>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    host: String,
    destination: Destination,
    via: Ipv4Addr,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapture {
    host: String,
    link: Option<String>,
    interface: Option<Ipv4Addr>,
    file: String,
    #[serde(default)]
    direction: CaptureDirection,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum RawAppKind {
    Cbr,
    Sink,
    TcpBulk,
    TcpSink,
    Exchange,
    ExchangeServer,
    MessageSeries,
}

impl RawAppKind {
    fn name(self) -> &'static str {
        match self {
            RawAppKind::Cbr => "cbr",
            RawAppKind::Sink => "sink",
            RawAppKind::TcpBulk => "tcp-bulk",
            RawAppKind::TcpSink => "tcp-sink",
            RawAppKind::Exchange => "exchange",
            RawAppKind::ExchangeServer => "exchange-server",
            RawAppKind::MessageSeries => "message-series",
        }
    }

    /// The optional fields an app of this kind takes (besides kind, name
    /// and host).
    fn fields(self) -> &'static [&'static str] {
        match self {
            RawAppKind::Cbr => &[
                "destination",
                "source_port",
                "size",
                "rate",
                "start",
                "stop",
            ],
            RawAppKind::Sink => &["port"],
            RawAppKind::TcpBulk => &["peer", "bytes", "start", "stop", "profile", "tcp"],
            RawAppKind::TcpSink | RawAppKind::ExchangeServer => &["port", "profile", "tcp"],
            RawAppKind::Exchange => &[
                "peer",
                "request",
                "response",
                "start",
                "count",
                "gap",
                "profile",
                "tcp",
                "source_port",
                "connect_first",
            ],
            RawAppKind::MessageSeries => &[
                "peer",
                "sizes",
                "gaps",
                "start",
                "profile",
                "tcp",
                "responses",
                "source_port",
                "connect_first",
            ],
        }
    }

    /// The listener kind a client of this kind connects to.
    fn server(self) -> Option<RawAppKind> {
        match self {
            RawAppKind::TcpBulk | RawAppKind::MessageSeries => Some(RawAppKind::TcpSink),
            RawAppKind::Exchange => Some(RawAppKind::ExchangeServer),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApp {
    kind: RawAppKind,
    name: Option<String>,
    host: String,
    destination: Option<SocketAddrV4>,
    source_port: Option<u16>,
    size: Option<usize>,
    rate: Option<Rate>,
    start: Option<Duration>,
    stop: Option<Duration>,
    port: Option<u16>,
    peer: Option<SocketAddrV4>,
    bytes: Option<u64>,
    request: Option<u32>,
    response: Option<u32>,
    count: Option<u32>,
    gap: Option<Duration>,
    sizes: Option<Vec<u32>>,
    gaps: Option<Vec<Duration>>,
    responses: Option<Vec<u32>>,
    connect_first: Option<bool>,
    profile: Option<String>,
    tcp: Option<toml::Table>,
}

impl RawApp {
    /// Which optional fields are set, by name.
    fn present(&self) -> [(&'static str, bool); 19] {
        [
            ("destination", self.destination.is_some()),
            ("source_port", self.source_port.is_some()),
            ("size", self.size.is_some()),
            ("rate", self.rate.is_some()),
            ("start", self.start.is_some()),
            ("stop", self.stop.is_some()),
            ("port", self.port.is_some()),
            ("peer", self.peer.is_some()),
            ("bytes", self.bytes.is_some()),
            ("request", self.request.is_some()),
            ("response", self.response.is_some()),
            ("count", self.count.is_some()),
            ("gap", self.gap.is_some()),
            ("sizes", self.sizes.is_some()),
            ("gaps", self.gaps.is_some()),
            ("responses", self.responses.is_some()),
            ("connect_first", self.connect_first.is_some()),
            ("profile", self.profile.is_some()),
            ("tcp", self.tcp.is_some()),
        ]
    }
}

// ----- loading -----

impl Scenario {
    /// Parses and validates a scenario.
    pub fn from_toml_str(text: &str) -> Result<Scenario, ScenarioError> {
        let deserializer = toml::Deserializer::new(text);
        let raw: RawScenario = serde_path_to_error::deserialize(deserializer)
            .map_err(|e| deserialize_error(e, text))?;
        validate(raw)
    }

    /// Reads, parses and validates a scenario file.
    pub fn from_path(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::new(path.display().to_string(), e.to_string()))?;
        Scenario::from_toml_str(&text)
    }
}

/// Turns a deserialization error into a one-line error with a field path.
fn deserialize_error(
    err: serde_path_to_error::Error<toml::de::Error>,
    text: &str,
) -> ScenarioError {
    let path = path_string(err.path());
    let inner = err.inner();
    let message = one_line(inner.message());
    if let Some(e) = field_error(&path, &message) {
        return e;
    }
    if path.is_empty() {
        // A syntax error: no field yet, so give the position instead.
        let location = inner
            .span()
            .map(|span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("line {line}, column {column}")
            })
            .unwrap_or_else(|| "scenario".to_string());
        return ScenarioError::new(location, message);
    }
    ScenarioError::new(path, message)
}

/// A field path from serde_path_to_error, written `app[0].tcp.rto`.
fn path_string(segments: &serde_path_to_error::Path) -> String {
    let mut path = String::new();
    for segment in segments.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => path.push_str(&format!("[{index}]")),
            serde_path_to_error::Segment::Map { key } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            serde_path_to_error::Segment::Enum { .. } => {}
            serde_path_to_error::Segment::Unknown => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push('?');
            }
        }
    }
    path
}

/// serde names the field inside the message of unknown- and missing-field
/// errors; moves it into the path so every error reads "<field path>:
/// <problem>". `None` for other errors.
fn field_error(path: &str, message: &str) -> Option<ScenarioError> {
    let mut path = path.to_string();
    for (prefix, replacement) in [
        ("unknown field `", "unknown field"),
        ("missing field `", "missing field"),
    ] {
        if let Some(rest) = message.strip_prefix(prefix) {
            if let Some((field, tail)) = rest.split_once('`') {
                let last = path.rsplit(['.', ']']).next().unwrap_or("");
                if last != field {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(field);
                }
                let tail = tail.trim_start_matches(',').trim();
                let message = if tail.is_empty() {
                    replacement.to_string()
                } else {
                    format!("{replacement} ({tail})")
                };
                return Some(ScenarioError::new(path, message));
            }
        }
    }
    None
}

/// TCP profile of hosts and apps that name none.
pub const DEFAULT_TCP_PROFILE: &str = "linux";

fn default_profile() -> Profile {
    Profile::linux()
}

fn named_profile(name: &str, path: String) -> Result<Profile, ScenarioError> {
    Profile::named(name).ok_or_else(|| {
        ScenarioError::new(
            path,
            format!(
                "unknown profile {name:?} (expected one of {})",
                Profile::NAMES.join(", ")
            ),
        )
    })
}

/// Applies a `tcp` override table to `base`: the table is merged onto the
/// profile's own TOML form and the result deserialised, so any profile
/// field can be overridden and unknown ones are rejected with their path
/// (`app[0].tcp.rto.bogus: unknown field (...)`).
fn apply_overrides(
    base: &Profile,
    overrides: &toml::Table,
    path: &str,
) -> Result<Profile, ScenarioError> {
    let mut table = match toml::Value::try_from(base) {
        Ok(toml::Value::Table(t)) => t,
        Ok(_) => return Err(ScenarioError::new(path, "profile is not a table")),
        Err(e) => return Err(ScenarioError::new(path, e.to_string())),
    };
    merge_table(&mut table, overrides);
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let inner = path_string(e.path());
        let full = if inner.is_empty() {
            path.to_string()
        } else {
            format!("{path}.{inner}")
        };
        let message = one_line(e.inner().message());
        field_error(&full, &message).unwrap_or_else(|| ScenarioError::new(full, message))
    })
}

/// Merges `overrides` into `base`, key by key; sub-tables merge when they
/// describe the same choice and replace it otherwise.
fn merge_table(base: &mut toml::Table, overrides: &toml::Table) {
    for (key, value) in overrides {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) if same_choice(b, o) => {
                merge_table(b, o);
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Whether an override continues the base's choice of a policy or variant.
/// Internally tagged choices (`rto`, `cc`, `ack`) name theirs in `policy`;
/// externally tagged ones (`rto_timer`, `initial_window`, `ack.timer`) are
/// one-key tables named after the variant. Plain structs always merge.
fn same_choice(base: &toml::Table, overrides: &toml::Table) -> bool {
    match (base.get("policy"), overrides.get("policy")) {
        (Some(b), Some(o)) => b == o,
        (Some(_), None) => true,
        _ if base.len() == 1 && overrides.len() == 1 => base.keys().eq(overrides.keys()),
        _ => true,
    }
}

/// Collects the validation context: which hosts exist, which addresses
/// are assigned where.
struct Checker {
    hosts: BTreeMap<String, usize>,
    /// Address → (host, link name, path of the field that assigned it).
    addresses: BTreeMap<Ipv4Addr, (String, String, String)>,
    /// (host, link) → interface address.
    attachments: Vec<(String, String, Ipv4Cidr)>,
    /// Bridge hosts.
    bridges: std::collections::BTreeSet<String>,
    /// (bridge, link) of every bridge port.
    ports: Vec<(String, String)>,
}

impl Checker {
    fn host(&self, path: &str, name: &str) -> Result<(), ScenarioError> {
        if self.hosts.contains_key(name) {
            Ok(())
        } else {
            Err(ScenarioError::new(path, format!("no host named {name:?}")))
        }
    }

    fn assign(
        &mut self,
        path: &str,
        host: &str,
        link: &str,
        address: Ipv4Cidr,
    ) -> Result<(), ScenarioError> {
        if let Some((_, _, first)) = self.addresses.get(&address.addr) {
            return Err(ScenarioError::new(
                path,
                format!("{} is already assigned at {first}", address.addr),
            ));
        }
        self.addresses.insert(
            address.addr,
            (host.to_string(), link.to_string(), path.to_string()),
        );
        self.attachments
            .push((host.to_string(), link.to_string(), address));
        Ok(())
    }
}

fn not_allowed<T>(value: &Option<T>, path: String, kind: &str) -> Result<(), ScenarioError> {
    match value {
        Some(_) => Err(ScenarioError::new(path, format!("not allowed for {kind}"))),
        None => Ok(()),
    }
}

fn required<T: Clone>(value: &Option<T>, path: String, kind: &str) -> Result<T, ScenarioError> {
    value
        .clone()
        .ok_or_else(|| ScenarioError::new(path, format!("required for {kind}")))
}

fn check_unique<'a>(
    names: impl Iterator<Item = &'a str>,
    path: impl Fn(usize) -> String,
    what: &str,
) -> Result<(), ScenarioError> {
    let mut seen = BTreeMap::new();
    for (i, name) in names.enumerate() {
        if name.is_empty() {
            return Err(ScenarioError::new(path(i), "must not be empty"));
        }
        if let Some(first) = seen.insert(name, i) {
            return Err(ScenarioError::new(
                path(i),
                format!("duplicate {what} name {name:?} (also at {})", path(first)),
            ));
        }
    }
    Ok(())
}

fn check_position(path: String, p: &Position) -> Result<(), ScenarioError> {
    if p.x.is_finite() && p.y.is_finite() {
        Ok(())
    } else {
        Err(ScenarioError::new(
            path,
            "coordinates must be finite numbers",
        ))
    }
}

fn validate(raw: RawScenario) -> Result<Scenario, ScenarioError> {
    if raw.name.trim().is_empty() {
        return Err(ScenarioError::new("name", "must not be empty"));
    }
    if raw.duration.0.is_zero() {
        return Err(ScenarioError::new("duration", "must be positive"));
    }
    check_unique(
        raw.host.iter().map(|h| h.name.as_str()),
        |i| format!("host[{i}].name"),
        "host",
    )?;
    check_unique(
        raw.link.iter().map(|l| l.name.as_str()),
        |i| format!("link[{i}].name"),
        "link",
    )?;
    let mut checker = Checker {
        hosts: raw
            .host
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.clone(), i))
            .collect(),
        addresses: BTreeMap::new(),
        attachments: Vec::new(),
        bridges: raw
            .host
            .iter()
            .filter(|h| h.bridge == Some(true))
            .map(|h| h.name.clone())
            .collect(),
        ports: Vec::new(),
    };

    let mut hosts = Vec::new();
    for (i, h) in raw.host.iter().enumerate() {
        if let Some(p) = &h.position {
            check_position(format!("host[{i}].position"), p)?;
        }
        let bridge = h.bridge.unwrap_or(false);
        if bridge {
            if h.profile.is_some() {
                return Err(ScenarioError::new(
                    format!("host[{i}].profile"),
                    "not allowed for a bridge (it runs no TCP)",
                ));
            }
            if h.tcp.is_some() {
                return Err(ScenarioError::new(
                    format!("host[{i}].tcp"),
                    "not allowed for a bridge (it runs no TCP)",
                ));
            }
        }
        let tcp = match (&h.profile, &h.tcp) {
            (None, None) => None,
            (name, overrides) => {
                let base = match name {
                    Some(name) => named_profile(name, format!("host[{i}].profile"))?,
                    None => default_profile(),
                };
                Some(match overrides {
                    Some(t) => apply_overrides(&base, t, &format!("host[{i}].tcp"))?,
                    None => base,
                })
            }
        };
        hosts.push(HostSpec {
            bridge,
            name: h.name.clone(),
            position: h.position,
            tcp,
        });
    }

    let mut links = Vec::new();
    for (i, l) in raw.link.iter().enumerate() {
        links.push(validate_link(&mut checker, &hosts, i, l)?);
    }

    for (i, h) in raw.host.iter().enumerate() {
        if !checker.bridges.contains(&h.name) {
            continue;
        }
        let ports = checker.ports.iter().filter(|(b, _)| *b == h.name).count();
        if ports != 2 {
            return Err(ScenarioError::new(
                format!("host[{i}].bridge"),
                format!("a bridge joins exactly 2 links, {:?} is on {ports}", h.name),
            ));
        }
    }

    let mut routes = Vec::new();
    for (i, r) in raw.route.iter().enumerate() {
        let at = |field: &str| format!("route[{i}].{field}");
        checker.host(&at("host"), &r.host)?;
        if checker.bridges.contains(&r.host) {
            return Err(ScenarioError::new(
                at("host"),
                format!("{:?} is a bridge: it does not route", r.host),
            ));
        }
        let on_subnet = checker
            .attachments
            .iter()
            .find(|(host, _, cidr)| *host == r.host && cidr.contains(r.via));
        let Some((_, link, _)) = on_subnet else {
            return Err(ScenarioError::new(
                at("via"),
                format!("{} is not on a subnet of host {:?}", r.via, r.host),
            ));
        };
        match checker.addresses.get(&r.via) {
            Some((owner, owner_link, _)) if owner_link == link && *owner != r.host => {}
            Some((owner, _, _)) if *owner == r.host => {
                return Err(ScenarioError::new(
                    at("via"),
                    format!("{} is an address of host {:?} itself", r.via, r.host),
                ))
            }
            _ => {
                return Err(ScenarioError::new(
                    at("via"),
                    format!(
                        "no neighbour of host {:?} on link {link:?} has address {}",
                        r.host, r.via
                    ),
                ))
            }
        }
        routes.push(RouteSpec {
            host: r.host.clone(),
            destination: r.destination.0,
            via: r.via,
        });
    }

    let mut captures = Vec::new();
    let mut files: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, c) in raw.capture.iter().enumerate() {
        let at = |field: &str| format!("capture[{i}].{field}");
        checker.host(&at("host"), &c.host)?;
        let link = match (&c.link, &c.interface) {
            (Some(link), None) => {
                if !raw.link.iter().any(|l| l.name == *link) {
                    return Err(ScenarioError::new(
                        at("link"),
                        format!("no link named {link:?}"),
                    ));
                }
                let attached = checker
                    .attachments
                    .iter()
                    .any(|(h, l, _)| *h == c.host && l == link)
                    || checker.ports.iter().any(|(h, l)| *h == c.host && l == link);
                if !attached {
                    return Err(ScenarioError::new(
                        at("link"),
                        format!("host {:?} is not attached to link {link:?}", c.host),
                    ));
                }
                link.clone()
            }
            (None, Some(addr)) => checker
                .attachments
                .iter()
                .find(|(h, _, cidr)| *h == c.host && cidr.addr == *addr)
                .map(|(_, l, _)| l.clone())
                .ok_or_else(|| {
                    ScenarioError::new(
                        at("interface"),
                        format!("host {:?} has no interface with address {addr}", c.host),
                    )
                })?,
            (Some(_), Some(_)) => {
                return Err(ScenarioError::new(
                    at("interface"),
                    "give either link or interface, not both",
                ))
            }
            (None, None) => {
                return Err(ScenarioError::new(
                    at("link"),
                    "missing field (or give interface)",
                ))
            }
        };
        let file = c.file.as_str();
        let plain = !file.is_empty()
            && !file.contains(['/', '\\'])
            && file != "."
            && file != ".."
            && file != TRACES_FILE
            && file != METRICS_FILE;
        if !plain {
            return Err(ScenarioError::new(
                at("file"),
                format!("must be a plain file name other than {TRACES_FILE} and {METRICS_FILE}, got {file:?}"),
            ));
        }
        if let Some(first) = files.insert(file, i) {
            return Err(ScenarioError::new(
                at("file"),
                format!("{file:?} is already written by capture[{first}]"),
            ));
        }
        captures.push(CaptureSpec {
            host: c.host.clone(),
            link,
            file: c.file.clone(),
            direction: c.direction,
        });
    }

    let mut apps = Vec::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut sink_ports: BTreeMap<(String, u16), usize> = BTreeMap::new();
    let mut tcp_ports: BTreeMap<(String, u16), usize> = BTreeMap::new();
    for (i, a) in raw.app.iter().enumerate() {
        let at = |field: &str| format!("app[{i}].{field}");
        checker.host(&at("host"), &a.host)?;
        if checker.bridges.contains(&a.host) {
            return Err(ScenarioError::new(
                at("host"),
                format!("{:?} is a bridge: it runs no apps", a.host),
            ));
        }
        let kind_name = a.kind.name();
        let what = format!("{kind_name} apps");
        let allowed = a.kind.fields();
        for (field, present) in a.present() {
            if present && !allowed.contains(&field) {
                return Err(ScenarioError::new(
                    at(field),
                    format!("not allowed for {what}"),
                ));
            }
        }
        let name = a.name.clone().unwrap_or_else(|| format!("{kind_name}{i}"));
        if name.is_empty() {
            return Err(ScenarioError::new(at("name"), "must not be empty"));
        }
        if let Some(first) = names.insert(name.clone(), i) {
            return Err(ScenarioError::new(
                at("name"),
                format!("duplicate app name {name:?} (also app[{first}])"),
            ));
        }
        let start = a.start.map_or(SimDuration::ZERO, |d| d.0);
        let stop = a.stop.map(|d| d.0);
        if stop.is_some_and(|stop| stop <= start) {
            return Err(ScenarioError::new(at("stop"), "must be after start"));
        }
        let peer = |checker: &Checker| -> Result<SocketAddrV4, ScenarioError> {
            let peer = required(&a.peer, at("peer"), &what)?;
            if !checker.addresses.contains_key(peer.ip()) {
                return Err(ScenarioError::new(
                    at("peer"),
                    format!("no interface has address {}", peer.ip()),
                ));
            }
            Ok(peer)
        };
        let mut listen = |port: u16| -> Result<u16, ScenarioError> {
            if let Some(first) = tcp_ports.insert((a.host.clone(), port), i) {
                return Err(ScenarioError::new(
                    at("port"),
                    format!(
                        "TCP port {port} on host {:?} is already used by app[{first}]",
                        a.host
                    ),
                ));
            }
            Ok(port)
        };
        let kind = match a.kind {
            RawAppKind::Cbr => {
                let destination = required(&a.destination, at("destination"), &what)?;
                if !checker.addresses.contains_key(destination.ip()) {
                    return Err(ScenarioError::new(
                        at("destination"),
                        format!("no interface has address {}", destination.ip()),
                    ));
                }
                let size = required(&a.size, at("size"), &what)?;
                if !(crate::app::PAYLOAD_HEADER_LEN..=MAX_UDP_PAYLOAD).contains(&size) {
                    return Err(ScenarioError::new(
                        at("size"),
                        format!(
                            "must be between {} and {MAX_UDP_PAYLOAD} bytes, got {size}",
                            crate::app::PAYLOAD_HEADER_LEN
                        ),
                    ));
                }
                let rate = required(&a.rate, at("rate"), &what)?;
                let source_port = a
                    .source_port
                    .unwrap_or(DEFAULT_SOURCE_PORT_BASE.saturating_add(i as u16));
                AppKindSpec::Cbr(CbrSpec {
                    destination,
                    source_port,
                    size,
                    rate_bps: rate.0,
                    start,
                    stop,
                })
            }
            RawAppKind::Sink => {
                let port = required(&a.port, at("port"), &what)?;
                if let Some(first) = sink_ports.insert((a.host.clone(), port), i) {
                    return Err(ScenarioError::new(
                        at("port"),
                        format!(
                            "port {port} on host {:?} is already used by app[{first}]",
                            a.host
                        ),
                    ));
                }
                AppKindSpec::Sink { port }
            }
            RawAppKind::TcpBulk => {
                let peer = peer(&checker)?;
                if a.bytes == Some(0) {
                    return Err(ScenarioError::new(at("bytes"), "must be positive"));
                }
                AppKindSpec::TcpBulk(TcpBulkSpec {
                    peer,
                    bytes: a.bytes,
                    start,
                    stop,
                })
            }
            RawAppKind::TcpSink => AppKindSpec::TcpSink {
                port: listen(required(&a.port, at("port"), &what)?)?,
            },
            RawAppKind::ExchangeServer => AppKindSpec::ExchangeServer {
                port: listen(required(&a.port, at("port"), &what)?)?,
            },
            RawAppKind::Exchange => {
                let peer = peer(&checker)?;
                let header = crate::app::REQUEST_HEADER_LEN as u32;
                let request = required(&a.request, at("request"), &what)?;
                if request < header {
                    return Err(ScenarioError::new(
                        at("request"),
                        format!(
                            "must be at least {header} bytes (the request header), got {request}"
                        ),
                    ));
                }
                let response = required(&a.response, at("response"), &what)?;
                if response == 0 {
                    return Err(ScenarioError::new(at("response"), "must be positive"));
                }
                let count = a.count.unwrap_or(1);
                if count == 0 {
                    return Err(ScenarioError::new(at("count"), "must be positive"));
                }
                AppKindSpec::Exchange(ExchangeSpec {
                    peer,
                    request,
                    response,
                    start,
                    count,
                    gap: a.gap.map_or(SimDuration::ZERO, |d| d.0),
                    source_port: a.source_port,
                    connect_first: a.connect_first.unwrap_or(false),
                })
            }
            RawAppKind::MessageSeries => {
                let peer = peer(&checker)?;
                let sizes = required(&a.sizes, at("sizes"), &what)?;
                if sizes.is_empty() {
                    return Err(ScenarioError::new(at("sizes"), "must not be empty"));
                }
                if let Some(k) = sizes.iter().position(|&s| s == 0) {
                    return Err(ScenarioError::new(
                        format!("app[{i}].sizes[{k}]"),
                        "must be positive",
                    ));
                }
                let responses = a.responses.clone().unwrap_or_default();
                if a.responses.is_some() {
                    if responses.len() != sizes.len() {
                        return Err(ScenarioError::new(
                            at("responses"),
                            format!(
                                "needs one size per message ({}), got {}",
                                sizes.len(),
                                responses.len()
                            ),
                        ));
                    }
                    let header = crate::app::REQUEST_HEADER_LEN as u32;
                    if let Some(k) = sizes.iter().position(|&s| s < header) {
                        return Err(ScenarioError::new(
                            format!("app[{i}].sizes[{k}]"),
                            format!("must be at least {header} bytes (the request header) with responses"),
                        ));
                    }
                }
                AppKindSpec::MessageSeries(MessageSeriesSpec {
                    peer,
                    sizes,
                    gaps: a
                        .gaps
                        .as_ref()
                        .map_or_else(Vec::new, |g| g.iter().map(|d| d.0).collect()),
                    start,
                    responses,
                    source_port: a.source_port,
                    connect_first: a.connect_first.unwrap_or(false),
                })
            }
        };
        let tcp = if allowed.contains(&"tcp") {
            let base = match &a.profile {
                Some(name) => named_profile(name, at("profile"))?,
                None => hosts
                    .iter()
                    .find(|h| h.name == a.host)
                    .and_then(|h| h.tcp.clone())
                    .unwrap_or_else(default_profile),
            };
            Some(match &a.tcp {
                Some(overrides) => apply_overrides(&base, overrides, &at("tcp"))?,
                None => base,
            })
        } else {
            None
        };
        apps.push(AppSpec {
            name,
            host: a.host.clone(),
            kind,
            tcp,
        });
    }

    // Every TCP client needs a listener of the matching kind at its peer.
    for (i, a) in raw.app.iter().enumerate() {
        let server = match a.kind {
            RawAppKind::MessageSeries if a.responses.is_some() => Some(RawAppKind::ExchangeServer),
            kind => kind.server(),
        };
        let (Some(server), Some(peer)) = (server, a.peer) else {
            continue;
        };
        let Some((host, _, _)) = checker.addresses.get(peer.ip()) else {
            continue;
        };
        let found = raw
            .app
            .iter()
            .any(|b| b.kind == server && b.host == *host && b.port == Some(peer.port()));
        if !found {
            return Err(ScenarioError::new(
                format!("app[{i}].peer"),
                format!(
                    "no {} app listens on port {} of host {host:?}",
                    server.name(),
                    peer.port()
                ),
            ));
        }
    }

    Ok(Scenario {
        name: raw.name,
        seed: raw.seed.unwrap_or(DEFAULT_SEED),
        duration: raw.duration.0,
        hosts,
        links,
        routes,
        captures,
        apps,
    })
}

/// File name of the trace written next to the captures.
pub const TRACES_FILE: &str = "traces.jsonl";
/// File name of the metrics written next to the captures.
pub const METRICS_FILE: &str = "metrics.json";

fn validate_link(
    checker: &mut Checker,
    hosts: &[HostSpec],
    i: usize,
    l: &RawLink,
) -> Result<LinkSpec, ScenarioError> {
    let at = |field: &str| format!("link[{i}].{field}");
    let kind = l.kind.describe();
    let what = format!("{kind} links");
    let rate = required(&l.rate, at("rate"), &what)?.0;
    let queue = l.queue.unwrap_or(DEFAULT_QUEUE);
    let model = match l.kind {
        RawLinkKind::PointToPoint | RawLinkKind::HalfDuplex | RawLinkKind::Nfc => {
            not_allowed(&l.members, at("members"), &what)?;
            not_allowed(&l.tx_range, at("tx_range"), &what)?;
            not_allowed(&l.interference_range, at("interference_range"), &what)?;
            let nfc = l.kind == RawLinkKind::Nfc;
            if !nfc {
                not_allowed(&l.slot_phase, at("slot_phase"), &what)?;
            }
            let raw_ends = l
                .ends
                .as_ref()
                .ok_or_else(|| ScenarioError::new(at("ends"), format!("required for {what}")))?;
            if raw_ends.len() != 2 {
                return Err(ScenarioError::new(
                    at("ends"),
                    format!("a {kind} link has exactly 2 ends, got {}", raw_ends.len()),
                ));
            }
            let mut ends = Vec::new();
            for (e, end) in raw_ends.iter().enumerate() {
                let end_at = |field: &str| format!("link[{i}].ends[{e}].{field}");
                checker.host(&end_at("host"), &end.host)?;
                if e == 1 && end.host == raw_ends[0].host {
                    return Err(ScenarioError::new(
                        end_at("host"),
                        format!("both ends are on host {:?}", end.host),
                    ));
                }
                if !nfc {
                    not_allowed(&end.sensing, end_at("sensing"), &what)?;
                }
                let bridge = checker.bridges.contains(&end.host);
                let address = match (bridge, end.address) {
                    (true, Some(_)) => {
                        return Err(ScenarioError::new(
                            end_at("address"),
                            format!(
                                "not allowed: {:?} is a bridge, its ports have no address",
                                end.host
                            ),
                        ))
                    }
                    (true, None) => {
                        checker.ports.push((end.host.clone(), l.name.clone()));
                        None
                    }
                    (false, None) => {
                        return Err(ScenarioError::new(
                            end_at("address"),
                            format!("missing field (host {:?} is not a bridge)", end.host),
                        ))
                    }
                    (false, Some(address)) => {
                        checker.assign(&end_at("address"), &end.host, &l.name, address)?;
                        Some(address)
                    }
                };
                ends.push(EndSpec {
                    host: end.host.clone(),
                    address,
                });
            }
            if let (Some(a), Some(b)) = (raw_ends[0].address, raw_ends[1].address) {
                if a.network() != b.network() || a.prefix_len != b.prefix_len {
                    return Err(ScenarioError::new(
                        format!("link[{i}].ends[1].address"),
                        format!("{b} is not on the same subnet as the other end ({a})"),
                    ));
                }
            }
            let sensing = [
                raw_ends[0].sensing.unwrap_or(false),
                raw_ends[1].sensing.unwrap_or(false),
            ];
            let [a, b]: [EndSpec; 2] = ends.try_into().map_err(|_| {
                ScenarioError::new(at("ends"), format!("a {kind} link has exactly 2 ends"))
            })?;
            if nfc {
                not_allowed(&l.delay, at("delay"), &what)?;
                not_allowed(&l.loss, at("loss"), &what)?;
                if crate::link::NfcConfig::for_rate(rate).is_none() {
                    return Err(ScenarioError::new(
                        at("rate"),
                        format!("an nfc link runs at \"11.2kbps\" or \"24kbps\", got {rate} bit/s"),
                    ));
                }
                LinkModelSpec::Nfc(NfcSpec {
                    ends: [a, b],
                    rate_bps: rate,
                    sensing,
                    queue,
                    slot_phase: l.slot_phase.map(|d| d.0),
                })
            } else {
                let delay = required(&l.delay, at("delay"), &what)?.0;
                let loss = l.loss.unwrap_or(0.0);
                if !(0.0..=1.0).contains(&loss) {
                    return Err(ScenarioError::new(
                        at("loss"),
                        format!("must be between 0 and 1, got {loss}"),
                    ));
                }
                let wired = WiredSpec {
                    ends: [a, b],
                    rate_bps: rate,
                    delay,
                    queue,
                    loss,
                };
                if l.kind == RawLinkKind::PointToPoint {
                    LinkModelSpec::PointToPoint(wired)
                } else {
                    LinkModelSpec::HalfDuplex(wired)
                }
            }
        }
        RawLinkKind::Broadcast => {
            not_allowed(&l.ends, at("ends"), &what)?;
            not_allowed(&l.delay, at("delay"), &what)?;
            not_allowed(&l.loss, at("loss"), &what)?;
            let tx_range = required(&l.tx_range, at("tx_range"), &what)?;
            if !(tx_range.is_finite() && tx_range > 0.0) {
                return Err(ScenarioError::new(
                    at("tx_range"),
                    format!("must be a positive distance in metres, got {tx_range}"),
                ));
            }
            let interference_range =
                required(&l.interference_range, at("interference_range"), &what)?;
            if !(interference_range.is_finite() && interference_range >= tx_range) {
                return Err(ScenarioError::new(
                    at("interference_range"),
                    format!("must be at least tx_range ({tx_range}), got {interference_range}"),
                ));
            }
            let raw_members = l
                .members
                .as_ref()
                .ok_or_else(|| ScenarioError::new(at("members"), format!("required for {what}")))?;
            if raw_members.len() < 2 {
                return Err(ScenarioError::new(
                    at("members"),
                    format!(
                        "a broadcast link needs at least 2 members, got {}",
                        raw_members.len()
                    ),
                ));
            }
            let mut members = Vec::new();
            for (m, member) in raw_members.iter().enumerate() {
                let member_at = |field: &str| format!("link[{i}].members[{m}].{field}");
                checker.host(&member_at("host"), &member.host)?;
                if checker.bridges.contains(&member.host) {
                    return Err(ScenarioError::new(
                        member_at("host"),
                        format!(
                            "{:?} is a bridge: it joins wired and nfc links only",
                            member.host
                        ),
                    ));
                }
                if raw_members[..m]
                    .iter()
                    .any(|other| other.host == member.host)
                {
                    return Err(ScenarioError::new(
                        member_at("host"),
                        format!("host {:?} is already a member of this link", member.host),
                    ));
                }
                let host_position = hosts
                    .iter()
                    .find(|h| h.name == member.host)
                    .and_then(|h| h.position);
                let position = member.position.or(host_position).ok_or_else(|| {
                    ScenarioError::new(
                        member_at("position"),
                        format!("required (host {:?} has no position either)", member.host),
                    )
                })?;
                check_position(member_at("position"), &position)?;
                checker.assign(&member_at("address"), &member.host, &l.name, member.address)?;
                members.push(MemberSpec {
                    host: member.host.clone(),
                    address: member.address,
                    position,
                });
            }
            LinkModelSpec::Broadcast(BroadcastSpec {
                members,
                rate_bps: rate,
                tx_range,
                interference_range,
                queue,
            })
        }
    };
    Ok(LinkSpec {
        name: l.name.clone(),
        model,
    })
}
