//! Traces as typed tables: which events a run records (trace levels and
//! families) and the sink that streams them into Parquet files, one per
//! event family, with typed columns.
//!
//! A *family* is one kind of event: the `event` tag of a [`TraceEvent`]
//! (`packet_dropped`), or for TCP engine and app events the tag with the
//! inner kind (`tcp_cwnd`, `app_transfer_completed`), since their columns
//! differ by kind. The columns of a family are derived from the events'
//! serde form by `serde_arrow`, so a new event kind gets its table with no
//! change here. A family's schema is traced from its first rows; should
//! later rows not fit it (a field that was always empty until then), the
//! family continues in a further part file with a schema traced from the
//! new rows, and readers unify the parts (docs/traces.md).
//!
//! Rows are written in row groups of [`ROW_GROUP`] rows as the run goes,
//! so the sink's memory does not grow with the trace.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::mem::Discriminant;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_schema::{DataType, Field, FieldRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use rtolab_time::SimTime;
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_arrow::schema::{SchemaLike, TracingOptions};

use crate::trace::{AppEvent, TraceEvent, TraceSink};

/// How much of the trace a run records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TraceLevel {
    /// No trace at all.
    None,
    /// Every family except those with a row per packet or per segment
    /// ([`PER_PACKET_FAMILIES`]), plus received bytes binned over time
    /// ([`RECEIVED_BINS`]): what the standard figures need, a few percent
    /// of the rows of a bulk transfer's full trace.
    Summary,
    /// Every event.
    #[default]
    Full,
}

impl TraceLevel {
    /// The level's name on the command line and in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceLevel::None => "none",
            TraceLevel::Summary => "summary",
            TraceLevel::Full => "full",
        }
    }

    /// The level called `name`.
    pub fn parse(name: &str) -> Result<Self, SelectionError> {
        match name {
            "none" => Ok(TraceLevel::None),
            "summary" => Ok(TraceLevel::Summary),
            "full" => Ok(TraceLevel::Full),
            _ => Err(SelectionError::Level(name.to_string())),
        }
    }
}

impl fmt::Display for TraceLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The families a summary leaves out: one row per packet per hop, per
/// medium state change, or per ACK decision. The standard figures use the
/// binned table of received bytes instead.
pub const PER_PACKET_FAMILIES: &[&str] = &[
    "packet_enqueued",
    "packet_sent",
    "packet_received",
    "packet_forwarded",
    "packet_bridged",
    "packet_delivered",
    "link_busy",
    "link_free",
    "tcp_ack_delayed",
    "tcp_ack_now",
    "tcp_delayed_ack_fired",
];

/// The derived family of bytes received per link, node and interface in
/// bins of [`RECEIVED_BIN_NS`] (recorded at both levels that record
/// anything, unless families are chosen by name and it is not among them).
pub const RECEIVED_BINS: &str = "packet_received_bins";

/// Width of the bins of [`RECEIVED_BINS`], ns: fine enough for a figure of
/// a run of a few seconds, a row per 10 ms and receiver for long ones.
pub const RECEIVED_BIN_NS: u64 = 10_000_000;

/// Rows of a family buffered before they are written as one row group.
pub const ROW_GROUP: usize = 32 * 1024;

/// A bad trace selection.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SelectionError {
    /// Not a level's name.
    #[error("expected none, summary or full, got {0:?}")]
    Level(String),
    /// A family name that cannot be one.
    #[error(
        "must be a family's snake_case name such as tcp_cwnd, or a prefix \
         such as tcp, got {name:?}"
    )]
    Family {
        /// Position in the list.
        index: usize,
        /// The name given.
        name: String,
    },
}

/// Which families a run records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TraceSelection {
    /// The level.
    pub level: TraceLevel,
    /// When not empty, only these families, each a family's name or a
    /// prefix of names followed by `_` (`tcp` for every TCP family); the
    /// level then only tells whether anything is recorded.
    pub families: Vec<String>,
}

impl TraceSelection {
    /// A selection, its family names checked (errors name the position).
    pub fn new(level: TraceLevel, families: Vec<String>) -> Result<Self, SelectionError> {
        for (index, name) in families.iter().enumerate() {
            let well_formed = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                && !name.starts_with('_')
                && !name.ends_with('_');
            if !well_formed {
                return Err(SelectionError::Family {
                    index,
                    name: name.clone(),
                });
            }
        }
        Ok(TraceSelection { level, families })
    }

    /// Whether anything is recorded.
    pub fn any(&self) -> bool {
        self.level != TraceLevel::None
    }

    /// Whether the family called `family` is recorded.
    pub fn wants(&self, family: &str) -> bool {
        if !self.any() {
            return false;
        }
        if !self.families.is_empty() {
            return self.families.iter().any(|f| {
                family == f
                    || family
                        .strip_prefix(f.as_str())
                        .is_some_and(|rest| rest.starts_with('_'))
            });
        }
        match self.level {
            TraceLevel::None => false,
            TraceLevel::Summary => !PER_PACKET_FAMILIES.contains(&family),
            TraceLevel::Full => true,
        }
    }
}

/// The family of `event`: its `event` tag, with the inner kind of TCP
/// engine (`tcp_<tcp_event>`) and app events (`app_<kind>`). Read from the
/// event's serde form, so that it is the name the tables show.
pub fn family_name(event: &TraceEvent) -> String {
    let value = serde_json::to_value(event).unwrap_or_default();
    let tag = value["event"].as_str().unwrap_or("unknown");
    let inner = value["tcp_event"]
        .as_str()
        .or_else(|| value["detail"]["kind"].as_str());
    match inner {
        Some(inner) => format!("{tag}_{inner}"),
        None => tag.to_string(),
    }
}

/// What tells families apart without serialising: the variant, and for TCP
/// engine and app events the inner variant.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct FamilyKey {
    outer: Discriminant<TraceEvent>,
    tcp: Option<Discriminant<rtolab_tcp::trace::TraceEvent>>,
    app: Option<Discriminant<AppEvent>>,
}

impl FamilyKey {
    fn of(event: &TraceEvent) -> Self {
        FamilyKey {
            outer: std::mem::discriminant(event),
            tcp: match event {
                TraceEvent::Tcp { detail, .. } => Some(std::mem::discriminant(&detail.0)),
                _ => None,
            },
            app: match event {
                TraceEvent::App { detail, .. } => Some(std::mem::discriminant(detail)),
                _ => None,
            },
        }
    }
}

/// Passes on to another sink only the events of the families a selection
/// wants (the JSON-lines trace's filter).
pub struct FilteredSink<S> {
    inner: S,
    selection: TraceSelection,
    wanted: FxHashMap<FamilyKey, bool>,
}

impl<S: TraceSink> FilteredSink<S> {
    /// `inner`, receiving only what `selection` wants.
    pub fn new(inner: S, selection: TraceSelection) -> Self {
        FilteredSink {
            inner,
            selection,
            wanted: FxHashMap::default(),
        }
    }
}

impl<S: TraceSink> TraceSink for FilteredSink<S> {
    fn record(&mut self, time: SimTime, event: &TraceEvent) {
        let selection = &self.selection;
        let wanted = *self
            .wanted
            .entry(FamilyKey::of(event))
            .or_insert_with(|| selection.wants(&family_name(event)));
        if wanted {
            self.inner.record(time, event);
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A trace event with its time: one row of its family's table.
#[derive(Serialize)]
struct EventRow<'a> {
    t_ns: u64,
    #[serde(flatten)]
    event: &'a TraceEvent,
}

/// One row of [`RECEIVED_BINS`].
#[derive(Clone, Copy, Serialize)]
struct ReceivedBin {
    /// Start of the bin, ns.
    t_ns: u64,
    link: u32,
    node: u32,
    iface: u32,
    packets: u64,
    bytes: u64,
}

/// A receiving interface: link, node, interface index.
type Receiver = (u32, u32, u32);

/// The bin being filled for one receiver: bin number, packets, bytes.
type OpenBin = (u64, u64, u64);

/// Opens the files the sink writes; the run wraps them to count the bytes
/// written against its output limit.
pub type OpenFile = Box<dyn FnMut(&Path) -> io::Result<Box<dyn Write + Send>> + Send>;

/// Rows of one family waiting to be written, and its open file.
struct Family<T> {
    name: String,
    rows: Vec<T>,
    writer: Option<ArrowWriter<Box<dyn Write + Send>>>,
    fields: Vec<FieldRef>,
    parts: u32,
}

impl<T> Family<T> {
    fn new(name: String) -> Self {
        Family {
            name,
            rows: Vec::new(),
            writer: None,
            fields: Vec::new(),
            parts: 0,
        }
    }
}

/// What the columns are derived with: unit enum variants (drop reasons) as
/// dictionary-encoded strings, fields no row of a batch has as nulls.
fn tracing_options() -> TracingOptions {
    TracingOptions::default()
        .allow_null_fields(true)
        .enums_without_data_as_strings(true)
}

/// Writes trace events into `DIR/<family>.parquet` (and, should a family's
/// schema have to widen, `DIR/<family>.<n>.parquet`), snappy-compressed.
pub struct ParquetSink {
    dir: PathBuf,
    open: OpenFile,
    selection: TraceSelection,
    families: Vec<Family<(u64, TraceEvent)>>,
    /// Family index of each kind of event; `None`: not recorded.
    index: FxHashMap<FamilyKey, Option<usize>>,
    /// Bins being filled, per (link, node, iface): bin number, packets,
    /// bytes. A BTreeMap: rows come out in a fixed order.
    open_bins: Option<BTreeMap<Receiver, OpenBin>>,
    bins: Family<ReceivedBin>,
    files: Vec<PathBuf>,
    error: Option<io::Error>,
}

impl ParquetSink {
    /// A sink writing the families `selection` wants into `dir` (which
    /// must exist), opening files with `open`.
    pub fn new(dir: &Path, selection: TraceSelection, open: OpenFile) -> Self {
        let bins = selection.wants(RECEIVED_BINS);
        ParquetSink {
            dir: dir.to_path_buf(),
            open,
            selection,
            families: Vec::new(),
            index: FxHashMap::default(),
            open_bins: bins.then(BTreeMap::new),
            bins: Family::new(RECEIVED_BINS.to_string()),
            files: Vec::new(),
            error: None,
        }
    }

    /// The files written so far (all of them after [`TraceSink::flush`]).
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    fn family_of(&mut self, event: &TraceEvent) -> Option<usize> {
        let key = FamilyKey::of(event);
        if let Some(&index) = self.index.get(&key) {
            return index;
        }
        let name = family_name(event);
        let index = if self.selection.wants(&name) {
            // Two kinds of event could serialise under one name; they
            // share the table.
            match self.families.iter().position(|f| f.name == name) {
                Some(i) => Some(i),
                None => {
                    self.families.push(Family::new(name));
                    Some(self.families.len() - 1)
                }
            }
        } else {
            None
        };
        self.index.insert(key, index);
        index
    }

    fn bin(&mut self, time: SimTime, event: &TraceEvent) {
        let (
            Some(open),
            TraceEvent::PacketReceived {
                node,
                iface,
                link,
                len,
                ..
            },
        ) = (self.open_bins.as_mut(), event)
        else {
            return;
        };
        let bin = time.as_nanos() / RECEIVED_BIN_NS;
        let entry = open.entry((*link, *node, *iface)).or_insert((bin, 0, 0));
        if entry.0 != bin {
            self.bins.rows.push(ReceivedBin {
                t_ns: entry.0 * RECEIVED_BIN_NS,
                link: *link,
                node: *node,
                iface: *iface,
                packets: entry.1,
                bytes: entry.2,
            });
            *entry = (bin, 0, 0);
        }
        entry.1 += 1;
        entry.2 += u64::from(*len);
        if self.bins.rows.len() >= ROW_GROUP {
            let result = write_family(&self.dir, &mut self.open, &mut self.files, &mut self.bins);
            self.keep(result);
        }
    }

    fn keep(&mut self, result: io::Result<()>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }
}

impl TraceSink for ParquetSink {
    fn record(&mut self, time: SimTime, event: &TraceEvent) {
        if self.error.is_some() {
            return;
        }
        self.bin(time, event);
        let Some(index) = self.family_of(event) else {
            return;
        };
        let family = &mut self.families[index];
        family.rows.push((time.as_nanos(), event.clone()));
        if family.rows.len() >= ROW_GROUP {
            let result = write_events(&self.dir, &mut self.open, &mut self.files, family);
            self.keep(result);
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(open) = self.open_bins.take() {
            for ((link, node, iface), (bin, packets, bytes)) in open {
                self.bins.rows.push(ReceivedBin {
                    t_ns: bin * RECEIVED_BIN_NS,
                    link,
                    node,
                    iface,
                    packets,
                    bytes,
                });
            }
            let result = write_family(&self.dir, &mut self.open, &mut self.files, &mut self.bins)
                .and_then(|()| close(&mut self.bins));
            self.keep(result);
        }
        for family in &mut self.families {
            let result = write_events(&self.dir, &mut self.open, &mut self.files, family)
                .and_then(|()| close(family));
            if let Err(e) = result {
                self.error.get_or_insert(e);
            }
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn write_events(
    dir: &Path,
    open: &mut OpenFile,
    files: &mut Vec<PathBuf>,
    family: &mut Family<(u64, TraceEvent)>,
) -> io::Result<()> {
    let rows: Vec<EventRow<'_>> = family
        .rows
        .iter()
        .map(|(t_ns, event)| EventRow { t_ns: *t_ns, event })
        .collect();
    let written = write_rows(
        dir,
        open,
        files,
        &family.name,
        &mut family.writer,
        &mut family.fields,
        &mut family.parts,
        &rows,
    );
    drop(rows);
    family.rows.clear();
    written
}

fn write_family<T: Serialize>(
    dir: &Path,
    open: &mut OpenFile,
    files: &mut Vec<PathBuf>,
    family: &mut Family<T>,
) -> io::Result<()> {
    let written = write_rows(
        dir,
        open,
        files,
        &family.name,
        &mut family.writer,
        &mut family.fields,
        &mut family.parts,
        &family.rows,
    );
    family.rows.clear();
    written
}

/// Writes `rows` as a row group of the family's current file, opening it
/// (or, when they do not fit its schema, a further part) as needed.
#[allow(clippy::too_many_arguments)]
fn write_rows<T: Serialize>(
    dir: &Path,
    open: &mut OpenFile,
    files: &mut Vec<PathBuf>,
    name: &str,
    writer: &mut Option<ArrowWriter<Box<dyn Write + Send>>>,
    fields: &mut Vec<FieldRef>,
    parts: &mut u32,
    rows: &[T],
) -> io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let batch = match (&writer, serde_arrow::to_record_batch(fields, &rows)) {
        (Some(_), Ok(batch)) => batch,
        (Some(_), Err(_)) | (None, _) => {
            // First rows, or rows the schema has no room for: a new part
            // with the schema of these rows.
            if let Some(old) = writer.take() {
                old.close().map_err(io::Error::other)?;
            }
            *fields = schema_of(rows)?;
            if let Some(field) = fields.iter().find(|f| has_union(f.data_type())) {
                // The Parquet writer has no union type (and panics on one).
                return Err(io::Error::other(format!(
                    "trace family {name}: column {} mixes value types, which Parquet cannot store",
                    field.name()
                )));
            }
            let file = if *parts == 0 {
                format!("{name}.parquet")
            } else {
                format!("{name}.{parts}.parquet")
            };
            let path = dir.join(file);
            let out = open(&path)?;
            let schema = Arc::new(arrow_schema::Schema::new(fields.clone()));
            let properties = WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .set_max_row_group_size(ROW_GROUP)
                .set_created_by("rtolab".to_string())
                .build();
            *writer = Some(
                ArrowWriter::try_new(out, schema, Some(properties)).map_err(io::Error::other)?,
            );
            files.push(path);
            *parts += 1;
            serde_arrow::to_record_batch(fields, &rows).map_err(io::Error::other)?
        }
    };
    let writer = writer.as_mut().expect("opened above");
    writer.write(&batch).map_err(io::Error::other)?;
    // One row group per batch: what is buffered stays one batch's size.
    writer.flush().map_err(io::Error::other)
}

/// The columns of `rows`, every one nullable (a later row may lack it).
fn schema_of<T: Serialize>(rows: &[T]) -> io::Result<Vec<FieldRef>> {
    let fields =
        Vec::<FieldRef>::from_samples(rows, tracing_options()).map_err(io::Error::other)?;
    Ok(fields
        .into_iter()
        .map(|f| Arc::new(unit_enums_as_strings(&f).with_nullable(true)))
        .collect())
}

/// `field` with enums of unit variants (a TCP state, a drop reason) as
/// dictionary-encoded strings. serde_arrow does this itself only when the
/// samples show every variant, which a batch of events rarely does.
fn unit_enums_as_strings(field: &Field) -> Field {
    match field.data_type() {
        DataType::Union(variants, _)
            if variants
                .iter()
                .all(|(_, f)| f.data_type() == &DataType::Null) =>
        {
            field.clone().with_data_type(DataType::Dictionary(
                Box::new(DataType::UInt32),
                Box::new(DataType::Utf8),
            ))
        }
        DataType::Struct(children) => {
            let children: Vec<Field> = children.iter().map(|c| unit_enums_as_strings(c)).collect();
            field
                .clone()
                .with_data_type(DataType::Struct(children.into()))
        }
        _ => field.clone(),
    }
}

/// Whether `data_type` is or holds a union (an enum whose variants carry
/// different data).
fn has_union(data_type: &DataType) -> bool {
    match data_type {
        DataType::Union(_, _) => true,
        DataType::Struct(fields) => fields.iter().any(|f| has_union(f.data_type())),
        DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) => {
            has_union(f.data_type())
        }
        DataType::Dictionary(_, value) => has_union(value),
        _ => false,
    }
}

fn close<T>(family: &mut Family<T>) -> io::Result<()> {
    match family.writer.take() {
        Some(writer) => writer.close().map(drop).map_err(io::Error::other),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::sync::Mutex;

    #[derive(Serialize)]
    struct Row {
        t_ns: u64,
        extra: Option<u32>,
    }

    #[test]
    fn rows_that_outgrow_the_schema_go_to_a_further_part() {
        let dir = std::env::temp_dir().join(format!("rtolab-trace-parts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let opened = Arc::new(Mutex::new(Vec::new()));
        let seen = opened.clone();
        let mut open: OpenFile = Box::new(move |path: &Path| {
            seen.lock().unwrap().push(path.to_path_buf());
            Ok(Box::new(File::create(path)?) as Box<dyn Write + Send>)
        });
        let mut family = Family::new("demo".to_string());
        let mut files = Vec::new();
        // `extra` is empty in every first row: its column has no type yet.
        family.rows = vec![
            Row {
                t_ns: 1,
                extra: None,
            },
            Row {
                t_ns: 2,
                extra: None,
            },
        ];
        write_family(&dir, &mut open, &mut files, &mut family).unwrap();
        family.rows = vec![Row {
            t_ns: 3,
            extra: None,
        }];
        write_family(&dir, &mut open, &mut files, &mut family).unwrap();
        family.rows = vec![Row {
            t_ns: 4,
            extra: Some(7),
        }];
        write_family(&dir, &mut open, &mut files, &mut family).unwrap();
        close(&mut family).unwrap();
        assert_eq!(
            files,
            [dir.join("demo.parquet"), dir.join("demo.1.parquet")]
        );
        assert_eq!(*opened.lock().unwrap(), files);
        let rows: Vec<usize> = files
            .iter()
            .map(|f| {
                let file = File::open(f).unwrap();
                parquet::file::reader::FileReader::metadata(
                    &parquet::file::serialized_reader::SerializedFileReader::new(file).unwrap(),
                )
                .file_metadata()
                .num_rows() as usize
            })
            .collect();
        assert_eq!(rows, [3, 1]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn families_are_the_tag_with_the_inner_kind() {
        use crate::trace::TcpTrace;
        use rtolab_tcp::trace::TraceEvent as Engine;
        let tcp = TraceEvent::Tcp {
            node: 0,
            app: None,
            flow: 0,
            detail: TcpTrace(Engine::DelayedAckFired),
        };
        assert_eq!(family_name(&tcp), "tcp_delayed_ack_fired");
        let app = TraceEvent::App {
            node: 0,
            app: 0,
            detail: AppEvent::Started,
        };
        assert_eq!(family_name(&app), "app_started");
        let free = TraceEvent::LinkFree {
            node: 0,
            iface: 0,
            link: 0,
        };
        assert_eq!(family_name(&free), "link_free");
        let summary = TraceSelection::new(TraceLevel::Summary, Vec::new()).unwrap();
        assert!(!summary.wants("link_free"));
        assert!(summary.wants("tcp_cwnd"));
        assert!(summary.wants(RECEIVED_BINS));
        let chosen = TraceSelection::new(TraceLevel::Full, vec!["tcp".into()]).unwrap();
        assert!(chosen.wants("tcp_cwnd"));
        assert!(!chosen.wants("tcpx_cwnd"));
        assert!(!chosen.wants(RECEIVED_BINS));
        let none = TraceSelection::new(TraceLevel::None, vec!["tcp".into()]).unwrap();
        assert!(!none.wants("tcp_cwnd"));
    }
}
