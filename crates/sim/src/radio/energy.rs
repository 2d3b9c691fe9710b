//! Time in each radio state, the duty cycle, and the energy it costs.
//!
//! Like Contiki's energest, time is split into transmit and listen (which
//! includes receiving); the CPU is not modelled. The default currents are
//! the Tmote Sky datasheet's (Moteiv, 2006, "Typical operating conditions"):
//! radio receiving 21.8 mA, transmitting at 0 dBm 19.5 mA, at 3 V (two AA
//! cells). These are the figures Contiki's energy estimates conventionally
//! multiply energest times by. They include the microcontroller running,
//! as it must be while the radio is in use. With the radio off the draw is
//! the sleeping microcontroller's, which belongs to the CPU and is 0 here
//! unless set.
//!
//! ```toml
//! energy = { voltage = 3.0, tx_current_ma = 19.5, rx_current_ma = 21.8, off_current_ma = 0.0 }
//! ```

use serde::{Deserialize, Serialize};

use super::RadioState;
use crate::config::ScenarioError;

/// Currents per radio state and the supply voltage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnergyModel {
    /// Supply voltage, V.
    pub voltage: f64,
    /// Current while transmitting, mA.
    pub tx_current_ma: f64,
    /// Current while listening or receiving, mA.
    pub rx_current_ma: f64,
    /// Current while the radio is off, mA.
    pub off_current_ma: f64,
}

impl Default for EnergyModel {
    fn default() -> Self {
        EnergyModel {
            voltage: 3.0,
            tx_current_ma: 19.5,
            rx_current_ma: 21.8,
            off_current_ma: 0.0,
        }
    }
}

/// Nanoseconds a radio spent in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StateTimes {
    /// Off.
    pub off_ns: u64,
    /// On and listening, not receiving a frame.
    pub listen_ns: u64,
    /// Locked onto an incoming frame.
    pub receive_ns: u64,
    /// Transmitting.
    pub transmit_ns: u64,
}

impl StateTimes {
    /// Adds `ns` to the time of `state`.
    pub(crate) fn add(&mut self, state: RadioState, ns: u64) {
        let slot = match state {
            RadioState::Off => &mut self.off_ns,
            RadioState::Listen => &mut self.listen_ns,
            RadioState::Receive => &mut self.receive_ns,
            RadioState::Transmit => &mut self.transmit_ns,
        };
        *slot = slot.saturating_add(ns);
    }

    /// All of it.
    pub fn total_ns(&self) -> u64 {
        self.off_ns + self.listen_ns + self.receive_ns + self.transmit_ns
    }

    /// Time with the radio on: listening, receiving or transmitting.
    pub fn on_ns(&self) -> u64 {
        self.listen_ns + self.receive_ns + self.transmit_ns
    }

    /// On-time over total time; 0 before any time has passed.
    pub fn duty_cycle(&self) -> f64 {
        match self.total_ns() {
            0 => 0.0,
            total => self.on_ns() as f64 / total as f64,
        }
    }
}

impl EnergyModel {
    /// Energy drawn over `times`, joules.
    pub fn energy_j(&self, times: &StateTimes) -> f64 {
        let s = |ns: u64| ns as f64 * 1e-9;
        let milliamp_seconds = self.tx_current_ma * s(times.transmit_ns)
            + self.rx_current_ma * s(times.listen_ns + times.receive_ns)
            + self.off_current_ma * s(times.off_ns);
        milliamp_seconds * 1e-3 * self.voltage
    }

    /// Checks an `energy` table (`path` is the table's).
    pub fn from_raw(raw: RawEnergy, path: &str) -> Result<EnergyModel, ScenarioError> {
        let d = EnergyModel::default();
        let check = |field: &str, value: Option<f64>, default: f64| {
            let value = value.unwrap_or(default);
            if value.is_finite() && value >= 0.0 {
                Ok(value)
            } else {
                Err(ScenarioError::new(
                    format!("{path}.{field}"),
                    format!("must be a non-negative number, got {value}"),
                ))
            }
        };
        Ok(EnergyModel {
            voltage: check("voltage", raw.voltage, d.voltage)?,
            tx_current_ma: check("tx_current_ma", raw.tx_current_ma, d.tx_current_ma)?,
            rx_current_ma: check("rx_current_ma", raw.rx_current_ma, d.rx_current_ma)?,
            off_current_ma: check("off_current_ma", raw.off_current_ma, d.off_current_ma)?,
        })
    }
}

/// The fields of an `energy` table; all optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnergy {
    voltage: Option<f64>,
    tx_current_ma: Option<f64>,
    rx_current_ma: Option<f64>,
    off_current_ma: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_is_current_times_time_times_voltage() {
        let times = StateTimes {
            off_ns: 7_000_000_000,
            listen_ns: 1_500_000_000,
            receive_ns: 500_000_000,
            transmit_ns: 1_000_000_000,
        };
        assert_eq!(times.total_ns(), 10_000_000_000);
        assert!((times.duty_cycle() - 0.3).abs() < 1e-12);
        // 19.5 mA for 1 s and 21.8 mA for 2 s at 3 V.
        let expected = (0.0195 * 1.0 + 0.0218 * 2.0) * 3.0;
        assert!((EnergyModel::default().energy_j(&times) - expected).abs() < 1e-12);
        assert_eq!(StateTimes::default().duty_cycle(), 0.0);
    }

    #[test]
    fn negative_currents_are_refused_by_name() {
        let raw: RawEnergy = toml::from_str("rx_current_ma = -1").unwrap();
        let e = EnergyModel::from_raw(raw, "radio.energy").unwrap_err();
        assert_eq!(e.path, "radio.energy.rx_current_ma");
    }
}
