//! Traces as Parquet tables: the same events as the JSON-lines trace, one
//! table per family with typed columns; levels and family selection choose
//! what is written.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::RecordBatch;
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rtolab_sim::run::{TraceFormat, TraceOptions};
use rtolab_sim::trace_table::{
    SelectionError, TraceLevel, TraceSelection, RECEIVED_BINS, RECEIVED_BIN_NS, ROW_GROUP,
};
use rtolab_sim::{run_scenario, RunOptions, Scenario};

fn scenario(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    Scenario::from_path(&path).unwrap()
}

fn out_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("traces")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(s: &Scenario, dir: &Path, level: TraceLevel, families: &[&str], format: TraceFormat) {
    let opts = RunOptions {
        out_dir: Some(dir.to_path_buf()),
        write_traces: true,
        traces: TraceOptions {
            selection: TraceSelection::new(level, families.iter().map(|f| f.to_string()).collect())
                .unwrap(),
            format,
        },
        ..RunOptions::default()
    };
    run_scenario(s, &opts).unwrap();
}

/// Every table in `dir/traces`: family name → its batches.
fn tables(dir: &Path) -> BTreeMap<String, Vec<RecordBatch>> {
    let mut out: BTreeMap<String, Vec<RecordBatch>> = BTreeMap::new();
    for entry in fs::read_dir(dir.join("traces")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap();
        let family = name.split('.').next().unwrap().to_string();
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        out.entry(family)
            .or_default()
            .extend(reader.map(Result::unwrap));
    }
    out
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

/// Family → events of the JSON-lines trace.
fn jsonl_families(dir: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in fs::read_to_string(dir.join("traces.jsonl"))
        .unwrap()
        .lines()
    {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let tag = v["event"].as_str().unwrap();
        let family = match v["tcp_event"]
            .as_str()
            .or_else(|| v["detail"]["kind"].as_str())
        {
            Some(inner) => format!("{tag}_{inner}"),
            None => tag.to_string(),
        };
        *out.entry(family).or_insert(0) += 1;
    }
    out
}

fn column_u64(batches: &[RecordBatch], name: &str) -> Vec<u64> {
    batches
        .iter()
        .flat_map(|b| {
            b.column_by_name(name)
                .unwrap_or_else(|| panic!("no column {name}"))
                .as_primitive::<UInt64Type>()
                .iter()
                .map(Option::unwrap)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn full_parquet_holds_every_event_of_the_jsonl_trace_in_typed_columns() {
    let s = scenario("p2p-bulk.toml");
    let dir = out_dir("full");
    run(&s, &dir, TraceLevel::Full, &[], TraceFormat::Jsonl);
    run(&s, &dir, TraceLevel::Full, &[], TraceFormat::Parquet);
    let expected = jsonl_families(&dir);
    let tables = tables(&dir);
    let mut got: BTreeMap<String, usize> = tables
        .iter()
        .map(|(family, batches)| (family.clone(), rows(batches)))
        .collect();
    // The binned receptions are derived, not events.
    let bins = got.remove(RECEIVED_BINS).expect("binned receptions");
    assert!(bins > 0);
    assert_eq!(got, expected);

    // Typed: times and lengths are unsigned integers, drop reasons text.
    let received = &tables["packet_received"];
    let schema = received[0].schema();
    assert_eq!(
        schema.field_with_name("t_ns").unwrap().data_type(),
        &DataType::UInt64
    );
    assert_eq!(
        schema.field_with_name("len").unwrap().data_type(),
        &DataType::UInt32
    );
    let times = column_u64(received, "t_ns");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "rows in time order");
    let cwnd = &tables["tcp_cwnd"][0].schema();
    for name in ["t_ns", "node", "flow", "tcp_event", "old", "new"] {
        assert!(cwnd.field_with_name(name).is_ok(), "tcp_cwnd lacks {name}");
    }
    let drops = &tables["packet_dropped"][0];
    let reason = drops.column_by_name("reason").unwrap();
    let reason = arrow_cast_to_strings(reason);
    assert!(reason
        .iter()
        .all(|r| r == "random_loss" || r == "queue_full"));

    // The bins add up to the received packets' bytes.
    let bytes: u64 = tables["packet_received"]
        .iter()
        .flat_map(|b| {
            b.column_by_name("len")
                .unwrap()
                .as_primitive::<arrow_array::types::UInt32Type>()
                .iter()
                .map(|v| u64::from(v.unwrap()))
                .collect::<Vec<_>>()
        })
        .sum();
    let binned: u64 = column_u64(&tables[RECEIVED_BINS], "bytes").iter().sum();
    assert_eq!(binned, bytes);
    let starts = column_u64(&tables[RECEIVED_BINS], "t_ns");
    assert!(starts.iter().all(|t| t % RECEIVED_BIN_NS == 0));
}

fn arrow_cast_to_strings(array: &arrow_array::ArrayRef) -> Vec<String> {
    match array.data_type() {
        DataType::Dictionary(_, _) => {
            let dict = array.as_any_dictionary();
            let values = arrow_cast_to_strings(dict.values());
            dict.normalized_keys()
                .into_iter()
                .map(|k| values[k].clone())
                .collect()
        }
        DataType::Utf8 => array
            .as_string::<i32>()
            .iter()
            .map(|s| s.unwrap().to_string())
            .collect(),
        DataType::LargeUtf8 => array
            .as_string::<i64>()
            .iter()
            .map(|s| s.unwrap().to_string())
            .collect(),
        other => panic!("not text: {other}"),
    }
}

#[test]
fn summary_leaves_out_per_packet_families_and_keeps_the_rest() {
    let s = scenario("p2p-bulk.toml");
    let full_dir = out_dir("summary-full");
    run(&s, &full_dir, TraceLevel::Full, &[], TraceFormat::Parquet);
    let dir = out_dir("summary");
    run(&s, &dir, TraceLevel::Summary, &[], TraceFormat::Parquet);
    let full = tables(&full_dir);
    let summary = tables(&dir);
    assert!(!summary.contains_key("packet_received"));
    assert!(!summary.contains_key("packet_sent"));
    for family in [
        "packet_dropped",
        "tcp_cwnd",
        "tcp_rtt_sample",
        RECEIVED_BINS,
    ] {
        assert_eq!(
            rows(&summary[family]),
            rows(&full[family]),
            "{family} is whole in a summary"
        );
    }
}

#[test]
fn families_chosen_by_name_or_prefix_are_all_that_is_written() {
    let s = scenario("p2p-bulk.toml");
    let dir = out_dir("families");
    run(
        &s,
        &dir,
        TraceLevel::Full,
        &["tcp", "packet_dropped"],
        TraceFormat::Parquet,
    );
    let tables = tables(&dir);
    assert!(tables.contains_key("packet_dropped"));
    assert!(tables.contains_key("tcp_cwnd"));
    assert!(tables
        .keys()
        .all(|f| f == "packet_dropped" || f.starts_with("tcp_")));

    // The JSON-lines trace takes the same selection.
    let dir = out_dir("families-jsonl");
    run(
        &s,
        &dir,
        TraceLevel::Summary,
        &["packet_dropped"],
        TraceFormat::Jsonl,
    );
    let families = jsonl_families(&dir);
    assert_eq!(families.keys().collect::<Vec<_>>(), ["packet_dropped"]);
}

#[test]
fn long_runs_are_written_in_row_groups_as_they_go() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/scenarios/bulk-16.toml");
    let s = Scenario::from_path(&path).unwrap();
    let dir = out_dir("row-groups");
    let opts = RunOptions {
        out_dir: Some(dir.clone()),
        duration: Some(rtolab_sim::SimDuration::from_secs(4)),
        write_traces: true,
        traces: TraceOptions {
            selection: TraceSelection::new(TraceLevel::Full, vec!["packet_received".into()])
                .unwrap(),
            format: TraceFormat::Parquet,
        },
        ..RunOptions::default()
    };
    let report = run_scenario(&s, &opts).unwrap();
    let file = File::open(dir.join("traces/packet_received.parquet")).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let metadata = builder.metadata().clone();
    let groups = metadata.row_groups();
    assert!(groups.len() > 1, "{} row group(s)", groups.len());
    assert!(groups.iter().all(|g| g.num_rows() as usize <= ROW_GROUP));
    let total: i64 = groups.iter().map(|g| g.num_rows()).sum();
    // The link's counters, read from its report as a user reads them.
    let stats = serde_json::to_value(&report.links[0].stats).unwrap();
    let delivered: u64 = stats["directions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["delivered_packets"].as_u64().unwrap())
        .sum();
    assert_eq!(total as u64, delivered);
}

#[test]
fn the_same_run_gives_byte_identical_tables() {
    let s = scenario("p2p-bulk.toml");
    let one = out_dir("same-1");
    let two = out_dir("same-2");
    run(&s, &one, TraceLevel::Summary, &[], TraceFormat::Parquet);
    run(&s, &two, TraceLevel::Summary, &[], TraceFormat::Parquet);
    let mut names: Vec<_> = fs::read_dir(one.join("traces"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert!(names.len() > 5);
    for name in names {
        let a = fs::read(one.join("traces").join(&name)).unwrap();
        let b = fs::read(two.join("traces").join(&name)).unwrap();
        assert!(a == b, "{name:?} differs");
    }
}

#[test]
fn level_none_writes_no_trace() {
    let s = scenario("p2p-cbr.toml");
    let dir = out_dir("none");
    run(&s, &dir, TraceLevel::None, &[], TraceFormat::Parquet);
    assert!(!dir.join("traces").exists());
    assert!(!dir.join("traces.jsonl").exists());
}

#[test]
fn bad_selections_name_the_entry() {
    assert_eq!(
        TraceLevel::parse("most"),
        Err(SelectionError::Level("most".into()))
    );
    let err =
        TraceSelection::new(TraceLevel::Full, vec!["tcp".into(), "Tcp-Cwnd".into()]).unwrap_err();
    assert_eq!(
        err,
        SelectionError::Family {
            index: 1,
            name: "Tcp-Cwnd".into()
        }
    );
    assert!(err.to_string().contains("\"Tcp-Cwnd\""));
}
