//! The middlebox plug-in point on the scenario side, and the macro that
//! registers every middlebox in one place.

use serde::de::DeserializeOwned;

use crate::config::{ScenarioError, Topology};

/// What a middlebox kind's validation sees.
pub struct MiddleboxCheck<'a> {
    /// Hosts and interface addresses.
    pub topology: &'a Topology,
    /// Index of the `[[middlebox]]` entry.
    pub index: usize,
    /// The host it sits on.
    pub host: &'a str,
    /// `"<kind> middleboxes"`, for messages.
    pub what: String,
}

impl MiddleboxCheck<'_> {
    /// The path of one of its fields: `middlebox[0].drop`.
    pub fn at(&self, field: &str) -> String {
        format!("middlebox[{}].{field}", self.index)
    }
}

/// A middlebox kind as a scenario file describes it.
pub trait ScenarioMiddlebox: Sized + Clone + std::fmt::Debug + PartialEq {
    /// The `kind` value of its `[[middlebox]]` tables.
    const KIND: &'static str;
    /// The fields of its table (besides `name`, `kind` and `host`); a
    /// struct with `#[serde(deny_unknown_fields)]`.
    type Raw: DeserializeOwned;
    /// The middlebox it builds.
    type Model: super::Middlebox;

    /// Checks the fields and returns the validated description.
    fn validate(raw: Self::Raw, cx: &mut MiddleboxCheck<'_>) -> Result<Self, ScenarioError>;

    /// The middlebox, in its initial state.
    fn build(&self) -> Self::Model;
}

/// Registers the middleboxes: generates [`AnyMiddlebox`](super::AnyMiddlebox)
/// (dispatched by `match`), [`MiddleboxSpec`](super::MiddleboxSpec) (the
/// validated `[[middlebox]]` tables) and
/// [`MIDDLEBOX_KINDS`](super::MIDDLEBOX_KINDS).
macro_rules! middlebox_registry {
    ($( $(#[doc = $doc:literal])* $variant:ident => $module:ident :: $spec:ident ),+ $(,)?) => {
        /// Every registered middlebox.
        pub enum AnyMiddlebox {
            $( $(#[doc = $doc])* $variant(<$module::$spec as ScenarioMiddlebox>::Model), )+
            /// A middlebox outside the registry, for programs that build a
            /// simulation in code; its counters are whatever it reports.
            Custom(Box<dyn Middlebox<Stats = serde_json::Value> + Send>),
        }

        /// A validated `[[middlebox]]` table, by kind.
        #[derive(Clone, Debug, PartialEq)]
        pub enum MiddleboxSpec {
            $( $(#[doc = $doc])* $variant($module::$spec), )+
        }

        /// The `kind` names of every registered middlebox.
        pub const MIDDLEBOX_KINDS: &[&str] = &[$( <$module::$spec as ScenarioMiddlebox>::KIND ),+];

        /// Every registered middlebox, with its description and the
        /// fields of its table ([`crate::catalog`]), in registration order.
        pub fn middlebox_catalog() -> Vec<$crate::catalog::KindInfo> {
            $crate::catalog::registry_catalog!("middlebox", ScenarioMiddlebox, $( [$( $doc ),*] $module::$spec ),+)
        }

        impl MiddleboxSpec {
            /// Reads and validates the table of a middlebox of `kind` (its
            /// `name`, `kind` and `host` already taken out).
            pub fn parse(
                kind: &str,
                table: toml::Table,
                cx: &mut MiddleboxCheck<'_>,
            ) -> Result<MiddleboxSpec, ScenarioError> {
                let path = format!("middlebox[{}]", cx.index);
                let family = [$( $crate::config::struct_fields::<<$module::$spec as ScenarioMiddlebox>::Raw>() ),+];
                $(
                    if kind == <$module::$spec as ScenarioMiddlebox>::KIND {
                        cx.what = format!("{kind} middleboxes");
                        let raw = $crate::config::read_kind(table, &path, &cx.what, &family, &[])?;
                        return <$module::$spec as ScenarioMiddlebox>::validate(raw, cx)
                            .map(MiddleboxSpec::$variant);
                    }
                )+
                Err($crate::config::unknown_kind(&path, "middlebox", kind, MIDDLEBOX_KINDS))
            }

            /// The `kind` name.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( MiddleboxSpec::$variant(_) => <$module::$spec as ScenarioMiddlebox>::KIND, )+
                }
            }

            /// The middlebox, in its initial state.
            pub fn build(&self) -> AnyMiddlebox {
                match self {
                    $( MiddleboxSpec::$variant(s) => AnyMiddlebox::$variant(s.build()), )+
                }
            }
        }

        impl AnyMiddlebox {
            /// The `kind` name.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( AnyMiddlebox::$variant(_) => <$module::$spec as ScenarioMiddlebox>::KIND, )+
                    AnyMiddlebox::Custom(_) => "custom",
                }
            }

            /// See [`Middlebox::on_packet`].
            pub fn on_packet(&mut self, cx: &mut MiddleboxCx<'_>, packet: Held) -> Option<Held> {
                match self {
                    $( AnyMiddlebox::$variant(m) => m.on_packet(cx, packet), )+
                    AnyMiddlebox::Custom(m) => m.on_packet(cx, packet),
                }
            }

            /// See [`Middlebox::handle_timeout`].
            pub fn handle_timeout(&mut self, cx: &mut MiddleboxCx<'_>) {
                match self {
                    $( AnyMiddlebox::$variant(m) => m.handle_timeout(cx), )+
                    AnyMiddlebox::Custom(m) => m.handle_timeout(cx),
                }
            }

            /// See [`Middlebox::on_link_indication`].
            pub fn on_link_indication(
                &mut self,
                cx: &mut MiddleboxCx<'_>,
                iface: u32,
                indication: $crate::link::LinkIndication,
            ) {
                match self {
                    $( AnyMiddlebox::$variant(m) => m.on_link_indication(cx, iface, indication), )+
                    AnyMiddlebox::Custom(m) => m.on_link_indication(cx, iface, indication),
                }
            }

            /// See [`Middlebox::poll_timeout`].
            pub fn poll_timeout(&self) -> Option<SimTime> {
                match self {
                    $( AnyMiddlebox::$variant(m) => m.poll_timeout(), )+
                    AnyMiddlebox::Custom(m) => m.poll_timeout(),
                }
            }

            /// Its counters, as the columns of its report row.
            pub fn stats(&self) -> serde_json::Value {
                match self {
                    $( AnyMiddlebox::$variant(m) => {
                        serde_json::to_value(m.stats()).unwrap_or(serde_json::Value::Null)
                    } )+
                    AnyMiddlebox::Custom(m) => m.stats(),
                }
            }
        }
    };
}
