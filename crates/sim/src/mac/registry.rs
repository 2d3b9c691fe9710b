//! The MAC plug-in point on the scenario side, and the macro that
//! registers every MAC in one place.

use serde::de::DeserializeOwned;

use crate::config::ScenarioError;

/// A MAC as a scenario file describes it: the `mac` table of a shared
/// medium, `{ kind = "...", ... }`.
pub trait ScenarioMac: Sized + Clone + std::fmt::Debug + PartialEq {
    /// The `kind` value of its table.
    const KIND: &'static str;
    /// The fields of its table besides `kind`; a struct with
    /// `#[serde(deny_unknown_fields)]`.
    type Raw: DeserializeOwned;
    /// The MAC it builds, one per interface.
    type Model: super::Mac;

    /// Checks the fields (`path` is the table's, e.g. `link[2].mac`).
    fn validate(raw: Self::Raw, path: &str) -> Result<Self, ScenarioError>;

    /// The MAC of one interface, in its initial state.
    fn build(&self) -> Self::Model;
}

/// Registers the MACs: generates [`AnyMac`](super::AnyMac) (dispatched by
/// `match`), [`MacSpec`](super::MacSpec) and [`MAC_KINDS`](super::MAC_KINDS).
macro_rules! mac_registry {
    ($( $(#[doc = $doc:literal])* $variant:ident => $module:ident :: $spec:ident ),+ $(,)?) => {
        /// Every registered MAC.
        #[derive(Debug)]
        pub enum AnyMac {
            $( $(#[doc = $doc])* $variant(<$module::$spec as ScenarioMac>::Model), )+
        }

        /// A validated `mac` table, by kind.
        #[derive(Clone, Debug, PartialEq)]
        pub enum MacSpec {
            $( $(#[doc = $doc])* $variant($module::$spec), )+
        }

        /// The `kind` names of every registered MAC.
        pub const MAC_KINDS: &[&str] = &[$( <$module::$spec as ScenarioMac>::KIND ),+];

        /// Every registered MAC, with its description and the
        /// fields of its table ([`crate::catalog`]), in registration order.
        pub fn mac_catalog() -> Vec<$crate::catalog::KindInfo> {
            $crate::catalog::registry_catalog!("mac", ScenarioMac, $( [$( $doc ),*] $module::$spec ),+)
        }

        impl MacSpec {
            /// Reads and validates a `mac` table at `path`.
            pub fn parse(mut table: toml::Table, path: &str) -> Result<MacSpec, ScenarioError> {
                let kind = $crate::config::take_required(&mut table, "kind", path)?;
                let family = [$( $crate::config::struct_fields::<<$module::$spec as ScenarioMac>::Raw>() ),+];
                $(
                    if kind == <$module::$spec as ScenarioMac>::KIND {
                        let what = format!("{kind} MACs");
                        let raw = $crate::config::read_kind(table, path, &what, &family, &[])?;
                        return <$module::$spec as ScenarioMac>::validate(raw, path).map(MacSpec::$variant);
                    }
                )+
                Err($crate::config::unknown_kind(path, "MAC", &kind, MAC_KINDS))
            }

            /// The `kind` name.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( MacSpec::$variant(_) => <$module::$spec as ScenarioMac>::KIND, )+
                }
            }

            /// The MAC of one interface.
            pub fn build(&self) -> AnyMac {
                match self {
                    $( MacSpec::$variant(s) => AnyMac::$variant(s.build()), )+
                }
            }
        }

        impl Mac for AnyMac {
            fn ready(&mut self, now: SimTime, rng: &mut SimRng) -> MacStep {
                match self {
                    $( AnyMac::$variant(m) => m.ready(now, rng), )+
                }
            }

            fn sensed(&mut self, now: SimTime, busy: bool, rng: &mut SimRng) -> MacStep {
                match self {
                    $( AnyMac::$variant(m) => m.sensed(now, busy, rng), )+
                }
            }
        }
    };
}
