//! `kind = "aloha"`: send as soon as the radio is free, without listening
//! first (the default of a shared medium).

use rtolab_time::SimTime;
use serde::Deserialize;

use super::{Mac, MacStep, ScenarioMac};
use crate::config::ScenarioError;
use crate::rng::SimRng;

/// The (empty) fields of an ALOHA MAC.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAloha {}

/// ALOHA: no parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlohaSpec;

impl ScenarioMac for AlohaSpec {
    const KIND: &'static str = "aloha";
    type Raw = RawAloha;
    type Model = Aloha;

    fn validate(_raw: RawAloha, _path: &str) -> Result<Self, ScenarioError> {
        Ok(AlohaSpec)
    }

    fn build(&self) -> Aloha {
        Aloha
    }
}

/// Sends at once.
#[derive(Clone, Copy, Debug, Default)]
pub struct Aloha;

impl Mac for Aloha {
    fn ready(&mut self, now: SimTime, _rng: &mut SimRng) -> MacStep {
        MacStep::Transmit(now)
    }

    fn sensed(&mut self, now: SimTime, _busy: bool, _rng: &mut SimRng) -> MacStep {
        MacStep::Transmit(now)
    }
}
