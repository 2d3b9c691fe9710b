//! Durations in configuration files, written with a unit: `"200ms"`,
//! `"1s"`, `"1.5s"`, `"40us"` (or `"40µs"`), `"250000ns"`.
//!
//! Reading and writing use [`rtolab_time::units`], the parser the scenario
//! files use for link delays, so a duration means the same in `[host.tcp]`
//! as anywhere else. A bare number is rejected because its unit would be a
//! guess.

use rtolab_time::units::{format_duration, parse_duration};
use rtolab_time::SimDuration;
use serde::{de, Deserialize, Deserializer, Serializer};

/// Parses `"<number><unit>"` with unit `ns`, `us` (or `µs`), `ms` or `s`.
pub fn parse(text: &str) -> Result<SimDuration, String> {
    parse_duration(text)
}

/// Formats a duration in the largest unit that represents it exactly.
pub fn format(d: SimDuration) -> String {
    format_duration(d)
}

/// Serde `serialize_with` helper.
pub fn serialize<S: Serializer>(d: &SimDuration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*d))
}

/// Serde `deserialize_with` helper.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SimDuration, D::Error> {
    let text = String::deserialize(d)?;
    parse(&text).map_err(de::Error::custom)
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Deserialize, Serialize)]
    struct Timer {
        #[serde(with = "super")]
        after: SimDuration,
    }

    #[test]
    fn settings_read_every_unit_and_reject_bare_numbers() {
        let read = |text: &str| toml::from_str::<Timer>(&format!("after = {text:?}"));
        assert_eq!(read("1.5s").unwrap().after, SimDuration::from_millis(1500));
        assert_eq!(read("250µs").unwrap().after, SimDuration::from_micros(250));
        assert_eq!(read("7 ns").unwrap().after, SimDuration::from_nanos(7));
        let err = read("200").unwrap_err().to_string();
        assert!(err.contains("missing unit"), "{err}");
        let err = read("2 min").unwrap_err().to_string();
        assert!(err.contains("unknown duration unit"), "{err}");
    }

    #[test]
    fn settings_are_written_in_the_largest_exact_unit() {
        let text = toml::to_string(&Timer {
            after: SimDuration::from_micros(1500),
        })
        .unwrap();
        assert_eq!(text, "after = \"1500us\"\n");
    }
}
