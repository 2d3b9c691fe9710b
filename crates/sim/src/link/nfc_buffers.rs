//! The packet buffers at the two ends of an NFC link, and the exchange of
//! their sizes at link set-up that the bridge study proposes as future work
//! (bridge spec §5): each end advertises how much it can hold, and the TCP
//! hosts at the ends take the largest segment both hold as their MSS.
//!
//! An end holds a packet's whole NFC payload (the IP packet and the link's
//! framing) while it sends it and while it receives it. A plain buffer (an
//! MCU's RAM) holds a payload of up to its size. An end whose buffer is
//! lwIP's pbuf pool holds a payload as a chain of pool pbufs: each carries
//! `pbuf` bytes and costs its `struct pbuf` besides, both rounded up to
//! lwIP's memory alignment, so the buffer holds fewer payload bytes than
//! its size (see [`EndBuffer::footprint`]).

/// Bytes of lwIP 2.1's `struct pbuf` on a 32-bit MCU: the `next` and
/// `payload` pointers (4 each), `tot_len` and `len` (2 each), and
/// `type_internal`, `flags`, `ref` and `if_idx` (1 each).
pub const PBUF_STRUCT: u32 = 16;

/// lwIP's `MEM_ALIGNMENT` on a 32-bit MCU: every pool element's header and
/// payload are rounded up to it (`LWIP_MEM_ALIGN_SIZE`).
pub const MEM_ALIGNMENT: u32 = 4;

/// Bytes of the IPv4 and TCP headers of a data segment without options
/// (the lwIP hosts of the bridge send none: timestamps and SACK are off).
pub const TCP_IP_HEADERS: u32 = 40;

/// One end's packet buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndBuffer {
    /// Size of the buffer in bytes.
    pub bytes: u32,
    /// Payload bytes of one pool pbuf when the buffer is lwIP's pbuf pool
    /// (`PBUF_POOL_BUFSIZE`); 0 for a plain byte buffer.
    pub pbuf: u32,
}

fn align(n: u64) -> u64 {
    n.div_ceil(u64::from(MEM_ALIGNMENT)) * u64::from(MEM_ALIGNMENT)
}

impl EndBuffer {
    /// Bytes one pool pbuf takes: its `struct pbuf` and its payload, each
    /// aligned, as lwIP's pool elements are laid out.
    pub fn pbuf_element(&self) -> u64 {
        align(u64::from(PBUF_STRUCT)) + align(u64::from(self.pbuf))
    }

    /// Bytes of the buffer an NFC payload of `payload` bytes takes: itself
    /// in a plain buffer, else as many whole pool pbufs as its chain needs
    /// (at least one).
    pub fn footprint(&self, payload: u32) -> u64 {
        if self.pbuf == 0 {
            u64::from(payload)
        } else {
            u64::from(payload.div_ceil(self.pbuf).max(1)) * self.pbuf_element()
        }
    }

    /// Whether the buffer can hold an NFC payload of `payload` bytes.
    pub fn holds(&self, payload: u32) -> bool {
        self.footprint(payload) <= u64::from(self.bytes)
    }

    /// The largest NFC payload the buffer holds.
    pub fn largest_payload(&self) -> u32 {
        if self.pbuf == 0 {
            self.bytes
        } else {
            let pbufs = u64::from(self.bytes) / self.pbuf_element();
            (pbufs * u64::from(self.pbuf)).min(u64::from(u32::MAX)) as u32
        }
    }
}

/// The buffers of an NFC link's two ends, by port, and whether they are
/// exchanged at link set-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfcBuffers {
    /// `ends[p]` is the buffer of the end at port `p`.
    pub ends: [EndBuffer; 2],
    /// Whether the ends advertise their buffers at set-up, so that the TCP
    /// hosts at the ends clamp their MSS to [`NfcBuffers::negotiated_mss`].
    pub exchange: bool,
}

impl NfcBuffers {
    /// The largest NFC payload both ends hold.
    pub fn largest_payload(&self) -> u32 {
        self.ends[0]
            .largest_payload()
            .min(self.ends[1].largest_payload())
    }

    /// The largest TCP payload whose segment both ends hold, with `framing`
    /// bytes of link framing per packet: the largest payload both hold less
    /// the framing and the 40 bytes of IP and TCP headers. `None` when not
    /// even a segment of one byte fits.
    pub fn negotiated_mss(&self, framing: u32) -> Option<u16> {
        let mss = self
            .largest_payload()
            .checked_sub(framing + TCP_IP_HEADERS)?;
        (mss >= 1).then(|| mss.min(u32::from(u16::MAX)) as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(bytes: u32) -> EndBuffer {
        EndBuffer { bytes, pbuf: 0 }
    }

    #[test]
    fn a_plain_buffer_holds_its_size() {
        let b = plain(1080);
        assert_eq!(b.footprint(1080), 1080);
        assert!(b.holds(1080) && !b.holds(1081));
        assert_eq!(b.largest_payload(), 1080);
    }

    #[test]
    fn a_pbuf_chain_costs_whole_aligned_pbufs_and_their_headers() {
        // 256-byte pbufs: 16 + 256 = 272 bytes each.
        let b = EndBuffer {
            bytes: 1024,
            pbuf: 256,
        };
        assert_eq!(b.pbuf_element(), 272);
        assert_eq!(b.footprint(1), 272);
        assert_eq!(b.footprint(0), 272);
        assert_eq!(b.footprint(256), 272);
        assert_eq!(b.footprint(257), 544);
        // 1024 bytes hold three pbufs (816 bytes), not four (1088).
        assert_eq!(b.largest_payload(), 768);
        assert!(b.holds(768) && !b.holds(769));
        // An unaligned pool size is rounded up: 16 + 252 for 250.
        let odd = EndBuffer {
            bytes: 536,
            pbuf: 250,
        };
        assert_eq!(odd.pbuf_element(), 268);
        assert_eq!(odd.largest_payload(), 500);
    }

    #[test]
    fn the_mss_follows_the_smaller_end_less_framing_and_headers() {
        let pbufs = EndBuffer {
            bytes: 1024,
            pbuf: 256,
        };
        let b = NfcBuffers {
            ends: [pbufs, plain(2048)],
            exchange: true,
        };
        // 768 bytes of NFC payload, 16 of framing, 40 of headers.
        assert_eq!(b.negotiated_mss(16), Some(712));
        // Without the MCU's 8 bytes of framing the segment grows by 8.
        assert_eq!(b.negotiated_mss(8), Some(720));
        // The smaller end decides, whichever port it is at.
        let swapped = NfcBuffers {
            ends: [plain(600), pbufs],
            exchange: true,
        };
        assert_eq!(swapped.negotiated_mss(16), Some(544));
        // A 1080-byte buffer holds exactly the study's 1024-byte segment.
        let exact = NfcBuffers {
            ends: [plain(1080), plain(2048)],
            exchange: true,
        };
        assert_eq!(exact.negotiated_mss(16), Some(1024));
        // A buffer that holds only the headers and framing carries no data.
        let tiny = NfcBuffers {
            ends: [plain(56), plain(2048)],
            exchange: true,
        };
        assert_eq!(tiny.negotiated_mss(16), None);
        assert_eq!(
            NfcBuffers {
                ends: [plain(57), plain(57)],
                exchange: true
            }
            .negotiated_mss(16),
            Some(1)
        );
        // Large buffers are capped at the largest MSS an option can carry.
        let huge = NfcBuffers {
            ends: [plain(u32::MAX), plain(u32::MAX)],
            exchange: true,
        };
        assert_eq!(huge.negotiated_mss(16), Some(u16::MAX));
    }
}
