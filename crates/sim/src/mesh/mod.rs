//! The low-power mesh: the sans-IO pieces of a duty-cycled IEEE 802.15.4
//! network running 6LoWPAN and RPL (see `docs/mesh.md`).

pub mod rpl;
