//! RPL parameters: Contiki 3.0's defaults, each named after the constant it
//! comes from, and the scenario table they are read from.
//!
//! ```toml
//! routing = { kind = "rpl", dio_interval_min = 12, dao_latency = "4s" }
//! ```

use rtolab_time::SimDuration;
use serde::Deserialize;

use crate::config::{deserialize_at, Duration, ScenarioError};

/// Validated RPL parameters of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RplConfig {
    /// RPLInstanceID the root creates (`RPL_DEFAULT_INSTANCE` 0x1e,
    /// `rpl-conf.h`).
    pub instance_id: u8,
    /// Smallest Trickle interval as log2 ms (`RPL_DIO_INTERVAL_MIN` 12, about
    /// 4 s, `rpl-conf.h`).
    pub dio_interval_min: u8,
    /// Doublings of the Trickle interval (`RPL_DIO_INTERVAL_DOUBLINGS` 8,
    /// to about 17.5 minutes, `rpl-conf.h`).
    pub dio_interval_doublings: u8,
    /// DIO redundancy constant (`RPL_DIO_REDUNDANCY` 10, `rpl-conf.h`).
    pub dio_redundancy: u8,
    /// MinHopRankIncrease (`RPL_MIN_HOPRANKINC` 256, `rpl-private.h`).
    pub min_hop_rank_increase: u16,
    /// MaxRankIncrease (`RPL_MAX_RANKINC`, 7 × MinHopRankIncrease,
    /// `rpl-private.h`); 0 disables the limit.
    pub max_rank_increase: u16,
    /// Route lifetime in lifetime units (`RPL_DEFAULT_LIFETIME` 0xff,
    /// `rpl-conf.h`).
    pub default_lifetime: u8,
    /// Lifetime unit in seconds (`RPL_DEFAULT_LIFETIME_UNIT` 0xffff,
    /// `rpl-conf.h`). With both at their maximum, routes are never refreshed
    /// by a lifetime timer, as in Contiki.
    pub lifetime_unit: u16,
    /// ETX assumed for a new neighbour (`RPL_INIT_LINK_METRIC` 2,
    /// `rpl-conf.h`).
    pub init_link_metric: u8,
    /// DAO delay: a DAO goes out uniformly within [L/2, 3L/2) after it is
    /// scheduled (`RPL_DAO_LATENCY` 4 s, `rpl-private.h`).
    pub dao_latency: SimDuration,
    /// Ask for DAO-ACKs (`RPL_CONF_DAO_ACK`, off in Contiki 3.0).
    pub dao_ack: bool,
    /// A node outside any DODAG sends a DIS this often (`RPL_DIS_INTERVAL`
    /// 60 s, `rpl-private.h`).
    pub dis_interval: SimDuration,
    /// Probe parents with unicast DIOs (`RPL_WITH_PROBING` 1, `rpl-conf.h`).
    pub probing: bool,
    /// Mean time between probes; each wait is uniform in [P/2, 3P/2)
    /// (`RPL_PROBING_INTERVAL` 120 s, `rpl-conf.h`).
    pub probing_interval: SimDuration,
    /// A parent not sent to for this long needs probing
    /// (`RPL_PROBING_EXPIRATION_TIME` 10 min, `rpl-conf.h`).
    pub probing_expiration: SimDuration,
    /// Downward routes kept; the least recently added is dropped for a new
    /// one (`UIP_CONF_MAX_ROUTES` 20, `contiki-default-conf.h` and the Sky
    /// platform).
    pub max_routes: usize,
    /// From this time on, a node keeps its preferred parent for as long as
    /// that parent stays in its parent set with a finite rank (no Contiki
    /// setting: an experiment's switch that freezes the tree formed so
    /// far, so that schemes compared on one network also share its
    /// routes). `None`, the default, is RPL as Contiki runs it.
    pub freeze_tree_at: Option<SimDuration>,
}

impl Default for RplConfig {
    fn default() -> Self {
        RplConfig {
            instance_id: 0x1e,
            dio_interval_min: 12,
            dio_interval_doublings: 8,
            dio_redundancy: 10,
            min_hop_rank_increase: 256,
            max_rank_increase: 7 * 256,
            default_lifetime: 0xff,
            lifetime_unit: 0xffff,
            init_link_metric: 2,
            dao_latency: SimDuration::from_secs(4),
            dao_ack: false,
            dis_interval: SimDuration::from_secs(60),
            probing: true,
            probing_interval: SimDuration::from_secs(120),
            probing_expiration: SimDuration::from_secs(600),
            max_routes: 20,
            freeze_tree_at: None,
        }
    }
}

/// The fields of a `routing = { kind = "rpl", ... }` table; all optional.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRplConfig {
    instance_id: Option<u8>,
    dio_interval_min: Option<u8>,
    dio_interval_doublings: Option<u8>,
    dio_redundancy: Option<u8>,
    min_hop_rank_increase: Option<u16>,
    max_rank_increase: Option<u16>,
    default_lifetime: Option<u8>,
    lifetime_unit: Option<u16>,
    init_link_metric: Option<u8>,
    dao_latency: Option<Duration>,
    dao_ack: Option<bool>,
    dis_interval: Option<Duration>,
    probing: Option<bool>,
    probing_interval: Option<Duration>,
    probing_expiration: Option<Duration>,
    max_routes: Option<usize>,
    freeze_tree_at: Option<Duration>,
}

/// Longest Trickle interval accepted, as log2 ms (about 49 days).
const MAX_INTERVAL_EXP: u8 = 32;

impl RplConfig {
    /// Reads and validates the table at `path` (errors name the field below
    /// it, like `node[3].routing.dio_interval_min`).
    pub fn from_toml(value: toml::Value, path: &str) -> Result<Self, ScenarioError> {
        let raw: RawRplConfig = deserialize_at(value, path)?;
        Self::validate(raw, path)
    }

    /// Fills defaults and checks ranges.
    pub fn validate(raw: RawRplConfig, path: &str) -> Result<Self, ScenarioError> {
        let d = RplConfig::default();
        let min_hop_rank_increase = raw.min_hop_rank_increase.unwrap_or(d.min_hop_rank_increase);
        let c = RplConfig {
            instance_id: raw.instance_id.unwrap_or(d.instance_id),
            dio_interval_min: raw.dio_interval_min.unwrap_or(d.dio_interval_min),
            dio_interval_doublings: raw
                .dio_interval_doublings
                .unwrap_or(d.dio_interval_doublings),
            dio_redundancy: raw.dio_redundancy.unwrap_or(d.dio_redundancy),
            min_hop_rank_increase,
            // Follows a changed MinHopRankIncrease, as RPL_MAX_RANKINC does.
            max_rank_increase: raw
                .max_rank_increase
                .unwrap_or(7u16.saturating_mul(min_hop_rank_increase)),
            default_lifetime: raw.default_lifetime.unwrap_or(d.default_lifetime),
            lifetime_unit: raw.lifetime_unit.unwrap_or(d.lifetime_unit),
            init_link_metric: raw.init_link_metric.unwrap_or(d.init_link_metric),
            dao_latency: raw.dao_latency.map_or(d.dao_latency, |v| v.0),
            dao_ack: raw.dao_ack.unwrap_or(d.dao_ack),
            dis_interval: raw.dis_interval.map_or(d.dis_interval, |v| v.0),
            probing: raw.probing.unwrap_or(d.probing),
            probing_interval: raw.probing_interval.map_or(d.probing_interval, |v| v.0),
            probing_expiration: raw.probing_expiration.map_or(d.probing_expiration, |v| v.0),
            max_routes: raw.max_routes.unwrap_or(d.max_routes),
            freeze_tree_at: raw.freeze_tree_at.map(|v| v.0),
        };
        c.check(path)?;
        Ok(c)
    }

    /// Checks the ranges of a configuration however it was made; errors
    /// name the field below `path`.
    pub fn check(&self, path: &str) -> Result<(), ScenarioError> {
        let c = self;
        let err = |field: &str, message: String| {
            Err(ScenarioError::new(format!("{path}.{field}"), message))
        };
        if u16::from(c.dio_interval_min) + u16::from(c.dio_interval_doublings)
            > u16::from(MAX_INTERVAL_EXP)
        {
            return err(
                "dio_interval_doublings",
                format!(
                    "dio_interval_min + dio_interval_doublings must be at most \
                     {MAX_INTERVAL_EXP} (2^{MAX_INTERVAL_EXP} ms), got {} + {}",
                    c.dio_interval_min, c.dio_interval_doublings
                ),
            );
        }
        // Ranks are divided by it (DAGRank).
        if c.min_hop_rank_increase == 0 {
            return err("min_hop_rank_increase", "must be positive".into());
        }
        // A lifetime of 0 is a No-Path DAO: routes would be withdrawn as
        // they are announced.
        if c.default_lifetime == 0 {
            return err("default_lifetime", "must be positive".into());
        }
        if c.lifetime_unit == 0 {
            return err("lifetime_unit", "must be positive".into());
        }
        if c.init_link_metric == 0 {
            return err("init_link_metric", "must be between 1 and 255".into());
        }
        // The periodic timer counts whole seconds towards the next DIS.
        let dis = c.dis_interval.as_nanos();
        if dis == 0 || dis % 1_000_000_000 != 0 || dis / 1_000_000_000 > u64::from(u16::MAX) {
            return err(
                "dis_interval",
                format!("must be a whole number of seconds from 1s to {}s", u16::MAX),
            );
        }
        if c.probing_interval.is_zero() {
            return err("probing_interval", "must be positive".into());
        }
        if c.max_routes == 0 {
            return err("max_routes", "must be at least 1".into());
        }
        Ok(())
    }

    /// Route lifetime in seconds (`RPL_LIFETIME`).
    pub(crate) fn lifetime_secs(default_lifetime: u8, lifetime_unit: u16) -> u32 {
        u32::from(default_lifetime) * u32::from(lifetime_unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<RplConfig, ScenarioError> {
        let value: toml::Value = toml::from_str(text).unwrap();
        RplConfig::from_toml(value, "node[2].routing")
    }

    #[test]
    fn defaults_are_contikis() {
        let c = read("").unwrap();
        assert_eq!(c, RplConfig::default());
        assert_eq!(c.max_rank_increase, 1792);
        let c = read("min_hop_rank_increase = 128\ndao_latency = \"1s\"").unwrap();
        assert_eq!(c.max_rank_increase, 896);
        assert_eq!(c.dao_latency, SimDuration::from_secs(1));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                "dio_interval_min = 30\ndio_interval_doublings = 8",
                "node[2].routing.dio_interval_doublings",
            ),
            (
                "min_hop_rank_increase = 0",
                "node[2].routing.min_hop_rank_increase",
            ),
            ("default_lifetime = 0", "node[2].routing.default_lifetime"),
            ("lifetime_unit = 0", "node[2].routing.lifetime_unit"),
            ("init_link_metric = 0", "node[2].routing.init_link_metric"),
            ("dis_interval = \"1500ms\"", "node[2].routing.dis_interval"),
            (
                "probing_interval = \"0s\"",
                "node[2].routing.probing_interval",
            ),
            ("max_routes = 0", "node[2].routing.max_routes"),
            ("dio_redundancy = 300", "node[2].routing.dio_redundancy"),
            ("dao_latency = 4", "node[2].routing.dao_latency"),
            ("trickle = 1", "node[2].routing.trickle"),
        ];
        for (text, path) in cases {
            let e = read(text).unwrap_err();
            assert_eq!(e.path, path, "{text}: {e}");
        }
    }
}
