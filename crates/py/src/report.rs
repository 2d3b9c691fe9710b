//! Run reports as JSON text, read without building them whole: where each
//! top-level value is, and every number as a row of the long metrics table.
//!
//! A report holds one object per app and per TCP connection; a run with
//! hundreds of thousands of them gives a report of a hundred megabytes or
//! more. Python keeps its text and reads a value only when asked for it;
//! the metrics table is built here, one item at a time, as columns.

use std::collections::HashMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// A top-level value of a report.
#[derive(Debug, PartialEq)]
pub struct Entry {
    /// Its key.
    pub key: String,
    /// Its byte span in the text.
    pub start: usize,
    /// End of the span (exclusive).
    pub end: usize,
    /// For an array: how many elements, and whether every one is an object.
    pub array: Option<(usize, bool)>,
}

/// The top-level values of the report in `text`, in order. A key given
/// twice keeps its first place and its last value, as Python's `json`
/// reads it. Errors when the text is not one JSON object.
pub fn index(text: &[u8]) -> Result<Vec<Entry>, serde_json::Error> {
    spans(text)?
        .into_iter()
        .map(|(key, start, end)| {
            Ok(Entry {
                key,
                start,
                end,
                array: serde_json::from_slice::<Shape>(&text[start..end])?.0,
            })
        })
        .collect()
}

/// The key and byte span of each top-level value of the report in `text`,
/// with the same rule for repeated keys as [`index`].
fn spans(text: &[u8]) -> Result<Vec<(String, usize, usize)>, serde_json::Error> {
    let Raw(fields) = serde_json::from_slice(text)?;
    let base = text.as_ptr() as usize;
    let mut spans: Vec<(String, usize, usize)> = Vec::with_capacity(fields.len());
    for (key, value) in fields {
        let raw = value.get();
        let start = raw.as_ptr() as usize - base;
        let span = (key, start, start + raw.len());
        match spans.iter_mut().find(|s| s.0 == span.0) {
            Some(earlier) => *earlier = span,
            None => spans.push(span),
        }
    }
    Ok(spans)
}

/// The top-level fields of an object, their values unread.
struct Raw<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Raw<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Raw<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw<'de>, A::Error> {
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    fields.push((key, map.next_value()?));
                }
                Ok(Raw(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// For an array, its length and whether its elements are all objects.
struct Shape(Option<(usize, bool)>);

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ShapeVisitor;
        impl<'de> Visitor<'de> for ShapeVisitor {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                let (mut len, mut objects) = (0, true);
                while let Some(IsObject(object)) = seq.next_element()? {
                    len += 1;
                    objects &= object;
                }
                Ok(Shape(Some((len, objects))))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Shape(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
                Ok(Shape(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
                Ok(Shape(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
                Ok(Shape(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
                Ok(Shape(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
                Ok(Shape(None))
            }
            fn visit_unit<E>(self) -> Result<Shape, E> {
                Ok(Shape(None))
            }
        }
        d.deserialize_any(ShapeVisitor)
    }
}

/// Whether a value is an object (read and dropped either way).
struct IsObject(bool);

impl<'de> Deserialize<'de> for IsObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = IsObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IsObject, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IsObject(true))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IsObject, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IsObject(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
            fn visit_unit<E>(self) -> Result<IsObject, E> {
                Ok(IsObject(false))
            }
        }
        d.deserialize_any(ObjectVisitor)
    }
}

/// A JSON value with its objects' keys in order (a key given twice keeps
/// its first place and its last value).
#[derive(Debug)]
enum Tree {
    Object(Vec<(String, Tree)>),
    Array(Vec<Tree>),
    Number(f64),
    Bool(bool),
    String(String),
    Null,
}

impl Tree {
    fn get(&self, key: &str) -> Option<&Tree> {
        match self {
            Tree::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The fields of an object (none for anything else).
    fn fields(&self) -> std::slice::Iter<'_, (String, Tree)> {
        match self {
            Tree::Object(fields) => fields.iter(),
            _ => [].iter(),
        }
    }

    /// The number a metric takes from this value: numbers, and booleans
    /// as 0 or 1.
    fn number(&self) -> Option<f64> {
        match self {
            Tree::Number(n) => Some(*n),
            Tree::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TreeVisitor;
        impl<'de> Visitor<'de> for TreeVisitor {
            type Value = Tree;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
                let mut fields: Vec<(String, Tree)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Tree>()? {
                    match fields.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, earlier)) => *earlier = value,
                        None => fields.push((key, value)),
                    }
                }
                Ok(Tree::Object(fields))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Tree::Array(items))
            }
            fn visit_bool<E>(self, b: bool) -> Result<Tree, E> {
                Ok(Tree::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Tree, E> {
                Ok(Tree::Number(n as f64))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Tree, E> {
                Ok(Tree::Number(n as f64))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Tree, E> {
                Ok(Tree::Number(n))
            }
            fn visit_str<E>(self, s: &str) -> Result<Tree, E> {
                Ok(Tree::String(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Tree, E> {
                Ok(Tree::String(s))
            }
            fn visit_unit<E>(self) -> Result<Tree, E> {
                Ok(Tree::Null)
            }
        }
        d.deserialize_any(TreeVisitor)
    }
}

/// The scopes of the metrics table after `run`, each with the report key
/// that lists its items, in the table's order.
pub const SCOPES: [(&str, &str); 5] = [
    ("node", "nodes"),
    ("link", "links"),
    ("app", "apps"),
    ("middlebox", "middleboxes"),
    ("flow", "flows"),
];

/// Fields of an item that name or place it rather than count anything.
const NOT_COUNTS: [&str; 6] = ["name", "kind", "host", "app", "stats", "interfaces"];

/// The long metrics table of a report as columns: one row per number,
/// with the strings of each column as indices into a list of distinct ones.
#[derive(Debug, Default)]
pub struct MetricColumns {
    /// The run's name, then every item's name (its index when it has none),
    /// scope after scope.
    pub names: Vec<String>,
    /// The kind of each of `names` (`None` for the run and items without one).
    pub kinds: Vec<Option<String>>,
    /// Where each scope's items start in `names`, and how many there are.
    pub items: Vec<(usize, usize)>,
    /// Distinct parts; index 0 stands for none.
    pub parts: Vec<String>,
    /// Distinct metric names.
    pub metrics: Vec<String>,
    /// Per row: 0 for the run, else 1 + the index in [`SCOPES`].
    pub scope: Vec<u8>,
    /// Per row: index into `names` (and `kinds`).
    pub name: Vec<u32>,
    /// Per row: index into `parts`.
    pub part: Vec<u32>,
    /// Per row: index into `metrics`.
    pub metric: Vec<u32>,
    /// Per row: the number (NaN where the report has `null`).
    pub value: Vec<f64>,
}

/// Strings to indices, in order of first appearance.
#[derive(Default)]
struct Interner {
    index: HashMap<String, u32>,
    strings: Vec<String>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.to_string());
        self.index.insert(s.to_string(), id);
        id
    }
}

/// Rows being collected.
struct Builder {
    out: MetricColumns,
    parts: Interner,
    metrics: Interner,
}

impl Builder {
    fn row(&mut self, scope: u8, name: u32, part: Option<&str>, metric: &str, value: f64) {
        let part = part.map_or(0, |p| self.parts.id(p));
        let metric = self.metrics.id(metric);
        self.out.scope.push(scope);
        self.out.name.push(name);
        self.out.part.push(part);
        self.out.metric.push(metric);
        self.out.value.push(value);
    }

    /// A row per number in `fields`: nested objects give dotted metric
    /// names, an array of objects (a link's directions) a `part` per
    /// element, `key[i]`, an array of numbers a metric per element; `null`
    /// gives NaN; strings give nothing.
    fn stat_rows<'t>(
        &mut self,
        scope: u8,
        name: u32,
        fields: impl Iterator<Item = &'t (String, Tree)>,
        prefix: &str,
        part: Option<&str>,
    ) {
        for (key, value) in fields {
            match value {
                Tree::Array(items)
                    if !items.is_empty() && items.iter().all(|i| matches!(i, Tree::Object(_))) =>
                {
                    for (i, item) in items.iter().enumerate() {
                        let sub = match part {
                            None => format!("{key}[{i}]"),
                            Some(p) => format!("{p}.{key}[{i}]"),
                        };
                        self.stat_rows(scope, name, item.fields(), prefix, Some(&sub));
                    }
                }
                Tree::Object(inner) => {
                    let prefix = format!("{prefix}{key}.");
                    self.stat_rows(scope, name, inner.iter(), &prefix, part);
                }
                Tree::Array(items)
                    if !items.is_empty() && items.iter().all(|i| i.number().is_some()) =>
                {
                    for (i, item) in items.iter().enumerate() {
                        let number = item.number().unwrap_or(f64::NAN);
                        self.row(scope, name, part, &format!("{prefix}{key}[{i}]"), number);
                    }
                }
                Tree::Null => self.row(scope, name, part, &format!("{prefix}{key}"), f64::NAN),
                other => {
                    if let Some(number) = other.number() {
                        self.row(scope, name, part, &format!("{prefix}{key}"), number);
                    }
                }
            }
        }
    }

    /// The rows of one item of a scope: its `stats`, then its other fields
    /// but those that name or place it.
    fn item(&mut self, scope: u8, index: usize, item: &Tree) {
        let name = match item.get("name") {
            Some(Tree::String(s)) => s.clone(),
            _ => index.to_string(),
        };
        let kind = match item.get("kind") {
            Some(Tree::String(s)) => Some(s.clone()),
            _ => None,
        };
        let id = self.out.names.len() as u32;
        self.out.names.push(name);
        self.out.kinds.push(kind);
        if let Some(stats) = item.get("stats") {
            self.stat_rows(scope, id, stats.fields(), "", None);
        }
        let extra = item
            .fields()
            .filter(|(k, _)| !NOT_COUNTS.contains(&k.as_str()));
        self.stat_rows(scope, id, extra, "", None);
    }
}

/// Feeds each element of an array to a builder as an item of `scope`.
struct Items<'b> {
    builder: &'b mut Builder,
    scope: u8,
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut count = 0;
        while let Some(item) = seq.next_element::<Tree>()? {
            self.builder.item(self.scope, count, &item);
            count += 1;
        }
        Ok(count)
    }
    // Anything else lists no items.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(0)
    }
    fn visit_bool<E>(self, _: bool) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_i64<E>(self, _: i64) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_u64<E>(self, _: u64) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_f64<E>(self, _: f64) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_str<E>(self, _: &str) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_unit<E>(self) -> Result<usize, E> {
        Ok(0)
    }
}

/// The long metrics table of the report in `text`: the run's
/// `duration_s` and `events_processed`, then every number of each node,
/// link, app, middlebox and TCP connection.
pub fn metric_columns(text: &[u8]) -> Result<MetricColumns, serde_json::Error> {
    // Spans only: the items are read below, their shapes are not needed.
    let spans = spans(text)?;
    let value = |key: &str| {
        spans
            .iter()
            .find(|s| s.0 == key)
            .map(|&(_, start, end)| &text[start..end])
    };
    let mut b = Builder {
        out: MetricColumns::default(),
        parts: Interner::default(),
        metrics: Interner::default(),
    };
    b.parts.id(""); // index 0: no part
    let name = match value("name")
        .map(serde_json::from_slice::<Tree>)
        .transpose()?
    {
        Some(Tree::String(s)) => s,
        _ => String::new(),
    };
    b.out.names.push(name);
    b.out.kinds.push(None);
    for key in ["duration_s", "events_processed"] {
        if let Some(raw) = value(key) {
            if let Some(number) = serde_json::from_slice::<Tree>(raw)?.number() {
                b.row(0, 0, None, key, number);
            }
        }
    }
    for (scope, (_, key)) in SCOPES.iter().enumerate() {
        let start = b.out.names.len();
        if let Some(raw) = value(key) {
            let scope = scope as u8 + 1;
            let mut d = serde_json::Deserializer::from_slice(raw);
            Items {
                builder: &mut b,
                scope,
            }
            .deserialize(&mut d)?;
            d.end()?;
        }
        b.out.items.push((start, b.out.names.len() - start));
    }
    let mut out = b.out;
    out.parts = b.parts.strings;
    out.metrics = b.metrics.strings;
    Ok(out)
}

/// An error of [`index`] or [`metric_columns`] on one line.
pub fn describe(err: &serde_json::Error) -> String {
    match err.classify() {
        serde_json::error::Category::Io => format!("cannot read: {err}"),
        _ => format!("not a run report ({err})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_finds_each_value_and_the_shape_of_arrays() {
        let text = br#"{"name": "x", "apps": [{"a": 1}, {"b": 2}], "files": ["m"], "n": 3}"#;
        let entries = index(text).unwrap();
        let keys: Vec<_> = entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["name", "apps", "files", "n"]);
        let value =
            |i: usize| std::str::from_utf8(&text[entries[i].start..entries[i].end]).unwrap();
        assert_eq!(value(0), "\"x\"");
        assert_eq!(value(1), r#"[{"a": 1}, {"b": 2}]"#);
        assert_eq!(entries[1].array, Some((2, true)));
        assert_eq!(entries[2].array, Some((1, false)));
        assert_eq!(entries[3].array, None);
    }

    #[test]
    fn a_repeated_key_keeps_its_place_and_its_last_value() {
        let text = br#"{"a": 1, "b": 2, "a": [3]}"#;
        let entries = index(text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(&text[entries[0].start..entries[0].end], b"[3]");
        assert!(index(b"[1]").is_err());
        assert!(index(b"{\"a\": 1} x").is_err());
    }

    fn rows(text: &str) -> Vec<(String, String, Option<String>, String, String)> {
        let c = metric_columns(text.as_bytes()).unwrap();
        (0..c.value.len())
            .map(|r| {
                let scope = match c.scope[r] {
                    0 => "run",
                    s => SCOPES[s as usize - 1].0,
                };
                let part = c.part[r];
                (
                    scope.to_string(),
                    c.names[c.name[r] as usize].clone(),
                    (part != 0).then(|| c.parts[part as usize].clone()),
                    c.metrics[c.metric[r] as usize].clone(),
                    format!("{}", c.value[r]),
                )
            })
            .collect()
    }

    #[test]
    fn every_number_becomes_a_row_in_the_order_of_the_report() {
        let text = r#"{
            "flows": [{"host": "a", "app": "x", "segments": 4, "state": "closed"}],
            "name": "s", "events_processed": 10, "duration_s": 1.5,
            "links": [{"name": "ab", "kind": "p2p", "stats": {"directions": [
                {"sent": 1, "bad": [2, 3]}, {"sent": 4, "bad": [5, 6]}]}}],
            "apps": [{"name": "x", "kind": "sink", "host": "b", "lost": null,
                      "up": true, "delay": {"min": 7}, "empty": [], "note": "n"}]
        }"#;
        let s = |v: &str| v.to_string();
        let row = |scope: &str, name: &str, part: Option<&str>, metric: &str, value: &str| {
            (s(scope), s(name), part.map(s), s(metric), s(value))
        };
        assert_eq!(
            rows(text),
            vec![
                row("run", "s", None, "duration_s", "1.5"),
                row("run", "s", None, "events_processed", "10"),
                row("link", "ab", Some("directions[0]"), "sent", "1"),
                row("link", "ab", Some("directions[0]"), "bad[0]", "2"),
                row("link", "ab", Some("directions[0]"), "bad[1]", "3"),
                row("link", "ab", Some("directions[1]"), "sent", "4"),
                row("link", "ab", Some("directions[1]"), "bad[0]", "5"),
                row("link", "ab", Some("directions[1]"), "bad[1]", "6"),
                row("app", "x", None, "lost", "NaN"),
                row("app", "x", None, "up", "1"),
                row("app", "x", None, "delay.min", "7"),
                row("flow", "0", None, "segments", "4"),
            ]
        );
        let c = metric_columns(text.as_bytes()).unwrap();
        assert_eq!(c.names, ["s", "ab", "x", "0"]);
        assert_eq!(c.kinds[1].as_deref(), Some("p2p"));
        assert_eq!(c.items, [(1, 0), (1, 1), (2, 1), (3, 0), (3, 1)]);
    }
}
