//! The real-time driver: namespaces and TUN devices around an [`Engine`],
//! run on the wall clock.
//!
//! One thread runs the engine. It sleeps in `ppoll` on every TUN device
//! until a datagram arrives or the engine's earliest deadline comes, hands
//! arrivals to the engine stamped with the wall clock, lets the engine
//! catch up to the present, and writes each delivered datagram to its TUN
//! device at once, noting how late that was against the model's schedule.
//! Apps of Linux hosts run on their own threads inside their namespaces.

use std::io::{ErrorKind, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use rtolab_sim::out_dir::OutDir;
use rtolab_sim::scenario::{AppSpec, RouteTarget};
use rtolab_time::{SimDuration, SimTime};
use serde::Serialize;

use crate::apps::linux::{self, AppEnv, LinuxApp};
use crate::apps::AppResult;
use crate::clock::{Clock, WallClock};
use crate::config::{EmuScenario, HostKind};
use crate::engine::{Egress, Engine, EngineReport, TunId};
use crate::error::EmuError;
use crate::lwip::LwipHost;
use crate::netns::{self, ip, Namespace};
use crate::sys::RealtimeGuard;
use crate::tun_dev::{check_prerequisites, TunDevice};

/// The longest the loop sleeps without looking at the stop flag and the
/// apps.
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// How long everything must have been quiet, after every client app
/// finished, before a run that stops when done ends: long enough for the
/// kernels' last ACKs to cross.
const QUIET_GRACE: SimDuration = SimDuration::from_millis(200);

/// Datagrams read from one device before the loop looks elsewhere.
const MAX_BATCH: usize = 64;

/// Largest datagram a TUN device hands over (the IPv4 maximum).
const MAX_DATAGRAM: usize = 65_535;

/// MTU of the hosts' TUN interfaces.
pub const MTU: u16 = 1500;

/// File the run's report is written to in the output directory.
pub const METRICS_FILE: &str = "metrics.json";

/// How to run an emulation.
#[derive(Clone, Debug, Default)]
pub struct EmuOptions {
    /// Overrides the scenario's seed (link losses, slot phases, ISNs of
    /// rtolab hosts).
    pub seed: Option<u64>,
    /// Overrides the scenario's duration (wall-clock time).
    pub duration: Option<SimDuration>,
    /// Where captures and `metrics.json` go.
    pub out_dir: Option<PathBuf>,
    /// Ends the run when set (by a signal handler, say).
    pub stop: Option<Arc<AtomicBool>>,
    /// End as soon as every client app finished and the links fell quiet,
    /// rather than at the end of the duration (ignored when the scenario
    /// has no client app).
    pub stop_when_done: bool,
    /// Run the engine thread under real-time scheduling (`SCHED_FIFO`) for
    /// the run, for punctual writes on a busy machine.
    pub realtime: bool,
}

/// A host as set up for the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostSetup {
    /// Host name.
    pub host: String,
    /// Which stack runs it.
    pub stack: HostKind,
    /// Its network namespace (Linux hosts).
    pub netns: Option<String>,
    /// Its interfaces: `(device, address, link)` (Linux hosts).
    pub interfaces: Vec<InterfaceSetup>,
    /// How to run a program inside it (Linux hosts).
    pub exec: Option<String>,
}

/// A TUN interface of a Linux host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InterfaceSetup {
    /// Device name in the namespace.
    pub device: String,
    /// Address and prefix.
    pub address: String,
    /// Link it is attached to.
    pub link: String,
}

/// Lateness of datagram writes against the model's schedule.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimingStats {
    /// Datagrams written to TUN devices.
    pub samples: u64,
    /// Median lateness, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Worst, ms.
    pub max_ms: f64,
    /// Writes that failed (the datagram was lost at the edge).
    pub write_errors: u64,
}

impl TimingStats {
    /// Summarises lateness samples in nanoseconds (nearest-rank
    /// percentiles).
    pub fn from_samples(mut samples: Vec<u64>, write_errors: u64) -> TimingStats {
        samples.sort_unstable();
        let pick = |p: u64| -> f64 {
            if samples.is_empty() {
                return 0.0;
            }
            let n = samples.len() as u64;
            let rank = (p * n).div_ceil(100).clamp(1, n);
            samples[(rank - 1) as usize] as f64 / 1e6
        };
        TimingStats {
            samples: samples.len() as u64,
            p50_ms: pick(50),
            p99_ms: pick(99),
            max_ms: pick(100),
            write_errors,
        }
    }
}

/// An app in an [`EmuReport`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppReport {
    /// App name.
    pub name: String,
    /// Host name.
    pub host: String,
    /// Which stack ran it.
    pub stack: HostKind,
    /// `tcp-bulk`, `exchange`, ...
    pub kind: &'static str,
    /// What it did.
    #[serde(flatten)]
    pub result: AppResult,
}

/// The outcome of an emulation; `--json` prints it and `metrics.json`
/// holds it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EmuReport {
    /// Scenario name.
    pub name: String,
    /// Seed used.
    pub seed: u64,
    /// Wall-clock time the links ran, s.
    pub duration_s: f64,
    /// Why the run ended: `duration`, `done` or `stopped`.
    pub ended_by: &'static str,
    /// Median lateness of TUN writes, ms.
    pub timing_error_p50_ms: f64,
    /// 99th percentile lateness, ms.
    pub timing_error_p99_ms: f64,
    /// Worst lateness, ms.
    pub timing_error_max_ms: f64,
    /// Lateness details.
    pub timing: TimingStats,
    /// Whether the engine thread ran under real-time scheduling.
    pub realtime: bool,
    /// Hosts, namespaces and how to enter them.
    pub hosts: Vec<HostSetup>,
    /// Every app, of either stack.
    pub apps: Vec<AppReport>,
    /// Links, per-host wire counters, edge counters.
    pub engine: EngineReport,
    /// Stale namespaces of earlier crashed runs removed before starting.
    pub stale_namespaces_removed: Vec<String>,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// An `rto_min` value for iproute2 (whole milliseconds, at least 1).
fn rto_option(d: SimDuration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

/// The kind name of an app, as in scenario files.
pub fn app_kind(spec: &AppSpec) -> &'static str {
    spec.kind.kind()
}

/// Where a TUN-attached port's datagrams come from and go: a Linux
/// host's TUN device, or the socket of an lwIP host's program.
enum Port {
    Tun(TunDevice),
    Lwip(LwipHost),
}

impl Port {
    fn recv(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Port::Tun(d) => d.recv(buf),
            Port::Lwip(h) => h.recv(buf),
        }
    }

    fn send(&self, datagram: &[u8]) -> std::io::Result<usize> {
        match self {
            Port::Tun(d) => d.send(datagram),
            Port::Lwip(h) => h.send(datagram),
        }
    }

    fn name(&self) -> &str {
        match self {
            Port::Tun(d) => d.name(),
            Port::Lwip(h) => h.name(),
        }
    }
}

impl std::os::fd::AsFd for Port {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Port::Tun(d) => d.as_fd(),
            Port::Lwip(h) => h.as_fd(),
        }
    }
}

/// Writes delivered datagrams to the TUN devices and measures lateness.
struct TunEgress<'a> {
    devices: &'a [Port],
    clock: WallClock,
    lateness_ns: Vec<u64>,
    write_errors: u64,
}

impl Egress for TunEgress<'_> {
    fn deliver(&mut self, tun: TunId, datagram: &[u8], due: SimTime) {
        let Some(device) = self.devices.get(tun) else {
            return;
        };
        match device.send(datagram) {
            Ok(_) => {
                let written = self.clock.now();
                self.lateness_ns
                    .push(written.saturating_since(due).as_nanos());
            }
            Err(_) => self.write_errors += 1,
        }
    }
}

/// Linux app threads: stopped and joined when dropped, so no early return
/// leaves one running.
struct Apps {
    stop: Arc<AtomicBool>,
    running: Vec<(usize, LinuxApp)>,
    results: Vec<(usize, AppResult)>,
}

impl Apps {
    fn finish(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for (i, app) in self.running.drain(..) {
            self.results.push((i, app.join()));
        }
    }
}

impl Drop for Apps {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Devices are declared before namespaces so they close first: a TUN
/// descriptor keeps its namespace alive.
struct Edge {
    devices: Vec<Port>,
    namespaces: Vec<(usize, Namespace)>,
}

/// Runs `emu` between network namespaces until its duration passes, the
/// stop flag is set, or (with `stop_when_done`) every client app finished.
/// `on_ready` is called once the hosts are up, before any app starts.
pub fn emulate(
    emu: &EmuScenario,
    opts: &EmuOptions,
    on_ready: impl FnOnce(&[HostSetup]),
) -> Result<EmuReport, EmuError> {
    check_prerequisites()?;
    if let Some(h) = emu.kinds.iter().position(|k| *k == HostKind::Lwip) {
        // Before anything is set up: this build may lack the lwIP program.
        crate::lwip::available().map_err(|message| {
            EmuError::Scenario(rtolab_sim::ScenarioError {
                path: format!("host[{h}].stack"),
                message,
            })
        })?;
    }
    let stale = netns::sweep_stale();
    let s = &emu.scenario;
    let seed = opts.seed.unwrap_or(s.seed);
    let duration = opts.duration.unwrap_or(s.duration);
    // A link at the directory is followed here, once; a link at any name
    // inside it is replaced, never written through.
    let out = match &opts.out_dir {
        Some(dir) => Some(OutDir::open(dir).map_err(|source| EmuError::Io {
            path: dir.clone(),
            source,
        })?),
        None => None,
    };
    let mut engine = Engine::new(emu, seed, out.as_ref())?;

    // ----- namespaces, devices, addresses, routes -----
    let run = netns::next_run();
    let pid = std::process::id();
    let mut edge = Edge {
        devices: Vec::new(),
        namespaces: Vec::new(),
    };
    let mut hosts = Vec::new();
    for (h, host) in s.hosts.iter().enumerate() {
        let kind = emu.kinds[h];
        let mut setup = HostSetup {
            host: host.name.clone(),
            stack: kind,
            netns: None,
            interfaces: Vec::new(),
            exec: None,
        };
        if kind == HostKind::Linux {
            let ns = Namespace::create(&netns::namespace_name(pid, run, &host.name))?;
            setup.exec = Some(format!("ip netns exec {} PROGRAM [ARGS...]", ns.name()));
            setup.netns = Some(ns.name().to_string());
            edge.namespaces.push((h, ns));
        }
        hosts.push(setup);
    }
    // lwIP hosts start after the Linux servers (their clients may connect
    // at once); `(TunId, port)` keeps their place among the devices.
    let mut lwip_ports = Vec::new();
    for (tun, port) in engine.tun_ports().to_vec().into_iter().enumerate() {
        if emu.kinds[port.host] == HostKind::Lwip {
            lwip_ports.push((tun, port.clone()));
            hosts[port.host].interfaces.push(InterfaceSetup {
                device: "lwip".to_string(),
                address: port.address.to_string(),
                link: port.link.clone(),
            });
            continue;
        }
        let Some((_, ns)) = edge.namespaces.iter().find(|(h, _)| *h == port.host) else {
            continue;
        };
        let device = TunDevice::create_in(&ns.path(), &port.device).map_err(|e| EmuError::Tun {
            host: port.host_name.clone(),
            device: port.device.clone(),
            message: e.to_string(),
        })?;
        let address = port.address.to_string();
        let mtu = MTU.to_string();
        ip(&[
            "-n",
            ns.name(),
            "addr",
            "add",
            &address,
            "dev",
            &port.device,
        ])?;
        ip(&[
            "-n",
            ns.name(),
            "link",
            "set",
            &port.device,
            "mtu",
            &mtu,
            "up",
        ])?;
        if let Some(rto_min) = emu.linux[port.host].rto_min {
            // The connected route is the kernel's; restate it with the option.
            let network = format!("{}/{}", port.address.network(), port.address.prefix_len);
            let src = port.address.addr.to_string();
            let rto = rto_option(rto_min);
            ip(&[
                "-n",
                ns.name(),
                "route",
                "change",
                &network,
                "dev",
                &port.device,
                "proto",
                "kernel",
                "scope",
                "link",
                "src",
                &src,
                "rto_min",
                &rto,
            ])?;
        }
        edge.devices.push(Port::Tun(device));
        hosts[port.host].interfaces.push(InterfaceSetup {
            device: port.device.clone(),
            address,
            link: port.link.clone(),
        });
    }
    for (h, ns) in &edge.namespaces {
        for (name, value) in &emu.linux[*h].sysctls {
            // Before any app opens a socket: some are read at connect time.
            ns.exec(&["sysctl", "-qw", &format!("{name}={value}")])?;
        }
        if hosts[*h].interfaces.len() > 1 {
            // A Linux host on several links routes between them.
            ns.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        }
        for route in s.routes.iter().filter(|r| r.host == s.hosts[*h].name) {
            // IPv6 routes never get here: EmuScenario rejects them.
            let RouteTarget::V4 { destination, via } = route.target else {
                continue;
            };
            let destination = if destination.prefix_len == 0 {
                "default".to_string()
            } else {
                destination.to_string()
            };
            let via = via.to_string();
            let mut args = vec!["-n", ns.name(), "route", "add", &destination, "via", &via];
            let rto = emu.linux[*h].rto_min.map(rto_option);
            if let Some(rto) = &rto {
                args.extend(["rto_min", rto.as_str()]);
            }
            ip(&args)?;
        }
    }

    // ----- apps of Linux hosts: servers first, so clients find them -----
    let clock = WallClock::start();
    let mut apps = Apps {
        stop: Arc::new(AtomicBool::new(false)),
        running: Vec::new(),
        results: Vec::new(),
    };
    let env = AppEnv {
        clock,
        stop: apps.stop.clone(),
    };
    let mut order: Vec<usize> = (0..s.apps.len())
        .filter(|&i| emu.kind_of(&s.apps[i].host) == Some(HostKind::Linux))
        .collect();
    order.sort_by_key(|&i| s.apps[i].kind.listen_port().is_none());
    // Servers start before the loop runs; clients wait for their start
    // time on their own threads, so starting them here is harmless.
    for i in order {
        let spec = &s.apps[i];
        let Some((_, ns)) = edge
            .namespaces
            .iter()
            .find(|(h, _)| s.hosts[*h].name == spec.host)
        else {
            continue;
        };
        let app = linux::spawn(spec, ns.path(), env.clone()).map_err(|source| EmuError::App {
            app: spec.name.clone(),
            host: spec.host.clone(),
            source,
        })?;
        apps.running.push((i, app));
    }
    for (tun, port) in &lwip_ports {
        let host = spawn_lwip(emu, port)?;
        if opts.realtime {
            // Best effort, like the engine thread's own policy.
            let _ = crate::sys::make_process_realtime(host.pid() as libc::pid_t);
        }
        edge.devices.insert(*tun, Port::Lwip(host));
    }
    on_ready(&hosts);

    // ----- the engine loop -----
    // Best effort: a smaller timer slack makes wake-ups more punctual, and
    // real-time scheduling keeps other work on the machine from delaying
    // them.
    let _ = nix::sys::prctl::set_timerslack(1);
    let realtime = opts.realtime.then(RealtimeGuard::enter);
    let end = SimTime::ZERO + duration;
    let lwip_hosts = || {
        edge.devices.iter().filter_map(|d| match d {
            Port::Lwip(h) => Some(h),
            Port::Tun(_) => None,
        })
    };
    let has_clients = engine.has_rtolab_clients()
        || apps.running.iter().any(|(_, a)| a.is_client)
        || lwip_hosts().any(LwipHost::has_clients);
    let mut egress = TunEgress {
        devices: &edge.devices,
        clock,
        lateness_ns: Vec::new(),
        write_errors: 0,
    };
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut quiet_since: Option<SimTime> = None;
    let ended_by = loop {
        let now = clock.now();
        if now >= end {
            break "duration";
        }
        if opts.stop.as_ref().is_some_and(|f| f.load(Ordering::SeqCst)) {
            break "stopped";
        }
        engine.advance(now, &mut egress);
        for (tun, device) in edge.devices.iter().enumerate() {
            // A bounded batch per device: a namespace flooding its device
            // cannot starve the others or the stop flag.
            for _ in 0..MAX_BATCH {
                match device.recv(&mut buf) {
                    Ok(n) => {
                        let now = clock.now();
                        engine.advance(now, &mut egress);
                        engine.ingress(now, tun, &buf[..n], &mut egress);
                    }
                    Err(e)
                        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) =>
                    {
                        break
                    }
                    Err(e) => {
                        return Err(EmuError::Loop(format!("reading {}: {e}", device.name())))
                    }
                }
            }
        }
        let now = clock.now();
        if opts.stop_when_done && has_clients {
            let done = engine.rtolab_clients_done()
                && apps
                    .running
                    .iter()
                    .all(|(_, a)| !a.is_client || a.is_finished())
                && lwip_hosts().all(|h| !h.has_clients() || h.clients_done())
                && engine.network_empty();
            quiet_since = if done {
                quiet_since.or(Some(now))
            } else {
                None
            };
            if quiet_since.is_some_and(|t| now >= t + QUIET_GRACE) {
                break "done";
            }
        }
        let mut wake = engine.poll_timeout().unwrap_or(end).min(end);
        if let Some(t) = quiet_since {
            wake = wake.min(t + QUIET_GRACE);
        }
        let sleep = clock.until(wake).min(MAX_SLEEP);
        if sleep.is_zero() {
            continue;
        }
        let mut fds: Vec<PollFd<'_>> = edge
            .devices
            .iter()
            .map(|d| PollFd::new(std::os::fd::AsFd::as_fd(d), PollFlags::POLLIN))
            .collect();
        match ppoll(&mut fds, Some(TimeSpec::from(sleep)), None) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(EmuError::Loop(format!("ppoll: {e}"))),
        }
    };
    let elapsed = clock.now();
    let was_realtime = realtime.as_ref().is_some_and(RealtimeGuard::active);
    drop(realtime);
    // Deliver what is already due, so the report counts it.
    engine.advance(elapsed, &mut egress);
    let timing =
        TimingStats::from_samples(std::mem::take(&mut egress.lateness_ns), egress.write_errors);
    apps.finish();
    let mut lwip_results = Vec::new();
    for device in std::mem::take(&mut edge.devices) {
        if let Port::Lwip(host) = device {
            lwip_results.extend(host.finish());
        }
    }
    let captured = engine.finish();
    let engine_report = engine.report(elapsed);
    drop(edge);
    captured?;

    let mut app_reports = Vec::new();
    for (i, spec) in s.apps.iter().enumerate() {
        let stack = emu.kind_of(&spec.host).unwrap_or(HostKind::Linux);
        let result = match stack {
            HostKind::Linux => apps
                .results
                .iter()
                .find(|(j, _)| *j == i)
                .map(|(_, r)| r.clone()),
            HostKind::Lwip => lwip_results
                .iter()
                .find(|(name, _)| *name == spec.name)
                .map(|(_, r)| r.clone()),
            _ => engine_report
                .apps
                .iter()
                .find(|a| a.name == spec.name)
                .map(|a| a.result.clone()),
        };
        if let Some(result) = result {
            app_reports.push(AppReport {
                name: spec.name.clone(),
                host: spec.host.clone(),
                stack,
                kind: app_kind(spec),
                result,
            });
        }
    }
    let mut files = engine.capture_files();
    let mut report = EmuReport {
        name: s.name.clone(),
        seed,
        duration_s: elapsed.as_secs_f64(),
        ended_by,
        timing_error_p50_ms: timing.p50_ms,
        timing_error_p99_ms: timing.p99_ms,
        timing_error_max_ms: timing.max_ms,
        timing,
        realtime: was_realtime,
        hosts,
        apps: app_reports,
        engine: engine_report,
        stale_namespaces_removed: stale,
        files: Vec::new(),
    };
    if let Some(out) = &out {
        let path = out.join(METRICS_FILE);
        files.push(path.clone());
        report.files = files;
        let json = serde_json::to_vec_pretty(&report).map_err(|e| EmuError::Io {
            path: path.clone(),
            source: e.into(),
        })?;
        out.write_atomic(METRICS_FILE, |file| file.write_all(&json))
            .map_err(|source| EmuError::Io { path, source })?;
    }
    Ok(report)
}

/// Starts the lwIP program of the host behind `port`, with its apps.
fn spawn_lwip(emu: &EmuScenario, port: &crate::engine::TunPort) -> Result<LwipHost, EmuError> {
    let s = &emu.scenario;
    let host = &s.hosts[port.host];
    let gateway = s
        .routes
        .iter()
        .filter(|r| r.host == host.name)
        .find_map(|r| match r.target {
            RouteTarget::V4 { destination, via } if destination.prefix_len == 0 => Some(via),
            _ => None,
        });
    let apps: Vec<&AppSpec> = s.apps.iter().filter(|a| a.host == host.name).collect();
    LwipHost::spawn(
        &host.name,
        port.address,
        gateway,
        emu.lwip[port.host],
        &apps,
    )
    .map_err(|source| EmuError::App {
        app: "lwip".to_string(),
        host: host.name.clone(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let t = TimingStats::from_samples((1..=100).map(|i| i * 1_000_000).collect(), 0);
        assert_eq!(
            (t.p50_ms, t.p99_ms, t.max_ms, t.samples),
            (50.0, 99.0, 100.0, 100)
        );
        let one = TimingStats::from_samples(vec![2_500_000], 1);
        assert_eq!((one.p50_ms, one.p99_ms, one.max_ms), (2.5, 2.5, 2.5));
        assert_eq!(TimingStats::from_samples(Vec::new(), 0).p99_ms, 0.0);
    }
}
