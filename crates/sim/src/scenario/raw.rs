//! The top-level tables of a scenario file as read. `[[link]]` and
//! `[[app]]` entries stay TOML tables here: each kind reads its own
//! fields (see [`super::validate`]).

use std::net::IpAddr;

use serde::{Deserialize, Deserializer};

use crate::capture::CaptureDirection;
use crate::cidr::{Ipv4Cidr, Ipv6Cidr, StrVisitor};
use crate::config::{field_error, one_line, path_string, Distance, Duration, ScenarioError};
use crate::position::Position;

/// `"default"` or a prefix of either family.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Destination {
    /// `"default"`: `0.0.0.0/0` or `::/0`, whichever family `via` has.
    Default,
    /// An IPv4 prefix.
    V4(Ipv4Cidr),
    /// An IPv6 prefix.
    V6(Ipv6Cidr),
}

impl<'de> Deserialize<'de> for Destination {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = d.deserialize_str(StrVisitor(
            "\"default\" or a prefix like \"10.0.1.0/24\" or \"fd00:1::/64\"",
        ))?;
        if text == "default" {
            return Ok(Destination::Default);
        }
        // Only IPv6 addresses contain colons; anything else reads as IPv4,
        // with IPv4's messages as before.
        if text.contains(':') {
            text.parse().map(Destination::V6)
        } else {
            text.parse().map(Destination::V4)
        }
        .map_err(serde::de::Error::custom)
    }
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) name: String,
    pub(super) seed: Option<u64>,
    pub(super) duration: Duration,
    #[serde(default)]
    pub(super) host: Vec<RawHost>,
    #[serde(default)]
    pub(super) host_group: Vec<RawHostGroup>,
    #[serde(default)]
    pub(super) link: Vec<toml::Table>,
    #[serde(default)]
    pub(super) route: Vec<RawRoute>,
    #[serde(default)]
    pub(super) capture: Vec<RawCapture>,
    #[serde(default)]
    pub(super) app: Vec<toml::Table>,
    #[serde(default)]
    pub(super) middlebox: Vec<toml::Table>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    pub(super) name: String,
    pub(super) bridge: Option<bool>,
    pub(super) position: Option<Position>,
    pub(super) profile: Option<String>,
    pub(super) tcp: Option<toml::Table>,
    /// `"rtolab"` (our engine, the default) or `"smoltcp"`.
    pub(super) stack: Option<String>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub(super) host: String,
    pub(super) destination: Destination,
    pub(super) via: IpAddr,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(deny_unknown_fields)]
pub(super) struct RawCapture {
    pub(super) host: String,
    pub(super) link: Option<String>,
    pub(super) interface: Option<IpAddr>,
    pub(super) file: String,
    #[serde(default)]
    pub(super) direction: CaptureDirection,
}

/// Parses the whole file at once.
pub(super) fn parse_whole(text: &str) -> Result<RawScenario, ScenarioError> {
    let deserializer = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(deserializer).map_err(|e| deserialize_error(e, text))
}

/// Turns a deserialization error into a one-line error with a field path.
fn deserialize_error(
    err: serde_path_to_error::Error<toml::de::Error>,
    text: &str,
) -> ScenarioError {
    let path = path_string(err.path());
    let inner = err.inner();
    let message = one_line(inner.message());
    if let Some(e) = field_error(&path, &message) {
        return e;
    }
    if path.is_empty() {
        // A syntax error: no field yet, so give the position instead.
        let location = inner
            .span()
            .map(|span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("line {line}, column {column}")
            })
            .unwrap_or_else(|| "scenario".to_string());
        return ScenarioError::new(location, message);
    }
    ScenarioError::new(path, message)
}

/// A `[[host_group]]` table (its hosts are made in [`super::layout`]).
#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(deny_unknown_fields)]
pub(super) struct RawHostGroup {
    pub(super) prefix: String,
    pub(super) grid: Option<RawGrid>,
    pub(super) random: Option<RawRandom>,
    pub(super) profile: Option<String>,
    pub(super) tcp: Option<toml::Table>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(deny_unknown_fields)]
pub(super) struct RawGrid {
    pub(super) rows: u64,
    pub(super) cols: u64,
    pub(super) spacing: Distance,
    pub(super) origin: Option<Position>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(deny_unknown_fields)]
pub(super) struct RawRandom {
    pub(super) count: u64,
    pub(super) width: Distance,
    pub(super) height: Distance,
    pub(super) origin: Option<Position>,
    pub(super) seed: Option<u64>,
}
