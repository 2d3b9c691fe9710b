//! Errors that name the offending field, and deserialization that keeps the
//! field's path.

use serde::de::DeserializeOwned;

/// Why a scenario was rejected: the path of the offending field and what is
/// wrong with it. Displays on one line as `"{path}: {message}"`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ScenarioError {
    /// Where: `link[0].rate`, `host[1].name`, or a file path or `line L,
    /// column C` for errors that precede any field.
    pub path: String,
    /// What, on one line.
    pub message: String,
}

impl ScenarioError {
    /// An error at `path`; the message is folded onto one line.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        let message: String = message.into();
        ScenarioError {
            path: path.into(),
            message: one_line(&message),
        }
    }
}

pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A field path from serde_path_to_error, written `app[0].tcp.rto`.
pub(crate) fn path_string(segments: &serde_path_to_error::Path) -> String {
    let mut path = String::new();
    for segment in segments.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => path.push_str(&format!("[{index}]")),
            serde_path_to_error::Segment::Map { key } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            serde_path_to_error::Segment::Enum { .. } => {}
            serde_path_to_error::Segment::Unknown => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push('?');
            }
        }
    }
    path
}

/// serde names the field inside the message of unknown- and missing-field
/// errors; moves it into the path so every error reads "<field path>:
/// <problem>". `None` for other errors.
pub(crate) fn field_error(path: &str, message: &str) -> Option<ScenarioError> {
    let (field, replacement, tail) = named_field(message)?;
    let mut path = path.to_string();
    let last = path.rsplit(['.', ']']).next().unwrap_or("");
    if last != field {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(field);
    }
    let message = if tail.is_empty() {
        replacement.to_string()
    } else {
        format!("{replacement} ({tail})")
    };
    Some(ScenarioError::new(path, message))
}

/// Splits serde's "unknown field `x`, expected …" and "missing field `x`"
/// into the field, the problem and the rest.
fn named_field(message: &str) -> Option<(&str, &'static str, &str)> {
    for (prefix, replacement) in [
        ("unknown field `", "unknown field"),
        ("missing field `", "missing field"),
    ] {
        if let Some(rest) = message.strip_prefix(prefix) {
            if let Some((field, tail)) = rest.split_once('`') {
                return Some((field, replacement, tail.trim_start_matches(',').trim()));
            }
        }
    }
    None
}

/// Deserializes `value` as a `T`, naming the failing field below `path`.
pub fn deserialize_at<T: DeserializeOwned>(
    value: toml::Value,
    path: &str,
) -> Result<T, ScenarioError> {
    serde_path_to_error::deserialize(value.clone()).map_err(|e| {
        let mut inner = path_string(e.path());
        let message = one_line(e.inner().message());
        if named_field(&message).is_none() {
            if let Some(field) = culprit::<T>(&value, e.path(), &message) {
                inner = join(&inner, &field);
            }
        }
        let full = join(path, &inner);
        field_error(&full, &message).unwrap_or_else(|| ScenarioError::new(full, message))
    })
}

/// The field of the table at `at` that makes `value` fail with `message`,
/// when serde could not say: an internally tagged table (`rto = { policy =
/// .., min = 200 }`) is read as a whole, so its errors stop at the table.
/// Each field is tried alone (with the `policy` tag): the one that fails
/// the same way is it.
fn culprit<T: DeserializeOwned>(
    value: &toml::Value,
    at: &serde_path_to_error::Path,
    message: &str,
) -> Option<String> {
    let table = table_at(&mut value.clone(), at)?.clone();
    if table.len() < 2 {
        return None;
    }
    let mut found = table.keys().filter(|&key| key != "policy").filter(|&key| {
        let mut alone = value.clone();
        let Some(target) = table_at(&mut alone, at) else {
            return false;
        };
        target.retain(|k, _| k == key || k == "policy");
        serde_path_to_error::deserialize::<_, T>(alone)
            .is_err_and(|e| one_line(e.inner().message()) == message)
    });
    let field = found.next()?;
    // Two fields failing alike cannot be told apart.
    found.next().is_none().then(|| field.clone())
}

/// The table at serde's path `at` inside `value`.
fn table_at<'v>(
    value: &'v mut toml::Value,
    at: &serde_path_to_error::Path,
) -> Option<&'v mut toml::Table> {
    let mut node = value;
    for segment in at.iter() {
        node = match segment {
            serde_path_to_error::Segment::Map { key } => node.as_table_mut()?.get_mut(key)?,
            serde_path_to_error::Segment::Seq { index } => node.as_array_mut()?.get_mut(*index)?,
            _ => return None,
        };
    }
    node.as_table_mut()
}

/// Deserializes the table of one kind (a `[[link]]` or `[[app]]` entry
/// without its common keys) as that kind's `R`. A key `R` does not take but
/// another kind of the same family does (a field list in `family`, or one of
/// `shared`) is reported as "not allowed for {what}", which says more than
/// "unknown field".
pub fn read_kind<R: DeserializeOwned>(
    table: toml::Table,
    path: &str,
    what: &str,
    family: &[&'static [&'static str]],
    shared: &[&'static str],
) -> Result<R, ScenarioError> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let inner = path_string(e.path());
        let message = one_line(e.inner().message());
        if let Some((field, "unknown field", _)) = named_field(&message) {
            let elsewhere =
                family.iter().any(|fields| fields.contains(&field)) || shared.contains(&field);
            // `R` rejected it, so it is not one of `R`'s own fields.
            if (inner.is_empty() || inner == field) && elsewhere {
                return ScenarioError::new(join(path, field), format!("not allowed for {what}"));
            }
        }
        let full = join(path, &inner);
        field_error(&full, &message).unwrap_or_else(|| ScenarioError::new(full, message))
    })
}

/// The error for a `kind` no registered kind of the family has.
pub fn unknown_kind(path: &str, family: &str, kind: &str, kinds: &[&str]) -> ScenarioError {
    ScenarioError::new(
        join(path, "kind"),
        format!(
            "unknown {family} kind {kind:?} (expected one of {})",
            kinds.join(", ")
        ),
    )
}

/// Removes `key` from `table` and returns it as a string; fails naming the
/// field when it is missing.
pub fn take_required(
    table: &mut toml::Table,
    key: &str,
    path: &str,
) -> Result<String, ScenarioError> {
    take_string(table, key, path)?
        .ok_or_else(|| ScenarioError::new(join(path, key), "missing field"))
}

/// Removes `key` from `table` and returns it as a string, `None` if absent.
pub fn take_string(
    table: &mut toml::Table,
    key: &str,
    path: &str,
) -> Result<Option<String>, ScenarioError> {
    match table.remove(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ScenarioError::new(
            join(path, key),
            format!(
                "invalid type: {} `{other}`, expected a string",
                other.type_str()
            ),
        )),
    }
}

fn join(path: &str, inner: &str) -> String {
    match (path.is_empty(), inner.is_empty()) {
        (_, true) => path.to_string(),
        (true, false) => inner.to_string(),
        (false, false) if inner.starts_with('[') => format!("{path}{inner}"),
        (false, false) => format!("{path}.{inner}"),
    }
}
