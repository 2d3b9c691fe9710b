//! Which way a packet went at an interface, shared by captures and by the
//! links that capture their own frames. It sits below both so that neither
//! imports the other.

use serde::{Deserialize, Serialize};

/// Which of an interface's packets a capture records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaptureDirection {
    /// Sent and received.
    #[default]
    Both,
    /// Sent only (stamped when the first bit leaves).
    Tx,
    /// Received only (stamped when the last bit arrives).
    Rx,
}

impl CaptureDirection {
    /// Whether a capture in this direction records packets going `dir`
    /// (`Tx` or `Rx`).
    pub fn includes(self, dir: CaptureDirection) -> bool {
        self == CaptureDirection::Both || self == dir
    }
}
