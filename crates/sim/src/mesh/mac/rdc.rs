//! What CSMA and a radio duty cycling layer exchange (Contiki's
//! `rdc_driver`: `send_list` down, the sent callback and `input` up).

use std::collections::VecDeque;

use rtolab_wire::ieee802154::Address;

use super::radio::RadioCtl;
use super::{MacPacketId, MacStats};

/// One queued packet handed to the RDC, framed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OutFrame {
    pub id: MacPacketId,
    pub seq: u8,
    pub psdu: Vec<u8>,
    /// The frame pending bit it carries: more frames of the burst follow.
    pub pending: bool,
}

/// A neighbour's queue as CSMA hands it to the RDC (`send_list`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Burst {
    /// The neighbour (the broadcast address for broadcasts).
    pub dst: Address,
    pub frames: Vec<OutFrame>,
}

/// Contiki's `MAC_TX_*` results an RDC reports for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RdcStatus {
    Ok,
    NoAck,
    Collision,
}

/// What an RDC tells the layer above.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RdcNote {
    /// The sent callback of one frame.
    Sent {
        dst: Address,
        id: MacPacketId,
        status: RdcStatus,
    },
    /// A new (not duplicate) data frame for us or broadcast.
    Input {
        src: Address,
        dst: Address,
        payload: Vec<u8>,
    },
}

/// What an RDC acts on besides its own state.
pub(crate) struct Io<'a> {
    pub radio: &'a mut RadioCtl,
    pub notes: &'a mut VecDeque<RdcNote>,
    pub stats: &'a mut MacStats,
}
