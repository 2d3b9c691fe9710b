//! The scenario's TCP apps as real socket programs on Linux hosts.
//!
//! Each app runs on its own thread, which first enters the host's network
//! namespace (`setns`), so its sockets belong to that namespace and the
//! kernel's TCP carries them over the host's TUN interface, exactly as a
//! program started with `ip netns exec` would. Blocking calls use short
//! timeouts so every thread notices the end of the run promptly.

use std::fs::File;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sched::{setns, CloneFlags};
use rtolab_sim::app::pattern;
use rtolab_sim::app::REQUEST_HEADER_LEN;
use rtolab_sim::scenario::{AppKindSpec, AppSpec, ExchangeServerSpec, TcpSinkSpec};
use rtolab_time::{SimDuration, SimTime};
use sha2::{Digest, Sha256};

use super::{fill_request, hex_digest, parse_header, AppResult, CHUNK};
use crate::clock::{Clock, WallClock};

/// How long a blocking socket call waits before checking for the end of
/// the run.
const POLL_SLICE: Duration = Duration::from_millis(20);

/// What every app thread of a run shares.
#[derive(Clone)]
pub struct AppEnv {
    /// The run's clock: app start times count from its zero.
    pub clock: WallClock,
    /// Set when the run ends; every thread returns soon after.
    pub stop: Arc<AtomicBool>,
}

impl AppEnv {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Sleeps until `t` or the end of the run; false if the run ended.
    fn sleep_until(&self, t: SimTime) -> bool {
        while !self.stopped() {
            let left = self.clock.until(t);
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(POLL_SLICE));
        }
        false
    }
}

/// A running app of a Linux host.
pub struct LinuxApp {
    /// The scenario's app name.
    pub name: String,
    /// Whether it opens connections (and so finishes by itself).
    pub is_client: bool,
    thread: Option<JoinHandle<AppResult>>,
}

impl LinuxApp {
    /// Whether its thread has returned.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().map_or(true, JoinHandle::is_finished)
    }

    /// Waits for the thread (call after setting the stop flag) and returns
    /// what the app did.
    pub fn join(mut self) -> AppResult {
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            _ => AppResult {
                failure: Some("app thread panicked".to_string()),
                ..AppResult::default()
            },
        }
    }
}

/// Starts `spec` in the network namespace mounted at `netns`. Returns once
/// a server is listening, so clients started afterwards find it.
pub fn spawn(spec: &AppSpec, netns: PathBuf, env: AppEnv) -> io::Result<LinuxApp> {
    let kind = spec.kind.clone();
    let is_client = kind.listen_port().is_none();
    let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
    let thread = std::thread::Builder::new()
        .name(format!("app-{}", spec.name))
        .spawn(move || {
            let entered = File::open(&netns)
                .and_then(|f| setns(f.as_fd(), CloneFlags::CLONE_NEWNET).map_err(io::Error::from));
            if let Err(e) = entered {
                let message = format!("entering {}: {e}", netns.display());
                let _ = ready_tx.send(Err(io::Error::new(e.kind(), message.clone())));
                return AppResult {
                    failure: Some(message),
                    ..AppResult::default()
                };
            }
            run(kind, &env, ready_tx)
        })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(LinuxApp {
            name: spec.name.clone(),
            is_client,
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        // The thread ended without a word: it panicked.
        Err(_) => {
            let _ = thread.join();
            Err(io::Error::other(format!(
                "app {} failed to start",
                spec.name
            )))
        }
    }
}

/// The app kinds a Linux host runs as real socket programs; the others run
/// on rtolab hosts only (validation says so first).
pub const LINUX_KINDS: &[&str] = &[
    "tcp-sink",
    "exchange-server",
    "tcp-bulk",
    "exchange",
    "message-series",
];

fn run(kind: AppKindSpec, env: &AppEnv, ready: mpsc::Sender<io::Result<()>>) -> AppResult {
    match kind {
        AppKindSpec::TcpSink(TcpSinkSpec { port })
        | AppKindSpec::ExchangeServer(ExchangeServerSpec { port }) => {
            let exchange = matches!(kind, AppKindSpec::ExchangeServer(_));
            let listener = match TcpListener::bind(("0.0.0.0", port)) {
                Ok(l) => l,
                Err(e) => {
                    let message = format!("listening on port {port}: {e}");
                    let _ = ready.send(Err(io::Error::new(e.kind(), message.clone())));
                    return AppResult {
                        failure: Some(message),
                        ..AppResult::default()
                    };
                }
            };
            let _ = ready.send(Ok(()));
            serve(listener, exchange, env)
        }
        AppKindSpec::TcpBulk(b) => {
            let _ = ready.send(Ok(()));
            bulk(b.peer, b.bytes, at(b.start), b.stop.map(at), env)
        }
        AppKindSpec::Exchange(e) => {
            let _ = ready.send(Ok(()));
            exchange(
                e.peer,
                e.request.max(REQUEST_HEADER_LEN as u32),
                e.response,
                e.count,
                at(e.start),
                e.gap,
                env,
            )
        }
        AppKindSpec::MessageSeries(m) => {
            let _ = ready.send(Ok(()));
            series(m.peer, &m.sizes, &m.gaps, at(m.start), env)
        }
        other => {
            let _ = ready.send(Err(io::Error::new(
                ErrorKind::Unsupported,
                format!("a Linux host has no program for {} apps", other.kind()),
            )));
            AppResult::default()
        }
    }
}

fn at(d: SimDuration) -> SimTime {
    SimTime::ZERO + d
}

fn ms(d: SimDuration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

/// Whether an I/O error only means "nothing yet".
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Connects to `peer`, waiting in slices so the end of the run interrupts
/// a handshake still crossing a slow link (std's connect cannot be
/// interrupted).
fn connect(peer: SocketAddr, env: &AppEnv) -> io::Result<TcpStream> {
    use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage};
    let family = if peer.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd = socket::socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(peer)) {
        Ok(()) | Err(nix::errno::Errno::EINPROGRESS) => {}
        Err(e) => return Err(e.into()),
    }
    loop {
        if env.stopped() {
            return Err(io::Error::new(ErrorKind::Interrupted, "run ended"));
        }
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
        let timeout = PollTimeout::try_from(POLL_SLICE).unwrap_or(PollTimeout::NONE);
        match poll(&mut fds, timeout) {
            Ok(n) if n > 0 => break,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let error = socket::getsockopt(&fd, sockopt::SocketError)?;
    if error != 0 {
        return Err(io::Error::from_raw_os_error(error));
    }
    let stream = TcpStream::from(fd);
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(POLL_SLICE))?;
    stream.set_write_timeout(Some(POLL_SLICE))?;
    Ok(stream)
}

/// Writes all of `data`, giving up when the run ends.
fn write_all(stream: &mut TcpStream, mut data: &[u8], env: &AppEnv) -> io::Result<()> {
    while !data.is_empty() {
        match stream.write(data) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if is_timeout(&e) => {
                if env.stopped() {
                    return Err(io::Error::new(ErrorKind::Interrupted, "run ended"));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads once, retrying on timeouts until the run ends; `Ok(0)` is EOF.
fn read_some(stream: &mut TcpStream, buf: &mut [u8], env: &AppEnv) -> io::Result<usize> {
    loop {
        match stream.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if is_timeout(&e) => {
                if env.stopped() {
                    return Err(io::Error::new(ErrorKind::Interrupted, "run ended"));
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Reads until the peer closes, discarding the data.
fn read_to_eof(stream: &mut TcpStream, buf: &mut [u8], env: &AppEnv) -> io::Result<()> {
    while read_some(stream, buf, env)? > 0 {}
    Ok(())
}

fn failure(e: &io::Error) -> Option<String> {
    Some(match e.kind() {
        ErrorKind::Interrupted => "run_ended".to_string(),
        ErrorKind::ConnectionReset => "reset".to_string(),
        ErrorKind::TimedOut => "timed_out".to_string(),
        _ => e.to_string(),
    })
}

fn bulk(
    peer: SocketAddr,
    bytes: Option<u64>,
    start: SimTime,
    stop: Option<SimTime>,
    env: &AppEnv,
) -> AppResult {
    let mut result = AppResult::default();
    if !env.sleep_until(start) {
        return result;
    }
    let opened = env.clock.now();
    let mut hasher = Sha256::new();
    let outcome = (|| -> io::Result<()> {
        let mut stream = connect(peer, env)?;
        result.connections = 1;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let remaining = bytes.map_or(u64::MAX, |b| b - result.bytes_sent.min(b));
            if remaining == 0 || stop.is_some_and(|s| env.clock.now() >= s) {
                break;
            }
            let n = remaining.min(CHUNK as u64) as usize;
            pattern::fill(result.bytes_sent, &mut buf[..n]);
            match stream.write(&buf[..n]) {
                Ok(k) => {
                    hasher.update(&buf[..k]);
                    result.bytes_sent += k as u64;
                }
                Err(e) if is_timeout(&e) => {
                    if env.stopped() {
                        return Err(io::Error::new(ErrorKind::Interrupted, "run ended"));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        stream.shutdown(Shutdown::Write)?;
        // The sink closes once it has read everything: the transfer is over.
        read_to_eof(&mut stream, &mut buf, env)?;
        result.completion_time_ms = Some(ms(env.clock.now().saturating_since(opened)));
        result.completed = true;
        Ok(())
    })();
    if let Err(e) = outcome {
        result.failure = failure(&e);
    }
    result.sha256_sent = Some(hex_digest(hasher));
    result
}

fn exchange(
    peer: SocketAddr,
    request: u32,
    response: u32,
    count: u32,
    start: SimTime,
    gap: SimDuration,
    env: &AppEnv,
) -> AppResult {
    let mut result = AppResult::default();
    let mut latencies = Vec::new();
    let mut next = start;
    let mut buf = vec![0u8; CHUNK];
    for _ in 0..count {
        if !env.sleep_until(next) {
            break;
        }
        let opened = env.clock.now();
        let mut answered = false;
        let outcome = (|| -> io::Result<()> {
            let mut stream = connect(peer, env)?;
            result.connections += 1;
            let mut sent = 0u64;
            while sent < u64::from(request) {
                let n = (u64::from(request) - sent).min(CHUNK as u64) as usize;
                fill_request(sent, request, response, &mut buf[..n]);
                write_all(&mut stream, &buf[..n], env)?;
                sent += n as u64;
                result.bytes_sent += n as u64;
            }
            let mut received = 0u64;
            while received < u64::from(response) {
                let n = read_some(&mut stream, &mut buf, env)?;
                if n == 0 {
                    return Err(io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "peer_closed_early",
                    ));
                }
                result.bytes_corrupt += pattern::mismatches(received, &buf[..n]);
                received += n as u64;
                result.bytes_received += n as u64;
            }
            latencies.push(env.clock.now().saturating_since(opened).as_nanos());
            result.exchanges_completed += 1;
            answered = true;
            // Close and wait for the server's FIN, so the close handshake
            // is part of the app.
            stream.shutdown(Shutdown::Write)?;
            read_to_eof(&mut stream, &mut buf, env)
        })();
        if let Err(e) = outcome {
            if !answered {
                result.exchanges_failed += 1;
            }
            result.failure = failure(&e);
            if env.stopped() {
                break;
            }
        }
        next = env.clock.now() + gap;
    }
    result.set_latencies(&latencies);
    result.completed = result.exchanges_completed == u64::from(count);
    result
}

fn series(
    peer: SocketAddr,
    sizes: &[u32],
    gaps: &[SimDuration],
    start: SimTime,
    env: &AppEnv,
) -> AppResult {
    let mut result = AppResult::default();
    if !env.sleep_until(start) {
        return result;
    }
    let outcome = (|| -> io::Result<()> {
        let mut stream = connect(peer, env)?;
        result.connections = 1;
        let mut buf = vec![0u8; CHUNK];
        let mut release = start;
        for (i, &size) in sizes.iter().enumerate() {
            if !env.sleep_until(release) {
                return Err(io::Error::new(ErrorKind::Interrupted, "run ended"));
            }
            let mut left = u64::from(size);
            while left > 0 {
                let n = left.min(CHUNK as u64) as usize;
                pattern::fill(result.bytes_sent, &mut buf[..n]);
                write_all(&mut stream, &buf[..n], env)?;
                result.bytes_sent += n as u64;
                left -= n as u64;
            }
            result.messages_sent += 1;
            if !gaps.is_empty() {
                release += gaps[i % gaps.len()];
            }
        }
        stream.shutdown(Shutdown::Write)?;
        read_to_eof(&mut stream, &mut buf, env)?;
        result.completed = true;
        Ok(())
    })();
    if let Err(e) = outcome {
        result.failure = failure(&e);
    }
    result
}

/// Accepts connections until the run ends, one thread each.
fn serve(listener: TcpListener, exchange: bool, env: &AppEnv) -> AppResult {
    let shared = Arc::new(Mutex::new(AppResult::default()));
    let mut handlers = Vec::new();
    while !env.stopped() {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(POLL_SLICE).unwrap_or(PollTimeout::NONE);
        match poll(&mut fds, timeout) {
            Ok(n) if n > 0 => {}
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                lock(&shared).failure = Some(format!("poll: {e}"));
                break;
            }
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if is_timeout(&e) => continue,
            Err(e) => {
                lock(&shared).failure = Some(format!("accept: {e}"));
                break;
            }
        };
        lock(&shared).connections += 1;
        let shared = shared.clone();
        let env = env.clone();
        handlers.push(std::thread::spawn(move || {
            let mut local = AppResult::default();
            let outcome = if exchange {
                serve_exchange(stream, &mut local, &env)
            } else {
                serve_sink(stream, &mut local, &env)
            };
            let mut r = lock(&shared);
            if let Err(e) = outcome {
                r.failure = failure(&e);
            }
            r.bytes_sent += local.bytes_sent;
            r.bytes_received += local.bytes_received;
            r.bytes_corrupt += local.bytes_corrupt;
            r.exchanges_completed += local.exchanges_completed;
            r.sha256_received.extend(local.sha256_received);
        }));
    }
    for h in handlers {
        let _ = h.join();
    }
    let mut result = lock(&shared).clone();
    result.completed = result.failure.is_none() && result.connections > 0;
    result
}

fn lock(m: &Mutex<AppResult>) -> std::sync::MutexGuard<'_, AppResult> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn configure(stream: &TcpStream) -> io::Result<()> {
    stream.set_read_timeout(Some(POLL_SLICE))?;
    stream.set_write_timeout(Some(POLL_SLICE))
}

fn serve_sink(mut stream: TcpStream, r: &mut AppResult, env: &AppEnv) -> io::Result<()> {
    configure(&stream)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut offset = 0u64;
    loop {
        let n = read_some(&mut stream, &mut buf, env)?;
        if n == 0 {
            break;
        }
        r.bytes_corrupt += pattern::mismatches(offset, &buf[..n]);
        hasher.update(&buf[..n]);
        offset += n as u64;
        r.bytes_received += n as u64;
    }
    r.sha256_received.push(hex_digest(hasher));
    stream.shutdown(Shutdown::Write)
}

fn serve_exchange(mut stream: TcpStream, r: &mut AppResult, env: &AppEnv) -> io::Result<()> {
    configure(&stream)?;
    let mut buf = vec![0u8; CHUNK];
    let mut header = [0u8; REQUEST_HEADER_LEN];
    let mut received = 0u64;
    let mut lengths = None;
    loop {
        let n = read_some(&mut stream, &mut buf, env)?;
        if n == 0 {
            break;
        }
        r.bytes_received += n as u64;
        let mut data = &buf[..n];
        while received < REQUEST_HEADER_LEN as u64 && !data.is_empty() {
            header[received as usize] = data[0];
            received += 1;
            data = &data[1..];
        }
        if lengths.is_none() && received == REQUEST_HEADER_LEN as u64 {
            lengths = Some(parse_header(&header));
        }
        if !data.is_empty() {
            r.bytes_corrupt += pattern::mismatches(received, data);
            received += data.len() as u64;
        }
        if let Some((request, response)) = lengths {
            if received >= request {
                let mut sent = 0u64;
                let mut out = vec![0u8; CHUNK];
                while sent < response {
                    let n = (response - sent).min(CHUNK as u64) as usize;
                    pattern::fill(sent, &mut out[..n]);
                    write_all(&mut stream, &out[..n], env)?;
                    sent += n as u64;
                    r.bytes_sent += n as u64;
                }
                r.exchanges_completed += 1;
                // One request per connection, as the simulator's server.
                lengths = Some((u64::MAX, 0));
            }
        }
    }
    stream.shutdown(Shutdown::Write)
}
