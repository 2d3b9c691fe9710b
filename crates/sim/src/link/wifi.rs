//! `kind = "wifi"`: an IEEE 802.11 infrastructure BSS, an access point
//! and its stations on a shared radio medium, each with the DCF
//! ([`crate::mac::dcf`]).
//!
//! Port 0 is the access point, the stations follow in the order listed.
//! A station sends every datagram to the access point, as in a BSS (the
//! AP's host routes it on: to its wired side, or back into the BSS, a
//! second wireless hop); the access point sends to the station that owns
//! the datagram's destination address (IPv4 or IPv6). Stations get a
//! default route via the access point, for each address family both have.
//!
//! The link reads the datagrams it carries, so that each 802.11 interface
//! can account the time it loses to retransmissions in the TCP timelost
//! option (`timelost = true`, the default): when a data frame goes on air,
//! `rets` becomes what the packet brought plus the time since this
//! interface's first attempt, in 20 µs units, the TCP checksum updated
//! ([`rtolab_wire::timelost`]). A datagram without the option is carried
//! unchanged.
//!
//! ```toml
//! [[link]]
//! name = "wlan"
//! kind = "wifi"
//! ap = { host = "ap", address = "10.0.2.1/24", position = { x = 0.0, y = 0.0 } }
//! stations = [ { host = "sta", address = "10.0.2.2/24",
//!                mobility = { waypoints = [ { at = "0s", x = 1.0, y = 0.0 },
//!                                           { at = "150s", x = 300.0, y = 0.0 } ] } } ]
//! radio = { propagation = { kind = "shadowing", path_loss_exponent = 2.7 } }
//! mac = { data_rate = "11Mbps", basic_rate = "1Mbps", queue = 50 }
//! ```

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ieee80211::{self, station_addr, Ds, FrameHeader};
use rtolab_wire::pcap::LinkType;
use rtolab_wire::timelost::{read_rets, rets_on_attempt, write_rets};
use serde::{Deserialize, Serialize};

use super::{
    Datagram, Frame, LinkCheck, LinkModel, LinkOut, LinkOutput, LinkTrace, Medium, Port,
    ScenarioLink,
};
use crate::cidr::{Ipv4Cidr, Ipv6Cidr};
use crate::config::{Attachment, Duration, Rate, ScenarioError};
use crate::direction::CaptureDirection;
use crate::mac::dcf::{
    DcfEvent, DcfFrame, DcfSpec, DcfStats, FrameKind, PhyRate, StationId, TxRequest,
};
use crate::mac::wlan::{Wlan, WlanEvent};
use crate::pool::PacketId;
use crate::position::Position;
use crate::radio::{Mobility, Propagation, RadioSpec, RawMobility, Shadowing};
use crate::rng::{component_stream, SimRng};
use crate::trace::DropReason;

/// One interface of the BSS as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWifiMember {
    /// The interface's host. Required.
    host: String,
    /// IPv4 interface address with the prefix; `address`, `ipv6` or both. Default: none.
    address: Option<Ipv4Cidr>,
    /// IPv6 interface address with the prefix. Default: none.
    ipv6: Option<Ipv6Cidr>,
    /// Where it stands, `{ x, y }` in metres; not with `mobility`. Default: the host's
    /// position.
    position: Option<Position>,
    /// How it moves: `{ position }` or `{ waypoints = [ { at, x, y }, … ] }`. Default: none (it
    /// stays at `position`).
    mobility: Option<RawMobility>,
}

/// The `mac` table of a wifi link; all optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWifiMac {
    /// Which defaults the other fields take: `"802.11b"` or `"ns2"` (ns-2.35's `Mac/802_11`,
    /// the timelost study's MAC). Default: `"802.11b"`.
    preset: Option<String>,
    /// PHY rate of data frames (an 802.11b rate: 1, 2, 5.5 or 11 Mbit/s). Default: the preset's
    /// (`"11Mbps"` for 802.11b).
    data_rate: Option<Rate>,
    /// PHY rate of control frames and ACKs. Default: the preset's (`"1Mbps"` for 802.11b).
    basic_rate: Option<Rate>,
    /// Slot time, above 0. Default: the preset's (`"20us"` for 802.11b).
    slot: Option<Duration>,
    /// Short interframe space. Default: the preset's (`"10us"` for 802.11b).
    sifs: Option<Duration>,
    /// Smallest contention window, in slots. Default: the preset's (31 for 802.11b).
    cw_min: Option<u32>,
    /// Largest contention window, in slots. Default: the preset's (1023 for 802.11b).
    cw_max: Option<u32>,
    /// Attempts of a frame sent without RTS/CTS. Default: the preset's (7 for 802.11b).
    short_retry_limit: Option<u32>,
    /// Attempts of a frame sent after RTS/CTS. Default: the preset's (4 for 802.11b).
    long_retry_limit: Option<u32>,
    /// Frames longer than this go after an RTS/CTS exchange. Unit: bytes. Default: the preset's
    /// (2347 for 802.11b).
    rts_threshold: Option<u32>,
    /// Frames that may wait at each interface. Unit: packets. Default: the preset's (50 for
    /// 802.11b).
    queue: Option<usize>,
    /// Whether a station answers an RTS addressed to it while busy with an exchange of its own
    /// (awaiting a CTS or ACK, sending, about to respond, or after its CTS until the data it
    /// cleared would have ended): the standard's `true`, or ns-2.35's `false`. Default: the
    /// preset's (`true` for 802.11b, `false` for ns2).
    answer_rts_when_busy: Option<bool>,
}

/// The `[[link]]` fields of a wifi BSS.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWifi {
    /// The access point: `{ host, address, ipv6, position, mobility }` (addresses with their
    /// prefix; `mobility` moves it along waypoints). Required.
    ap: Option<RawWifiMember>,
    /// The stations, each as `ap` is written. Required.
    stations: Option<Vec<RawWifiMember>>,
    /// The radio medium: propagation, reception and energy, as in a mesh's `radio` table.
    /// Default: ns-2's shadowing model (path loss exponent 2, 4 dB deviation).
    radio: Option<toml::Table>,
    /// The DCF's settings, each defaulting to its `preset`'s. Default: the 802.11b preset.
    mac: Option<RawWifiMac>,
    /// Whether each interface adds the time it lost to MAC retransmissions to the TCP timelost
    /// option of the datagrams it sends. Default: true.
    timelost: Option<bool>,
}

/// One interface of the BSS.
#[derive(Clone, Debug, PartialEq)]
pub struct WifiMember {
    /// Host name.
    pub host: String,
    /// IPv4 interface address.
    pub address: Option<Ipv4Cidr>,
    /// IPv6 interface address.
    pub ipv6: Option<Ipv6Cidr>,
    /// How its radio moves.
    pub mobility: Mobility,
}

/// `kind = "wifi"`: a [`WifiLink`].
#[derive(Clone, Debug, PartialEq)]
pub struct WifiSpec {
    /// The access point (port 0).
    pub ap: WifiMember,
    /// The stations (ports 1...).
    pub stations: Vec<WifiMember>,
    /// The radio medium (default: ns-2's shadowing model and defaults, the
    /// collision rule).
    pub radio: RadioSpec,
    /// The DCF's parameters.
    pub mac: DcfSpec,
    /// Whether interfaces account MAC retransmission time in the TCP
    /// timelost option.
    pub timelost: bool,
}

impl WifiSpec {
    fn members(&self) -> impl Iterator<Item = &WifiMember> {
        std::iter::once(&self.ap).chain(&self.stations)
    }
}

fn phy_rate(rate: Option<Rate>, default: PhyRate, path: String) -> Result<PhyRate, ScenarioError> {
    match rate {
        None => Ok(default),
        Some(Rate(bps)) => PhyRate::from_bps(bps).ok_or_else(|| {
            ScenarioError::new(
                path,
                format!("must be an 802.11b rate (1, 2, 5.5 or 11 Mbps), got {bps} bit/s"),
            )
        }),
    }
}

fn validate_mac(raw: RawWifiMac, cx: &LinkCheck<'_>) -> Result<DcfSpec, ScenarioError> {
    let at = |field: &str| cx.at(&format!("mac.{field}"));
    // The preset gives the defaults of the fields left out.
    let d = match raw.preset.as_deref() {
        None | Some("802.11b") => DcfSpec::default(),
        Some("ns2") => DcfSpec::ns2(),
        Some(other) => {
            return Err(ScenarioError::new(
                at("preset"),
                format!("must be \"802.11b\" or \"ns2\", got {other:?}"),
            ))
        }
    };
    let spec = DcfSpec {
        slot: raw.slot.map_or(d.slot, |v| v.0),
        sifs: raw.sifs.map_or(d.sifs, |v| v.0),
        cw_min: raw.cw_min.unwrap_or(d.cw_min),
        cw_max: raw.cw_max.unwrap_or(d.cw_max),
        short_retry_limit: raw.short_retry_limit.unwrap_or(d.short_retry_limit),
        long_retry_limit: raw.long_retry_limit.unwrap_or(d.long_retry_limit),
        rts_threshold: raw.rts_threshold.unwrap_or(d.rts_threshold),
        data_rate: phy_rate(raw.data_rate, d.data_rate, at("data_rate"))?,
        basic_rate: phy_rate(raw.basic_rate, d.basic_rate, at("basic_rate"))?,
        queue_limit: raw.queue.unwrap_or(d.queue_limit),
        answer_rts_when_busy: raw.answer_rts_when_busy.unwrap_or(d.answer_rts_when_busy),
    };
    // A zero slot would count backoffs without time passing.
    if spec.slot == SimDuration::ZERO {
        return Err(ScenarioError::new(at("slot"), "must be positive"));
    }
    // Windows are 2^k - 1 in the standard; doubling keeps that form.
    if !(spec.cw_min + 1).is_power_of_two() {
        return Err(ScenarioError::new(
            at("cw_min"),
            format!("must be one less than a power of two, got {}", spec.cw_min),
        ));
    }
    if !(spec.cw_max + 1).is_power_of_two() || spec.cw_max < spec.cw_min {
        return Err(ScenarioError::new(
            at("cw_max"),
            format!(
                "must be one less than a power of two and at least cw_min ({}), got {}",
                spec.cw_min, spec.cw_max
            ),
        ));
    }
    for (field, value) in [
        ("short_retry_limit", spec.short_retry_limit),
        ("long_retry_limit", spec.long_retry_limit),
    ] {
        if !(1..=255).contains(&value) {
            return Err(ScenarioError::new(
                at(field),
                format!("must be between 1 and 255, got {value}"),
            ));
        }
    }
    if spec.queue_limit == 0 {
        return Err(ScenarioError::new(at("queue"), "must be at least 1"));
    }
    Ok(spec)
}

fn validate_member(
    raw: &RawWifiMember,
    path: &str,
    cx: &mut LinkCheck<'_>,
) -> Result<WifiMember, ScenarioError> {
    cx.topology.host(&format!("{path}.host"), &raw.host)?;
    if cx.topology.is_bridge(&raw.host) {
        return Err(ScenarioError::new(
            format!("{path}.host"),
            format!(
                "{:?} is a bridge: it joins wired and nfc links only",
                raw.host
            ),
        ));
    }
    let mobility = match (&raw.mobility, raw.position) {
        (Some(_), Some(_)) => {
            return Err(ScenarioError::new(
                format!("{path}.mobility"),
                "not allowed together with position",
            ))
        }
        (Some(m), None) => Mobility::from_raw(m.clone(), &format!("{path}.mobility"))?,
        (None, position) => {
            let p = position
                .or(cx.topology.host_position(&raw.host))
                .ok_or_else(|| {
                    ScenarioError::new(
                        format!("{path}.position"),
                        format!(
                            "required, or mobility (host {:?} has no position either)",
                            raw.host
                        ),
                    )
                })?;
            crate::config::check_position(format!("{path}.position"), &p)?;
            Mobility::Static(p)
        }
    };
    if raw.address.is_none() && raw.ipv6.is_none() {
        return Err(ScenarioError::new(
            format!("{path}.address"),
            "required (or ipv6, or both)",
        ));
    }
    if let Some(address) = raw.address {
        cx.topology
            .assign(&format!("{path}.address"), &raw.host, cx.name, address)?;
    }
    if let Some(ipv6) = raw.ipv6 {
        cx.topology
            .assign_v6(&format!("{path}.ipv6"), &raw.host, cx.name, ipv6)?;
    }
    Ok(WifiMember {
        host: raw.host.clone(),
        address: raw.address,
        ipv6: raw.ipv6,
        mobility,
    })
}

impl ScenarioLink for WifiSpec {
    const KIND: &'static str = "wifi";
    // The emulator has no shared medium yet.
    const EMULATED: bool = false;
    type Raw = RawWifi;
    type Model = WifiLink<PacketId>;

    fn validate(raw: RawWifi, cx: &mut LinkCheck<'_>) -> Result<Self, ScenarioError> {
        let raw_ap = raw.ap.as_ref().ok_or_else(|| cx.required("ap"))?;
        let raw_stations = raw
            .stations
            .as_ref()
            .ok_or_else(|| cx.required("stations"))?;
        if raw_stations.is_empty() {
            return Err(ScenarioError::new(
                cx.at("stations"),
                "a BSS needs at least one station",
            ));
        }
        let ap = validate_member(raw_ap, &cx.at("ap"), cx)?;
        let mut stations = Vec::new();
        for (i, s) in raw_stations.iter().enumerate() {
            let path = cx.at(&format!("stations[{i}]"));
            if s.host == ap.host || raw_stations[..i].iter().any(|o| o.host == s.host) {
                return Err(ScenarioError::new(
                    format!("{path}.host"),
                    format!("host {:?} is already in this BSS", s.host),
                ));
            }
            stations.push(validate_member(s, &path, cx)?);
        }
        let radio = match raw.radio {
            Some(t) => RadioSpec::parse(t, &cx.at("radio"))?,
            None => RadioSpec {
                propagation: Propagation::Shadowing(Shadowing::default()),
                ..RadioSpec::default()
            },
        };
        let mac = validate_mac(raw.mac.unwrap_or_default(), cx)?;
        Ok(WifiSpec {
            ap,
            stations,
            radio,
            mac,
            timelost: raw.timelost.unwrap_or(true),
        })
    }

    fn attachments(&self) -> Vec<Attachment> {
        self.members()
            .map(|m| Attachment {
                host: m.host.clone(),
                address: m.address,
                ipv6: m.ipv6,
                position: Some(m.mobility.position_at(SimTime::ZERO)),
            })
            .collect()
    }

    fn rate_bps(&self) -> u64 {
        self.mac.data_rate.bps()
    }

    fn default_routes(&self) -> Vec<(Port, IpAddr)> {
        let mut routes = Vec::new();
        for (i, s) in self.stations.iter().enumerate() {
            let port = i as Port + 1;
            if let (Some(_), Some(ap)) = (s.address, self.ap.address) {
                routes.push((port, IpAddr::V4(ap.addr)));
            }
            if let (Some(_), Some(ap)) = (s.ipv6, self.ap.ipv6) {
                routes.push((port, IpAddr::V6(ap.addr)));
            }
        }
        routes
    }

    fn build(&self, mut rng: SimRng) -> WifiLink<PacketId> {
        WifiLink::new(self, rng.gen())
    }
}

/// Counters of one interface of a [`WifiLink`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WifiMemberStats {
    /// Its host.
    pub host: String,
    /// The DCF's counters.
    #[serde(flatten)]
    pub dcf: DcfStats,
    /// Frames for its radio lost to overlapping signals: destroyed while
    /// received, or arriving while another frame was on air or while it
    /// was itself sending (two stations that end their backoffs in the
    /// same slot do not hear each other).
    pub collisions: u64,
    /// Data frames whose timelost option it rewrote.
    pub timelost_rewrites: u64,
}

/// Counters of a [`WifiLink`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WifiStats {
    /// Frames put on air, every kind.
    pub frames: u64,
    /// Data frames sent again (Retry bit set).
    pub retries: u64,
    /// Packets dropped at the retry limit.
    pub drops: u64,
    /// Frames lost to overlapping signals, summed over the radios.
    pub collisions: u64,
    /// Per port, the access point first.
    pub members: Vec<WifiMemberStats>,
}

/// A datagram in the BSS: its bytes (rewritten on each attempt) and the
/// simulator's handle, given back when it leaves.
#[derive(Debug)]
struct InFlight<P> {
    frame: Frame<P>,
    bytes: Vec<u8>,
    /// The datagram's trace uid, given back with it when it arrives.
    uid: u64,
    /// `rets` as the packet brought it, read at the first attempt.
    arrived_rets: Option<u32>,
}

/// The BSS as a link model. See the [module documentation](self).
#[derive(Debug)]
pub struct WifiLink<P> {
    wlan: Wlan<u64>,
    addresses: Vec<Option<Ipv4Addr>>,
    addresses_v6: Vec<Option<Ipv6Addr>>,
    hosts: Vec<String>,
    timelost: bool,
    in_flight: BTreeMap<u64, InFlight<P>>,
    next_key: u64,
    events: Vec<WlanEvent<u64>>,
    frames: u64,
    rewrites: Vec<u64>,
    captures: bool,
}

impl<P: Copy> WifiLink<P> {
    /// The BSS of `spec`, its random draws seeded from `seed`.
    pub fn new(spec: &WifiSpec, seed: u64) -> Self {
        let mut wlan = Wlan::new(
            spec.radio.clone(),
            spec.mac,
            component_stream(seed, "wifi-medium"),
            component_stream(seed, "wifi-dcf"),
        );
        for m in spec.members() {
            wlan.add_station(m.mobility.clone());
        }
        let members = 1 + spec.stations.len();
        WifiLink {
            wlan,
            addresses: spec.members().map(|m| m.address.map(|a| a.addr)).collect(),
            addresses_v6: spec.members().map(|m| m.ipv6.map(|a| a.addr)).collect(),
            hosts: spec.members().map(|m| m.host.clone()).collect(),
            timelost: spec.timelost,
            in_flight: BTreeMap::new(),
            next_key: 0,
            events: Vec::new(),
            frames: 0,
            rewrites: vec![0; members],
            captures: false,
        }
    }

    /// `frame` as captures record it: radiotap, then the 802.11 MPDU, the
    /// datagram as it was on air at this attempt.
    fn captured(&self, frame: &DcfFrame<u64>) -> Vec<u8> {
        let header = FrameHeader {
            kind: frame.kind,
            receiver: station_addr(frame.dst),
            transmitter: station_addr(frame.src),
            bssid: station_addr(0),
            ds: if frame.src == 0 { Ds::FromAp } else { Ds::ToAp },
            duration_us: u16::try_from(frame.duration.as_micros()).unwrap_or(u16::MAX),
            seq: frame.seq,
            retry: frame.retry,
        };
        let payload = frame
            .payload
            .and_then(|key| self.in_flight.get(&key))
            .map_or(&[][..], |e| &e.bytes[..]);
        let mut out = Vec::with_capacity(64 + payload.len());
        ieee80211::emit_radiotap(&mut out, &header, frame.rate.radiotap_units(), payload);
        out
    }

    /// The port that receives what `from` sends to the destination of
    /// `datagram` (IPv4 or IPv6).
    fn receiver(&self, from: Port, datagram: &[u8]) -> Option<Port> {
        if from != 0 {
            return Some(0);
        }
        let station = match datagram.first().map(|b| b >> 4) {
            Some(4) => {
                let dst: [u8; 4] = datagram.get(16..20)?.try_into().ok()?;
                let dst = Some(Ipv4Addr::from(dst));
                self.addresses.iter().skip(1).position(|&a| a == dst)
            }
            Some(6) => {
                let dst: [u8; 16] = datagram.get(24..40)?.try_into().ok()?;
                let dst = Some(Ipv6Addr::from(dst));
                self.addresses_v6.iter().skip(1).position(|&a| a == dst)
            }
            _ => None,
        };
        station.map(|i| i as Port + 1)
    }

    /// The timelost accounting of one attempt (timelost spec §2): `rets`
    /// becomes what the packet brought plus this interface's time since
    /// its first attempt.
    fn stamp(&mut self, station: StationId, request: &TxRequest<u64>) {
        let key = match (&request.frame.kind, request.frame.payload) {
            (FrameKind::Data, Some(key)) if self.timelost => key,
            _ => return,
        };
        let Some(entry) = self.in_flight.get_mut(&key) else {
            return;
        };
        let arrived = *entry
            .arrived_rets
            .get_or_insert_with(|| read_rets(&entry.bytes).unwrap_or(0));
        let rets = rets_on_attempt(arrived, request.since_first_attempt.as_nanos());
        let before = read_rets(&entry.bytes);
        if write_rets(&mut entry.bytes, rets) && before != read_rets(&entry.bytes) {
            self.rewrites[usize::from(station)] += 1;
        }
    }

    fn drain(&mut self, out: &mut LinkOut<P>) {
        for event in std::mem::take(&mut self.events) {
            match event {
                WlanEvent::OnAir { station, request } => {
                    self.frames += 1;
                    self.stamp(station, &request);
                    if self.captures {
                        out.push(LinkOutput::Captured {
                            port: Port::from(station),
                            direction: CaptureDirection::Tx,
                            psdu: self.captured(&request.frame),
                        });
                    }
                }
                WlanEvent::Heard { station, frame } => {
                    if self.captures {
                        out.push(LinkOutput::Captured {
                            port: Port::from(station),
                            direction: CaptureDirection::Rx,
                            psdu: self.captured(&frame),
                        });
                    }
                }
                WlanEvent::Dcf { station, event } => {
                    let port = Port::from(station);
                    match event {
                        DcfEvent::Received { payload, .. } => {
                            if let Some(entry) = self.in_flight.get(&payload) {
                                out.push(LinkOutput::arrived(
                                    port,
                                    entry.bytes.clone(),
                                    Some(entry.uid),
                                ));
                            }
                        }
                        DcfEvent::Acked { payload, .. } => {
                            if let Some(entry) = self.in_flight.remove(&payload) {
                                out.push(LinkOutput::Consumed {
                                    port,
                                    frame: entry.frame,
                                });
                            }
                        }
                        DcfEvent::RetryLimit { payload, .. } => {
                            if let Some(entry) = self.in_flight.remove(&payload) {
                                out.push(LinkOutput::Dropped {
                                    port,
                                    frame: entry.frame,
                                    reason: DropReason::NoAck,
                                });
                            }
                        }
                        DcfEvent::QueueFull { payload } => {
                            if let Some(entry) = self.in_flight.remove(&payload) {
                                out.push(LinkOutput::Dropped {
                                    port,
                                    frame: entry.frame,
                                    reason: DropReason::QueueFull,
                                });
                            }
                        }
                        DcfEvent::Attempt { payload, attempt } => {
                            if let Some(entry) = self.in_flight.get(&payload) {
                                out.trace(|| LinkTrace::MacAttempt {
                                    port,
                                    frame: entry.frame,
                                    attempt,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
}

impl<P: Copy> LinkModel<P> for WifiLink<P> {
    type Stats = WifiStats;

    /// Without the datagram's bytes the link cannot carry a frame (the
    /// simulator always hands datagrams to a model that reads them).
    fn transmit(
        &mut self,
        _now: SimTime,
        from: Port,
        _to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    ) {
        out.push(LinkOutput::Dropped {
            port: from,
            frame,
            reason: DropReason::NeighbourUnknown,
        });
    }

    fn transmit_datagram(
        &mut self,
        now: SimTime,
        from: Port,
        frame: Frame<P>,
        datagram: Datagram<'_>,
        out: &mut LinkOut<P>,
    ) {
        let Some(to) = self.receiver(from, datagram.bytes) else {
            out.push(LinkOutput::Dropped {
                port: from,
                frame,
                reason: DropReason::NeighbourUnknown,
            });
            return;
        };
        let key = self.next_key;
        self.next_key += 1;
        self.in_flight.insert(
            key,
            InFlight {
                frame,
                bytes: datagram.bytes.to_vec(),
                uid: datagram.uid,
                arrived_rets: None,
            },
        );
        self.wlan.enqueue(
            now,
            from as StationId,
            to as StationId,
            key,
            frame.len,
            &mut self.events,
        );
        self.drain(out);
    }

    fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        self.wlan.handle_timeout(now, &mut self.events);
        self.drain(out);
    }

    fn poll_timeout(&self) -> Option<SimTime> {
        self.wlan.poll_timeout()
    }

    fn stats(&self, now: SimTime) -> WifiStats {
        let radios = self.wlan.medium().stats(now).radios;
        let members: Vec<WifiMemberStats> = self
            .wlan
            .stations()
            .iter()
            .zip(&radios)
            .enumerate()
            .map(|(i, (dcf, radio))| WifiMemberStats {
                host: self.hosts[i].clone(),
                dcf: dcf.stats(),
                collisions: radio.collisions + radio.missed_transmitting,
                timelost_rewrites: self.rewrites[i],
            })
            .collect();
        WifiStats {
            frames: self.frames,
            retries: members.iter().map(|m| m.dcf.retries).sum(),
            drops: members.iter().map(|m| m.dcf.dropped_retry_limit).sum(),
            collisions: members.iter().map(|m| m.collisions).sum(),
            members,
        }
    }

    fn max_ports(&self) -> Option<usize> {
        Some(self.addresses.len())
    }

    fn medium(&self) -> Medium {
        Medium::Ip
    }

    fn set_frame_captures(&mut self, on: bool) {
        self.captures = on;
    }

    fn capture_link_type(&self) -> LinkType {
        LinkType::Ieee80211Radiotap
    }
}
