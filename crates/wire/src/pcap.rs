//! Writing captures that Wireshark and tshark read.
//!
//! This wraps the `pcap-file` crate rather than exposing it: callers get one
//! fixed, reproducible format (nanosecond timestamps, little-endian, raw
//! IPv4 link type, snapshot length 65535) and `std::io` errors, and the
//! dependency can change without touching any caller.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use byteorder_slice::LittleEndian;
use pcap_file::pcap::{PcapHeader, PcapPacket};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

/// Snapshot length recorded in the file header, and the longest packet accepted.
pub const SNAPLEN: u32 = 65535;

/// Writes nanosecond-resolution pcap files (magic 0xa1b23c4d) with
/// LINKTYPE_RAW (raw IPv4, no link header), via the pcap-file crate.
///
/// The header and records are written with pcap-file's own encoders
/// straight into a buffer this writer owns: one capture per interface is on
/// every packet's path when capturing, so a record costs a few copies into
/// that buffer, with no lock or dynamic call per field.
pub struct PcapWriter {
    out: BufWriter<Box<dyn Write + Send>>,
}

/// Buffer of each capture: large writes keep system calls rare.
const BUFFER_BYTES: usize = 1 << 20;

impl PcapWriter {
    /// Creates (or truncates) `path` and writes the file header.
    pub fn create(path: &Path) -> io::Result<Self> {
        Self::from_writer(Box::new(File::create(path)?))
    }

    /// Writes the file header to `w` and returns a writer for packets.
    pub fn from_writer(w: Box<dyn Write + Send>) -> io::Result<Self> {
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: SNAPLEN,
            datalink: DataLink::RAW,
            ts_resolution: TsResolution::NanoSecond,
            // Fixed rather than native so the same run gives byte-identical
            // files on every machine.
            endianness: Endianness::Little,
        };
        let mut out = BufWriter::with_capacity(BUFFER_BYTES, w);
        header.write_to(&mut out).map_err(into_io)?;
        Ok(PcapWriter { out })
    }

    /// Appends one packet (a raw IPv4 datagram) stamped `time_ns` nanoseconds
    /// after the epoch of the capture.
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
