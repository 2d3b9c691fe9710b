//! The app plug-in point on the scenario side: the trait an app kind
//! implements to be read from `[[app]]` tables, and the macro that
//! registers every kind in one place.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use rtolab_time::SimDuration;
use serde::de::DeserializeOwned;

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

    /// A remote address (IPv4 or IPv6) some interface of the scenario has,
    /// with a port that is not 0.
    pub fn remote(&self, field: &str, addr: SocketAddr) -> Result<SocketAddr, ScenarioError> {
        self.topology
            .ip_address_exists(&self.at(field), addr.ip())?;
        self.port(field, addr.port())?;
        Ok(addr)
    }

    /// A port the app's field names: 0 is no port a datagram or segment
    /// can carry (it asks a real stack for any port).
    pub fn port(&self, field: &str, port: u16) -> Result<u16, ScenarioError> {
        if port == 0 {
            return Err(ScenarioError::new(
                self.at(field),
                "port must be between 1 and 65535, got 0",
            ));
        }
        Ok(port)
    }

    /// Claims TCP `port` on the app's host for listening.
    pub fn listen_tcp(&mut self, port: u16) -> Result<u16, ScenarioError> {
        self.port("port", port)?;
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
        self.port("port", port)?;
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
    /// The app it builds: one type that runs in any [`AppCx`](super::AppCx)
    /// (the simulator's and the emulator's).
    type App;
    /// Its counters, reported as the columns of its row.
    type Stats: Clone + std::fmt::Debug + PartialEq + serde::Serialize;

    /// Checks the fields and returns the validated description.
    fn validate(raw: Self::Raw, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError>;

    /// The app, in its initial state.
    fn build(&self) -> Self::App;

    /// For a client: the address it connects to and the kind of app that
    /// must listen there.
    fn server(&self) -> Option<(SocketAddr, &'static str)> {
        None
    }

    /// For a TCP server: the port it listens on.
    fn listen_port(&self) -> Option<u16> {
        None
    }

    /// Whether it opens connections or sends on its own, and so finishes,
    /// rather than serving: the runs that wait for apps to finish (the
    /// emulator's) wait for these. By default, an app with a server.
    fn is_client(&self) -> bool {
        self.server().is_some()
    }
}

/// Registers the app kinds: generates [`AnyApp`](super::AnyApp) (the apps,
/// dispatched by `match`), [`AppStats`](super::AppStats),
/// [`AppKindSpec`](super::AppKindSpec) (the validated `[[app]]` tables) and
/// [`APP_KINDS`](super::APP_KINDS).
macro_rules! app_registry {
    ($( $(#[doc = $doc:literal])* $variant:ident => $module:ident :: $spec:ident ),+ $(,)?) => {
        /// The registered apps, plus custom ones.
        pub enum AnyApp {
            $( $(#[doc = $doc])* $variant(<$module::$spec as ScenarioApp>::App), )+
            /// Any other app (simulator only).
            Custom(Box<CustomApp>),
        }

        /// Counters of an app, by kind. Reports write them as flat columns
        /// of the app's row, so every kind keeps to scalar fields.
        #[derive(Clone, Debug, PartialEq, serde::Serialize)]
        #[serde(untagged)]
        pub enum AppStats {
            $( $(#[doc = $doc])* $variant(<$module::$spec as ScenarioApp>::Stats), )+
            /// Whatever a custom app reports: an object's fields become
            /// columns, any other value a column named `value`.
            Custom(#[serde(serialize_with = "custom_as_object")] serde_json::Value),
        }

        impl AnyApp {
            /// Short name of the kind, as in scenario files.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( AnyApp::$variant(_) => <$module::$spec as ScenarioApp>::KIND, )+
                    AnyApp::Custom(_) => "custom",
                }
            }

            /// Whether the app is one of the built-in TCP apps.
            pub fn uses_tcp(&self) -> bool {
                match self {
                    $( AnyApp::$variant(_) => <$module::$spec as ScenarioApp>::TCP, )+
                    AnyApp::Custom(_) => false,
                }
            }

            /// A snapshot of the app's counters.
            pub fn stats(&self) -> AppStats {
                match self {
                    $( AnyApp::$variant(a) => App::<AppContext<'_>>::stats(a), )+
                    AnyApp::Custom(c) => c.stats(),
                }
            }
        }

        impl<C: AppCx> App<C> for AnyApp {
            fn on_start(&mut self, cx: &mut C) {
                match self {
                    $( AnyApp::$variant(a) => a.on_start(cx), )+
                    AnyApp::Custom(c) => cx.call_custom(&mut **c, Hook::Start),
                }
            }

            fn on_packet(&mut self, cx: &mut C, datagram: &[u8]) {
                match self {
                    $( AnyApp::$variant(a) => a.on_packet(cx, datagram), )+
                    AnyApp::Custom(c) => cx.call_custom(&mut **c, Hook::Packet(datagram)),
                }
            }

            fn on_timer(&mut self, cx: &mut C, token: u64) {
                match self {
                    $( AnyApp::$variant(a) => a.on_timer(cx, token), )+
                    AnyApp::Custom(c) => cx.call_custom(&mut **c, Hook::Timer(token)),
                }
            }

            fn on_tcp(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
                match self {
                    $( AnyApp::$variant(a) => a.on_tcp(cx, flow, event), )+
                    AnyApp::Custom(c) => cx.call_custom(&mut **c, Hook::Tcp(flow, event)),
                }
            }

            fn on_end(&mut self, cx: &mut C) {
                match self {
                    $( AnyApp::$variant(a) => a.on_end(cx), )+
                    AnyApp::Custom(_) => {}
                }
            }

            fn stats(&self) -> AppStats {
                AnyApp::stats(self)
            }
        }

        /// A validated `[[app]]` table, by kind.
        #[derive(Clone, Debug, PartialEq)]
        pub enum AppKindSpec {
            $( $(#[doc = $doc])* $variant($module::$spec), )+
        }

        /// The `kind` names of every registered app.
        pub const APP_KINDS: &[&str] = &[$( <$module::$spec as ScenarioApp>::KIND ),+];

        /// Every registered app, with its description and the
        /// fields of its table ([`crate::catalog`]), in registration order.
        pub fn app_catalog() -> Vec<$crate::catalog::KindInfo> {
            let tcp = [$( <$module::$spec as ScenarioApp>::TCP ),+];
            $crate::catalog::registry_catalog!("app", ScenarioApp, $( [$( $doc ),*] $module::$spec ),+)
                .into_iter()
                .zip(tcp)
                .map(|(info, tcp)| info.with_fields($crate::catalog::tcp_app_fields(tcp)))
                .collect()
        }

        impl AppKindSpec {
            /// Whether an app of `kind` runs over TCP; `None` for an unknown
            /// kind.
            pub fn kind_uses_tcp(kind: &str) -> Option<bool> {
                $(
                    if kind == <$module::$spec as ScenarioApp>::KIND {
                        return Some(<$module::$spec as ScenarioApp>::TCP);
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
                let family = [$( $crate::config::struct_fields::<<$module::$spec as ScenarioApp>::Raw>() ),+];
                $(
                    if kind == <$module::$spec as ScenarioApp>::KIND {
                        cx.what = format!("{kind} apps");
                        // TCP apps have `profile` and `tcp` taken out already.
                        let tcp_fields: &[&'static str] = &["profile", "tcp"];
                        let raw = $crate::config::read_kind(table, &path, &cx.what, &family, tcp_fields)?;
                        return <$module::$spec as ScenarioApp>::validate(raw, cx).map(AppKindSpec::$variant);
                    }
                )+
                Err($crate::config::unknown_kind(&path, "app", kind, APP_KINDS))
            }

            /// The `kind` name.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( AppKindSpec::$variant(_) => <$module::$spec as ScenarioApp>::KIND, )+
                }
            }

            /// Whether it runs over TCP.
            pub fn uses_tcp(&self) -> bool {
                match self {
                    $( AppKindSpec::$variant(_) => <$module::$spec as ScenarioApp>::TCP, )+
                }
            }

            /// The app, in its initial state.
            pub fn build(&self) -> AnyApp {
                match self {
                    $( AppKindSpec::$variant(s) => AnyApp::$variant(s.build()), )+
                }
            }

            /// See [`ScenarioApp::server`].
            pub fn server(&self) -> Option<(std::net::SocketAddr, &'static str)> {
                match self {
                    $( AppKindSpec::$variant(s) => s.server(), )+
                }
            }

            /// See [`ScenarioApp::is_client`].
            pub fn is_client(&self) -> bool {
                match self {
                    $( AppKindSpec::$variant(s) => s.is_client(), )+
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
