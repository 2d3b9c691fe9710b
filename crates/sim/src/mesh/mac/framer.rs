//! Frames as Contiki 3.0's `framer_802154` (core/net/mac/framer-802154.c)
//! writes them, the address filter of its parser, and the receivers'
//! duplicate detection (core/net/mac/mac-sequence.c).

use rtolab_wire::ieee802154::{Address, FrameRepr, FrameType, FrameVersion, BROADCAST};
use rtolab_wire::WireError;

/// `IEEE802154_PANID` 0xABCD (core/net/mac/frame802154.h, and
/// `IEEE802154_CONF_PANID` in platform/sky/contiki-conf.h).
pub const IEEE802154_PANID: u16 = 0xabcd;

/// Broadcast PAN ID a receiver also accepts (`FRAME802154_BROADCASTPANDID`,
/// core/net/mac/frame802154.h).
const BROADCAST_PAN: u16 = 0xffff;

/// Sequence numbers remembered for duplicate detection, one per sender
/// (`MAX_SEQNOS`, core/net/mac/mac-sequence.c).
pub const MAX_SEQNOS: usize = 16;

/// Whether `a` is a broadcast address in either mode (framer-802154.c
/// `is_broadcast_addr`: every byte 0xff).
pub fn is_broadcast(a: Address) -> bool {
    match a {
        Address::Short(s) => s == 0xffff,
        Address::Extended(e) => e == [0xff; 8],
    }
}

/// Builds the PSDU of a data frame from `src` to `dst`: version 2006, PAN
/// ID compression (source and destination PAN are the same), the
/// acknowledgment request on unicasts, the broadcast destination as short
/// 0xffff, every other address as given (Contiki with IPv6 has 8-byte link
/// addresses, so extended).
pub fn data_frame(
    pan_id: u16,
    src: Address,
    dst: Address,
    seq: u8,
    pending: bool,
    payload: &[u8],
) -> Result<Vec<u8>, WireError> {
    let broadcast = is_broadcast(dst);
    let repr = FrameRepr {
        frame_type: FrameType::Data,
        version: FrameVersion::V2006,
        frame_pending: pending,
        ack_request: !broadcast,
        seq,
        dst_pan: Some(pan_id),
        dst: Some(if broadcast { BROADCAST } else { dst }),
        src_pan: None,
        src: Some(src),
    };
    let mut out = Vec::with_capacity(repr.psdu_len(payload.len()));
    repr.emit(payload, &mut out)?;
    Ok(out)
}

/// Length of the PSDU `data_frame` would build.
pub fn psdu_len(src: Address, dst: Address, payload_len: usize) -> usize {
    let dst = if is_broadcast(dst) { BROADCAST } else { dst };
    // Frame control and sequence number, PAN ID, addresses, FCS.
    3 + 2 + dst.wire_len() + src.wire_len() + payload_len + 2
}

/// A received frame the MAC looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// An ACK with this sequence number.
    Ack(u8),
    /// A data frame that passed the address filter: to us or broadcast, in
    /// our PAN.
    Data {
        /// Sender.
        src: Address,
        /// Destination as written (ours or broadcast).
        dst: Address,
        /// Sequence number.
        seq: u8,
        /// Frame pending bit: more frames of a burst follow.
        pending: bool,
        /// Whether the sender asked for an ACK.
        ack_request: bool,
        /// MAC payload.
        payload: Vec<u8>,
    },
    /// Anything else: unparsable, not for us, another PAN.
    Other,
}

/// Parses `psdu` and applies framer-802154.c's filter (PAN ID ours or
/// broadcast) and the RDCs' (destination us or broadcast).
pub fn classify(psdu: &[u8], pan_id: u16, me: Address) -> Incoming {
    let Ok((repr, payload)) = FrameRepr::parse(psdu) else {
        return Incoming::Other;
    };
    match repr.frame_type {
        FrameType::Ack => Incoming::Ack(repr.seq),
        FrameType::Data => {
            let (Some(dst), Some(src), Some(pan)) = (repr.dst, repr.src, repr.dst_pan) else {
                return Incoming::Other;
            };
            if pan != pan_id && pan != BROADCAST_PAN {
                return Incoming::Other;
            }
            if dst != me && !is_broadcast(dst) {
                return Incoming::Other;
            }
            Incoming::Data {
                src,
                dst,
                seq: repr.seq,
                pending: repr.frame_pending,
                ack_request: repr.ack_request,
                payload: payload.to_vec(),
            }
        }
    }
}

/// The last sequence number of each of the [`MAX_SEQNOS`] most recent
/// senders, most recent first, as mac-sequence.c keeps them.
#[derive(Clone, Debug, Default)]
pub struct SeqnoHistory {
    entries: Vec<(Address, u8)>,
}

impl SeqnoHistory {
    /// `mac_sequence_is_duplicate`: the sender's remembered number is this one.
    pub fn is_duplicate(&self, src: Address, seq: u8) -> bool {
        self.entries
            .iter()
            .find(|(a, _)| *a == src)
            .is_some_and(|&(_, s)| s == seq)
    }

    /// `mac_sequence_register_seqno`: the sender moves to the front with
    /// this number; a new sender pushes the least recent one out.
    pub fn register(&mut self, src: Address, seq: u8) {
        if let Some(i) = self.entries.iter().position(|(a, _)| *a == src) {
            self.entries.remove(i);
        } else if self.entries.len() == MAX_SEQNOS {
            self.entries.pop();
        }
        self.entries.insert(0, (src, seq));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Address = Address::Extended([0, 0x12, 0x74, 1, 0, 1, 1, 1]);
    const B: Address = Address::Extended([0, 0x12, 0x74, 2, 0, 2, 2, 2]);

    #[test]
    fn frames_are_contiki_s() {
        let psdu = data_frame(IEEE802154_PANID, A, B, 7, false, b"hi").unwrap();
        assert_eq!(psdu.len(), psdu_len(A, B, 2));
        // Data, ack request, PAN ID compression; extended addresses,
        // version 2006.
        assert_eq!(&psdu[..3], &[0x61, 0xdc, 7]);
        let Incoming::Data {
            src,
            ack_request,
            payload,
            ..
        } = classify(&psdu, IEEE802154_PANID, B)
        else {
            panic!("not data");
        };
        assert_eq!((src, ack_request, &payload[..]), (A, true, &b"hi"[..]));
        // Not for a third node, nor in another PAN.
        assert_eq!(classify(&psdu, IEEE802154_PANID, A), Incoming::Other);
        assert_eq!(classify(&psdu, 0x1234, B), Incoming::Other);
        // Broadcasts: short 0xffff, no ack request.
        let psdu = data_frame(IEEE802154_PANID, A, BROADCAST, 8, false, b"hi").unwrap();
        assert_eq!(psdu.len(), psdu_len(A, BROADCAST, 2));
        assert_eq!(&psdu[..2], &[0x41, 0xd8]);
        assert!(matches!(
            classify(&psdu, IEEE802154_PANID, B),
            Incoming::Data {
                ack_request: false,
                ..
            }
        ));
    }

    #[test]
    fn seqno_history_keeps_one_number_per_recent_sender() {
        let mut h = SeqnoHistory::default();
        h.register(A, 1);
        assert!(h.is_duplicate(A, 1));
        assert!(!h.is_duplicate(A, 2) && !h.is_duplicate(B, 1));
        h.register(A, 2);
        assert!(!h.is_duplicate(A, 1));
        for i in 0..MAX_SEQNOS as u8 {
            h.register(Address::Short(u16::from(i)), 0);
        }
        // Sixteen newer senders pushed A out.
        assert!(!h.is_duplicate(A, 2));
        assert!(h.is_duplicate(Address::Short(0), 0));
    }
}
