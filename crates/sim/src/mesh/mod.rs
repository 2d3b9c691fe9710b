//! The low-power mesh: the sans-IO pieces of a duty-cycled IEEE 802.15.4
//! network running 6LoWPAN and RPL (see `docs/mesh.md`), each layer a
//! state machine that never reads a clock.

pub mod mac;
pub mod rpl;
