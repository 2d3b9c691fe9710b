//! The link-model plug-in point: the traits a model implements and the
//! macro that registers every model in one place.

use std::net::IpAddr;

use rtolab_tcp::rto::PathHint;
use rtolab_time::SimTime;
use rtolab_wire::pcap::LinkType;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Datagram, Frame, LinkOut, Medium, Port};
use crate::config::{Attachment, ScenarioError, Topology};
use crate::pool::PacketId;
use crate::position::Position;
use crate::rng::SimRng;

/// A link model as the simulator and the emulator drive it (see the module
/// documentation of [`crate::link`] for the calling convention).
pub trait LinkModel<P> {
    /// Counters reported for the link; serialized as the columns of its
    /// row in reports.
    type Stats: Clone + std::fmt::Debug + PartialEq + Serialize;

    /// Hands a frame from port `from` to the link, addressed to port `to`
    /// (only models that are [`addressed`](LinkModel::addressed) use it).
    fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    );

    /// Processes everything due at or before `now`.
    fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>);

    /// When `handle_timeout` must next be called.
    fn poll_timeout(&self) -> Option<SimTime>;

    /// A snapshot of the counters as of `now`.
    fn stats(&self, now: SimTime) -> Self::Stats;

    /// How many interfaces may attach (`None`: any number).
    fn max_ports(&self) -> Option<usize> {
        Some(2)
    }

    /// What it carries, which decides how the simulator hands it a
    /// datagram: frames to a peer port ([`Medium::PointToPoint`], the
    /// default, and [`Medium::Broadcast`]) through `transmit`, or datagrams
    /// it reads ([`Medium::Ip`]) through `transmit_datagram`. Fixed once the
    /// model is built: the simulator asks once, when it adds the link.
    fn medium(&self) -> Medium {
        Medium::PointToPoint
    }

    /// Attaches the `index`-th interface, placed at `position`; returns its
    /// port, or `None` when the model needs a position and got none.
    fn add_port(&mut self, index: Port, position: Option<Position>) -> Option<Port> {
        let _ = position;
        Some(index)
    }

    /// Whether the medium is busy as heard at `port` now.
    fn carrier_sense(&self, port: Port, now: SimTime) -> bool {
        let _ = (port, now);
        false
    }

    /// Whether to produce [`super::LinkOutput::TxStart`] notices; models that can
    /// skip them when nobody listens (captures, traces) save wake-ups.
    fn set_start_notices(&mut self, on: bool) {
        let _ = on;
    }

    /// Hands a datagram from port `from` to a model that carries datagrams
    /// ([`Medium::Ip`]): `frame` is its handle, `datagram` its bytes and
    /// trace uid. Other models take the frame as `transmit` does.
    fn transmit_datagram(
        &mut self,
        now: SimTime,
        from: Port,
        frame: Frame<P>,
        datagram: Datagram<'_>,
        out: &mut LinkOut<P>,
    ) {
        let _ = datagram;
        self.transmit(now, from, 0, frame, out);
    }

    /// Whether to produce [`super::LinkOutput::Captured`] records of the frames its
    /// radios send and receive (for captures of link-layer frames).
    fn set_frame_captures(&mut self, on: bool) {
        let _ = on;
    }

    /// What captures of its interfaces record: IP datagrams
    /// ([`LinkType::Raw`]) unless the model captures its own frames.
    fn capture_link_type(&self) -> LinkType {
        LinkType::Raw
    }

    /// What the link layer at `port` knows of the timing of the path to
    /// `dst` at `now`, for the RTO policy of a connection opened over it
    /// ([`rtolab_tcp::rto::ConnectionContext::path`]). `None` (the
    /// default): nothing, and the connection runs as it always did.
    fn path_hint(&self, port: Port, dst: IpAddr, now: SimTime) -> Option<PathHint> {
        let _ = (port, dst, now);
        None
    }
}

/// What a link kind's validation sees: the topology so far (hosts,
/// addresses) and where the link sits in the file.
pub struct LinkCheck<'a> {
    /// Hosts and assigned addresses; a link records the addresses and
    /// bridge ports it attaches.
    pub topology: &'a mut Topology,
    /// Index of the `[[link]]` entry.
    pub index: usize,
    /// The link's name.
    pub name: &'a str,
    /// `"<kind> links"`, for messages.
    pub what: String,
}

impl LinkCheck<'_> {
    /// The path of one of the link's fields: `link[3].rate`.
    pub fn at(&self, field: &str) -> String {
        format!("link[{}].{field}", self.index)
    }

    /// The error of a required field left out: `link[3].ap: required for
    /// a wifi link`.
    pub fn required(&self, field: &str) -> ScenarioError {
        ScenarioError::new(self.at(field), format!("required for {}", self.what))
    }
}

/// A link kind as a scenario file describes it.
pub trait ScenarioLink: Sized + Clone + std::fmt::Debug + PartialEq {
    /// The `kind` value of its `[[link]]` tables.
    const KIND: &'static str;
    /// Whether the real-time emulator can run it.
    const EMULATED: bool = true;
    /// The fields of its table (besides `name` and `kind`), as read; a
    /// struct with `#[serde(deny_unknown_fields)]`.
    type Raw: DeserializeOwned;
    /// The model it builds.
    type Model: LinkModel<PacketId>;

    /// Checks the fields against the topology, records the addresses the
    /// link assigns, and returns the validated description.
    fn validate(raw: Self::Raw, cx: &mut LinkCheck<'_>) -> Result<Self, ScenarioError>;

    /// The interfaces it attaches, in port order.
    fn attachments(&self) -> Vec<Attachment>;

    /// Its nominal bit rate, which bounds the load apps may offer it.
    fn rate_bps(&self) -> u64;

    /// Default routes the link gives the nodes it attaches, as (port,
    /// gateway on the link): a mesh's members reach everything outside it
    /// through the mesh. None by default.
    fn default_routes(&self) -> Vec<(Port, std::net::IpAddr)> {
        Vec::new()
    }

    /// Whether the real-time emulator can run this link as configured
    /// (its kind's [`ScenarioLink::EMULATED`] unless an option needs more).
    fn emulated(&self) -> bool {
        Self::EMULATED
    }

    /// The largest MSS the TCP hosts at its ends may use, when the link
    /// negotiates one at set-up (an NFC link's buffer exchange). None by
    /// default.
    fn mss_limit(&self) -> Option<u16> {
        None
    }

    /// The model, drawing whatever it randomises from `rng` (the stream
    /// `link/<name>` of the run's seed, in the simulator and the emulator
    /// alike).
    fn build(&self, rng: SimRng) -> Self::Model;
}

/// Registers the link models: generates [`Link`](super::Link) (the models,
/// dispatched by `match` so the inner loop stays monomorphic),
/// [`LinkStats`](super::LinkStats), [`LinkModelSpec`](super::LinkModelSpec)
/// (the validated `[[link]]` tables), [`LINK_KINDS`](super::LINK_KINDS)
/// and [`link_catalog`](super::link_catalog).
macro_rules! link_registry {
    ($( $(#[doc = $doc:literal])* $variant:ident => $module:ident :: $spec:ident ),+ $(,)?) => {
        /// Every registered link model. Held by value: each link lives in
        /// one slot for the whole run and is never moved after set-up, so
        /// the size of the largest model costs nothing on the hot path,
        /// where a box would cost an indirection per call.
        #[allow(clippy::large_enum_variant)]
        pub enum Link {
            $( $(#[doc = $doc])* $variant(<$module::$spec as ScenarioLink>::Model), )+
        }

        /// Counters of a link, by model (serialized as the model's own).
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum LinkStats {
            $( $(#[doc = $doc])* $variant(<<$module::$spec as ScenarioLink>::Model as LinkModel<PacketId>>::Stats), )+
        }

        /// A validated `[[link]]` table, by kind.
        #[derive(Clone, Debug, PartialEq)]
        pub enum LinkModelSpec {
            $( $(#[doc = $doc])* $variant($module::$spec), )+
        }

        /// The `kind` names of every registered link model.
        pub const LINK_KINDS: &[&str] = &[$( <$module::$spec as ScenarioLink>::KIND ),+];

        /// Every registered link model, with its description and the
        /// fields of its table ([`crate::catalog`]), in registration order.
        pub fn link_catalog() -> Vec<$crate::catalog::KindInfo> {
            $crate::catalog::registry_catalog!("link", ScenarioLink, $( [$( $doc ),*] $module::$spec ),+)
        }

        /// `match`es on a `Link` (or `LinkModelSpec`), binding the model
        /// (or spec) of whichever kind it is: the one place that names
        /// every kind, so each forwarded method is one line.
        macro_rules! each_kind {
            ($on:expr, $enum:ident, $bound:ident => $body:expr) => {
                match $on {
                    $( $enum::$variant($bound) => $body, )+
                }
            };
        }

        impl LinkModelSpec {
            /// Reads and validates the table of a link of `kind` (its
            /// `name` and `kind` keys already taken out).
            pub fn parse(
                kind: &str,
                table: toml::Table,
                cx: &mut LinkCheck<'_>,
            ) -> Result<LinkModelSpec, ScenarioError> {
                let path = format!("link[{}]", cx.index);
                let family = [$( $crate::config::struct_fields::<<$module::$spec as ScenarioLink>::Raw>() ),+];
                $(
                    if kind == <$module::$spec as ScenarioLink>::KIND {
                        cx.what = format!("{kind} links");
                        let raw = $crate::config::read_kind(table, &path, &cx.what, &family, &[])?;
                        return <$module::$spec as ScenarioLink>::validate(raw, cx).map(LinkModelSpec::$variant);
                    }
                )+
                Err($crate::config::unknown_kind(&path, "link", kind, LINK_KINDS))
            }

            /// Whether the real-time emulator can run links of `kind`.
            pub fn kind_emulated(kind: &str) -> bool {
                $(
                    if kind == <$module::$spec as ScenarioLink>::KIND {
                        return <$module::$spec as ScenarioLink>::EMULATED;
                    }
                )+
                false
            }

            /// The `kind` name.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( LinkModelSpec::$variant(_) => <$module::$spec as ScenarioLink>::KIND, )+
                }
            }

            /// The interfaces it attaches, in port order.
            pub fn attachments(&self) -> Vec<$crate::config::Attachment> {
                each_kind!(self, LinkModelSpec, s => s.attachments())
            }

            /// Its nominal bit rate.
            pub fn rate_bps(&self) -> u64 {
                each_kind!(self, LinkModelSpec, s => s.rate_bps())
            }

            /// The default routes it gives its nodes, as (port, gateway).
            pub fn default_routes(&self) -> Vec<(Port, std::net::IpAddr)> {
                each_kind!(self, LinkModelSpec, s => s.default_routes())
            }

            /// The MSS it negotiates with the hosts at its ends, if any.
            pub fn mss_limit(&self) -> Option<u16> {
                each_kind!(self, LinkModelSpec, s => s.mss_limit())
            }

            /// Whether the real-time emulator can run it.
            pub fn emulated(&self) -> bool {
                each_kind!(self, LinkModelSpec, s => s.emulated())
            }

            /// Builds the model, randomised from `rng`.
            pub fn build(&self, rng: $crate::rng::SimRng) -> Link {
                match self {
                    $( LinkModelSpec::$variant(s) => Link::$variant(s.build(rng)), )+
                }
            }
        }

        impl Link {
            /// The `kind` name of its model.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( Link::$variant(_) => <$module::$spec as ScenarioLink>::KIND, )+
                }
            }
        }

        impl LinkModel<PacketId> for Link {
            type Stats = LinkStats;

            #[inline]
            fn transmit(&mut self, now: SimTime, from: Port, to: Port, frame: Frame<PacketId>, out: &mut LinkOut<PacketId>) {
                each_kind!(self, Link, l => LinkModel::<PacketId>::transmit(l, now, from, to, frame, out))
            }
            #[inline]
            fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<PacketId>) {
                each_kind!(self, Link, l => LinkModel::<PacketId>::handle_timeout(l, now, out))
            }
            #[inline]
            fn poll_timeout(&self) -> Option<SimTime> {
                each_kind!(self, Link, l => LinkModel::<PacketId>::poll_timeout(l))
            }
            fn stats(&self, now: SimTime) -> LinkStats {
                match self {
                    $( Link::$variant(l) => LinkStats::$variant(LinkModel::<PacketId>::stats(l, now)), )+
                }
            }
            fn max_ports(&self) -> Option<usize> {
                each_kind!(self, Link, l => LinkModel::<PacketId>::max_ports(l))
            }
            fn medium(&self) -> Medium {
                each_kind!(self, Link, l => LinkModel::<PacketId>::medium(l))
            }
            fn add_port(&mut self, index: Port, position: Option<Position>) -> Option<Port> {
                each_kind!(self, Link, l => LinkModel::<PacketId>::add_port(l, index, position))
            }
            fn carrier_sense(&self, port: Port, now: SimTime) -> bool {
                each_kind!(self, Link, l => LinkModel::<PacketId>::carrier_sense(l, port, now))
            }
            fn set_start_notices(&mut self, on: bool) {
                each_kind!(self, Link, l => LinkModel::<PacketId>::set_start_notices(l, on))
            }
            #[inline]
            fn transmit_datagram(&mut self, now: SimTime, from: Port, frame: Frame<PacketId>, datagram: Datagram<'_>, out: &mut LinkOut<PacketId>) {
                each_kind!(self, Link, l => LinkModel::<PacketId>::transmit_datagram(l, now, from, frame, datagram, out))
            }
            fn set_frame_captures(&mut self, on: bool) {
                each_kind!(self, Link, l => LinkModel::<PacketId>::set_frame_captures(l, on))
            }
            fn capture_link_type(&self) -> rtolab_wire::pcap::LinkType {
                each_kind!(self, Link, l => LinkModel::<PacketId>::capture_link_type(l))
            }
            fn path_hint(&self, port: Port, dst: std::net::IpAddr, now: SimTime) -> Option<rtolab_tcp::rto::PathHint> {
                each_kind!(self, Link, l => LinkModel::<PacketId>::path_hint(l, port, dst, now))
            }
        }
    };
}
