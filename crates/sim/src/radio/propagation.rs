//! Who hears whom, and how well: the propagation models of a
//! [`RadioMedium`](super::RadioMedium) and the rule that decides whether a
//! frame survives what else is on air at its receiver.
//!
//! * [`UnitDisk`]: Cooja's Unit Disk Graph Medium (UDGM): a transmission
//!   range within which frames can be decoded, a longer interference range
//!   within which they disturb receptions, and two success ratios;
//! * [`LogDistance`]: received power from a log-distance path loss with
//!   log-normal shadowing, against a receiver sensitivity, a noise floor and
//!   a clear channel assessment threshold.
//!
//! ```toml
//! propagation = { kind = "unit-disk", tx_range = 50.0, interference_range = 100.0 }
//! # or
//! propagation = { kind = "log-distance", exponent = 3.0, shadowing_sigma_db = 4.0 }
//! reception = { kind = "collision" }   # or { kind = "sinr", capture_threshold_db = 3.0 }
//! ```

use serde::Deserialize;

use crate::config::{read_kind, struct_fields, take_required, unknown_kind, ScenarioError};

/// Speed of light in vacuum, m/s, for propagation delays.
pub const SPEED_OF_LIGHT: f64 = 299_792_458.0;

/// The `kind` names of the propagation models.
pub const PROPAGATION_KINDS: &[&str] = &["unit-disk", "log-distance"];

/// The `kind` names of the reception rules.
pub const RECEPTION_KINDS: &[&str] = &["collision", "sinr"];

/// A propagation model, chosen per scenario.
#[derive(Clone, Debug, PartialEq)]
pub enum Propagation {
    /// Cooja's unit disk graph medium.
    UnitDisk(UnitDisk),
    /// Log-distance path loss with log-normal shadowing.
    LogDistance(LogDistance),
}

impl Default for Propagation {
    fn default() -> Self {
        Propagation::UnitDisk(UnitDisk::default())
    }
}

/// Cooja's Unit Disk Graph Medium (`org.contikios.cooja.radiomediums.UDGM`).
///
/// A receiver within `tx_range` of the sender can decode the frame; one
/// within `interference_range` hears it as interference only. A
/// transmission is heard by nobody with probability `1 - success_ratio_tx`
/// (one draw per frame); a receiver within range decodes it with
/// probability [`UnitDisk::rx_success`] (one draw per frame and receiver).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnitDisk {
    /// Metres within which a frame can be decoded.
    pub tx_range: f64,
    /// Metres within which a frame disturbs receptions; at least `tx_range`.
    pub interference_range: f64,
    /// Metres within which a signal makes clear channel assessment report
    /// busy; at most `interference_range`. Cooja's motes sense only senders
    /// within transmission range (see `docs/mesh.md`), hence its default.
    pub cca_range: f64,
    /// Probability that a transmission is heard at all (Cooja's
    /// `SUCCESS_RATIO_TX`).
    pub success_ratio_tx: f64,
    /// Probability of decoding at the edge of the transmission range
    /// (Cooja's `SUCCESS_RATIO_RX`); it falls with the square of the
    /// distance from 1 at the sender.
    pub success_ratio_rx: f64,
}

impl Default for UnitDisk {
    /// Cooja's UDGM defaults, which are also the study's values
    /// (`spec/uip-rto.md` §3): 50 m, 100 m, no random loss.
    fn default() -> Self {
        UnitDisk {
            tx_range: 50.0,
            interference_range: 100.0,
            cca_range: 50.0,
            success_ratio_tx: 1.0,
            success_ratio_rx: 1.0,
        }
    }
}

impl UnitDisk {
    /// Probability that a receiver `distance` metres from the sender decodes
    /// a frame that was sent successfully: `1 - (d/R)^2 (1 - success_ratio_rx)`
    /// within the transmission range R, 0 beyond it (UDGM's
    /// `getRxSuccessProbability`).
    pub fn rx_success(&self, distance: f64) -> f64 {
        if self.tx_range <= 0.0 {
            return 0.0;
        }
        let ratio = (distance / self.tx_range).powi(2);
        if ratio > 1.0 {
            0.0
        } else {
            1.0 - ratio * (1.0 - self.success_ratio_rx)
        }
    }
}

/// Log-distance path loss with log-normal shadowing:
/// `P_rx = P_tx - PL(d0) - 10 n log10(d / d0) - X`, X ~ N(0, sigma²) in dB,
/// drawn once per pair of radios per run (see `docs/mesh.md`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogDistance {
    /// Transmit power, dBm (CC2420 at its highest setting: 0 dBm).
    pub tx_power_dbm: f64,
    /// Reference distance d0, metres; closer pairs get the loss at d0.
    pub reference_distance: f64,
    /// Path loss at d0, dB (free space at 1 m and 2.44 GHz: 40.2 dB).
    pub reference_loss_db: f64,
    /// Path loss exponent n.
    pub exponent: f64,
    /// Standard deviation of the shadowing, dB (0 turns it off).
    pub shadowing_sigma_db: f64,
    /// Noise floor, dBm: signals weaker than this are not heard at all.
    pub noise_floor_dbm: f64,
    /// Weakest signal a receiver can decode, dBm (CC2420: -95 dBm).
    pub sensitivity_dbm: f64,
    /// Clear channel assessment reports busy at or above this total
    /// received power, dBm (CC2420's reset value: -77 dBm).
    pub cca_threshold_dbm: f64,
}

impl Default for LogDistance {
    fn default() -> Self {
        LogDistance {
            tx_power_dbm: 0.0,
            reference_distance: 1.0,
            reference_loss_db: 40.2,
            exponent: 3.0,
            shadowing_sigma_db: 4.0,
            noise_floor_dbm: -100.0,
            sensitivity_dbm: -95.0,
            cca_threshold_dbm: -77.0,
        }
    }
}

impl LogDistance {
    /// Mean path loss at `distance` metres, dB: `PL(d0) + 10 n log10(d/d0)`,
    /// with distances below d0 taken as d0.
    pub fn mean_path_loss_db(&self, distance: f64) -> f64 {
        let d = distance.max(self.reference_distance);
        self.reference_loss_db + 10.0 * self.exponent * (d / self.reference_distance).log10()
    }

    /// Received power at `distance` metres with a shadowing term of
    /// `shadowing_db` dB, dBm.
    pub fn rx_power_dbm(&self, distance: f64, shadowing_db: f64) -> f64 {
        self.tx_power_dbm - self.mean_path_loss_db(distance) - shadowing_db
    }
}

/// What decides whether a frame survives other signals at its receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Reception {
    /// Any overlap with another signal the receiver hears destroys the frame
    /// (Cooja's UDGM).
    #[default]
    Collision,
    /// The frame survives while its signal to interference-plus-noise ratio
    /// stays at or above the threshold over its whole airtime. Needs
    /// received powers, so only with [`Propagation::LogDistance`].
    Sinr {
        /// Capture threshold, dB.
        capture_threshold_db: f64,
    },
}

/// The fields of a `unit-disk` table; all optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUnitDisk {
    tx_range: Option<f64>,
    interference_range: Option<f64>,
    cca_range: Option<f64>,
    success_ratio_tx: Option<f64>,
    success_ratio_rx: Option<f64>,
}

/// The fields of a `log-distance` table; all optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLogDistance {
    tx_power_dbm: Option<f64>,
    reference_distance: Option<f64>,
    reference_loss_db: Option<f64>,
    exponent: Option<f64>,
    shadowing_sigma_db: Option<f64>,
    noise_floor_dbm: Option<f64>,
    sensitivity_dbm: Option<f64>,
    cca_threshold_dbm: Option<f64>,
}

/// The fields of a `collision` reception table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCollision {}

/// The fields of a `sinr` reception table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSinr {
    capture_threshold_db: Option<f64>,
}

fn finite(path: &str, field: &str, value: f64) -> Result<f64, ScenarioError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(ScenarioError::new(
            format!("{path}.{field}"),
            format!("must be a finite number, got {value}"),
        ))
    }
}

fn ratio(path: &str, field: &str, value: f64) -> Result<f64, ScenarioError> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(ScenarioError::new(
            format!("{path}.{field}"),
            format!("must be between 0 and 1, got {value}"),
        ))
    }
}

impl Propagation {
    /// Reads and validates a `propagation` table at `path`.
    pub fn parse(mut table: toml::Table, path: &str) -> Result<Propagation, ScenarioError> {
        let kind = take_required(&mut table, "kind", path)?;
        let family = [
            struct_fields::<RawUnitDisk>(),
            struct_fields::<RawLogDistance>(),
        ];
        let what = format!("{kind} propagation");
        match kind.as_str() {
            "unit-disk" => {
                let raw = read_kind(table, path, &what, &family, &[])?;
                UnitDisk::validate(raw, path).map(Propagation::UnitDisk)
            }
            "log-distance" => {
                let raw = read_kind(table, path, &what, &family, &[])?;
                LogDistance::validate(raw, path).map(Propagation::LogDistance)
            }
            _ => Err(unknown_kind(path, "propagation", &kind, PROPAGATION_KINDS)),
        }
    }

    /// The `kind` name.
    pub fn kind(&self) -> &'static str {
        match self {
            Propagation::UnitDisk(_) => "unit-disk",
            Propagation::LogDistance(_) => "log-distance",
        }
    }
}

impl UnitDisk {
    /// Checks a `unit-disk` table (`path` is the table's).
    pub fn validate(raw: RawUnitDisk, path: &str) -> Result<UnitDisk, ScenarioError> {
        let d = UnitDisk::default();
        let tx_range = finite(path, "tx_range", raw.tx_range.unwrap_or(d.tx_range))?;
        if tx_range <= 0.0 {
            return Err(ScenarioError::new(
                format!("{path}.tx_range"),
                format!("must be a positive distance in metres, got {tx_range}"),
            ));
        }
        let interference_range = finite(
            path,
            "interference_range",
            raw.interference_range
                .unwrap_or(d.interference_range.max(tx_range)),
        )?;
        if interference_range < tx_range {
            return Err(ScenarioError::new(
                format!("{path}.interference_range"),
                format!("must be at least tx_range ({tx_range}), got {interference_range}"),
            ));
        }
        let cca_range = finite(path, "cca_range", raw.cca_range.unwrap_or(tx_range))?;
        if !(0.0..=interference_range).contains(&cca_range) {
            return Err(ScenarioError::new(
                format!("{path}.cca_range"),
                format!(
                    "must be between 0 and interference_range ({interference_range}), \
                     got {cca_range}"
                ),
            ));
        }
        Ok(UnitDisk {
            tx_range,
            interference_range,
            cca_range,
            success_ratio_tx: ratio(
                path,
                "success_ratio_tx",
                raw.success_ratio_tx.unwrap_or(d.success_ratio_tx),
            )?,
            success_ratio_rx: ratio(
                path,
                "success_ratio_rx",
                raw.success_ratio_rx.unwrap_or(d.success_ratio_rx),
            )?,
        })
    }
}

impl LogDistance {
    /// Checks a `log-distance` table (`path` is the table's).
    pub fn validate(raw: RawLogDistance, path: &str) -> Result<LogDistance, ScenarioError> {
        let d = LogDistance::default();
        let spec = LogDistance {
            tx_power_dbm: finite(
                path,
                "tx_power_dbm",
                raw.tx_power_dbm.unwrap_or(d.tx_power_dbm),
            )?,
            reference_distance: finite(
                path,
                "reference_distance",
                raw.reference_distance.unwrap_or(d.reference_distance),
            )?,
            reference_loss_db: finite(
                path,
                "reference_loss_db",
                raw.reference_loss_db.unwrap_or(d.reference_loss_db),
            )?,
            exponent: finite(path, "exponent", raw.exponent.unwrap_or(d.exponent))?,
            shadowing_sigma_db: finite(
                path,
                "shadowing_sigma_db",
                raw.shadowing_sigma_db.unwrap_or(d.shadowing_sigma_db),
            )?,
            noise_floor_dbm: finite(
                path,
                "noise_floor_dbm",
                raw.noise_floor_dbm.unwrap_or(d.noise_floor_dbm),
            )?,
            sensitivity_dbm: finite(
                path,
                "sensitivity_dbm",
                raw.sensitivity_dbm.unwrap_or(d.sensitivity_dbm),
            )?,
            cca_threshold_dbm: finite(
                path,
                "cca_threshold_dbm",
                raw.cca_threshold_dbm.unwrap_or(d.cca_threshold_dbm),
            )?,
        };
        if spec.reference_distance <= 0.0 {
            return Err(ScenarioError::new(
                format!("{path}.reference_distance"),
                format!(
                    "must be a positive distance in metres, got {}",
                    spec.reference_distance
                ),
            ));
        }
        // A loss that does not grow with distance would let every radio
        // hear every other at the same power.
        if spec.exponent <= 0.0 {
            return Err(ScenarioError::new(
                format!("{path}.exponent"),
                format!("must be positive, got {}", spec.exponent),
            ));
        }
        if spec.shadowing_sigma_db < 0.0 {
            return Err(ScenarioError::new(
                format!("{path}.shadowing_sigma_db"),
                format!("must not be negative, got {}", spec.shadowing_sigma_db),
            ));
        }
        Ok(spec)
    }
}

impl Reception {
    /// Reads and validates a `reception` table at `path`.
    pub fn parse(mut table: toml::Table, path: &str) -> Result<Reception, ScenarioError> {
        let kind = take_required(&mut table, "kind", path)?;
        let family = [struct_fields::<RawCollision>(), struct_fields::<RawSinr>()];
        let what = format!("{kind} reception");
        match kind.as_str() {
            "collision" => {
                let _: RawCollision = read_kind(table, path, &what, &family, &[])?;
                Ok(Reception::Collision)
            }
            "sinr" => {
                let raw: RawSinr = read_kind(table, path, &what, &family, &[])?;
                // No default: published capture thresholds of 802.15.4
                // radios vary with the chip and the measurement.
                let threshold = raw.capture_threshold_db.ok_or_else(|| {
                    ScenarioError::new(
                        format!("{path}.capture_threshold_db"),
                        "required for sinr reception",
                    )
                })?;
                Ok(Reception::Sinr {
                    capture_threshold_db: finite(path, "capture_threshold_db", threshold)?,
                })
            }
            _ => Err(unknown_kind(path, "reception", &kind, RECEPTION_KINDS)),
        }
    }

    /// The `kind` name.
    pub fn kind(&self) -> &'static str {
        match self {
            Reception::Collision => "collision",
            Reception::Sinr { .. } => "sinr",
        }
    }
}

/// Power in milliwatts of `dbm`.
pub(crate) fn dbm_to_mw(dbm: f64) -> f64 {
    10f64.powf(dbm / 10.0)
}

/// A standard normal draw (Box–Muller), so no distribution crate is needed.
pub(crate) fn standard_normal(rng: &mut crate::rng::SimRng) -> f64 {
    use rand::Rng;
    // 1 - [0, 1) is in (0, 1], where the logarithm is finite.
    let u1: f64 = 1.0 - rng.gen::<f64>();
    let u2: f64 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn udgm_success_falls_with_the_square_of_distance() {
        let udgm = UnitDisk {
            success_ratio_rx: 0.5,
            ..UnitDisk::default()
        };
        assert_eq!(udgm.rx_success(0.0), 1.0);
        // A quarter of the way down from 1 to 0.5 at half the range.
        assert_eq!(udgm.rx_success(25.0), 0.875);
        assert_eq!(udgm.rx_success(50.0), 0.5);
        assert_eq!(udgm.rx_success(50.1), 0.0);
        // With the study's ratio of 1 every distance in range succeeds.
        let study = UnitDisk::default();
        assert_eq!(study.rx_success(49.9), 1.0);
    }

    #[test]
    fn mean_path_loss_grows_by_ten_n_db_per_decade() {
        let m = LogDistance {
            reference_loss_db: 40.0,
            exponent: 3.0,
            ..LogDistance::default()
        };
        assert_eq!(m.mean_path_loss_db(1.0), 40.0);
        assert!((m.mean_path_loss_db(10.0) - 70.0).abs() < 1e-9);
        assert!((m.mean_path_loss_db(100.0) - 100.0).abs() < 1e-9);
        // Closer than d0 counts as d0.
        assert_eq!(m.mean_path_loss_db(0.0), 40.0);
        assert!((m.rx_power_dbm(10.0, 2.0) - (0.0 - 70.0 - 2.0)).abs() < 1e-9);
    }

    #[test]
    fn default_reference_loss_is_free_space_at_one_metre() {
        // Friis: 20 log10(4 pi d f / c) at 1 m and 2.44 GHz (channel 18,
        // the middle of the 2.4 GHz band).
        let friis = 20.0 * (4.0 * std::f64::consts::PI * 2.44e9 / SPEED_OF_LIGHT).log10();
        assert!((LogDistance::default().reference_loss_db - friis).abs() < 0.05);
    }

    #[test]
    fn tables_parse_with_defaults() {
        let p = Propagation::parse(table("kind = \"unit-disk\""), "radio.propagation").unwrap();
        assert_eq!(p, Propagation::UnitDisk(UnitDisk::default()));
        let p = Propagation::parse(
            table("kind = \"log-distance\"\nexponent = 2\nshadowing_sigma_db = 0"),
            "p",
        )
        .unwrap();
        assert_eq!(
            p,
            Propagation::LogDistance(LogDistance {
                exponent: 2.0,
                shadowing_sigma_db: 0.0,
                ..LogDistance::default()
            })
        );
        let r = Reception::parse(table("kind = \"sinr\"\ncapture_threshold_db = 3"), "r").unwrap();
        assert_eq!(
            r,
            Reception::Sinr {
                capture_threshold_db: 3.0
            }
        );
    }

    #[test]
    fn errors_name_the_field() {
        let err = |text: &str| Propagation::parse(table(text), "radio.propagation").unwrap_err();
        let e = err("kind = \"unit-disk\"\ntx_range = 50\ninterference_range = 40");
        assert_eq!(e.path, "radio.propagation.interference_range");
        let e = err("kind = \"unit-disk\"\nsuccess_ratio_rx = 1.5");
        assert_eq!(e.path, "radio.propagation.success_ratio_rx");
        let e = err("kind = \"unit-disk\"\ncca_range = 150");
        assert_eq!(e.path, "radio.propagation.cca_range");
        let e = err("kind = \"unit-disk\"\nexponent = 3");
        assert_eq!(e.path, "radio.propagation.exponent");
        assert!(e.message.contains("not allowed"), "{e}");
        let e = err("kind = \"log-distance\"\nshadowing_sigma_db = -1");
        assert_eq!(e.path, "radio.propagation.shadowing_sigma_db");
        let e = err("kind = \"log-distance\"\nreference_distance = 0");
        assert_eq!(e.path, "radio.propagation.reference_distance");
        let e = err("kind = \"two-ray\"");
        assert_eq!(e.path, "radio.propagation.kind");
        let e = err("tx_range = 5");
        assert_eq!(e.path, "radio.propagation.kind");
        let e = Reception::parse(table("kind = \"sinr\""), "radio.reception").unwrap_err();
        assert_eq!(e.path, "radio.reception.capture_threshold_db");
    }

    #[test]
    fn normal_draws_have_unit_variance() {
        let mut rng = crate::rng::component_stream(1, "normal");
        let n = 20_000;
        let draws: Vec<f64> = (0..n).map(|_| standard_normal(&mut rng)).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        // Standard errors: 0.007 for the mean, 0.01 for the variance.
        assert!(mean.abs() < 0.03, "{mean}");
        assert!((var - 1.0).abs() < 0.05, "{var}");
    }
}
