//! Durations in configuration files, written with a unit: `"200ms"`,
//! `"1s"`, `"1.5s"`, `"40us"`, `"250000ns"`.
//!
//! A bare number is rejected because its unit would be a guess.

use rtolab_time::SimDuration;
use serde::{de, Deserialize, Deserializer, Serializer};

/// Parses `"<number><unit>"` with unit `ns`, `us`, `ms` or `s`.
pub fn parse(text: &str) -> Result<SimDuration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("duration {text:?} has no unit (ns, us, ms or s)"))?;
    let (number, unit) = text.split_at(split);
    let scale: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => return Err(format!("duration {text:?} has unknown unit {other:?}")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("duration {text:?} has no valid number"))?;
    let nanos = (value * scale).round();
    if !nanos.is_finite() || nanos >= u64::MAX as f64 {
        return Err(format!("duration {text:?} is out of range"));
    }
    Ok(SimDuration::from_nanos(nanos as u64))
}

/// Formats a duration in the largest unit that represents it exactly.
pub fn format(d: SimDuration) -> String {
    let n = d.as_nanos();
    if n == 0 {
        "0s".into()
    } else if n % 1_000_000_000 == 0 {
        format!("{}s", n / 1_000_000_000)
    } else if n % 1_000_000 == 0 {
        format!("{}ms", n / 1_000_000)
    } else if n % 1_000 == 0 {
        format!("{}us", n / 1_000)
    } else {
        format!("{n}ns")
    }
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
    use super::*;

    #[test]
    fn parses_units_and_rejects_bare_numbers() {
        assert_eq!(parse("200ms"), Ok(SimDuration::from_millis(200)));
        assert_eq!(parse("1.5s"), Ok(SimDuration::from_millis(1500)));
        assert_eq!(parse("40us"), Ok(SimDuration::from_micros(40)));
        assert_eq!(parse("7ns"), Ok(SimDuration::from_nanos(7)));
        assert!(parse("200").unwrap_err().contains("no unit"));
        assert!(parse("2 min").unwrap_err().contains("unknown unit"));
        assert!(parse("..s").unwrap_err().contains("no valid number"));
    }

    #[test]
    fn formats_round_trip() {
        for d in [0, 1, 1_000, 250_000_000, 3_000_000_000, 1_500_000_000] {
            let d = SimDuration::from_nanos(d);
            assert_eq!(parse(&format(d)), Ok(d));
        }
    }
}
