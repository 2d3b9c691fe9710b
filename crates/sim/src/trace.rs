//! Typed trace events and the sinks that receive them.
//!
//! Every component reports what happened as a [`TraceEvent`]; metrics and
//! plots are computed from these records (or from the stats structs each
//! component keeps), never from counters scattered through the models.
//! Nodes, interfaces, links and apps are named by their index in the run;
//! `metrics.json` holds the tables that map indices to names.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};

use rtolab_time::SimTime;
use serde::ser::{self, Impossible, SerializeStruct};
use serde::{Serialize, Serializer};

/// Why a packet was discarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DropReason {
    /// The transmit queue was full (drop-tail).
    QueueFull,
    /// The link's random loss process discarded it.
    RandomLoss,
    /// Another transmission overlapped it at the receiver.
    Collision,
    /// The receiver's radio was transmitting while it arrived.
    ReceiverTransmitting,
    /// The addressed receiver is outside the sender's transmission range.
    OutOfRange,
    /// No route matches the destination address.
    NoRoute,
    /// The next hop is not attached to the outgoing link.
    NeighbourUnknown,
    /// The TTL reached zero while forwarding.
    TtlExpired,
    /// The IPv4 header is malformed or its checksum is wrong.
    BadHeader,
    /// Addressed to this node but no app is bound to its protocol and port.
    NoListener,
    /// An NFC link's MCU was handed a packet while it still held another.
    McuBusy,
    /// An NFC link's header decompressor discarded it: rebuilt on stale
    /// state after a lost packet, or tossed until its state was refreshed.
    Decompression,
    /// An end of an NFC link could not hold it in its packet buffer.
    BufferOverflow,
    /// A middlebox at the node discarded it.
    Middlebox,
    /// The MAC gave up sending it: the channel stayed busy.
    ChannelAccessFailure,
    /// The link was out (a fade) while it crossed, or the mesh node that
    /// was to send it is switched off.
    LinkDown,
    /// The link layer's retransmissions all went unacknowledged.
    NoAck,
}

/// What an app reports about itself.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AppEvent {
    /// The app was started.
    Started,
    /// The app stopped generating traffic.
    Stopped,
    /// A datagram carrying sequence number `seq` was handed to the network.
    DatagramSent {
        /// Sequence number in the payload.
        seq: u64,
        /// Payload bytes.
        len: u32,
    },
    /// A datagram carrying sequence number `seq` arrived.
    DatagramReceived {
        /// Sequence number in the payload.
        seq: u64,
        /// Payload bytes.
        len: u32,
        /// One-way delay from the send time stamped in the payload.
        delay_ns: u64,
        /// Whether this sequence number had already arrived.
        duplicate: bool,
    },
    /// A TCP app's transfer finished: every byte was acknowledged (bulk
    /// sender) or the last response byte arrived (exchange client).
    TransferCompleted {
        /// Flow index.
        flow: u32,
        /// Payload bytes of the transfer.
        bytes: u64,
        /// From opening the connection to completion, ns.
        duration_ns: u64,
    },
    /// A TCP app's connection ended before its transfer completed.
    TransferFailed {
        /// Flow index.
        flow: u32,
        /// `reset`, `timed_out` or `closed_early`.
        reason: &'static str,
    },
    /// One message of a message series was fully acknowledged.
    MessageAcked {
        /// Flow index.
        flow: u32,
        /// Position of the message in the series.
        index: u32,
        /// Message bytes.
        len: u32,
        /// From the message's release to its last byte being acknowledged.
        latency_ns: u64,
    },
    /// Received TCP data did not match the stream that was sent.
    DataCorrupt {
        /// Flow index.
        flow: u32,
        /// Stream offset of the first byte of the checked chunk.
        offset: u64,
        /// Mismatching bytes in it.
        bytes: u64,
    },
}

/// One thing that happened in the network. Field `packet` is the datagram's
/// uid, which stays the same across hops.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TraceEvent {
    /// A packet was accepted into an interface's transmit queue.
    PacketEnqueued {
        /// Node index.
        node: u32,
        /// Interface index within the node.
        iface: u32,
        /// Link index.
        link: u32,
        /// Packet uid.
        packet: u64,
        /// Datagram length in bytes.
        len: u32,
        /// Packets waiting in the queue ahead of this one.
        queue_len: u32,
    },
    /// A packet started crossing the link (its first bit left).
    PacketSent {
        /// Node index.
        node: u32,
        /// Interface index within the node.
        iface: u32,
        /// Link index.
        link: u32,
        /// Packet uid.
        packet: u64,
        /// Datagram length in bytes.
        len: u32,
    },
    /// A packet arrived intact at an interface (its last bit arrived).
    PacketReceived {
        /// Node index.
        node: u32,
        /// Interface index within the node.
        iface: u32,
        /// Link index.
        link: u32,
        /// Packet uid.
        packet: u64,
        /// Datagram length in bytes.
        len: u32,
    },
    /// A packet was discarded at `node`.
    PacketDropped {
        /// Node where the packet was lost.
        node: u32,
        /// Interface, when the loss happened on a link.
        iface: Option<u32>,
        /// Link, when the loss happened on a link.
        link: Option<u32>,
        /// Packet uid.
        packet: u64,
        /// Datagram length in bytes.
        len: u32,
        /// Why.
        reason: DropReason,
    },
    /// A router passed a packet on (TTL already decremented).
    PacketForwarded {
        /// Node index.
        node: u32,
        /// Interface it arrived on.
        in_iface: u32,
        /// Interface it leaves by.
        out_iface: u32,
        /// Packet uid.
        packet: u64,
        /// TTL after the decrement.
        ttl: u8,
    },
    /// A middlebox at `node` kept a packet to release later.
    PacketHeld {
        /// Node index.
        node: u32,
        /// Middlebox index.
        middlebox: u32,
        /// Packet uid.
        packet: u64,
    },
    /// A middlebox let a packet it held continue through the node.
    PacketReleased {
        /// Node index.
        node: u32,
        /// Middlebox index.
        middlebox: u32,
        /// Packet uid.
        packet: u64,
        /// How long it was held, ns.
        held_ns: u64,
    },
    /// A middlebox sent a datagram of its own from `node`.
    PacketInjected {
        /// Node index.
        node: u32,
        /// Middlebox index.
        middlebox: u32,
        /// Packet uid.
        packet: u64,
        /// Datagram length in bytes.
        len: u32,
    },
    /// A bridge passed a packet from one interface to the other,
    /// unchanged (no TTL decrement, no routing).
    PacketBridged {
        /// Node index.
        node: u32,
        /// Interface it arrived on.
        in_iface: u32,
        /// Interface it leaves by.
        out_iface: u32,
        /// Packet uid.
        packet: u64,
    },
    /// A packet addressed to `node` was handed to app `app`, or to the
    /// host's TCP stack.
    PacketDelivered {
        /// Node index.
        node: u32,
        /// App index; `None` for a TCP segment no app wants (the stack
        /// answers it with a reset).
        app: Option<u32>,
        /// Packet uid.
        packet: u64,
        /// Datagram length in bytes.
        len: u32,
    },
    /// The medium an interface is attached to became busy.
    LinkBusy {
        /// Node index.
        node: u32,
        /// Interface index within the node.
        iface: u32,
        /// Link index.
        link: u32,
        /// When the medium will be free again, in ns.
        until_ns: u64,
    },
    /// The medium an interface is attached to became free.
    LinkFree {
        /// Node index.
        node: u32,
        /// Interface index within the node.
        iface: u32,
        /// Link index.
        link: u32,
    },
    /// A link layer told its node about the link's state (`going_down`,
    /// `gone`, `up`).
    LinkIndication {
        /// Node index.
        node: u32,
        /// Interface index within the node.
        iface: u32,
        /// Link index.
        link: u32,
        /// `going_down`, `gone` or `up`.
        indication: &'static str,
        /// With `going_down`: the link's round trip, ns.
        #[serde(skip_serializing_if = "Option::is_none")]
        rtt_ns: Option<u64>,
        /// With `going_down`: the predicted outage duration, ns.
        #[serde(skip_serializing_if = "Option::is_none")]
        expected_outage_ns: Option<u64>,
    },
    /// A mesh node chose a new preferred parent: one edge of the routing
    /// tree changed (the tree over time).
    ParentChanged {
        /// Node index of the mesh member.
        node: u32,
        /// Link index of the mesh.
        link: u32,
        /// Node index of its new parent (`None`: it has none).
        parent: Option<u32>,
        /// Its routing rank after the change (RPL: 256 per hop at the
        /// defaults' `MinHopRankIncrease`).
        rank: u16,
    },
    /// A link-layer MAC put a frame carrying a packet on air (802.11:
    /// each attempt; `attempt` above 1 is a retransmission, sent with the
    /// Retry bit).
    MacAttempt {
        /// Node index.
        node: u32,
        /// Interface index within the node.
        iface: u32,
        /// Link index.
        link: u32,
        /// Packet uid.
        packet: u64,
        /// Datagram length in bytes.
        len: u32,
        /// Attempt number, from 1.
        attempt: u32,
    },
    /// A TCP connection's engine reported something. Serialised flat: the
    /// engine's event name is in `tcp_event` and its fields are columns
    /// (times and durations in ns).
    Tcp {
        /// Node index.
        node: u32,
        /// Index of the app owning the connection, if any.
        app: Option<u32>,
        /// Flow index (the row of the report's `flows` table).
        flow: u32,
        /// What happened.
        #[serde(flatten)]
        detail: TcpTrace,
    },
    /// An app-level event.
    App {
        /// Node index.
        node: u32,
        /// App index.
        app: u32,
        /// What happened.
        detail: AppEvent,
    },
}

/// A TCP engine trace event ([`rtolab_tcp::trace::TraceEvent`]). The
/// engine tags its events with `event`, which [`TraceEvent`] already uses
/// for its own variant name, so this wrapper writes the engine's tag as
/// `tcp_event` and every other field unchanged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpTrace(pub rtolab_tcp::trace::TraceEvent);

impl Serialize for TcpTrace {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(RenameTag(serializer))
    }
}

/// Name under which [`TcpTrace`] writes the engine's event tag.
const TCP_TAG: &str = "tcp_event";

/// Passes a struct through to the wrapped serializer with its `event`
/// field renamed. The engine's events are all structs (unit variants of an
/// internally tagged enum serialise as a struct holding only the tag).
struct RenameTag<S>(S);

struct RenameFields<T>(T);

impl<T: SerializeStruct> SerializeStruct for RenameFields<T> {
    type Ok = T::Ok;
    type Error = T::Error;

    fn serialize_field<V: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &V,
    ) -> Result<(), T::Error> {
        let key = if key == "event" { TCP_TAG } else { key };
        self.0.serialize_field(key, value)
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), T::Error> {
        self.0.skip_field(key)
    }

    fn end(self) -> Result<T::Ok, T::Error> {
        self.0.end()
    }
}

fn not_a_struct<E: ser::Error>() -> E {
    E::custom("a TCP trace event must serialise as a struct")
}

macro_rules! refuse {
    ($($method:ident($($ty:ty),*);)*) => {
        $(fn $method(self, $(_: $ty),*) -> Result<S::Ok, S::Error> {
            Err(not_a_struct())
        })*
    };
}

impl<S: Serializer> Serializer for RenameTag<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = Impossible<S::Ok, S::Error>;
    type SerializeMap = Impossible<S::Ok, S::Error>;
    type SerializeStruct = RenameFields<S::SerializeStruct>;
    type SerializeStructVariant = Impossible<S::Ok, S::Error>;

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        self.0.serialize_struct(name, len).map(RenameFields)
    }

    refuse! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_char(char);
        serialize_str(&str);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Err(not_a_struct())
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, S::Error> {
        Err(not_a_struct())
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        Err(not_a_struct())
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        Err(not_a_struct())
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        Err(not_a_struct())
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        Err(not_a_struct())
    }
}

/// Receives trace events as they happen.
pub trait TraceSink: Send {
    /// Records `event`, which happened at `time`. Sinks that can fail keep
    /// the first error and report it from [`TraceSink::flush`].
    fn record(&mut self, time: SimTime, event: &TraceEvent);

    /// Writes out anything buffered and reports the first error seen.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A trace event with its time, as written to `traces.jsonl`.
#[derive(Serialize)]
struct Record<'a> {
    t_ns: u64,
    #[serde(flatten)]
    event: &'a TraceEvent,
}

/// Writes one JSON object per event and line:
/// `{"t_ns":1200000,"event":"packet_sent","node":0,...}`.
pub struct JsonlSink<W: Write + Send> {
    out: W,
    error: Option<io::Error>,
}

impl<W: Write + Send> JsonlSink<W> {
    /// A sink writing to `out` (wrap files in a `BufWriter`).
    pub fn new(out: W) -> Self {
        JsonlSink { out, error: None }
    }
}

impl<W: Write + Send> TraceSink for JsonlSink<W> {
    fn record(&mut self, time: SimTime, event: &TraceEvent) {
        if self.error.is_some() {
            return;
        }
        let record = Record {
            t_ns: time.as_nanos(),
            event,
        };
        let result = serde_json::to_writer(&mut self.out, &record)
            .map_err(io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"));
        if let Err(e) = result {
            self.error = Some(e);
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }
}

/// Keeps events in memory, for tests and for callers that analyse a run
/// without files. Clones share the same log.
#[derive(Clone, Default)]
pub struct MemorySink {
    log: Arc<Mutex<Vec<(SimTime, TraceEvent)>>>,
}

impl MemorySink {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of everything recorded so far.
    pub fn events(&self) -> Vec<(SimTime, TraceEvent)> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl TraceSink for MemorySink {
    fn record(&mut self, time: SimTime, event: &TraceEvent) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((time, event.clone()));
    }
}

/// Fans events out to the installed sink, if any; costs one branch when
/// tracing is off.
#[derive(Default)]
pub(crate) struct Tracer {
    sink: Option<Box<dyn TraceSink>>,
}

impl Tracer {
    pub(crate) fn set(&mut self, sink: Box<dyn TraceSink>) {
        self.sink = Some(sink);
    }

    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.sink.is_some()
    }

    #[inline]
    pub(crate) fn record(&mut self, time: SimTime, event: TraceEvent) {
        if let Some(sink) = self.sink.as_mut() {
            sink.record(time, &event);
        }
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        match self.sink.as_mut() {
            Some(sink) => sink.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_lines_carry_time_tag_and_snake_case_reason() {
        let mut sink = JsonlSink::new(Vec::new());
        sink.record(
            SimTime::from_micros(3),
            &TraceEvent::PacketDropped {
                node: 1,
                iface: Some(0),
                link: Some(2),
                packet: 7,
                len: 60,
                reason: DropReason::Collision,
            },
        );
        sink.record(
            SimTime::from_micros(4),
            &TraceEvent::App {
                node: 0,
                app: 1,
                detail: AppEvent::Started,
            },
        );
        sink.flush().unwrap();
        let text = String::from_utf8(sink.out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"t_ns":3000,"event":"packet_dropped","node":1,"iface":0,"link":2,"packet":7,"len":60,"reason":"collision"}"#
        );
        assert_eq!(
            lines[1],
            r#"{"t_ns":4000,"event":"app","node":0,"app":1,"detail":{"kind":"started"}}"#
        );
    }

    #[test]
    fn tcp_events_are_flat_rows_with_the_engine_name_in_tcp_event() {
        use rtolab_tcp::trace::{RetransmitCause, TraceEvent as Engine};
        let mut sink = JsonlSink::new(Vec::new());
        let tcp = |detail| TraceEvent::Tcp {
            node: 1,
            app: Some(2),
            flow: 3,
            detail: TcpTrace(detail),
        };
        sink.record(
            SimTime::from_millis(1),
            &tcp(Engine::Retransmission {
                seq: 7,
                len: 1448,
                cause: RetransmitCause::FastRetransmit,
            }),
        );
        sink.record(SimTime::from_millis(2), &tcp(Engine::DelayedAckFired));
        sink.flush().unwrap();
        let text = String::from_utf8(sink.out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"t_ns":1000000,"event":"tcp","node":1,"app":2,"flow":3,"tcp_event":"retransmission","seq":7,"len":1448,"cause":"fast_retransmit"}"#
        );
        assert_eq!(
            lines[1],
            r#"{"t_ns":2000000,"event":"tcp","node":1,"app":2,"flow":3,"tcp_event":"delayed_ack_fired"}"#
        );
    }

    #[test]
    fn write_errors_are_reported_on_flush() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut sink = JsonlSink::new(Broken);
        sink.record(
            SimTime::ZERO,
            &TraceEvent::LinkFree {
                node: 0,
                iface: 0,
                link: 0,
            },
        );
        assert!(sink.flush().unwrap_err().to_string().contains("disk full"));
    }
}
