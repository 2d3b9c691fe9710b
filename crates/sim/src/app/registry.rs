//! The app plug-in point on the scenario side: the trait an app kind
//! implements to be read from `[[app]]` tables, and the macro that
//! registers every kind in one place.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use rtolab_time::SimDuration;
use serde::de::DeserializeOwned;

use super::AnyApp;
use crate::config::{ScenarioError, Topology};

/// What an app kind's validation sees.
pub struct AppCheck<'a> {
    /// Hosts and interface addresses.
    pub topology: &'a Topology,
    /// Index of the `[[app]]` entry.
    pub index: usize,
    /// The host it runs on.
    pub host: &'a str,
    /// `"<kind> apps"`, for messages.
    pub what: String,
    /// (host, UDP port) → the app bound to it.
    pub(crate) udp_ports: &'a mut BTreeMap<(String, u16), usize>,
    /// (host, TCP port) → the app listening on it.
    pub(crate) tcp_ports: &'a mut BTreeMap<(String, u16), usize>,
}

impl AppCheck<'_> {
    /// The path of one of the app's fields: `app[2].peer`.
    pub fn at(&self, field: &str) -> String {
        format!("app[{}].{field}", self.index)
    }

    /// A remote address some interface of the scenario has.
    pub fn remote(&self, field: &str, addr: SocketAddrV4) -> Result<SocketAddrV4, ScenarioError> {
        self.topology.address_exists(&self.at(field), *addr.ip())?;
        Ok(addr)
    }

    /// Claims TCP `port` on the app's host for listening.
    pub fn listen_tcp(&mut self, port: u16) -> Result<u16, ScenarioError> {
        if let Some(first) = self
            .tcp_ports
            .insert((self.host.to_string(), port), self.index)
        {
            return Err(ScenarioError::new(
                self.at("port"),
                format!(
                    "TCP port {port} on host {:?} is already used by app[{first}]",
                    self.host
                ),
            ));
        }
        Ok(port)
    }

    /// Claims UDP `port` on the app's host.
    pub fn bind_udp(&mut self, port: u16) -> Result<u16, ScenarioError> {
        if let Some(first) = self
            .udp_ports
            .insert((self.host.to_string(), port), self.index)
        {
            return Err(ScenarioError::new(
                self.at("port"),
                format!(
                    "port {port} on host {:?} is already used by app[{first}]",
                    self.host
                ),
            ));
        }
        Ok(port)
    }

    /// The start time (default zero) and an optional stop time after it.
    pub fn start_stop(
        &self,
        start: Option<SimDuration>,
        stop: Option<SimDuration>,
    ) -> Result<(SimDuration, Option<SimDuration>), ScenarioError> {
        let start = start.unwrap_or(SimDuration::ZERO);
        if stop.is_some_and(|stop| stop <= start) {
            return Err(ScenarioError::new(self.at("stop"), "must be after start"));
        }
        Ok((start, stop))
    }
}

/// An app kind as a scenario file describes it.
pub trait ScenarioApp: Sized + Clone + std::fmt::Debug + PartialEq {
    /// The `kind` value of its `[[app]]` tables.
    const KIND: &'static str;
    /// Whether it runs over TCP: it then also takes `profile` and `tcp`.
    const TCP: bool;
    /// The fields of its table (besides `kind`, `name`, `host`, and
    /// `profile` and `tcp` for TCP apps); a struct with
    /// `#[serde(deny_unknown_fields)]`.
    type Raw: DeserializeOwned;

    /// Checks the fields and returns the validated description.
    fn validate(raw: Self::Raw, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError>;

    /// The simulator's app.
    fn build(&self) -> AnyApp;

    /// For a client: the address it connects to and the kind of app that
    /// must listen there.
    fn server(&self) -> Option<(SocketAddrV4, &'static str)> {
        None
    }

    /// For a TCP server: the port it listens on.
    fn listen_port(&self) -> Option<u16> {
        None
    }
}

/// Registers the app kinds: generates [`AppKindSpec`](super::AppKindSpec)
/// (the validated `[[app]]` tables) and [`APP_KINDS`](super::APP_KINDS).
macro_rules! app_registry {
    ($( $(#[$doc:meta])* $variant:ident => $spec:ty ),+ $(,)?) => {
        /// A validated `[[app]]` table, by kind.
        #[derive(Clone, Debug, PartialEq)]
        pub enum AppKindSpec {
            $( $(#[$doc])* $variant($spec), )+
        }

        /// The `kind` names of every registered app.
        pub const APP_KINDS: &[&str] = &[$( <$spec as ScenarioApp>::KIND ),+];

        impl AppKindSpec {
            /// Whether an app of `kind` runs over TCP; `None` for an unknown
            /// kind.
            pub fn kind_uses_tcp(kind: &str) -> Option<bool> {
                $(
                    if kind == <$spec as ScenarioApp>::KIND {
                        return Some(<$spec as ScenarioApp>::TCP);
                    }
                )+
                None
            }

            /// Reads and validates the table of an app of `kind` (its
            /// common keys already taken out).
            pub fn parse(
                kind: &str,
                table: toml::Table,
                cx: &mut AppCheck<'_>,
            ) -> Result<AppKindSpec, ScenarioError> {
                let path = format!("app[{}]", cx.index);
                let all: Vec<&'static [&'static str]> = vec![
                    $( $crate::config::struct_fields::<<$spec as ScenarioApp>::Raw>() ),+
                ];
                let others = |own: &[&str], tcp: bool| -> Vec<&'static str> {
                    let tcp_fields: &[&'static str] = if tcp { &[] } else { &["profile", "tcp"] };
                    all.iter()
                        .flat_map(|f| f.iter().copied())
                        .chain(tcp_fields.iter().copied())
                        .filter(|f| !own.contains(f))
                        .collect()
                };
                $(
                    if kind == <$spec as ScenarioApp>::KIND {
                        cx.what = format!("{kind} apps");
                        let own = $crate::config::struct_fields::<<$spec as ScenarioApp>::Raw>();
                        let others = others(own, <$spec as ScenarioApp>::TCP);
                        let raw = $crate::config::deserialize_kind(table, &path, &cx.what, &others)?;
                        return <$spec as ScenarioApp>::validate(raw, cx).map(AppKindSpec::$variant);
                    }
                )+
                Err(ScenarioError::new(
                    format!("{path}.kind"),
                    format!("unknown app kind {kind:?} (expected one of {})", APP_KINDS.join(", ")),
                ))
            }

            /// The `kind` name.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( AppKindSpec::$variant(_) => <$spec as ScenarioApp>::KIND, )+
                }
            }

            /// Whether it runs over TCP.
            pub fn uses_tcp(&self) -> bool {
                match self {
                    $( AppKindSpec::$variant(_) => <$spec as ScenarioApp>::TCP, )+
                }
            }

            /// The simulator's app.
            pub fn build(&self) -> AnyApp {
                match self {
                    $( AppKindSpec::$variant(s) => s.build(), )+
                }
            }

            /// See [`ScenarioApp::server`].
            pub fn server(&self) -> Option<(std::net::SocketAddrV4, &'static str)> {
                match self {
                    $( AppKindSpec::$variant(s) => s.server(), )+
                }
            }

            /// See [`ScenarioApp::listen_port`].
            pub fn listen_port(&self) -> Option<u16> {
                match self {
                    $( AppKindSpec::$variant(s) => s.listen_port(), )+
                }
            }
        }
    };
}
