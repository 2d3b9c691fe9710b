//! smoltcp as a host: its IPv4 interface and TCP sockets driven on a
//! caller's clock, exchanging whole IP datagrams through queues.
//!
//! smoltcp is a TCP/IP stack written by others; running it beside our
//! engine checks both against an independent implementation. It is already
//! sans-IO at heart: an [`Interface`] reads and writes packets through a
//! [`Device`] and is told the time on every call. [`Host`] gives it a
//! device made of two queues, converts the caller's [`SimTime`] to
//! smoltcp's [`Instant`], and reports when it next needs to be polled, so a
//! simulator can schedule that poll as an event (deterministic) and an
//! emulator can wait for it on its real-time clock.
//!
//! Only IPv4 is wired up (smoltcp's `medium-ip` interface, no link layer).

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, IpEndpoint};

pub use smoltcp::socket::tcp::{RecvError, SendError, State};

/// Largest buffer smoltcp can advertise: a 16-bit window scaled by 14.
pub const MAX_BUFFER: usize = 1 << 30;
/// Smallest IPv4 MTU every link must carry (RFC 791).
pub const MIN_MTU: usize = 68;
/// Largest IPv4 datagram.
pub const MAX_MTU: usize = 65_535;
/// Longest delayed-ACK timer RFC 9293 §3.8.6.3 allows (it must be under
/// 0.5 s).
pub const MAX_ACK_DELAY: SimDuration = SimDuration::from_millis(500);

/// The TCP settings smoltcp lets a user change at run time. Its RTO
/// (Jacobson's estimator, 10 ms–10 s, doubled per timeout), TIME-WAIT
/// (10 s), congestion control (none) and lack of SACK are fixed by its
/// source; keep-alive stays off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Receive buffer in bytes: the largest window it advertises (scaled
    /// when over 65535).
    pub recv_buffer: usize,
    /// Send buffer in bytes.
    pub send_buffer: usize,
    /// IP MTU of its interface; its MSS is this minus 40.
    pub mtu: usize,
    /// Whether Nagle's algorithm holds back small segments.
    pub nagle: bool,
    /// Delayed-ACK timer; zero acknowledges every segment at once.
    #[serde(with = "millis")]
    pub ack_delay: SimDuration,
}

impl Default for Settings {
    /// smoltcp's own defaults for what it defaults (Nagle on, 10 ms ACK
    /// delay), and buffers and MTU of an Ethernet-sized small host.
    fn default() -> Self {
        Settings {
            recv_buffer: 8192,
            send_buffer: 8192,
            mtu: 1500,
            nagle: true,
            ack_delay: SimDuration::from_millis(10),
        }
    }
}

/// Durations as whole milliseconds in scenario files.
mod millis {
    use rtolab_time::SimDuration;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &SimDuration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SimDuration, D::Error> {
        u64::deserialize(d).map(SimDuration::from_millis)
    }
}

/// A setting smoltcp cannot take, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A buffer is empty or larger than a scaled window can cover.
    #[error("{field} must be between 1 and {MAX_BUFFER} bytes, not {value}")]
    Buffer {
        /// `recv_buffer` or `send_buffer`.
        field: &'static str,
        /// The value given.
        value: usize,
    },
    /// The MTU is outside what IPv4 allows.
    #[error("mtu must be between {MIN_MTU} and {MAX_MTU} bytes, not {0}")]
    Mtu(usize),
    /// The ACK delay is longer than TCP allows.
    #[error("ack_delay must be at most 500 ms, not {0} ms")]
    AckDelay(u64),
}

impl Settings {
    /// Checks every field against what smoltcp and TCP accept.
    pub fn validate(&self) -> Result<(), SettingsError> {
        for (field, value) in [
            ("recv_buffer", self.recv_buffer),
            ("send_buffer", self.send_buffer),
        ] {
            if value == 0 || value > MAX_BUFFER {
                return Err(SettingsError::Buffer { field, value });
            }
        }
        if !(MIN_MTU..=MAX_MTU).contains(&self.mtu) {
            return Err(SettingsError::Mtu(self.mtu));
        }
        if self.ack_delay > MAX_ACK_DELAY {
            return Err(SettingsError::AckDelay(self.ack_delay.as_millis()));
        }
        Ok(())
    }

    /// The MSS smoltcp advertises: the MTU less the IPv4 and TCP headers.
    pub fn mss(&self) -> usize {
        self.mtu - 40
    }
}

/// A socket call smoltcp refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SocketError {
    /// `listen` failed (port 0, or the socket was not closed).
    #[error("smoltcp cannot listen on port {0}")]
    Listen(u16),
    /// `connect` failed (no route, unspecified address, port in use...).
    #[error("smoltcp cannot connect to {remote}: {reason}")]
    Connect {
        /// The peer.
        remote: SocketAddrV4,
        /// smoltcp's reason.
        reason: String,
    },
}

/// What the host's interface carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostStats {
    /// Datagrams handed to smoltcp.
    pub datagrams_in: u64,
    /// Their bytes.
    pub bytes_in: u64,
    /// Datagrams smoltcp sent.
    pub datagrams_out: u64,
    /// Their bytes.
    pub bytes_out: u64,
}

/// The interface's device: datagrams waiting to be read by smoltcp, and
/// those it wrote, waiting for the caller.
struct Queues {
    inbound: VecDeque<Vec<u8>>,
    outbound: VecDeque<Vec<u8>>,
    mtu: usize,
}

struct RxToken(Vec<u8>);

struct TxToken<'q>(&'q mut VecDeque<Vec<u8>>);

impl phy::RxToken for RxToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut datagram = vec![0; len];
        let result = f(&mut datagram);
        self.0.push_back(datagram);
        result
    }
}

impl Device for Queues {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(RxToken, TxToken<'_>)> {
        let datagram = self.inbound.pop_front()?;
        Some((RxToken(datagram), TxToken(&mut self.outbound)))
    }

    fn transmit(&mut self, _now: Instant) -> Option<TxToken<'_>> {
        Some(TxToken(&mut self.outbound))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.mtu;
        caps
    }
}

/// smoltcp's clock from ours (microsecond resolution).
pub fn instant(t: SimTime) -> Instant {
    Instant::from_micros(i64::try_from(t.as_nanos() / 1000).unwrap_or(i64::MAX))
}

/// Our clock from smoltcp's.
pub fn sim_time(i: Instant) -> SimTime {
    SimTime::from_micros(u64::try_from(i.total_micros()).unwrap_or(0))
}

/// One smoltcp host: an IPv4 interface with one address and TCP sockets.
pub struct Host {
    iface: Interface,
    device: Queues,
    sockets: SocketSet<'static>,
    settings: Settings,
    address: Ipv4Addr,
    next_port: u16,
    stats: HostStats,
}

impl Host {
    /// A host with `address/prefix_len`, a default route through `gateway`
    /// if given, and ISNs and ephemeral ports drawn from `seed`.
    pub fn new(
        address: Ipv4Addr,
        prefix_len: u8,
        gateway: Option<Ipv4Addr>,
        settings: Settings,
        seed: u64,
        now: SimTime,
    ) -> Result<Host, SettingsError> {
        settings.validate()?;
        let mut device = Queues {
            inbound: VecDeque::new(),
            outbound: VecDeque::new(),
            mtu: settings.mtu,
        };
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = seed;
        let mut iface = Interface::new(config, &mut device, instant(now));
        iface.update_ip_addrs(|addrs| {
            // One address: the list has room for several.
            let _ = addrs.push(IpCidr::new(IpAddress::Ipv4(address), prefix_len));
        });
        if let Some(gateway) = gateway {
            // A fresh table has room for a default route.
            let _ = iface.routes_mut().add_default_ipv4_route(gateway);
        }
        Ok(Host {
            iface,
            device,
            sockets: SocketSet::new(Vec::new()),
            settings,
            address,
            // Ephemeral ports per RFC 6335, starting at a seeded offset.
            next_port: 49152 + (seed % 16384) as u16,
            stats: HostStats::default(),
        })
    }

    /// Its settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Its address.
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// What its interface carried so far.
    pub fn stats(&self) -> HostStats {
        self.stats
    }

    fn new_socket(&mut self) -> SocketHandle {
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; self.settings.recv_buffer]),
            tcp::SocketBuffer::new(vec![0; self.settings.send_buffer]),
        );
        socket.set_nagle_enabled(self.settings.nagle);
        socket.set_ack_delay(
            (!self.settings.ack_delay.is_zero())
                .then(|| Duration::from_micros(self.settings.ack_delay.as_micros())),
        );
        socket.set_keep_alive(None);
        // Never give up on an unanswered peer: the link decides.
        socket.set_timeout(None);
        self.sockets.add(socket)
    }

    /// A socket listening on `port`. smoltcp has no backlog: the socket
    /// itself becomes the connection, so a server wanting several needs
    /// several listening sockets.
    pub fn listen(&mut self, port: u16) -> Result<SocketHandle, SocketError> {
        let handle = self.new_socket();
        match self.socket(handle).listen(port) {
            Ok(()) => Ok(handle),
            Err(_) => {
                self.sockets.remove(handle);
                Err(SocketError::Listen(port))
            }
        }
    }

    /// A socket connecting to `remote` from an ephemeral port (`local_port`
    /// if given).
    pub fn connect(
        &mut self,
        remote: SocketAddrV4,
        local_port: Option<u16>,
    ) -> Result<SocketHandle, SocketError> {
        let port = local_port.unwrap_or_else(|| {
            let port = self.next_port;
            self.next_port = if port == u16::MAX { 49152 } else { port + 1 };
            port
        });
        let handle = self.new_socket();
        let socket = self.sockets.get_mut::<tcp::Socket>(handle);
        match socket.connect(self.iface.context(), remote, port) {
            Ok(()) => Ok(handle),
            Err(e) => {
                self.sockets.remove(handle);
                Err(SocketError::Connect {
                    remote,
                    reason: e.to_string(),
                })
            }
        }
    }

    /// A socket, to read, write, close or inspect.
    pub fn socket(&mut self, handle: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(handle)
    }

    /// Frees a socket (closed or not: an open one vanishes silently).
    pub fn remove(&mut self, handle: SocketHandle) {
        self.sockets.remove(handle);
    }

    /// Hands smoltcp a datagram that arrived; it is read on the next
    /// [`Host::poll`].
    pub fn receive(&mut self, datagram: &[u8]) {
        self.stats.datagrams_in += 1;
        self.stats.bytes_in += datagram.len() as u64;
        self.device.inbound.push_back(datagram.to_vec());
    }

    /// Lets smoltcp read what arrived, fire its timers and write what it
    /// has to send. Returns whether any socket may have changed.
    pub fn poll(&mut self, now: SimTime) -> bool {
        let result = self
            .iface
            .poll(instant(now), &mut self.device, &mut self.sockets);
        result == PollResult::SocketStateChanged
    }

    /// The next datagram smoltcp wrote, oldest first.
    pub fn transmit(&mut self) -> Option<Vec<u8>> {
        let datagram = self.device.outbound.pop_front()?;
        self.stats.datagrams_out += 1;
        self.stats.bytes_out += datagram.len() as u64;
        Some(datagram)
    }

    /// When smoltcp next needs [`Host::poll`] (never before `now`), or
    /// `None` while nothing is pending.
    pub fn poll_at(&mut self, now: SimTime) -> Option<SimTime> {
        if !self.device.inbound.is_empty() {
            return Some(now);
        }
        self.iface
            .poll_at(instant(now), &self.sockets)
            .map(|at| sim_time(at).max(now))
    }

    /// Where a socket is bound: (local, remote), once connected.
    pub fn endpoints(&mut self, handle: SocketHandle) -> Option<(SocketAddrV4, SocketAddrV4)> {
        let socket = self.socket(handle);
        // The interface has only an IPv4 address.
        let v4 = |e: IpEndpoint| match e.addr {
            IpAddress::Ipv4(a) => Some(SocketAddrV4::new(a, e.port)),
            IpAddress::Ipv6(_) => None,
        };
        Some((
            v4(socket.local_endpoint()?)?,
            v4(socket.remote_endpoint()?)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_convert_both_ways_at_microsecond_resolution() {
        let t = SimTime::from_nanos(1_234_567_890);
        assert_eq!(instant(t).total_micros(), 1_234_567);
        assert_eq!(sim_time(instant(t)), SimTime::from_micros(1_234_567));
    }

    #[test]
    fn settings_outside_what_smoltcp_takes_name_the_field() {
        let bad = |s: Settings| s.validate().unwrap_err().to_string();
        let base = Settings::default();
        assert!(base.validate().is_ok());
        assert!(bad(Settings {
            recv_buffer: 0,
            ..base
        })
        .starts_with("recv_buffer "));
        assert!(bad(Settings {
            send_buffer: MAX_BUFFER + 1,
            ..base
        })
        .starts_with("send_buffer "));
        assert!(bad(Settings { mtu: 40, ..base }).starts_with("mtu "));
        assert!(bad(Settings {
            ack_delay: SimDuration::from_millis(501),
            ..base
        })
        .starts_with("ack_delay "));
        assert_eq!(Settings { mtu: 296, ..base }.mss(), 256);
    }

    /// Two smoltcp hosts joined back to back: a handshake, a transfer and
    /// both closes, with the MSS of the smaller MTU.
    #[test]
    fn two_hosts_transfer_and_close() {
        let a_addr = Ipv4Addr::new(10, 0, 0, 1);
        let b_addr = Ipv4Addr::new(10, 0, 0, 2);
        let small = Settings {
            mtu: 296,
            ..Settings::default()
        };
        let mut a = Host::new(a_addr, 24, None, small, 1, SimTime::ZERO).unwrap();
        let mut b = Host::new(b_addr, 24, None, Settings::default(), 2, SimTime::ZERO).unwrap();
        let server = b.listen(80).unwrap();
        let client = a.connect(SocketAddrV4::new(b_addr, 80), None).unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let (mut sent, mut got) = (0, Vec::new());
        let mut now = SimTime::ZERO;
        let mut largest = 0;
        for _ in 0..10_000 {
            a.poll(now);
            b.poll(now);
            if a.socket(client).may_send() && sent < data.len() {
                sent += a.socket(client).send_slice(&data[sent..]).unwrap();
                if sent == data.len() {
                    a.socket(client).close();
                }
            }
            let mut buf = [0; 4096];
            while let Ok(n) = b.socket(server).recv_slice(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            if b.socket(server).state() == State::CloseWait {
                b.socket(server).close();
            }
            a.poll(now);
            b.poll(now);
            while let Some(d) = a.transmit() {
                largest = largest.max(d.len());
                b.receive(&d);
            }
            while let Some(d) = b.transmit() {
                a.receive(&d);
            }
            let done = b.socket(server).state() == State::Closed
                && matches!(a.socket(client).state(), State::TimeWait | State::Closed);
            if done {
                break;
            }
            let next = [a.poll_at(now), b.poll_at(now)].into_iter().flatten().min();
            now = next.unwrap_or(now).max(now + SimDuration::from_micros(1));
        }
        assert_eq!(got, data);
        assert_eq!(largest, 296);
        assert_eq!(b.socket(server).state(), State::Closed);
        assert!(a.stats().datagrams_out > 20_000 / 256);
    }
}
