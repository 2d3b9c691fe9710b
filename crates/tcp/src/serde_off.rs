//! Optional settings in configuration files, where `false` means "off".
//!
//! TOML has no null, so a scenario could otherwise never turn off a setting
//! that its profile has on (window scaling, keep-alive). With this module a
//! field reads `window_scale = 7` or `window_scale = false`; `true` is an
//! error because it names no value. A missing field is "off" as well.

use core::fmt;
use core::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, IntoDeserializer, MapAccess, Unexpected, Visitor};
use serde::{Deserialize, Deserializer};

/// Deserialises `false` (or nothing) as `None` and anything else as `Some(T)`.
pub fn deserialize<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_any(OffOr(PhantomData))
}

struct OffOr<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for OffOr<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value, or false to turn the setting off")
    }

    fn visit_bool<E: de::Error>(self, on: bool) -> Result<Self::Value, E> {
        if on {
            Err(E::invalid_value(Unexpected::Bool(true), &self))
        } else {
            Ok(None)
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        T::deserialize(v.into_deserializer()).map(Some)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        T::deserialize(v.into_deserializer()).map(Some)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Some)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        T::deserialize(d).map(Some)
    }
}
