//! `metrics.parquet`: the long metrics table of a run report, written by the
//! core. Through pyarrow the command spent longer importing it than writing
//! the file; the columns and their types are those `rtolab.runreport`'s
//! `metric_table` builds (large strings, nullable, NaN where no number).

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, LargeStringArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use rtolab_sim::out_dir::OutDir;

use crate::report::{self, MetricColumns};

/// Why the table could not be written.
#[derive(Debug, thiserror::Error)]
pub enum MetricTableError {
    #[error("{}", report::describe(.0))]
    Report(#[from] serde_json::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),
}

/// Writes the long metrics table of the report in `text` (JSON) to `path`
/// as Parquet: `scope`, `name`, `kind`, `part`, `metric` and `value`, one
/// row per number.
pub fn write_metric_table(text: &[u8], path: &Path) -> Result<(), MetricTableError> {
    let columns = report::metric_columns(text)?;
    let batch = record_batch(&columns)?;
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by("rtolab".to_string())
        .build();
    // Written whole or not at all, and never through a link at the name.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let out = OutDir::open(dir.unwrap_or(Path::new(".")))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    out.write_atomic(name, |file| {
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties))
            .map_err(std::io::Error::other)?;
        writer.write(&batch).map_err(std::io::Error::other)?;
        writer.close().map(drop).map_err(std::io::Error::other)
    })?;
    Ok(())
}

/// The table's rows as one Arrow record batch.
fn record_batch(c: &MetricColumns) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let scopes: Vec<&str> = std::iter::once("run")
        .chain(report::SCOPES.iter().map(|&(scope, _)| scope))
        .collect();
    let strings =
        |values: Vec<Option<&str>>| -> ArrayRef { Arc::new(LargeStringArray::from(values)) };
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "scope",
            strings(c.scope.iter().map(|&s| Some(scopes[s as usize])).collect()),
        ),
        (
            "name",
            strings(
                c.name
                    .iter()
                    .map(|&n| Some(c.names[n as usize].as_str()))
                    .collect(),
            ),
        ),
        (
            "kind",
            strings(
                c.name
                    .iter()
                    .map(|&n| c.kinds[n as usize].as_deref())
                    .collect(),
            ),
        ),
        (
            "part",
            // Part 0 stands for none.
            strings(
                c.part
                    .iter()
                    .map(|&p| (p > 0).then(|| c.parts[p as usize].as_str()))
                    .collect(),
            ),
        ),
        (
            "metric",
            strings(
                c.metric
                    .iter()
                    .map(|&m| Some(c.metrics[m as usize].as_str()))
                    .collect(),
            ),
        ),
        ("value", Arc::new(Float64Array::from(c.value.clone()))),
    ];
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, array)| Field::new(*name, array.data_type().clone(), true))
        .collect();
    debug_assert!(fields[..5]
        .iter()
        .all(|f| f.data_type() == &DataType::LargeUtf8));
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, array)| array).collect(),
    )
}
