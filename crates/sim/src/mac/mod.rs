//! Channel access: when an interface on a shared medium may start sending
//! the frame at the head of its queue.
//!
//! A MAC is a sans-IO state machine like the link models: the medium hands
//! it a frame that is ready and, at the instants it asks for, what carrier
//! sense reports; it answers with the next step. It never reads a clock, so
//! the simulator and the emulator drive the same code.
//!
//! This is the access part of a MAC only: acknowledgements, retries and
//! duty cycling come with the MACs that need them. The 802.11 MAC beside
//! it ([`dcf`], [`wlan`], checked against [`bianchi`]) is a whole MAC the
//! `wifi` link drives, not a registered kind; Contiki's CSMA and RDCs live
//! with the mesh (`crate::mesh::mac`).
//!
//! # Adding a MAC
//!
//! One file in this folder: the MAC (a type implementing [`Mac`]) and its
//! scenario side (a type implementing [`ScenarioMac`], read from a shared
//! medium's `mac` table), then one line in the `mac_registry!` call below.

pub mod aloha;
pub mod bianchi;
pub mod csma_ca;
pub mod dcf;
pub mod wlan;
#[macro_use]
mod registry;

use rtolab_time::SimTime;

pub use aloha::AlohaSpec;
pub use csma_ca::CsmaCaSpec;
pub use registry::ScenarioMac;

use crate::config::ScenarioError;
use crate::rng::SimRng;

/// What a MAC wants done next with the frame at the head of its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacStep {
    /// Start sending it at this instant (now or later).
    Transmit(SimTime),
    /// Sense the carrier at this instant and tell [`Mac::sensed`].
    Sense(SimTime),
    /// Give up on it: a channel access failure. The frame is dropped and
    /// the next one, if any, becomes ready.
    Fail,
}

/// Channel access of one interface.
pub trait Mac {
    /// A frame is at the head of the queue and the radio is free, at `now`.
    fn ready(&mut self, now: SimTime, rng: &mut SimRng) -> MacStep;

    /// The carrier sensed at `now` (the instant of a [`MacStep::Sense`]):
    /// `busy` when the medium is heard in use.
    fn sensed(&mut self, now: SimTime, busy: bool, rng: &mut SimRng) -> MacStep;
}

mac_registry! {
    /// Send at once (pure ALOHA with a queue).
    Aloha => aloha::AlohaSpec,
    /// IEEE 802.15.4 unslotted CSMA-CA.
    CsmaCa => csma_ca::CsmaCaSpec,
}

impl Default for MacSpec {
    fn default() -> Self {
        MacSpec::Aloha(AlohaSpec)
    }
}
