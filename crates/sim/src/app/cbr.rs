//! Constant-bit-rate UDP source.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet;
use rtolab_wire::udp::UdpRepr;
use serde::Serialize;

use super::{App, AppCx, AppStats};
use crate::trace::AppEvent;

/// Bytes at the start of every payload: sequence number (u64, big endian)
/// then send time in ns (u64, big endian). The rest is zeros.
pub const PAYLOAD_HEADER_LEN: usize = 16;

/// Parameters of a [`CbrApp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CbrConfig {
    /// Where datagrams go.
    pub destination: SocketAddrV4,
    /// UDP source port.
    pub source_port: u16,
    /// UDP payload bytes per datagram, at least [`PAYLOAD_HEADER_LEN`].
    pub payload_size: usize,
    /// Payload bit rate: one datagram every `payload_size * 8 / rate`.
    pub rate_bps: u64,
    /// First datagram.
    pub start: SimTime,
    /// No datagram at or after this time (`None`: until the run ends).
    pub stop: Option<SimTime>,
}

/// Counters of a [`CbrApp`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CbrStats {
    /// Datagrams handed to the network.
    pub sent_packets: u64,
    /// Payload bytes handed to the network.
    pub sent_bytes: u64,
    /// Datagrams that could not be built (payload too large for IPv4).
    pub send_errors: u64,
}

/// Sends a datagram of `payload_size` bytes every interval from `start`
/// until `stop`, each carrying its sequence number and send time.
pub struct CbrApp {
    config: CbrConfig,
    interval: SimDuration,
    next_seq: u64,
    payload: Vec<u8>,
    stats: CbrStats,
}

impl CbrApp {
    /// A source with `config` (a payload shorter than the 16-byte header is
    /// padded up to it).
    pub fn new(config: CbrConfig) -> Self {
        let payload_size = config.payload_size.max(PAYLOAD_HEADER_LEN);
        CbrApp {
            config: CbrConfig {
                payload_size,
                ..config
            },
            interval: SimDuration::transmission(payload_size as u64, config.rate_bps),
            next_seq: 0,
            payload: vec![0; payload_size],
            stats: CbrStats::default(),
        }
    }

    /// Time between datagrams.
    pub fn interval(&self) -> SimDuration {
        self.interval
    }

    fn stopped(&self, now: SimTime) -> bool {
        self.config.stop.is_some_and(|stop| now >= stop)
    }

    fn send<C: AppCx>(&mut self, cx: &mut C) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.payload[..8].copy_from_slice(&seq.to_be_bytes());
        self.payload[8..16].copy_from_slice(&cx.now().as_nanos().to_be_bytes());
        let dst = *self.config.destination.ip();
        let src = cx.source_address_for(dst).unwrap_or(Ipv4Addr::UNSPECIFIED);
        let ip = Ipv4Repr {
            src,
            dst,
            protocol: protocol::UDP,
            ttl: 64,
            // The IPv4 ident only has to be unique per flow while packets
            // are in flight; the sequence number's low bits are.
            ident: seq as u16,
            dont_fragment: true,
            tos: 0,
            payload_len: 0,
        };
        let udp = UdpRepr {
            src_port: self.config.source_port,
            dst_port: self.config.destination.port(),
            payload: &self.payload,
        };
        match cx.send_with(|buf| packet::emit_udp(buf, &ip, &udp)) {
            Ok(()) => {
                self.stats.sent_packets += 1;
                self.stats.sent_bytes += self.payload.len() as u64;
                cx.trace(AppEvent::DatagramSent {
                    seq,
                    len: self.payload.len() as u32,
                });
            }
            Err(_) => self.stats.send_errors += 1,
        }
    }

    /// A snapshot of the app's counters.
    pub fn stats(&self) -> AppStats {
        AppStats::Cbr(self.stats)
    }
}

impl<C: AppCx> App<C> for CbrApp {
    fn on_start(&mut self, cx: &mut C) {
        cx.trace(AppEvent::Started);
        if !self.stopped(self.config.start) {
            cx.set_timer(self.config.start, 0);
        }
    }

    fn on_packet(&mut self, _cx: &mut C, _datagram: &[u8]) {}

    fn on_timer(&mut self, cx: &mut C, _token: u64) {
        let now = cx.now();
        if self.stopped(now) {
            cx.trace(AppEvent::Stopped);
            return;
        }
        self.send(cx);
        // Each send time is start + k * interval, so rounding never drifts.
        let next = self.config.start + self.interval * self.next_seq;
        if self.stopped(next) {
            cx.trace(AppEvent::Stopped);
        } else {
            cx.set_timer(next, 0);
        }
    }

    fn stats(&self) -> AppStats {
        CbrApp::stats(self)
    }
}

// ----- scenario side: `kind = "cbr"` -----

use super::registry::{AppCheck, ScenarioApp};
use crate::config::{required, Duration, Rate, ScenarioError};

/// Largest UDP payload in an IPv4 datagram.
pub const MAX_UDP_PAYLOAD: usize = 65_507;
/// Shortest time between two datagrams of one source: 100 ns, 10 M
/// datagrams per simulated second, what 100 Gbit/s Ethernet carries in
/// full-sized frames. A faster source only multiplies events.
pub const MIN_CBR_INTERVAL: SimDuration = SimDuration::from_nanos(100);
/// First default source port of CBR apps (the IANA dynamic range).
pub const DEFAULT_SOURCE_PORT_BASE: u16 = 49_152;

/// The `[[app]]` fields of a CBR source.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCbr {
    /// IPv4 address and port it sends to, like `"10.0.0.2:9000"`. Required.
    destination: Option<SocketAddr>,
    /// UDP source port. Default: 49152 plus the app's index.
    source_port: Option<u16>,
    /// UDP payload of each datagram, 16 to 65507. Unit: bytes. Required.
    size: Option<usize>,
    /// Payload bit rate, like `"1Mbps"`. Required.
    rate: Option<Rate>,
    /// When sending starts. Default: `"0s"`.
    start: Option<Duration>,
    /// When sending stops, after `start`. Default: the end of the run.
    stop: Option<Duration>,
}

/// `kind = "cbr"`: a constant-bit-rate UDP source ([`CbrApp`]).
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

/// The fastest rate of a source of `size`-byte datagrams, at one datagram
/// every [`MIN_CBR_INTERVAL`].
fn max_cbr_rate(size: usize) -> u64 {
    size as u64 * 8 * 1_000_000_000 / MIN_CBR_INTERVAL.as_nanos()
}

impl ScenarioApp for CbrSpec {
    const KIND: &'static str = "cbr";
    const TCP: bool = false;
    type Raw = RawCbr;
    type App = CbrApp;
    type Stats = CbrStats;

    fn validate(raw: RawCbr, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError> {
        let (start, stop) = cx.start_stop(raw.start.map(|d| d.0), raw.stop.map(|d| d.0))?;
        let destination = required(&raw.destination, cx.at("destination"), &cx.what)?;
        // The kernel's UDP path builds IPv4 datagrams only (see `AppCx`).
        let SocketAddr::V4(destination) = destination else {
            return Err(ScenarioError::new(
                cx.at("destination"),
                format!("{destination} is IPv6: cbr apps send UDP over IPv4 only"),
            ));
        };
        cx.remote("destination", destination.into())?;
        let size = required(&raw.size, cx.at("size"), &cx.what)?;
        if !(PAYLOAD_HEADER_LEN..=MAX_UDP_PAYLOAD).contains(&size) {
            return Err(ScenarioError::new(
                cx.at("size"),
                format!(
                    "must be between {PAYLOAD_HEADER_LEN} and {MAX_UDP_PAYLOAD} bytes, got {size}"
                ),
            ));
        }
        let rate = required(&raw.rate, cx.at("rate"), &cx.what)?;
        let interval = SimDuration::transmission(size as u64, rate.0);
        if interval < MIN_CBR_INTERVAL {
            return Err(ScenarioError::new(
                cx.at("rate"),
                format!(
                    "sends a datagram every {interval}, more often than once every \
                     {MIN_CBR_INTERVAL}: at most {} bit/s for {size}-byte datagrams",
                    max_cbr_rate(size)
                ),
            ));
        }
        let source_port = match raw.source_port {
            Some(port) => cx.port("source_port", port)?,
            None => DEFAULT_SOURCE_PORT_BASE.saturating_add(cx.index as u16),
        };
        Ok(CbrSpec {
            destination,
            source_port,
            size,
            rate_bps: rate.0,
            start,
            stop,
        })
    }

    fn is_client(&self) -> bool {
        // A source with no server: it sends until its stop time.
        true
    }

    fn build(&self) -> CbrApp {
        CbrApp::new(CbrConfig {
            destination: self.destination,
            source_port: self.source_port,
            payload_size: self.size,
            rate_bps: self.rate_bps,
            start: SimTime::ZERO + self.start,
            stop: self.stop.map(|stop| SimTime::ZERO + stop),
        })
    }
}
