//! Who hears whom, and how well: the propagation models of a
//! [`RadioMedium`](super::RadioMedium) and the rule that decides whether a
//! frame survives what else is on air at its receiver.
//!
//! * [`UnitDisk`]: Cooja's Unit Disk Graph Medium (UDGM): a transmission
//!   range within which frames can be decoded, a longer interference range
//!   within which they disturb receptions, and two success ratios;
//! * [`LogDistance`]: received power from a log-distance path loss with
//!   log-normal shadowing, against a receiver sensitivity, a noise floor and
//!   a clear channel assessment threshold;
//! * [`Shadowing`]: ns-2's `Propagation/Shadowing` with its `WirelessPhy`
//!   thresholds: the same log-distance law, referenced to the Friis power at
//!   d0, with the log-normal term drawn anew for every frame and receiver,
//!   so that each frame arrives with a probability that falls with distance.
//!
//! ```toml
//! propagation = { kind = "unit-disk", tx_range = 50.0, interference_range = 100.0 }
//! # or
//! propagation = { kind = "log-distance", exponent = 3.0, shadowing_sigma_db = 4.0 }
//! # or
//! propagation = { kind = "shadowing", path_loss_exponent = 2.7, std_db = 4.0 }
//! reception = { kind = "collision" }   # or { kind = "sinr", capture_threshold_db = 3.0 }
//! ```

use serde::Deserialize;

use crate::config::{read_kind, struct_fields, take_required, unknown_kind, ScenarioError};

/// Speed of light in vacuum, m/s, for propagation delays.
pub const SPEED_OF_LIGHT: f64 = 299_792_458.0;

/// The `kind` names of the propagation models.
pub const PROPAGATION_KINDS: &[&str] = &["unit-disk", "log-distance", "shadowing"];

/// The `kind` names of the reception rules.
pub const RECEPTION_KINDS: &[&str] = &["collision", "sinr"];

/// A propagation model, chosen per scenario.
#[derive(Clone, Debug, PartialEq)]
pub enum Propagation {
    /// Cooja's unit disk graph medium.
    UnitDisk(UnitDisk),
    /// Log-distance path loss with log-normal shadowing.
    LogDistance(LogDistance),
    /// ns-2's shadowing model: a shadowing draw per frame and receiver.
    Shadowing(Shadowing),
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

/// ns-2's `Propagation/Shadowing` (`mobile/shadowing.cc`) with the
/// thresholds of its `Phy/WirelessPhy`: the mean received power is the
/// Friis power at the reference distance d0 lowered by `10 β log10(d/d0)`
/// dB, and every frame at every receiver gets its own N(0, σ²) dB term.
/// A frame is decodable when its power reaches `rx_threshold_w` and is
/// heard (makes the channel busy, interferes) when it reaches
/// `cs_threshold_w`. Defaults: ns-2's (`tcl/lib/ns-default.tcl`), listed
/// with their origin in `docs/wifi.md`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shadowing {
    /// Transmit power, W (`Phy/WirelessPhy Pt_`).
    pub tx_power_w: f64,
    /// Carrier frequency, Hz (`freq_`), which sets the wavelength.
    pub frequency_hz: f64,
    /// System loss factor, ≥ 1 (`L_`).
    pub system_loss: f64,
    /// Transmit and receive antenna gains (`Antenna/OmniAntenna Gt_`, `Gr_`).
    pub antenna_gain: f64,
    /// Path loss exponent β (`pathlossExp_`).
    pub path_loss_exponent: f64,
    /// Standard deviation σ of the shadowing, dB (`std_db_`).
    pub std_db: f64,
    /// Reference distance d0, metres (`dist0_`).
    pub reference_distance: f64,
    /// Weakest power decoded, W (`RXThresh_`).
    pub rx_threshold_w: f64,
    /// Weakest power heard at all, W (`CSThresh_`).
    pub cs_threshold_w: f64,
    /// Noise floor for the SINR rule, dBm (ns-2 has none; thermal noise
    /// over 22 MHz is about -101 dBm).
    pub noise_floor_dbm: f64,
}

impl Default for Shadowing {
    fn default() -> Self {
        Shadowing {
            tx_power_w: 0.281_838_15,
            frequency_hz: 914e6,
            system_loss: 1.0,
            antenna_gain: 1.0,
            path_loss_exponent: 2.0,
            std_db: 4.0,
            reference_distance: 1.0,
            rx_threshold_w: 3.652e-10,
            cs_threshold_w: 1.559e-11,
            noise_floor_dbm: -101.0,
        }
    }
}

/// Watts to dBm.
fn w_to_dbm(watts: f64) -> f64 {
    10.0 * (watts * 1e3).log10()
}

impl Shadowing {
    /// Free-space (Friis) path loss at d0, dB: `(4π d0 / λ)² L / (Gt Gr)`.
    pub fn reference_loss_db(&self) -> f64 {
        let lambda = SPEED_OF_LIGHT / self.frequency_hz;
        let ratio = (4.0 * std::f64::consts::PI * self.reference_distance / lambda).powi(2)
            * self.system_loss
            / (self.antenna_gain * self.antenna_gain);
        10.0 * ratio.log10()
    }

    /// The same model as a [`LogDistance`], whose path loss law it shares:
    /// sensitivity at `RXThresh_`, clear channel assessment at `CSThresh_`.
    /// Its `shadowing_sigma_db` is σ, but a medium draws it per frame.
    pub fn log_distance(&self) -> LogDistance {
        LogDistance {
            tx_power_dbm: w_to_dbm(self.tx_power_w),
            reference_distance: self.reference_distance,
            reference_loss_db: self.reference_loss_db(),
            exponent: self.path_loss_exponent,
            shadowing_sigma_db: self.std_db,
            noise_floor_dbm: self.noise_floor_dbm,
            sensitivity_dbm: w_to_dbm(self.rx_threshold_w),
            cca_threshold_dbm: w_to_dbm(self.cs_threshold_w),
        }
    }

    /// Probability that one frame sent `distance` metres away reaches
    /// `RXThresh_`: `P(mean - X ≥ thr) = Φ((mean - thr) / σ)`.
    pub fn reception_probability(&self, distance: f64) -> f64 {
        let m = self.log_distance();
        let margin = m.rx_power_dbm(distance, 0.0) - m.sensitivity_dbm;
        if self.std_db == 0.0 {
            return if margin >= 0.0 { 1.0 } else { 0.0 };
        }
        normal_cdf(margin / self.std_db)
    }

    /// The power of one frame at `distance` metres with its own shadowing
    /// draw, dBm.
    pub fn draw_rx_power_dbm(&self, distance: f64, rng: &mut crate::rng::SimRng) -> f64 {
        let m = self.log_distance();
        m.rx_power_dbm(distance, self.std_db * standard_normal(rng))
    }
}

/// The standard normal distribution function Φ(x) = erfc(-x/√2) / 2.
///
/// Written out because the workspace has no special-function crate: the
/// Chebyshev-fitted `erfc(z) ≈ t exp(-z² + P(t))`, `t = 1/(1 + z/2)`, of
/// Numerical Recipes (2nd ed., §6.2, `erfcc`), fractional error below
/// 1.2e-7 everywhere.
pub fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - 0.5 * erfc
    } else {
        0.5 * erfc
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

/// The fields of a `shadowing` table; all optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShadowing {
    tx_power_w: Option<f64>,
    frequency_hz: Option<f64>,
    system_loss: Option<f64>,
    antenna_gain: Option<f64>,
    path_loss_exponent: Option<f64>,
    std_db: Option<f64>,
    reference_distance: Option<f64>,
    rx_threshold_w: Option<f64>,
    cs_threshold_w: Option<f64>,
    noise_floor_dbm: Option<f64>,
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

/// `field!(check, path, raw.NAME, defaults)`: the field of a `Raw*` table,
/// or the default's, checked by `finite`, `positive` or `ratio` and named
/// `PATH.NAME` in its error. The name is written once, so the TOML key, the
/// raw field and the default cannot disagree.
macro_rules! field {
    ($check:ident, $path:ident, $raw:ident . $name:ident, $d:ident) => {
        $check($path, stringify!($name), $raw.$name.unwrap_or($d.$name))?
    };
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
            struct_fields::<RawShadowing>(),
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
            "shadowing" => {
                let raw = read_kind(table, path, &what, &family, &[])?;
                Shadowing::validate(raw, path).map(Propagation::Shadowing)
            }
            _ => Err(unknown_kind(path, "propagation", &kind, PROPAGATION_KINDS)),
        }
    }

    /// The `kind` name.
    pub fn kind(&self) -> &'static str {
        match self {
            Propagation::UnitDisk(_) => "unit-disk",
            Propagation::LogDistance(_) => "log-distance",
            Propagation::Shadowing(_) => "shadowing",
        }
    }
}

impl UnitDisk {
    /// Checks a `unit-disk` table (`path` is the table's).
    pub fn validate(raw: RawUnitDisk, path: &str) -> Result<UnitDisk, ScenarioError> {
        let d = UnitDisk::default();
        let tx_range = field!(finite, path, raw.tx_range, d);
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
            success_ratio_tx: field!(ratio, path, raw.success_ratio_tx, d),
            success_ratio_rx: field!(ratio, path, raw.success_ratio_rx, d),
        })
    }
}

impl LogDistance {
    /// Checks a `log-distance` table (`path` is the table's).
    pub fn validate(raw: RawLogDistance, path: &str) -> Result<LogDistance, ScenarioError> {
        let d = LogDistance::default();
        let spec = LogDistance {
            tx_power_dbm: field!(finite, path, raw.tx_power_dbm, d),
            reference_distance: field!(finite, path, raw.reference_distance, d),
            reference_loss_db: field!(finite, path, raw.reference_loss_db, d),
            exponent: field!(finite, path, raw.exponent, d),
            shadowing_sigma_db: field!(finite, path, raw.shadowing_sigma_db, d),
            noise_floor_dbm: field!(finite, path, raw.noise_floor_dbm, d),
            sensitivity_dbm: field!(finite, path, raw.sensitivity_dbm, d),
            cca_threshold_dbm: field!(finite, path, raw.cca_threshold_dbm, d),
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

fn positive(path: &str, field: &str, value: f64) -> Result<f64, ScenarioError> {
    let value = finite(path, field, value)?;
    if value > 0.0 {
        Ok(value)
    } else {
        Err(ScenarioError::new(
            format!("{path}.{field}"),
            format!("must be positive, got {value}"),
        ))
    }
}

impl Shadowing {
    /// Checks a `shadowing` table (`path` is the table's).
    pub fn validate(raw: RawShadowing, path: &str) -> Result<Shadowing, ScenarioError> {
        let d = Shadowing::default();
        let spec = Shadowing {
            tx_power_w: field!(positive, path, raw.tx_power_w, d),
            frequency_hz: field!(positive, path, raw.frequency_hz, d),
            system_loss: field!(positive, path, raw.system_loss, d),
            antenna_gain: field!(positive, path, raw.antenna_gain, d),
            path_loss_exponent: field!(positive, path, raw.path_loss_exponent, d),
            std_db: field!(finite, path, raw.std_db, d),
            reference_distance: field!(positive, path, raw.reference_distance, d),
            rx_threshold_w: field!(positive, path, raw.rx_threshold_w, d),
            cs_threshold_w: field!(positive, path, raw.cs_threshold_w, d),
            noise_floor_dbm: field!(finite, path, raw.noise_floor_dbm, d),
        };
        if spec.system_loss < 1.0 {
            return Err(ScenarioError::new(
                format!("{path}.system_loss"),
                format!("must be at least 1 (ns-2's L_), got {}", spec.system_loss),
            ));
        }
        if spec.std_db < 0.0 {
            return Err(ScenarioError::new(
                format!("{path}.std_db"),
                format!("must not be negative, got {}", spec.std_db),
            ));
        }
        // A receiver that decodes what it cannot hear makes no sense.
        if spec.cs_threshold_w > spec.rx_threshold_w {
            return Err(ScenarioError::new(
                format!("{path}.cs_threshold_w"),
                format!(
                    "must be at most rx_threshold_w ({}), got {}",
                    spec.rx_threshold_w, spec.cs_threshold_w
                ),
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

    #[test]
    fn normal_cdf_matches_tabulated_values() {
        // Abramowitz & Stegun, Table 26.1.
        for (x, phi) in [
            (0.0, 0.5),
            (1.0, 0.841_344_746),
            (1.96, 0.975_002_105),
            (-2.5, 0.006_209_665),
            (3.0, 0.998_650_102),
        ] {
            assert!((normal_cdf(x) - phi).abs() < 1e-7, "{x}: {}", normal_cdf(x));
        }
    }

    #[test]
    fn shadowing_defaults_are_ns2_s() {
        let s = Shadowing::default();
        // Friis at 1 m and 914 MHz: 20 log10(4 pi f / c) = 31.7 dB.
        assert!(
            (s.reference_loss_db() - 31.67).abs() < 0.01,
            "{}",
            s.reference_loss_db()
        );
        let m = s.log_distance();
        // Pt_ 0.28183815 W is 24.5 dBm; RXThresh_ 3.652e-10 W is -64.4 dBm.
        assert!((m.tx_power_dbm - 24.5).abs() < 0.01);
        assert!((m.sensitivity_dbm - -64.37).abs() < 0.01);
        assert!((m.cca_threshold_dbm - -78.07).abs() < 0.01);
        // With beta = 2 the mean power crosses RXThresh_ where
        // d = sqrt(Pr0 / RXThresh_): there a frame arrives half the time.
        let pr0_w = s.tx_power_w * (SPEED_OF_LIGHT / s.frequency_hz).powi(2)
            / (4.0 * std::f64::consts::PI).powi(2);
        let median = (pr0_w / s.rx_threshold_w).sqrt();
        assert!((s.reception_probability(median) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn shadowing_reception_probability_follows_the_normal_cdf() {
        let s = Shadowing {
            path_loss_exponent: 2.7,
            ..Shadowing::default()
        };
        let m = s.log_distance();
        // The distance where the mean is k sigma above the threshold.
        let at_margin = |k: f64| {
            let loss = m.tx_power_dbm - m.sensitivity_dbm - k * s.std_db - m.reference_loss_db;
            10f64.powf(loss / (10.0 * s.path_loss_exponent))
        };
        let mut rng = crate::rng::component_stream(7, "shadowing");
        let n = 20_000;
        let received = |d: f64, rng: &mut crate::rng::SimRng| {
            (0..n)
                .filter(|_| s.draw_rx_power_dbm(d, rng) >= m.sensitivity_dbm)
                .count()
        };
        // 6 sigma inside: P(loss) = 1e-9, so none of 20 000 frames is lost.
        assert_eq!(received(at_margin(6.0), &mut rng), n);
        assert_eq!(received(at_margin(6.0) / 10.0, &mut rng), n);
        // 6 sigma outside: none arrives.
        assert_eq!(received(at_margin(-6.0), &mut rng), 0);
        // In between, the share arriving is Phi(k) within 5 standard errors
        // of a binomial (at most 0.018 for n = 20 000).
        for k in [-1.5, -0.5, 0.0, 0.7, 1.8] {
            let d = at_margin(k);
            let p = s.reception_probability(d);
            assert!((p - normal_cdf(k)).abs() < 1e-9, "{k}: {p}");
            let share = received(d, &mut rng) as f64 / n as f64;
            let se = (p * (1.0 - p) / n as f64).sqrt();
            assert!((share - p).abs() < 5.0 * se, "k {k}: {share} vs {p}");
        }
    }

    #[test]
    fn shadowing_tables_parse_and_errors_name_the_field() {
        let p = Propagation::parse(
            table("kind = \"shadowing\"\npath_loss_exponent = 2.7\nstd_db = 6"),
            "p",
        )
        .unwrap();
        assert_eq!(
            p,
            Propagation::Shadowing(Shadowing {
                path_loss_exponent: 2.7,
                std_db: 6.0,
                ..Shadowing::default()
            })
        );
        let err = |text: &str| Propagation::parse(table(text), "radio.propagation").unwrap_err();
        assert_eq!(
            err("kind = \"shadowing\"\nstd_db = -1").path,
            "radio.propagation.std_db"
        );
        assert_eq!(
            err("kind = \"shadowing\"\nsystem_loss = 0.5").path,
            "radio.propagation.system_loss"
        );
        assert_eq!(
            err("kind = \"shadowing\"\ncs_threshold_w = 1e-9").path,
            "radio.propagation.cs_threshold_w"
        );
        assert_eq!(
            err("kind = \"shadowing\"\nexponent = 2").path,
            "radio.propagation.exponent"
        );
        assert_eq!(
            err("kind = \"shadowing\"\ntx_power_w = 0").path,
            "radio.propagation.tx_power_w"
        );
    }
}
