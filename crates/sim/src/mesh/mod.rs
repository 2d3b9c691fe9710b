//! The low-power mesh (docs/mesh.md): each layer a sans-IO state machine.
pub mod mac;
