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
//! profile = "lwip"            # optional TCP profile: lwip, uip, linux, rfc, ns2
//! [host.tcp]                  # optional overrides of any profile field
//! send_buffer = 8192
//!
//! [[host_group]]              # hosts n1 … n16 placed by a generator
//! prefix = "n"                # (see the `layout` module)
//! grid = { rows = 4, cols = 4, spacing = "40m" }
//!
//! [[link]]
//! name = "ab"
//! kind = "point-to-point"     # or "half-duplex" or "broadcast"
//! ends = [ { host = "a", address = "10.0.0.1/24" },
//!          { host = "b", address = "10.0.0.2/24" } ]
//!                             # an end may add or instead give an IPv6
//!                             # address: ipv6 = "fd00:1::1/64"
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
//! destination = "10.0.1.0/24" # or "default"; or IPv6: "fd00:2::/64"
//! via = "10.0.0.2"            # or an IPv6 neighbour: "fd00:1::2"
//!
//! [[capture]]
//! host = "a"
//! link = "ab"                 # or: interface = "10.0.0.1" (or IPv6)
//! file = "a-ab.pcap"          # a plain file name in the output directory
//! direction = "both"          # or "tx" or "rx"; optional, default "both"
//!
//! [[app]]
//! kind = "cbr"
//! name = "video"              # optional, default "<kind><index>"
//! host = "a"
//! destination = "10.0.0.2:9000" # IPv4 only
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
//! peer = "10.0.0.2:5001"      # a tcp-sink; or IPv6: "[fd00:2::2]:5001"
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
//!
//! [[app]]
//! kind = "tcp-on-off"         # bursts and silences over one connection
//! host = "a"
//! peer = "10.0.0.2:5001"      # a tcp-sink
//! on = "500ms"                # each burst queues data this long (as fast as
//!                             # TCP takes it), then drains
//! off = "2s"                  # idle time, connection open, from the burst's
//!                             # last byte being acknowledged to the next
//! bursts = 5                  # optional; without it, bursts until stop
//! start = "1s"                # optional, default 0s
//! stop = "30s"                # optional
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
//!
//! # Layout
//!
//! * `raw`: the file format's top-level tables as read;
//! * `validate`: hosts, routes and captures, and the dispatch of each
//!   `[[link]]` and `[[app]]` table to its kind, which validates itself
//!   (see [`crate::link::ScenarioLink`] and [`crate::app::ScenarioApp`]);
//! * `profiles`: named TCP profiles and their overrides;
//! * errors and values with units live in [`crate::config`], below every
//!   kind.

mod layout;
mod pieces;
mod profiles;
mod raw;
mod validate;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

use rtolab_tcp::Profile;
use rtolab_time::SimDuration;
use serde::Serialize;

use crate::capture::CaptureDirection;
use crate::cidr::{Ipv4Cidr, Ipv6Cidr};
use crate::position::Position;

pub use crate::app::{
    AppKindSpec, CbrSpec, ExchangeServerSpec, ExchangeSpec, MessageSeriesSpec, SinkSpec,
    TcpBulkSpec, TcpSinkSpec, APP_KINDS, DEFAULT_SOURCE_PORT_BASE, MAX_UDP_PAYLOAD,
    MIN_CBR_INTERVAL,
};
pub use crate::config::ScenarioError;
pub use crate::link::{
    BroadcastSpec, EndSpec, HalfDuplexSpec, LinkModelSpec, MemberSpec, NfcSpec, P2pSpec, WiredSpec,
    DEFAULT_QUEUE, LINK_KINDS,
};
pub use crate::middlebox::{MiddleboxSpec, MIDDLEBOX_KINDS};
pub use profiles::DEFAULT_TCP_PROFILE;
pub use validate::MAX_OVERLOAD;

/// Every registered kind a scenario file can name, of every family: links,
/// MACs, apps, middleboxes ([`crate::catalog`]).
pub fn kind_catalog() -> Vec<crate::catalog::KindInfo> {
    let mut all = crate::link::link_catalog();
    all.extend(crate::mac::mac_catalog());
    all.extend(crate::app::app_catalog());
    all.extend(crate::middlebox::middlebox_catalog());
    all
}

/// Default seed when a scenario gives none.
pub const DEFAULT_SEED: u64 = 1;
/// File name of the trace written next to the captures.
pub const TRACES_FILE: &str = "traces.jsonl";

/// The directory of a run's trace tables (one Parquet file per family).
pub const TRACES_DIR: &str = "traces";
/// File name of the metrics written next to the captures.
pub const METRICS_FILE: &str = "metrics.json";
/// Every name a run writes in its output directory besides its captures:
/// the core's traces and metrics, and what the Python package adds (the
/// scenario's copy, the metrics table, the figures and the report). No
/// capture may take one of them.
pub const OUTPUT_NAMES: [&str; 7] = [
    TRACES_FILE,
    TRACES_DIR,
    METRICS_FILE,
    "scenario.toml",
    "metrics.parquet",
    "plots",
    "report.html",
];

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
    /// Middleboxes, in file order (which is the order a node's middleboxes
    /// see a packet).
    pub middleboxes: Vec<MiddleboxEntry>,
}

/// A middlebox at a host.
#[derive(Clone, Debug, PartialEq)]
pub struct MiddleboxEntry {
    /// Unique name.
    pub name: String,
    /// Host it sits on.
    pub host: String,
    /// What it is.
    pub kind: MiddleboxSpec,
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
    /// With `stack = "smoltcp"`: smoltcp runs the host's TCP instead of our
    /// engine, with these settings (from `[host.tcp]`).
    pub smoltcp: Option<rtolab_smoltcp::Settings>,
}

/// A link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// Unique name.
    pub name: String,
    /// Model and parameters.
    pub model: LinkModelSpec,
}

/// A static route.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteSpec {
    /// Host it is installed on.
    pub host: String,
    /// Where it leads and through whom, in one address family.
    pub target: RouteTarget,
}

/// The destination and next hop of a [`RouteSpec`]: one enum rather than
/// two optional pairs, so a route can never mix families.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RouteTarget {
    /// An IPv4 route.
    V4 {
        /// Destination prefix (`0.0.0.0/0` for "default").
        destination: Ipv4Cidr,
        /// Next-hop router.
        via: Ipv4Addr,
    },
    /// An IPv6 route.
    V6 {
        /// Destination prefix (`::/0` for "default").
        destination: Ipv6Cidr,
        /// Next-hop router.
        via: Ipv6Addr,
    },
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
    /// applied. Boxed: most apps of a large scenario have none, and a
    /// profile is hundreds of bytes.
    pub tcp: Option<Box<Profile>>,
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
    /// Number of middleboxes (left out when there are none).
    #[serde(skip_serializing_if = "is_zero")]
    pub middleboxes: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
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
            middleboxes: self.middleboxes.len(),
        }
    }

    /// Parses and validates a scenario.
    pub fn from_toml_str(text: &str) -> Result<Scenario, ScenarioError> {
        let raw = parse_tables(text)?;
        validate::validate(raw)
    }

    /// Reads, parses and validates a scenario file.
    pub fn from_path(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::new(path.display().to_string(), e.to_string()))?;
        Scenario::from_toml_str(&text)
    }
}

/// Parses the file's syntax and top-level tables; a large file piece by
/// piece when its layout allows (see [`pieces`]).
fn parse_tables(text: &str) -> Result<raw::RawScenario, ScenarioError> {
    if text.len() > pieces::PIECE_BYTES {
        if let Some(raw) = pieces::parse(text, pieces::PIECE_BYTES) {
            return Ok(raw);
        }
    }
    raw::parse_whole(text)
}
