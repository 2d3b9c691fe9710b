//! Reading scenario configuration, shared by every kind of link, app and
//! middlebox: errors that name the field, values written with units, and the
//! topology that references are checked against.
//!
//! It sits below [`crate::link`], [`crate::app`] and [`crate::scenario`], so
//! each kind can validate its own table without the scenario module knowing
//! its fields.

mod error;
mod topology;
mod values;

pub use error::{
    deserialize_at, read_kind, take_required, take_string, unknown_kind, ScenarioError,
};
pub use topology::{Attachment, Topology};
pub use values::{
    check_position, check_unique, not_allowed, required, struct_fields, Distance, Duration, Rate,
};

pub(crate) use error::{field_error, one_line, path_string};
