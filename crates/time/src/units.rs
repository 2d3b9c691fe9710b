//! Quantities written with units in configuration files: one exact parser
//! for every place that reads them (link rates and delays in scenarios,
//! TCP timer settings in profiles), so the same text means the same value
//! everywhere.
//!
//! Rates (bits per second): `bps`, `kbps`, `Mbps`, `Gbps` and the spelled-out
//! `bit/s`, `kbit/s`, `Mbit/s`, `Gbit/s`. Prefixes are decimal (k = 1000)
//! and case-insensitive, because nobody means "millibits": `10mbps` is
//! 10 Mbit/s. Bytes per second are refused, with the rate in bits the text
//! would mean: a capital `B` is a byte everywhere else (`10MB/s`, `10MBps`
//! are 80 Mbit/s), so reading it as a bit would silently give 8x less.
//!
//! Durations: `ns`, `us` (or `µs`), `ms`, `s`, case-sensitive. A bare number
//! is rejected because its unit would be a guess.
//!
//! Distances (node spacing, radio ranges): `mm`, `cm`, `m`, `km`,
//! case-sensitive, converted exactly to whole millimetres and returned in
//! metres.
//!
//! The number may have a fractional part (`1.5 Mbit/s`, `0.25ms`) and a space
//! before the unit. Values are converted exactly with integer arithmetic and
//! rounded to the nearest bit/s or nanosecond, so `"1.5ms"` is exactly
//! 1 500 000 ns on every machine.

use crate::SimDuration;

/// Splits `"1.5 Mbit/s"` into the number and the unit.
fn split(text: &str) -> Result<(bool, &str, &str), String> {
    let trimmed = text.trim();
    let (negative, rest) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, unit) = rest.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(format!(
            "expected a number followed by a unit, got {text:?}"
        ));
    }
    Ok((negative, number, unit.trim()))
}

/// `number * scale`, rounded to the nearest integer, computed exactly.
fn scale_decimal(number: &str, scale: u64) -> Option<u128> {
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let int_value: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().ok()?
    };
    // Digits beyond 30 cannot change the rounded result at any scale we use.
    let frac_digits = &frac_part[..frac_part.len().min(30)];
    let mut value = int_value.checked_mul(scale as u128)?;
    if !frac_digits.is_empty() {
        let frac: u128 = frac_digits.parse().ok()?;
        let denominator = 10u128.checked_pow(frac_digits.len() as u32)?;
        let scaled = frac.checked_mul(scale as u128)?;
        value = value.checked_add((scaled + denominator / 2) / denominator)?;
    }
    Some(value)
}

/// Parses a rate such as `"10Mbps"` or `"1.5 Mbit/s"` into bits per second.
/// Zero and negative rates are rejected.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let (negative, number, unit) = split(text)?;
    let symbol = unit
        .strip_prefix(['k', 'K', 'm', 'M', 'g', 'G'])
        .unwrap_or(unit);
    if symbol.starts_with('B') && !symbol.to_ascii_lowercase().starts_with("bit") {
        return Err(bytes_refused(text, number, unit));
    }
    let scale = match unit.to_ascii_lowercase().as_str() {
        "bps" | "bit/s" | "b/s" => 1,
        "kbps" | "kbit/s" | "kb/s" => 1_000,
        "mbps" | "mbit/s" | "mb/s" => 1_000_000,
        "gbps" | "gbit/s" | "gb/s" => 1_000_000_000,
        "" => return Err(format!("missing unit (e.g. \"10Mbps\"), got {text:?}")),
        _ => {
            return Err(format!(
                "unknown rate unit {unit:?} (use bps, kbps, Mbps, Gbps or bit/s, kbit/s, Mbit/s, Gbit/s), got {text:?}"
            ))
        }
    };
    let value = scale_decimal(number, scale).ok_or_else(|| format!("too large: {text:?}"))?;
    if negative || value == 0 {
        return Err(format!("must be positive, got {text:?}"));
    }
    u64::try_from(value).map_err(|_| format!("too large: {text:?}"))
}

/// The error for a rate written in bytes per second (`"10MB/s"`), naming
/// the rate in bits it stands for when that is plain (`"80Mbps"`).
fn bytes_refused(text: &str, number: &str, unit: &str) -> String {
    let prefix = &unit[..unit.find('B').unwrap_or(0)];
    let scale = match prefix.to_ascii_lowercase().as_str() {
        "" => Some(1),
        "k" => Some(1_000),
        "m" => Some(1_000_000),
        "g" => Some(1_000_000_000),
        _ => None,
    };
    let bits = scale
        .and_then(|scale| scale_decimal(number, 8 * scale))
        .filter(|&bits| bits > 0)
        .map(|bits| {
            let (value, unit) = [
                (1_000_000_000, "Gbps"),
                (1_000_000, "Mbps"),
                (1_000, "kbps"),
            ]
            .into_iter()
            .find(|&(step, _)| bits % step == 0)
            .map_or((bits, "bps"), |(step, unit)| (bits / step, unit));
            format!(" (that is \"{value}{unit}\")")
        })
        .unwrap_or_default();
    format!(
        "{unit:?} is bytes per second (B is a byte); rates are written in bits per second, \
         e.g. \"10Mbps\"{bits}, got {text:?}"
    )
}

/// Parses a duration such as `"5ms"`, `"2s"` or `"250 us"`. Zero is allowed
/// (callers that need a positive span check it); negative values are not.
pub fn parse_duration(text: &str) -> Result<SimDuration, String> {
    let (negative, number, unit) = split(text)?;
    let scale = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "" => return Err(format!("missing unit (e.g. \"5ms\"), got {text:?}")),
        _ => {
            return Err(format!(
                "unknown duration unit {unit:?} (use ns, us, ms or s), got {text:?}"
            ))
        }
    };
    let value = scale_decimal(number, scale).ok_or_else(|| format!("too large: {text:?}"))?;
    if negative && value != 0 {
        return Err(format!("must not be negative, got {text:?}"));
    }
    let nanos = u64::try_from(value).map_err(|_| format!("too large: {text:?}"))?;
    Ok(SimDuration::from_nanos(nanos))
}

/// Parses a distance such as `"40m"`, `"1.5 km"` or `"25cm"` into metres,
/// rounded to the nearest millimetre. Zero is allowed (callers that need a
/// positive distance check it); negative values are not.
pub fn parse_distance(text: &str) -> Result<f64, String> {
    let (negative, number, unit) = split(text)?;
    let millimetres_per_unit = match unit {
        "mm" => 1,
        "cm" => 10,
        "m" => 1_000,
        "km" => 1_000_000,
        "" => return Err(format!("missing unit (e.g. \"40m\"), got {text:?}")),
        _ => {
            return Err(format!(
                "unknown distance unit {unit:?} (use mm, cm, m or km), got {text:?}"
            ))
        }
    };
    let millimetres = scale_decimal(number, millimetres_per_unit)
        .ok_or_else(|| format!("too large: {text:?}"))?;
    if negative && millimetres != 0 {
        return Err(format!("must not be negative, got {text:?}"));
    }
    // Beyond 2^53 mm (about 9 billion km) f64 could not hold every
    // millimetre; no radio reaches that far.
    if millimetres > 1 << 53 {
        return Err(format!("too large: {text:?}"));
    }
    Ok(millimetres as f64 / 1000.0)
}

/// Formats a duration in the largest unit that represents it exactly
/// (`"250ms"`, `"1500us"`, `"0s"`), so [`parse_duration`] reads back the
/// same value. Only ASCII units are written.
pub fn format_duration(d: SimDuration) -> String {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn rates_in_every_spelling() {
        assert_eq!(parse_rate("10Mbps"), Ok(10_000_000));
        assert_eq!(parse_rate("1.5 Mbit/s"), Ok(1_500_000));
        assert_eq!(parse_rate("250kbps"), Ok(250_000));
        assert_eq!(parse_rate("424 kbit/s"), Ok(424_000));
        assert_eq!(parse_rate("1Gbps"), Ok(1_000_000_000));
        assert_eq!(parse_rate("9600bps"), Ok(9600));
        assert_eq!(parse_rate("10mbps"), Ok(10_000_000));
    }

    #[test]
    fn rates_in_bytes_are_refused_with_the_rate_in_bits() {
        // "10MB/s" once meant 10 Mbit/s: a capital B is a byte.
        for text in [
            "10MB/s", "10MBps", "10 MB/s", "10MBPS", "1.5kB/s", "100B/s", "2GB/s",
        ] {
            let err = parse_rate(text).unwrap_err();
            assert!(err.contains("bytes per second"), "{text}: {err}");
            assert!(err.contains(text), "{text}: {err}");
        }
        assert!(parse_rate("10MB/s").unwrap_err().contains("\"80Mbps\""));
        assert!(parse_rate("1.5kB/s").unwrap_err().contains("\"12kbps\""));
        assert!(parse_rate("100B/s").unwrap_err().contains("\"800bps\""));
        assert!(parse_rate("2GB/s").unwrap_err().contains("\"16Gbps\""));
        // Bits in any case of the prefix stay bits.
        assert_eq!(parse_rate("10Mb/s"), Ok(10_000_000));
        assert_eq!(parse_rate("10mb/s"), Ok(10_000_000));
        assert_eq!(parse_rate("10Kbps"), Ok(10_000));
        assert_eq!(parse_rate("10KBIT/S"), Ok(10_000));
    }

    #[test]
    fn distances_in_every_unit_exactly() {
        assert_eq!(parse_distance("40m"), Ok(40.0));
        assert_eq!(parse_distance("40 m"), Ok(40.0));
        assert_eq!(parse_distance("1.5km"), Ok(1500.0));
        assert_eq!(parse_distance("25cm"), Ok(0.25));
        assert_eq!(
            parse_distance("0.0004m"),
            Ok(0.0),
            "rounded to the millimetre"
        );
        assert_eq!(parse_distance("0m"), Ok(0.0));
        assert!(parse_distance("-1m").unwrap_err().contains("negative"));
        assert!(parse_distance("40").unwrap_err().contains("missing unit"));
        assert!(parse_distance("40 M")
            .unwrap_err()
            .contains("unknown distance unit"));
        assert!(parse_distance("99999999999km")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn bad_rates_are_rejected_with_the_text() {
        assert_eq!(
            parse_rate("-5Mbps"),
            Err("must be positive, got \"-5Mbps\"".to_string())
        );
        assert!(parse_rate("0Mbps")
            .unwrap_err()
            .contains("must be positive"));
        assert!(parse_rate("10").unwrap_err().contains("missing unit"));
        assert!(parse_rate("10 furlongs")
            .unwrap_err()
            .contains("unknown rate unit"));
        assert!(parse_rate("fast")
            .unwrap_err()
            .contains("expected a number"));
        assert!(parse_rate("1.2.3Mbps").is_err());
        assert!(parse_rate("99999999999999999999999Gbps")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn durations_convert_exactly() {
        assert_eq!(parse_duration("5ms"), Ok(SimDuration::from_millis(5)));
        assert_eq!(parse_duration("2s"), Ok(SimDuration::from_secs(2)));
        assert_eq!(parse_duration("1.5ms"), Ok(SimDuration::from_micros(1500)));
        assert_eq!(parse_duration("250 us"), Ok(SimDuration::from_micros(250)));
        assert_eq!(parse_duration("0s"), Ok(SimDuration::ZERO));
        assert_eq!(
            parse_duration("0.0000000015s"),
            Ok(SimDuration::from_nanos(2))
        );
        assert!(parse_duration("-1ms")
            .unwrap_err()
            .contains("must not be negative"));
        assert!(parse_duration("5 min")
            .unwrap_err()
            .contains("unknown duration unit"));
        assert!(parse_duration("5").unwrap_err().contains("missing unit"));
    }

    #[test]
    fn micro_sign_and_ascii_micro_agree() {
        assert_eq!(parse_duration("250µs"), parse_duration("250us"));
        assert_eq!(parse_duration("250 µs"), Ok(SimDuration::from_micros(250)));
    }

    #[test]
    fn durations_are_formatted_in_the_largest_exact_unit() {
        let formatted: Vec<String> = [0, 7, 40_000, 1_500_000, 250_000_000, 3_000_000_000]
            .into_iter()
            .map(|n| format_duration(SimDuration::from_nanos(n)))
            .collect();
        assert_eq!(formatted, ["0s", "7ns", "40us", "1500us", "250ms", "3s"]);
    }

    proptest! {
        #[test]
        fn formatted_durations_parse_back_exactly(nanos in any::<u64>()) {
            let d = SimDuration::from_nanos(nanos);
            prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }

        #[test]
        fn decimal_milliseconds_are_exact(whole in 0u64..1_000_000, frac in 0u64..1_000_000) {
            // "W.FFFFFFms" is W ms plus FFFFFF nanoseconds, with no float rounding.
            let text = format!("{whole}.{frac:06}ms");
            prop_assert_eq!(
                parse_duration(&text),
                Ok(SimDuration::from_nanos(whole * 1_000_000 + frac))
            );
        }
    }
}
