//! Taps that copy an interface's traffic into a pcap file.

use rtolab_wire::pcap::PcapWriter;
use serde::{Deserialize, Serialize};

use crate::node::IfaceId;

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

/// A capture attached to an interface.
pub(crate) struct Tap {
    pub(crate) name: String,
    pub(crate) iface: IfaceId,
    pub(crate) direction: CaptureDirection,
    pub(crate) writer: PcapWriter,
    /// It records the link's own frames ([`crate::link::LinkOutput::Captured`])
    /// rather than IP datagrams.
    pub(crate) frames: bool,
}
