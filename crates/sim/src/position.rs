//! Positions of nodes and radios in the plane.

use serde::{Deserialize, Serialize};

/// A position in the plane, in metres.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Position {
    /// East, metres.
    pub x: f64,
    /// North, metres.
    pub y: f64,
}

impl Position {
    /// Euclidean distance in metres.
    pub fn distance(&self, other: &Position) -> f64 {
        (self.x - other.x).hypot(self.y - other.y)
    }
}
