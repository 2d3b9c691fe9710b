//! Running a scenario end to end: build the simulation, attach captures and
//! the trace file, run, and collect a report.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::pcap::PcapWriter;
use serde::Serialize;

use rtolab_tcp::{Config, Profile, State};

use crate::app::{AppId, AppStats};
use crate::cidr::Ipv4Cidr;
use crate::limits::{CountingWriter, RunLimits, Stop, StopFlag};
use crate::link::LinkStats;
use crate::node::{LinkId, MiddleboxId, NodeId, NodeStats};
use crate::out_dir::OutDir;
use crate::scenario::{RouteTarget, Scenario, METRICS_FILE, TRACES_DIR, TRACES_FILE};
use crate::sim::{BuildError, SimError, Simulator};
use crate::tcp_layer::{FlowId, TcpAppMetrics, TcpConfigId, TcpCounts};
use crate::trace::JsonlSink;
use crate::trace_table::{FilteredSink, ParquetSink, TraceSelection};

/// How to run a scenario.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Where captures, `traces.jsonl` and `metrics.json` go; nothing is
    /// written without it.
    pub out_dir: Option<PathBuf>,
    /// Overrides the scenario's duration.
    pub duration: Option<SimDuration>,
    /// Whether to write traces (needs `out_dir`); which ones and how is
    /// `traces`.
    pub write_traces: bool,
    /// Which trace families, and in which format (default: every event,
    /// as `traces.jsonl`).
    pub traces: TraceOptions,
    /// Stop after this many events (`None`: no limit).
    pub max_events: Option<u64>,
    /// Stop after this much wall time.
    pub max_wall: Option<Duration>,
    /// Stop once captures and traces hold this many bytes.
    pub max_output: Option<u64>,
    /// Stop when this flag is raised (Ctrl-C).
    pub stop: Option<StopFlag>,
    /// Fail when this many events in a row fire at one instant (`None`:
    /// [`crate::limits::DEFAULT_STALL_EVENTS`]).
    pub stall_events: Option<u64>,
}

/// How a run's trace is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// One JSON object per event and line in `traces.jsonl`.
    #[default]
    Jsonl,
    /// One Parquet table per event family in the directory `traces`
    /// ([`crate::trace_table`]).
    Parquet,
}

impl TraceFormat {
    /// The format called `name` (`jsonl` or `parquet`).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "jsonl" => Some(TraceFormat::Jsonl),
            "parquet" => Some(TraceFormat::Parquet),
            _ => None,
        }
    }
}

/// Which trace events a run writes, and how.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TraceOptions {
    /// Level and families.
    pub selection: TraceSelection,
    /// File format.
    pub format: TraceFormat,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The scenario could not be turned into a simulation.
    #[error("building the simulation: {0}")]
    Build(#[from] BuildError),
    /// A limit or an interruption stopped the run before its end; the
    /// outputs hold everything up to `at` and `metrics.json` says
    /// `"complete": false`.
    #[error("{}", .stop.message_at(*.at))]
    Stopped {
        /// Why.
        stop: Stop,
        /// Simulated time reached.
        at: SimTime,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> RunError + '_ {
    move |source| RunError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// An interface in a [`NodeReport`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InterfaceReport {
    /// Address and prefix (`0.0.0.0/0` on an interface without IPv4).
    pub address: Ipv4Cidr,
    /// IPv6 address and prefix, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<crate::cidr::Ipv6Cidr>,
    /// Name of its link.
    pub link: String,
}

/// A node in a [`RunReport`]; its index is the `node` of trace events.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeReport {
    /// Host name.
    pub name: String,
    /// Interfaces; the index is the `iface` of trace events.
    pub interfaces: Vec<InterfaceReport>,
    /// IP-layer counters.
    pub stats: NodeStats,
    /// Where it is, for nodes placed in the plane (figures of a mesh draw
    /// it there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<crate::position::Position>,
}

/// A link in a [`RunReport`]; its index is the `link` of trace events.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkReport {
    /// Link name.
    pub name: String,
    /// Model: its `kind` in scenario files.
    pub kind: &'static str,
    /// Counters.
    pub stats: LinkStats,
}

/// An app in a [`RunReport`]; its index is the `app` of trace events.
/// Serialised as one flat row: name, host, kind, then the app's counters
/// and, for TCP apps, its connections' counters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppReport {
    /// App name.
    pub name: String,
    /// Host it ran on.
    pub host: String,
    /// `cbr`, `sink`, `tcp-bulk`, ...
    pub kind: String,
    /// Counters of the app itself.
    #[serde(flatten)]
    pub stats: AppStats,
    /// Counters of its TCP connections, from their trace events.
    #[serde(flatten)]
    pub tcp: Option<TcpAppMetrics>,
}

/// A middlebox in a [`RunReport`]; its index is the `middlebox` of trace
/// events. Serialised as one flat row: name, host, kind, then its
/// counters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MiddleboxReport {
    /// Middlebox name.
    pub name: String,
    /// Host it sits on.
    pub host: String,
    /// Its `kind` in scenario files.
    pub kind: &'static str,
    /// Its counters.
    #[serde(flatten)]
    pub stats: serde_json::Value,
}

/// A TCP connection in a [`RunReport`]; its index is the `flow` of TCP
/// trace events.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowReport {
    /// Host it ran on.
    pub host: String,
    /// Owning app's name (`null` for a connection no app accepted).
    pub app: Option<String>,
    /// Local address and port.
    pub local: String,
    /// Remote address and port.
    pub remote: String,
    /// TCP profile name.
    pub profile: String,
    /// Whether this end opened it.
    pub active_open: bool,
    /// State when the run ended (or when it finished).
    pub state: State,
    /// When it was created, ns.
    pub opened_ns: u64,
    /// When it finished, ns.
    pub closed_ns: Option<u64>,
    /// Counters from its trace events.
    #[serde(flatten)]
    pub counts: TcpCounts,
    /// Segments it sent (engine counter).
    pub segments_sent: u64,
    /// Segments it received (engine counter).
    pub segments_received: u64,
    /// Payload bytes the peer acknowledged (engine counter).
    pub bytes_acked: u64,
    /// Payload bytes received in order (engine counter).
    pub bytes_received: u64,
}

/// The outcome of a run; `metrics.json` holds the same data (with file
/// paths relative to its directory).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// Scenario name.
    pub name: String,
    /// Seed used.
    pub seed: u64,
    /// Simulated time covered, ns.
    pub duration_ns: u64,
    /// The same in seconds, for display.
    pub duration_s: f64,
    /// Events handled.
    pub events_processed: u64,
    /// Per node.
    pub nodes: Vec<NodeReport>,
    /// Per link.
    pub links: Vec<LinkReport>,
    /// Per app.
    pub apps: Vec<AppReport>,
    /// Per TCP connection.
    pub flows: Vec<FlowReport>,
    /// Per middlebox (left out when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub middleboxes: Vec<MiddleboxReport>,
    /// Files written: captures, traces, metrics.
    pub files: Vec<PathBuf>,
}

/// What `metrics.json` contains: the report, plus, if the run did not
/// reach its end, `"complete": false`, what stopped it (`stopped_by`, for
/// limits) and the error. A complete run's file has none of these.
#[derive(Serialize)]
struct MetricsFile<'a> {
    #[serde(flatten)]
    report: &'a RunReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    complete: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped_by: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Builds the simulation a scenario describes, without captures or traces.
pub fn build_simulator(scenario: &Scenario, seed: u64) -> Result<Simulator, BuildError> {
    let mut sim = Simulator::new(seed);
    let mut node_ids = std::collections::BTreeMap::new();
    for host in &scenario.hosts {
        let id = sim.add_node(&host.name);
        if let Some(position) = host.position {
            sim.set_position(id, position);
        }
        node_ids.insert(host.name.as_str(), id);
    }
    let node = |name: &str| -> NodeId { node_ids[name] };
    // Bridges are marked before their ports attach.
    for host in scenario.hosts.iter().filter(|h| h.bridge) {
        sim.set_bridge(node(&host.name));
    }
    for link in &scenario.links {
        sim.add_link_spec(&link.name, &link.model, node)?;
    }
    for route in &scenario.routes {
        let host = node(&route.host);
        match route.target {
            RouteTarget::V4 { destination, via } => sim.add_route(host, destination, via)?,
            RouteTarget::V6 { destination, via } => sim.add_route6(host, destination, via)?,
        }
    }
    // Equal profiles share one configuration, so apps of a host that use
    // the same settings share one engine stack.
    let mut configs: Vec<(Profile, TcpConfigId)> = Vec::new();
    let mut config_of = |sim: &mut Simulator, profile: &Profile| -> TcpConfigId {
        if let Some((_, id)) = configs.iter().find(|(p, _)| p == profile) {
            return *id;
        }
        let id = sim.add_tcp_config(Config::from_profile(profile.clone()));
        configs.push((profile.clone(), id));
        id
    };
    for host in &scenario.hosts {
        if let Some(settings) = host.smoltcp {
            sim.set_host_smoltcp(node(&host.name), settings)?;
        }
        if let Some(profile) = &host.tcp {
            let id = config_of(&mut sim, profile);
            sim.set_host_tcp_config(node(&host.name), id);
        }
    }
    for app in &scenario.apps {
        let built = app.kind.build();
        let id = sim.add_app(node(&app.host), &app.name, built);
        if let Some(profile) = &app.tcp {
            let config = config_of(&mut sim, profile);
            sim.set_app_tcp_config(id, config);
        }
    }
    for middlebox in &scenario.middleboxes {
        sim.add_middlebox(
            node(&middlebox.host),
            &middlebox.name,
            middlebox.kind.build(),
        );
    }
    Ok(sim)
}

/// Collects the report of a simulation in its current state.
pub fn report(sim: &Simulator, name: &str, files: Vec<PathBuf>) -> RunReport {
    let link_name = |id: LinkId| sim.link_name(id).to_string();
    RunReport {
        name: name.to_string(),
        seed: sim.seed(),
        duration_ns: sim.now().as_nanos(),
        duration_s: sim.now().as_secs_f64(),
        events_processed: sim.events_processed(),
        nodes: sim
            .nodes()
            .iter()
            .map(|n| NodeReport {
                name: n.name.clone(),
                interfaces: n
                    .interfaces
                    .iter()
                    .map(|i| InterfaceReport {
                        address: i.cidr,
                        ipv6: i.ipv6,
                        link: link_name(i.link),
                    })
                    .collect(),
                stats: n.stats,
                position: n.position,
            })
            .collect(),
        links: (0..sim.link_count() as u32)
            .map(LinkId)
            .map(|id| LinkReport {
                name: link_name(id),
                kind: sim.link_kind(id),
                stats: sim.link_stats(id),
            })
            .collect(),
        apps: (0..sim.app_count() as u32)
            .map(AppId)
            .map(|id| AppReport {
                name: sim.app_name(id).to_string(),
                host: sim.node(sim.app_node(id)).name.clone(),
                kind: sim.app(id).kind().to_string(),
                stats: sim.app_stats(id),
                tcp: sim.app_tcp_metrics(id),
            })
            .collect(),
        flows: (0..sim.flow_count() as u32)
            .map(|i| {
                let f = sim.flow(FlowId(i));
                FlowReport {
                    host: sim.node(f.node).name.clone(),
                    app: f.app.map(|a| sim.app_name(a).to_string()),
                    local: f.local.to_string(),
                    remote: f.remote.to_string(),
                    profile: f.profile,
                    active_open: f.active_open,
                    state: f.state,
                    opened_ns: f.opened.as_nanos(),
                    closed_ns: f.closed.map(SimTime::as_nanos),
                    counts: f.counts,
                    segments_sent: f.stats.segments_sent,
                    segments_received: f.stats.segments_received,
                    bytes_acked: f.stats.bytes_acked,
                    bytes_received: f.stats.bytes_received,
                }
            })
            .collect(),
        middleboxes: (0..sim.middlebox_count() as u32)
            .map(|i| {
                let (name, node, kind, stats) = sim.middlebox_report(MiddleboxId(i));
                MiddleboxReport {
                    name: name.to_string(),
                    host: sim.node(node).name.clone(),
                    kind,
                    stats,
                }
            })
            .collect(),
        files,
    }
}

/// Runs a scenario. With `out_dir`, writes one pcap per capture, the
/// trace (if `write_traces`: `traces.jsonl` or the tables in `traces/`)
/// and `metrics.json` there; a run that
/// fails midway or is stopped by a limit ([`RunError::Stopped`]) still
/// flushes what it captured and writes `metrics.json` with
/// `"complete": false` and an `error` field before returning the error.
pub fn run_scenario(scenario: &Scenario, opts: &RunOptions) -> Result<RunReport, RunError> {
    let seed = opts.seed.unwrap_or(scenario.seed);
    let duration = opts.duration.unwrap_or(scenario.duration);
    let mut sim = build_simulator(scenario, seed)?;
    sim.set_limits(RunLimits {
        max_events: opts.max_events,
        max_wall: opts.max_wall,
        max_output: opts.max_output,
        stop: opts.stop.clone(),
        stall_events: opts
            .stall_events
            .unwrap_or(crate::limits::DEFAULT_STALL_EVENTS),
    });
    let written = sim.output_counter();
    let mut files = Vec::new();

    let out = match &opts.out_dir {
        Some(dir) => Some(OutDir::open(dir).map_err(io_error(dir))?),
        None => None,
    };
    if let Some(out) = &out {
        for capture in &scenario.captures {
            let path = out.join(&capture.file);
            let node = sim
                .nodes()
                .iter()
                .position(|n| n.name == capture.host)
                .map(|i| NodeId(i as u32));
            let link = (0..sim.link_count() as u32)
                .map(LinkId)
                .find(|&l| sim.link_name(l) == capture.link);
            let iface = node.zip(link).and_then(|(node, link)| {
                sim.node(node)
                    .interfaces
                    .iter()
                    .position(|i| i.link == link)
                    .map(|index| crate::node::IfaceId {
                        node,
                        index: index as u32,
                    })
            });
            // Validation guarantees the interface exists.
            let Some(iface) = iface else { continue };
            let file = out.create(&capture.file).map_err(io_error(&path))?;
            let file = CountingWriter::new(file, written.clone());
            let writer = PcapWriter::from_writer_with(Box::new(file), sim.capture_link_type(iface))
                .map_err(io_error(&path))?;
            sim.add_capture(
                iface,
                capture.direction,
                &path.display().to_string(),
                writer,
            );
            files.push(path);
        }
        if opts.write_traces && opts.traces.selection.any() {
            let selection = opts.traces.selection.clone();
            match opts.traces.format {
                TraceFormat::Jsonl => {
                    let path = out.join(TRACES_FILE);
                    let file = out.create(TRACES_FILE).map_err(io_error(&path))?;
                    let file = CountingWriter::new(file, written.clone());
                    let sink = JsonlSink::new(BufWriter::new(file));
                    sim.set_trace_sink(Box::new(FilteredSink::new(sink, selection)));
                    files.push(path);
                }
                TraceFormat::Parquet => {
                    let path = out.join(TRACES_DIR);
                    // Tables of an earlier run into the same directory
                    // would be read as this run's.
                    let tables = out.fresh_subdir(TRACES_DIR).map_err(io_error(&path))?;
                    let counter = written.clone();
                    let open: crate::trace_table::OpenFile = Box::new(move |file: &Path| {
                        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
                        let file = CountingWriter::new(tables.create(name)?, counter.clone());
                        Ok(Box::new(BufWriter::new(file)) as Box<dyn Write + Send>)
                    });
                    sim.set_trace_sink(Box::new(ParquetSink::new(&path, selection, open)));
                    files.push(path);
                }
            }
        }
    }

    let run = sim.run_until(SimTime::ZERO + duration);
    if run.is_ok() {
        sim.end_apps();
    }
    let flushed = sim.finish();
    let failure = match (run, flushed) {
        (Err(e), _) | (Ok(()), Err(e)) => Some(e),
        (Ok(()), Ok(())) => None,
    };
    let failure = failure.map(|e| match e {
        SimError::Capture { name, source } => RunError::Io {
            path: PathBuf::from(name),
            source,
        },
        SimError::Trace(source) => {
            let name = match opts.traces.format {
                TraceFormat::Jsonl => TRACES_FILE,
                TraceFormat::Parquet => TRACES_DIR,
            };
            RunError::Io {
                path: opts
                    .out_dir
                    .as_deref()
                    .map_or_else(|| PathBuf::from(name), |d| d.join(name)),
                source,
            }
        }
        SimError::Stopped { stop, at } => RunError::Stopped { stop, at },
    });

    let mut report = report(&sim, &scenario.name, files);
    // Its memory goes before metrics.json is written and the report handed on.
    drop(sim);
    if let Some(out) = &out {
        report.files.push(out.join(METRICS_FILE));
        write_metrics(out, &mut report, failure.as_ref())?;
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// Writes `metrics.json` with file paths relative to `out`, so that runs
/// into different directories give identical files. The file is written
/// whole or not at all: one that exists is the run's last word.
fn write_metrics(
    out: &OutDir,
    report: &mut RunReport,
    failure: Option<&RunError>,
) -> Result<(), RunError> {
    // The paths are swapped for the file's rather than the report copied:
    // a report may hold hundreds of thousands of apps.
    let relative = report
        .files
        .iter()
        .map(|f| f.strip_prefix(out.path()).unwrap_or(f).to_path_buf())
        .collect();
    let absolute = std::mem::replace(&mut report.files, relative);
    let written = write_metrics_file(out, report, failure);
    report.files = absolute;
    written
}

fn write_metrics_file(
    out: &OutDir,
    report: &RunReport,
    failure: Option<&RunError>,
) -> Result<(), RunError> {
    let metrics = MetricsFile {
        report,
        complete: failure.map(|_| false),
        stopped_by: match failure {
            Some(RunError::Stopped { stop, .. }) => Some(stop.as_str()),
            _ => None,
        },
        error: failure.map(ToString::to_string),
    };
    out.write_atomic(METRICS_FILE, |file| {
        let mut file = BufWriter::new(file);
        serde_json::to_writer_pretty(&mut file, &metrics)?;
        file.write_all(b"\n")?;
        file.flush()
    })
    .map(drop)
    .map_err(io_error(&out.join(METRICS_FILE)))
}
