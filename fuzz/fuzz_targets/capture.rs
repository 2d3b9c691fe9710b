//! The capture reader on arbitrary files.
//!
//! The input is a whole pcap or pcapng file (the seeds are real and
//! simulated captures, so mutations reach the records). Reading must end
//! with records or one error, never a panic: every record lies inside the
//! file, numbers run from 1 without gaps, an error names a byte offset
//! inside the file, and each record's datagram (when its link type carries
//! one) is a part of the record whose TCP fields read without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rtolab_wire::capture::{self, ReadError};

fuzz_target!(|data: &[u8]| {
    let Ok(records) = capture::records(data) else {
        return;
    };
    let mut expected = 1;
    for record in records {
        let record = match record {
            Ok(record) => record,
            Err(ReadError { offset, packet, .. }) => {
                assert!(offset < data.len(), "error offset {offset} past the file");
                // A packet at fault is the one after the last record.
                if let Some(packet) = packet {
                    assert_eq!(packet, expected);
                }
                break;
            }
        };
        assert_eq!(record.number, expected);
        expected += 1;
        assert!(record.offset + record.data.len() <= data.len());
        if let Ok(Some(datagram)) = capture::network_layer(record.link_type, &record.data) {
            assert!(datagram.len() <= record.data.len());
            let _ = capture::tcp_header(datagram);
        }
    }
});
