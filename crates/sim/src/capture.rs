//! Taps that copy an interface's traffic into a pcap file.

use rtolab_wire::pcap::PcapWriter;

use crate::node::IfaceId;

pub use crate::direction::CaptureDirection;

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
