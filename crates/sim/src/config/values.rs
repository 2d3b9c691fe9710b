//! Values with units, common checks, and the field names of a kind.

use std::cell::Cell;
use std::collections::BTreeMap;

use rtolab_time::SimDuration;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

use super::ScenarioError;
use crate::cidr::StrVisitor;
use crate::position::Position;
use crate::units::{parse_distance, parse_duration, parse_rate};

/// A rate string such as `"10Mbps"`, in bits per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate(pub u64);

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = d.deserialize_str(StrVisitor("a rate with a unit, like \"10Mbps\""))?;
        parse_rate(&text).map(Rate).map_err(de::Error::custom)
    }
}

/// A duration string such as `"5ms"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duration(pub SimDuration);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = d.deserialize_str(StrVisitor("a duration with a unit, like \"5ms\""))?;
        parse_duration(&text)
            .map(Duration)
            .map_err(de::Error::custom)
    }
}

/// A distance string such as `"40m"`, in metres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Distance(pub f64);

impl<'de> Deserialize<'de> for Distance {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = d.deserialize_str(StrVisitor("a distance with a unit, like \"40m\""))?;
        parse_distance(&text)
            .map(Distance)
            .map_err(de::Error::custom)
    }
}

/// Fails when an optional field that `what` does not take is set.
pub fn not_allowed<T>(value: &Option<T>, path: String, what: &str) -> Result<(), ScenarioError> {
    match value {
        Some(_) => Err(ScenarioError::new(path, format!("not allowed for {what}"))),
        None => Ok(()),
    }
}

/// The value of an optional field that `what` requires.
pub fn required<T: Clone>(value: &Option<T>, path: String, what: &str) -> Result<T, ScenarioError> {
    value
        .clone()
        .ok_or_else(|| ScenarioError::new(path, format!("required for {what}")))
}

/// Fails on an empty or repeated name; `path(i)` names the i-th.
pub fn check_unique<'a>(
    names: impl Iterator<Item = &'a str>,
    path: impl Fn(usize) -> String,
    what: &str,
) -> Result<(), ScenarioError> {
    let mut seen = BTreeMap::new();
    for (i, name) in names.enumerate() {
        if name.is_empty() {
            return Err(ScenarioError::new(path(i), "must not be empty"));
        }
        if let Some(first) = seen.insert(name, i) {
            return Err(ScenarioError::new(
                path(i),
                format!("duplicate {what} name {name:?} (also at {})", path(first)),
            ));
        }
    }
    Ok(())
}

/// Fails unless both coordinates are finite.
pub fn check_position(path: String, p: &Position) -> Result<(), ScenarioError> {
    if p.x.is_finite() && p.y.is_finite() {
        Ok(())
    } else {
        Err(ScenarioError::new(
            path,
            "coordinates must be finite numbers",
        ))
    }
}

/// The field names a struct deserializes, read from its `Deserialize`
/// implementation, so a registry can tell which kind a stray key belongs to
/// without a second, hand-kept list. Empty for types that are not structs.
pub fn struct_fields<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    let seen = Cell::new(None);
    let _ = T::deserialize(FieldProbe(&seen));
    seen.get().unwrap_or(&[])
}

/// A deserializer that only records the fields a struct asks for.
struct FieldProbe<'a>(&'a Cell<Option<&'static [&'static str]>>);

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("field probe"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.set(Some(fields));
        Err(de::Error::custom("field probe"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Two {
        alpha: u32,
        beta: Option<String>,
    }

    #[test]
    fn struct_fields_reads_the_derived_field_list() {
        assert_eq!(struct_fields::<Two>(), ["alpha", "beta"]);
        assert!(struct_fields::<u32>().is_empty());
    }
}
