//! Writing captures that Wireshark and tshark read.
//!
//! This wraps the `pcap-file` crate rather than exposing it: callers get one
//! fixed, reproducible format (nanosecond timestamps, little-endian,
//! snapshot length 65535, one of the [`LinkType`]s) and `std::io` errors,
//! and the dependency can change without touching any caller.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use byteorder_slice::LittleEndian;
use pcap_file::pcap::{PcapHeader, PcapPacket};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

/// Snapshot length recorded in the file header, and the longest packet accepted.
pub const SNAPLEN: u32 = 65535;

/// What each record of a capture starts with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// LINKTYPE_RAW (101): an IP datagram, no link header.
    #[default]
    Raw,
    /// LINKTYPE_IEEE802_15_4_WITHFCS (195): an IEEE 802.15.4 PSDU ending
    /// with its 2-byte FCS.
    Ieee802154WithFcs,
    /// LINKTYPE_IEEE802_15_4_NOFCS (230): an IEEE 802.15.4 PSDU without
    /// its FCS.
    Ieee802154NoFcs,
    /// LINKTYPE_IEEE802_11_RADIOTAP (127): a radiotap header, then an
    /// IEEE 802.11 MPDU (see [`crate::ieee80211`]).
    Ieee80211Radiotap,
}

impl LinkType {
    /// The LINKTYPE_ number in the file header.
    pub fn number(self) -> u32 {
        u32::from(self.data_link())
    }

    fn data_link(self) -> DataLink {
        match self {
            LinkType::Raw => DataLink::RAW,
            LinkType::Ieee802154WithFcs => DataLink::IEEE802_15_4,
            LinkType::Ieee802154NoFcs => DataLink::IEEE802_15_4_NOFCS,
            LinkType::Ieee80211Radiotap => DataLink::IEEE802_11_RADIOTAP,
        }
    }
}

/// Writes nanosecond-resolution pcap files (magic 0xa1b23c4d) via the
/// pcap-file crate, with LINKTYPE_RAW (raw IP, no link header) unless
/// another [`LinkType`] is asked for.
///
/// The header and records are written with pcap-file's own encoders
/// straight into a buffer this writer owns: one capture per interface is on
/// every packet's path when capturing, so a record costs a few copies into
/// that buffer, with no lock or dynamic call per field.
pub struct PcapWriter {
    out: BufWriter<Box<dyn Write + Send>>,
}

/// Buffer of each capture: large writes keep system calls rare. It holds
/// the longest record ([`SNAPLEN`] bytes and its header) whole.
const BUFFER_BYTES: usize = 1 << 20;

/// Bytes of a record's header: seconds, nanoseconds, captured and original
/// lengths.
const RECORD_HEADER_BYTES: usize = 16;

impl PcapWriter {
    /// Creates (or truncates) `path` and writes the file header
    /// (LINKTYPE_RAW).
    pub fn create(path: &Path) -> io::Result<Self> {
        Self::from_writer(Box::new(File::create(path)?))
    }

    /// Writes the file header (LINKTYPE_RAW) to `w` and returns a writer
    /// for packets.
    pub fn from_writer(w: Box<dyn Write + Send>) -> io::Result<Self> {
        Self::from_writer_with(w, LinkType::Raw)
    }

    /// Creates (or truncates) `path` and writes the file header for
    /// `link_type`.
    pub fn create_with(path: &Path, link_type: LinkType) -> io::Result<Self> {
        Self::from_writer_with(Box::new(File::create(path)?), link_type)
    }

    /// Writes the file header for `link_type` to `w` and returns a writer
    /// for packets.
    pub fn from_writer_with(w: Box<dyn Write + Send>, link_type: LinkType) -> io::Result<Self> {
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: SNAPLEN,
            datalink: link_type.data_link(),
            ts_resolution: TsResolution::NanoSecond,
            // Fixed rather than native so the same run gives byte-identical
            // files on every machine.
            endianness: Endianness::Little,
        };
        let mut out = BufWriter::with_capacity(BUFFER_BYTES, w);
        header.write_to(&mut out).map_err(into_io)?;
        Ok(PcapWriter { out })
    }

    /// Appends one packet (what the link type says: an IP datagram, or an
    /// IEEE 802.15.4 PSDU with or without FCS) stamped `time_ns`
    /// nanoseconds after the epoch of the capture.
    ///
    /// A packet longer than [`SNAPLEN`] (which no IPv4 datagram can be) is
    /// refused with `InvalidInput` rather than cut: readers such as
    /// pcap-file reject records whose original length exceeds the snapshot
    /// length.
    pub fn write_packet(&mut self, time_ns: u64, data: &[u8]) -> io::Result<()> {
        let len = u32::try_from(data.len())
            .ok()
            .filter(|&len| len <= SNAPLEN)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "packet of {} bytes exceeds the pcap snapshot length",
                        data.len()
                    ),
                )
            })?;
        // A record goes out whole: when it does not fit in what is left of
        // the buffer, the buffer (whole records only) is written first. A
        // process killed between two writes then leaves a file that ends
        // at a record's end, never inside one.
        let record = RECORD_HEADER_BYTES + data.len();
        if self.out.capacity() - self.out.buffer().len() < record {
            self.out.flush()?;
        }
        let packet = PcapPacket::new(Duration::from_nanos(time_ns), len, data);
        packet
            .write_to::<_, LittleEndian>(&mut self.out, TsResolution::NanoSecond, SNAPLEN)
            .map_err(into_io)?;
        Ok(())
    }

    /// Snapshot length recorded in the header: 65535.
    pub fn snaplen(&self) -> u32 {
        SNAPLEN
    }

    /// Flushes buffered packets to the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

fn into_io(err: PcapError) -> io::Error {
    match err {
        PcapError::IoError(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidInput, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Records the length of every write that reaches it.
    struct Writes(Arc<Mutex<Vec<usize>>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().push(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_write_to_the_file_ends_at_a_record_boundary() {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let mut pcap = PcapWriter::from_writer(Box::new(Writes(writes.clone()))).unwrap();
        // Sizes that do not divide the buffer, so records straddle it.
        let sizes: Vec<usize> = (0..400).map(|i| 1 + (i * 7919) % 65_000).collect();
        let mut ends = vec![24];
        for (i, &size) in sizes.iter().enumerate() {
            pcap.write_packet(i as u64, &vec![0x45; size]).unwrap();
            ends.push(ends.last().unwrap() + RECORD_HEADER_BYTES + size);
        }
        pcap.flush().unwrap();
        let writes = writes.lock().unwrap();
        assert!(writes.len() > 5, "the buffer filled several times");
        let mut at = 0;
        for &len in writes.iter() {
            at += len;
            assert!(
                ends.contains(&at),
                "a write ends at byte {at}, inside a record"
            );
        }
        assert_eq!(at, *ends.last().unwrap());
    }
}
