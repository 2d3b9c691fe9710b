//! lwIP hosts: the real lwIP 2.1, as Debian's `liblwip` builds it, running
//! the scenario's TCP apps.
//!
//! A small C program of ours (`hosts/lwip/lwip_host.c`, compiled by this
//! crate's build script and embedded in the emulator) links the library
//! and gives lwIP a network interface whose datagrams travel over one end
//! of a `SOCK_SEQPACKET` socket pair, one IPv4 datagram per message. The
//! emulator holds the other end and treats it like a Linux host's TUN
//! device: what the program sends enters the host's link, what the link
//! delivers is written to the socket. No namespace and no kernel TCP/IP
//! are involved, so lwIP's own timers, windows and retransmissions are all
//! that shape the host's packets.
//!
//! The program runs the apps with lwIP's raw API in a single-threaded main
//! loop (`sys_check_timeouts`), reports each app's counters as JSON lines
//! on its standard output when told to stop (SIGTERM), and announces when
//! its client apps are done.

use std::io::{self, BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::sys::memfd::{memfd_create, MFdFlags};
use nix::sys::signal::{kill, Signal};
use nix::sys::socket::{self, AddressFamily, MsgFlags, SockFlag, SockType};
use nix::unistd::Pid;
use rtolab_sim::scenario::{AppKindSpec, AppSpec};
use rtolab_sim::Ipv4Cidr;
use serde::Deserialize;

use crate::apps::AppResult;
use crate::lwip_options::{LwipOptions, SLOW_TICK};

/// The program, built by `build.rs` (empty when lwIP's headers were
/// missing at build time).
const PROGRAM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/rtolab-lwip-host"));

/// `ok`, or why `build.rs` could not build the program.
const BUILD_STATUS: &str = env!("RTOLAB_LWIP_BUILD");

/// How long a stopped program may take to report before it is killed.
const REPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a stopped program is checked for having exited.
const REPORT_POLL: Duration = Duration::from_millis(10);

/// Whether this emulator can run lwIP hosts; the reason when not.
pub fn available() -> Result<(), String> {
    if BUILD_STATUS == "ok" && !PROGRAM.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "lwIP hosts are unavailable in this build: {BUILD_STATUS}"
        ))
    }
}

/// The program's argument for one app.
fn app_argument(spec: &AppSpec) -> Option<String> {
    let name = spec.name.replace(':', "_");
    Some(match &spec.kind {
        AppKindSpec::ExchangeServer(e) => format!("{name}:exchange-server:{}", e.port),
        AppKindSpec::TcpSink(t) => format!("{name}:tcp-sink:{}", t.port),
        AppKindSpec::Exchange(e) => {
            let std::net::SocketAddr::V4(peer) = e.peer else {
                return None;
            };
            format!(
                "{name}:exchange:{}:{}:{}:{}:{}:{}:{}:{}:{}",
                peer.ip(),
                peer.port(),
                e.request,
                e.response,
                e.count,
                e.start.as_nanos(),
                e.gap.as_nanos(),
                e.source_port.unwrap_or(0),
                u8::from(e.connect_first),
            )
        }
        AppKindSpec::TcpBulk(b) => {
            let std::net::SocketAddr::V4(peer) = b.peer else {
                return None;
            };
            format!(
                "{name}:tcp-bulk:{}:{}:{}:{}:0",
                peer.ip(),
                peer.port(),
                b.bytes?,
                b.start.as_nanos(),
            )
        }
        _ => return None,
    })
}

/// One app's line of the program's report.
#[derive(Debug, Deserialize)]
struct AppLine {
    app: String,
    completed: bool,
    connections: u64,
    bytes_sent: u64,
    bytes_received: u64,
    bytes_corrupt: u64,
    exchanges_completed: u64,
    exchanges_failed: u64,
    latency_min_ns: Option<u64>,
    latency_max_ns: Option<u64>,
    latency_sum_ns: Option<u64>,
    latencies: Option<u64>,
    completion_ns: Option<u64>,
    failure: Option<String>,
}

impl AppLine {
    fn result(&self) -> AppResult {
        let ms = |ns: u64| ns as f64 / 1e6;
        AppResult {
            completed: self.completed,
            connections: self.connections,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            bytes_corrupt: self.bytes_corrupt,
            exchanges_completed: self.exchanges_completed,
            exchanges_failed: self.exchanges_failed,
            latency_min_ms: self.latency_min_ns.map(ms),
            latency_max_ms: self.latency_max_ns.map(ms),
            latency_mean_ms: match (self.latency_sum_ns, self.latencies) {
                (Some(sum), Some(n)) if n > 0 => Some(sum as f64 / n as f64 / 1e6),
                _ => None,
            },
            completion_time_ms: self.completion_ns.map(ms),
            failure: self.failure.clone(),
            ..AppResult::default()
        }
    }
}

/// What the program's output reader collected.
#[derive(Default)]
struct Output {
    clients_done: bool,
    apps: Vec<AppLine>,
    other: Vec<String>,
}

/// A running lwIP host program and the emulator's end of its socket.
pub struct LwipHost {
    name: String,
    socket: OwnedFd,
    child: Child,
    /// Names of its apps, in scenario order, with whether each is a client.
    apps: Vec<(String, bool)>,
    output: Arc<Mutex<Output>>,
    reader: Option<JoinHandle<()>>,
    exited: AtomicBool,
}

impl LwipHost {
    /// Starts the program for host `name` at `address`, with the host's
    /// default route (if any), options and apps.
    pub fn spawn(
        name: &str,
        address: Ipv4Cidr,
        gateway: Option<Ipv4Addr>,
        options: LwipOptions,
        apps: &[&AppSpec],
    ) -> io::Result<LwipHost> {
        available().map_err(io::Error::other)?;
        let (ours, theirs) = socket::socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )?;
        // The program's end must survive exec, and block there.
        fcntl(&theirs, FcntlArg::F_SETFD(FdFlag::empty()))?;
        fcntl(&theirs, FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()))?;
        // The program runs from memory: nothing to install beside the
        // emulator, nothing left behind.
        let program = memfd_create(c"rtolab-lwip-host", MFdFlags::MFD_CLOEXEC)?;
        {
            let mut file = std::fs::File::from(program.try_clone()?);
            file.write_all(PROGRAM)?;
        }
        let mut command = Command::new(format!("/proc/self/fd/{}", program.as_raw_fd()));
        command
            .arg("--fd")
            .arg(theirs.as_raw_fd().to_string())
            .arg("--address")
            .arg(address.to_string())
            .arg("--mtu")
            .arg(options.mtu().to_string());
        if let Some(gateway) = gateway {
            command.arg("--gateway").arg(gateway.to_string());
        }
        if let Some(rto) = options.initial_rto {
            let ticks = rto.as_nanos() / SLOW_TICK.as_nanos();
            command.arg("--initial-rto-ticks").arg(ticks.to_string());
        }
        let mut names = Vec::new();
        for spec in apps {
            let argument = app_argument(spec).ok_or_else(|| {
                io::Error::other(format!("app {}: not runnable on an lwIP host", spec.name))
            })?;
            command.arg("--app").arg(argument);
            names.push((spec.name.clone(), spec.kind.listen_port().is_none()));
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        drop(theirs);
        drop(program);
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        let output = Arc::new(Mutex::new(Output::default()));
        let shared = output.clone();
        let reader = std::thread::Builder::new()
            .name(format!("lwip-{name}"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let mut out = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    if line.contains("\"clients_done\"") {
                        out.clients_done = true;
                    } else if let Ok(app) = serde_json::from_str::<AppLine>(&line) {
                        out.apps.push(app);
                    } else {
                        out.other.push(line);
                    }
                }
            })?;
        Ok(LwipHost {
            name: name.to_string(),
            socket: ours,
            child,
            apps: names,
            output,
            reader: Some(reader),
            exited: AtomicBool::new(false),
        })
    }

    /// The program's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The host's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reads one datagram lwIP sent; `WouldBlock` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        match socket::recv(self.socket.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT) {
            // End of stream: the program is gone.
            Ok(0) if !buf.is_empty() => {
                self.exited.store(true, Ordering::SeqCst);
                Err(io::ErrorKind::WouldBlock.into())
            }
            Ok(n) => Ok(n),
            Err(e) => Err(e.into()),
        }
    }

    /// Hands lwIP one datagram.
    pub fn send(&self, datagram: &[u8]) -> io::Result<usize> {
        socket::send(
            self.socket.as_raw_fd(),
            datagram,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        )
        .map_err(io::Error::from)
    }

    /// Whether the host runs client apps (which finish by themselves).
    pub fn has_clients(&self) -> bool {
        self.apps.iter().any(|(_, client)| *client)
    }

    /// Whether every client app finished (or the program is gone).
    pub fn clients_done(&self) -> bool {
        self.exited.load(Ordering::SeqCst)
            || self
                .output
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clients_done
    }

    /// Stops the program and returns what each app did, by app name.
    pub fn finish(mut self) -> Vec<(String, AppResult)> {
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let mut waited = Duration::ZERO;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if waited < REPORT_TIMEOUT => {
                    std::thread::sleep(REPORT_POLL);
                    waited += REPORT_POLL;
                }
                _ => {
                    let _ = self.child.kill();
                    break self.child.wait().ok();
                }
            }
        };
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let out = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        self.apps
            .iter()
            .map(|(name, _)| {
                let key = name.replace(':', "_");
                let result = match out.apps.iter().find(|a| a.app == key) {
                    Some(line) => line.result(),
                    None => AppResult {
                        failure: Some(format!(
                            "the lwIP program reported nothing ({}{})",
                            status.map_or("no exit status".to_string(), |s| s.to_string()),
                            out.other
                                .last()
                                .map(|l| format!("; said: {l}"))
                                .unwrap_or_default()
                        )),
                        ..AppResult::default()
                    },
                };
                (name.clone(), result)
            })
            .collect()
    }
}

impl Drop for LwipHost {
    fn drop(&mut self) {
        // `finish` reaps the program; an early return must not leave it.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl AsFd for LwipHost {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{EmuScenario, HostKind};

    const BASE: &str = r#"
name = "t"
duration = "2s"

[[host]]
name = "a"
stack = "lwip"
lwip = { mss = 1024 }

[[host]]
name = "b"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" } ]
rate = "10Mbps"
delay = "1ms"

[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 5001

[[app]]
kind = "exchange-server"
name = "server"
host = "b"
port = 7891
"#;

    #[test]
    fn lwip_hosts_are_parsed_and_their_limits_named() {
        let emu = EmuScenario::from_toml_str(BASE).unwrap();
        assert_eq!(emu.kinds, [HostKind::Lwip, HostKind::Linux]);
        assert_eq!(emu.lwip[0].mss, Some(1024));
        assert_eq!(emu.lwip[1], LwipOptions::default());
        let on_linux = BASE.replace("name = \"b\"", "name = \"b\"\nlwip = { mss = 500 }");
        let e = EmuScenario::from_toml_str(&on_linux).unwrap_err();
        assert_eq!(e.path, "host[1].lwip");
        let udp = format!("{BASE}\n[[app]]\nkind = \"sink\"\nhost = \"a\"\nport = 9000\n");
        let e = EmuScenario::from_toml_str(&udp).unwrap_err();
        assert_eq!(e.path, "app[2].kind");
        assert!(e.message.contains("lwIP host runs"), "{e}");
        let endless = format!(
            "{BASE}\n[[app]]\nkind = \"tcp-bulk\"\nhost = \"a\"\npeer = \"10.0.0.2:5001\"\n"
        );
        assert_eq!(
            EmuScenario::from_toml_str(&endless).unwrap_err().path,
            "app[2]"
        );
        let middlebox =
            format!("{BASE}\n[[middlebox]]\nkind = \"drop-list\"\nhost = \"a\"\ndrop = [1]\n");
        assert_eq!(
            EmuScenario::from_toml_str(&middlebox).unwrap_err().path,
            "middlebox[0].host"
        );
    }

    #[test]
    fn app_arguments_carry_every_option_the_program_reads() {
        let text = format!(
            "{BASE}\n[[app]]\nkind = \"exchange\"\nname = \"c\"\nhost = \"a\"\npeer = \"10.0.0.2:7891\"\n\
             request = 100\nresponse = 200\ncount = 3\nstart = \"1s\"\ngap = \"2ms\"\n\
             source_port = 49153\nconnect_first = true\n"
        );
        let emu = EmuScenario::from_toml_str(&text).unwrap();
        assert_eq!(
            app_argument(&emu.scenario.apps[2]).unwrap(),
            "c:exchange:10.0.0.2:7891:100:200:3:1000000000:2000000:49153:1"
        );
    }
}
