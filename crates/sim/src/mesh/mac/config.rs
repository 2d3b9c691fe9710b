//! The MAC stack's configuration: CSMA over one radio duty cycling layer.
//!
//! ```toml
//! pan_id = 0xabcd
//! rdc = { kind = "contikimac", check_rate_hz = 8 }
//! csma = { max_transmissions = 3, queue_len = 4 }
//! ```
//!
//! Every field is optional; the defaults are Contiki 3.0's on the Tmote
//! Sky, except `csma.queue_len`, which is the study's 4 (Contiki's default
//! `QUEUEBUF_NUM` on the Sky with IPv6 is 8).

use serde::{Deserialize, Serialize};

use super::framer::IEEE802154_PANID;
use crate::config::{deserialize_at, ScenarioError};

/// Channel check rate of the Sky's configuration,
/// `NETSTACK_CONF_RDC_CHANNEL_CHECK_RATE` (platform/sky/contiki-conf.h), and
/// the study's.
pub const DEFAULT_CHECK_RATE_HZ: u32 = 8;

/// Highest channel check rate accepted: above it a cycle of the Sky's
/// 32 768 Hz rtimer is shorter than the four channel checks ContikiMAC
/// leaves at the end of a cycle, and it would never sleep.
pub const MAX_CHECK_RATE_HZ: u32 = 128;

/// The link-layer queue of the study: `QUEUEBUF_CONF_NUM` 4.
pub const DEFAULT_QUEUE_LEN: usize = 4;

/// Transmissions of a packet before it is dropped
/// (`CSMA_MAX_MAC_TRANSMISSIONS`, csma.c).
pub const CSMA_MAX_MAC_TRANSMISSIONS: u8 = 3;
/// Neighbours with queued packets at once (`CSMA_MAX_NEIGHBOR_QUEUES`,
/// csma.c).
pub const CSMA_MAX_NEIGHBOR_QUEUES: usize = 2;

/// A whole MAC stack: CSMA over a radio duty cycling (RDC) layer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MacConfig {
    /// The radio duty cycling layer.
    pub rdc: RdcConfig,
    /// The CSMA layer above it.
    pub csma: CsmaConfig,
    /// PAN ID written into and required of data frames
    /// (`IEEE802154_CONF_PANID`, platform/sky/contiki-conf.h).
    pub pan_id: u16,
}

impl Default for MacConfig {
    fn default() -> Self {
        MacConfig {
            rdc: RdcConfig::ContikiMac(ContikiMacConfig::default()),
            csma: CsmaConfig::default(),
            pan_id: IEEE802154_PANID,
        }
    }
}

/// The radio duty cycling layer, by `kind`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum RdcConfig {
    /// `kind = "contikimac"`: periodic channel checks and strobed frames.
    #[serde(rename = "contikimac")]
    ContikiMac(ContikiMacConfig),
    /// `kind = "nullrdc"`: the radio always on.
    #[serde(rename = "nullrdc")]
    NullRdc(NullRdcConfig),
}

/// ContikiMAC's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContikiMacConfig {
    /// Wake-ups per second (`NETSTACK_RDC_CHANNEL_CHECK_RATE`): a power of
    /// two from 1 to 128.
    pub check_rate_hz: u32,
    /// Phase lock (`CONTIKIMAC_CONF_WITH_PHASE_OPTIMIZATION`, on by default).
    /// contikimac.c turns it off at 64 Hz and above whatever this says.
    pub phase_optimization: bool,
}

impl Default for ContikiMacConfig {
    fn default() -> Self {
        ContikiMacConfig {
            check_rate_hz: DEFAULT_CHECK_RATE_HZ,
            phase_optimization: true,
        }
    }
}

/// nullrdc's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NullRdcConfig {
    /// nullrdc never sleeps, but CSMA's retransmission time base is one
    /// interval of this rate when the RDC has no channel check interval
    /// (csma.c, `default_timebase`). A power of two from 1 to 128.
    pub check_rate_hz: u32,
}

impl Default for NullRdcConfig {
    fn default() -> Self {
        NullRdcConfig {
            check_rate_hz: DEFAULT_CHECK_RATE_HZ,
        }
    }
}

/// CSMA's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CsmaConfig {
    /// Transmissions of a packet before it is dropped
    /// (`CSMA_MAX_MAC_TRANSMISSIONS`); at least 1.
    pub max_transmissions: u8,
    /// Packets queued at once, all neighbours together, and per neighbour
    /// (`QUEUEBUF_NUM`, which sizes both pools in csma.c); at least 1.
    pub queue_len: usize,
    /// Neighbours (broadcast counting as one) with queued packets at once
    /// (`CSMA_MAX_NEIGHBOR_QUEUES`); at least 1.
    pub neighbor_queues: usize,
}

impl Default for CsmaConfig {
    fn default() -> Self {
        CsmaConfig {
            max_transmissions: CSMA_MAX_MAC_TRANSMISSIONS,
            queue_len: DEFAULT_QUEUE_LEN,
            neighbor_queues: CSMA_MAX_NEIGHBOR_QUEUES,
        }
    }
}

impl RdcConfig {
    /// The channel check rate (ContikiMAC's, or nullrdc's CSMA time base).
    pub fn check_rate_hz(&self) -> u32 {
        match self {
            RdcConfig::ContikiMac(c) => c.check_rate_hz,
            RdcConfig::NullRdc(c) => c.check_rate_hz,
        }
    }
}

impl MacConfig {
    /// Reads a MAC table (a TOML value) at `path` and validates it; errors
    /// name the field below `path`.
    pub fn from_toml(value: toml::Value, path: &str) -> Result<MacConfig, ScenarioError> {
        let config: MacConfig = deserialize_at(value, path)?;
        config.validate(path)?;
        Ok(config)
    }

    /// Checks every field; `path` is the table's own (`mesh.mac`).
    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
        let at = |field: &str| {
            if path.is_empty() {
                field.to_string()
            } else {
                format!("{path}.{field}")
            }
        };
        let rate = self.rdc.check_rate_hz();
        if !rate.is_power_of_two() || rate > MAX_CHECK_RATE_HZ {
            return Err(ScenarioError::new(
                at("rdc.check_rate_hz"),
                format!("must be a power of two from 1 to {MAX_CHECK_RATE_HZ}, got {rate}"),
            ));
        }
        if self.csma.max_transmissions == 0 {
            return Err(ScenarioError::new(
                at("csma.max_transmissions"),
                "must be at least 1",
            ));
        }
        if self.csma.queue_len == 0 {
            return Err(ScenarioError::new(
                at("csma.queue_len"),
                "must be at least 1",
            ));
        }
        if self.csma.neighbor_queues == 0 {
            return Err(ScenarioError::new(
                at("csma.neighbor_queues"),
                "must be at least 1",
            ));
        }
        // 0xffff is the broadcast PAN ID: frames sent in it would be read by
        // every PAN.
        if self.pan_id == 0xffff {
            return Err(ScenarioError::new(
                at("pan_id"),
                "must not be the broadcast PAN ID 0xffff",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<MacConfig, ScenarioError> {
        MacConfig::from_toml(toml::Value::Table(toml::from_str(text).unwrap()), "mac")
    }

    #[test]
    fn defaults_are_contiki_s_and_the_study_s() {
        let c = read("").unwrap();
        assert_eq!(c, MacConfig::default());
        assert_eq!(
            c.rdc,
            RdcConfig::ContikiMac(ContikiMacConfig {
                check_rate_hz: 8,
                phase_optimization: true
            })
        );
        assert_eq!(
            (c.csma.max_transmissions, c.csma.queue_len, c.pan_id),
            (3, 4, 0xabcd)
        );
        let c = read("rdc = { kind = \"nullrdc\" }\ncsma = { queue_len = 8 }").unwrap();
        assert_eq!(
            c.rdc,
            RdcConfig::NullRdc(NullRdcConfig { check_rate_hz: 8 })
        );
        assert_eq!(c.csma.queue_len, 8);
    }

    #[test]
    fn errors_name_the_field() {
        let e = read("rdc = { kind = \"contikimac\", check_rate_hz = 6 }").unwrap_err();
        assert_eq!(
            e.to_string(),
            "mac.rdc.check_rate_hz: must be a power of two from 1 to 128, got 6"
        );
        let e = read("rdc = { kind = \"nullrdc\", check_rate_hz = 256 }").unwrap_err();
        assert_eq!(e.path, "mac.rdc.check_rate_hz");
        let e = read("csma = { max_transmissions = 0 }").unwrap_err();
        assert_eq!(e.path, "mac.csma.max_transmissions");
        let e = read("csma = { queue_len = 0 }").unwrap_err();
        assert_eq!(e.path, "mac.csma.queue_len");
        let e = read("csma = { neighbor_queues = 0 }").unwrap_err();
        assert_eq!(e.path, "mac.csma.neighbor_queues");
        let e = read("pan_id = 0xffff").unwrap_err();
        assert_eq!(e.path, "mac.pan_id");
        let e = read("csma = { retries = 2 }").unwrap_err();
        assert_eq!(e.path, "mac.csma.retries");
        assert!(e.message.contains("unknown field"), "{e}");
        let e = read("rdc = { kind = \"xmac\" }").unwrap_err();
        assert!(e.path.starts_with("mac.rdc"), "{e}");
        let e = read("rdc = { kind = \"nullrdc\", phase_optimization = true }").unwrap_err();
        assert!(e.to_string().contains("phase_optimization"), "{e}");
        let e = read("csma = { max_transmissions = -1 }").unwrap_err();
        assert_eq!(e.path, "mac.csma.max_transmissions");
    }
}
