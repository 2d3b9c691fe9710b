//! Emulation scenarios: a simulator scenario plus, per host, which stack
//! runs it.
//!
//! The file format is the simulator's ([`rtolab_sim::scenario`]) with one
//! more key per host:
//!
//! ```toml
//! [[host]]
//! name = "appliance"
//! stack = "rtolab"   # the rtolab engine in the emulator process
//! profile = "lwip"   # its TCP profile, as in the simulator
//!
//! [[host]]
//! name = "phone"
//! stack = "linux"    # the default: a network namespace with kernel TCP
//! ```
//!
//! A Linux host may also tune its kernel where the scenario needs it:
//!
//! ```toml
//! linux = { rto_min = "3s" }  # per-route minimum RTO (ip route ... rto_min)
//! # the namespace's own sysctls, written before any app starts
//! linux = { sysctls = { "net.ipv4.tcp_early_retrans" = 0 } }
//! ```
//!
//! Bridges take no `stack`: the emulator forwards between their links
//! itself. A scenario written for the simulator therefore emulates as is,
//! with every host running Linux.
//!
//! What the emulator does not run yet is rejected here with the field's
//! path, so a run never half-starts: broadcast links, UDP apps on Linux
//! hosts, middleboxes on Linux hosts, and rtolab hosts with more than one
//! interface or more than one TCP profile.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use rtolab_sim::scenario::{AppKindSpec, LinkModelSpec, RouteTarget};
use rtolab_sim::units::parse_duration;
use rtolab_sim::{Scenario, ScenarioError};
use rtolab_tcp::profile::RtoChoice;
use rtolab_tcp::Profile;
use rtolab_time::SimDuration;
use serde::Serialize;

use crate::lwip_options::{LwipOptions, LWIP_KINDS};
use crate::netns;

/// Which stack runs a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKind {
    /// The host's own network namespace and its kernel TCP/IP; the
    /// scenario's apps run as socket programs inside it.
    Linux,
    /// The rtolab engine as a user-space host inside the emulator process,
    /// with the host's TCP profile.
    Rtolab,
    /// smoltcp as a user-space host inside the emulator process, running
    /// the same apps as an rtolab host (see `rtolab_sim::smol`).
    Smoltcp,
    /// A link-layer bridge: frames pass between its two links unchanged.
    Bridge,
    /// The real lwIP 2.1 (Debian's liblwip) in a program of ours, fed the
    /// host's IP datagrams by the emulator (see [`crate::lwip`]).
    Lwip,
}

impl HostKind {
    /// The name used in scenario files and reports.
    pub fn name(self) -> &'static str {
        match self {
            HostKind::Linux => "linux",
            HostKind::Rtolab => "rtolab",
            HostKind::Smoltcp => "smoltcp",
            HostKind::Bridge => "bridge",
            HostKind::Lwip => "lwip",
        }
    }
}

/// Kernel settings of a Linux host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinuxOptions {
    /// Minimum retransmission timeout of every route of the host
    /// (`ip route ... rto_min`), for links slower than Linux's 200 ms
    /// default assumes.
    pub rto_min: Option<SimDuration>,
    /// Sysctls written in the host's namespace before its apps start
    /// (`sysctl -w name=value`), e.g. to switch off TCP's tail loss probe.
    /// Only the network namespace's own (`net.` ones the kernel keeps per
    /// namespace) can be written there; any other fails the run's set-up.
    pub sysctls: BTreeMap<String, String>,
}

/// A sysctl's name as a scenario may give it: `net.` then dot-separated
/// words of lowercase letters, digits, `_` and `-`.
fn valid_sysctl_name(name: &str) -> bool {
    name.strip_prefix("net.").is_some_and(|rest| {
        rest.split('.').all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        })
    })
}

/// Reads a host's `linux.sysctls` table: names to integers or strings
/// (several numbers separated by spaces, as `tcp_rmem` takes).
fn sysctls(path: &str, value: &toml::Value) -> Result<BTreeMap<String, String>, ScenarioError> {
    let toml::Value::Table(t) = value else {
        return Err(error(path, "expected a table of sysctl names to values"));
    };
    let mut out = BTreeMap::new();
    for (name, v) in t {
        let here = format!("{path}.{name}");
        if !valid_sysctl_name(name) {
            return Err(error(
                &here,
                "expected a network sysctl's name, like \"net.ipv4.tcp_early_retrans\"",
            ));
        }
        let text =
            match v {
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::String(s)
                    if !s.trim().is_empty()
                        && s.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b" _-.".contains(&b)) =>
                {
                    s.clone()
                }
                _ => return Err(error(
                    &here,
                    "expected an integer or a string of letters, digits, spaces, '_', '-' and '.'",
                )),
            };
        out.insert(name.clone(), text);
    }
    Ok(out)
}

/// A validated scenario with the stack of every host.
#[derive(Clone, Debug, PartialEq)]
pub struct EmuScenario {
    /// The scenario as the simulator reads it.
    pub scenario: Scenario,
    /// `kinds[i]` runs `scenario.hosts[i]`.
    pub kinds: Vec<HostKind>,
    /// `linux[i]`: kernel settings of `scenario.hosts[i]` (default for
    /// other kinds).
    pub linux: Vec<LinuxOptions>,
    /// `lwip[i]`: run-time settings of `scenario.hosts[i]` when it is an
    /// lwIP host (default for other kinds).
    pub lwip: Vec<LwipOptions>,
}

/// Reads a host's `linux` table.
fn linux_options(i: usize, value: &toml::Value) -> Result<LinuxOptions, ScenarioError> {
    let toml::Value::Table(t) = value else {
        return Err(error(format!("host[{i}].linux"), "expected a table"));
    };
    let mut options = LinuxOptions::default();
    for (key, v) in t {
        let path = format!("host[{i}].linux.{key}");
        match key.as_str() {
            "rto_min" => {
                let text = v
                    .as_str()
                    .ok_or_else(|| error(&path, "expected a duration with a unit, like \"3s\""))?;
                let d = parse_duration(text).map_err(|e| error(&path, e.to_string()))?;
                if d.is_zero() {
                    return Err(error(&path, "must be positive"));
                }
                options.rto_min = Some(d);
            }
            "sysctls" => options.sysctls = sysctls(&path, v)?,
            _ => return Err(error(path, "unknown field (expected rto_min or sysctls)")),
        }
    }
    Ok(options)
}

fn error(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        path: path.into(),
        message: message.into(),
    }
}

impl EmuScenario {
    /// Reads, parses and validates an emulation scenario file.
    pub fn from_path(path: &Path) -> Result<EmuScenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| error(path.display().to_string(), e.to_string()))?;
        EmuScenario::from_toml_str(&text)
    }

    /// Parses and validates an emulation scenario.
    pub fn from_toml_str(text: &str) -> Result<EmuScenario, ScenarioError> {
        let mut table: toml::Table = match text.parse() {
            Ok(t) => t,
            // Let the simulator's parser word syntax errors, with positions.
            Err(_) => {
                return Err(Scenario::from_toml_str(text)
                    .err()
                    .unwrap_or_else(|| error("scenario", "not a TOML document")))
            }
        };
        let mut stacks: Vec<Option<String>> = Vec::new();
        let mut linux: Vec<Option<LinuxOptions>> = Vec::new();
        let mut lwip: Vec<Option<LwipOptions>> = Vec::new();
        if let Some(toml::Value::Array(hosts)) = table.get_mut("host") {
            for (i, host) in hosts.iter_mut().enumerate() {
                let (stack, options, lwip_table) = match host {
                    toml::Value::Table(h) => {
                        let stack = h.remove("stack");
                        // The simulator's parser reads a smoltcp host's
                        // settings and checks its apps.
                        if let Some(v @ toml::Value::String(_)) = &stack {
                            if v.as_str() == Some("smoltcp") {
                                h.insert("stack".to_string(), v.clone());
                            }
                        }
                        (stack, h.remove("linux"), h.remove("lwip"))
                    }
                    _ => (None, None, None),
                };
                linux.push(options.map(|v| linux_options(i, &v)).transpose()?);
                lwip.push(
                    lwip_table
                        .map(|v| LwipOptions::from_toml(i, &v))
                        .transpose()?,
                );
                stacks.push(match stack {
                    None => None,
                    Some(toml::Value::String(s)) => Some(s),
                    Some(other) => {
                        let expected = r#""linux", "rtolab", "smoltcp" or "lwip""#;
                        return Err(error(
                            format!("host[{i}].stack"),
                            format!("expected {expected}, got {other}"),
                        ));
                    }
                });
            }
        }
        let stripped = toml::to_string(&table).map_err(|e| error("scenario", e.to_string()))?;
        let scenario = Scenario::from_toml_str(&stripped)?;
        let mut kinds = Vec::with_capacity(scenario.hosts.len());
        let mut options = Vec::with_capacity(scenario.hosts.len());
        let mut lwip_all = Vec::with_capacity(scenario.hosts.len());
        for (i, host) in scenario.hosts.iter().enumerate() {
            let stack = stacks.get(i).cloned().flatten();
            let linux = linux.get(i).cloned().flatten();
            let kind = match (host.bridge, stack.as_deref()) {
                (true, None) => HostKind::Bridge,
                (true, Some(_)) => {
                    return Err(error(
                        format!("host[{i}].stack"),
                        "not allowed for a bridge (the emulator forwards its frames)",
                    ))
                }
                (false, None | Some("linux")) => HostKind::Linux,
                (false, Some("rtolab")) => HostKind::Rtolab,
                (false, Some("lwip")) => HostKind::Lwip,
                (false, Some("smoltcp")) => HostKind::Smoltcp,
                (false, Some(other)) => {
                    return Err(error(
                        format!("host[{i}].stack"),
                        format!(
                            "expected \"linux\", \"rtolab\", \"smoltcp\" or \"lwip\", got {other:?}"
                        ),
                    ))
                }
            };
            if linux.is_some() && kind != HostKind::Linux {
                return Err(error(
                    format!("host[{i}].linux"),
                    format!(
                        "only for hosts with stack = \"linux\", {:?} is {}",
                        host.name,
                        kind.name()
                    ),
                ));
            }
            let lwip_options = lwip.get(i).copied().flatten();
            if lwip_options.is_some() && kind != HostKind::Lwip {
                return Err(error(
                    format!("host[{i}].lwip"),
                    format!(
                        "only for hosts with stack = \"lwip\", {:?} is {}",
                        host.name,
                        kind.name()
                    ),
                ));
            }
            kinds.push(kind);
            options.push(linux.unwrap_or_default());
            lwip_all.push(lwip_options.unwrap_or_default());
        }
        let emu = EmuScenario {
            scenario,
            kinds,
            linux: options,
            lwip: lwip_all,
        };
        emu.check_supported()?;
        Ok(emu)
    }

    /// The simulator's model of this emulation: Linux hosts run the rtolab
    /// engine with the `linux` profile (and their `rto_min` as the RTO
    /// floor), everything else is unchanged. Comparing a run with its model
    /// shows what the real stacks and the wall clock change.
    pub fn simulator_equivalent(&self) -> Scenario {
        let mut s = self.scenario.clone();
        for (h, kind) in self.kinds.iter().enumerate() {
            if *kind != HostKind::Linux {
                continue;
            }
            let mut profile = Profile::linux();
            if let (Some(min), RtoChoice::Rfc6298(c)) = (self.linux[h].rto_min, &mut profile.rto) {
                c.min = min;
            }
            let name = s.hosts[h].name.clone();
            s.hosts[h].tcp = Some(profile.clone());
            for app in s.apps.iter_mut().filter(|a| a.host == name) {
                if app.tcp.is_some() {
                    app.tcp = Some(Box::new(profile.clone()));
                }
            }
        }
        s
    }

    /// Linux hosts are network namespaces named after them
    /// ([`netns::host_part`]): each name must give a namespace of its own,
    /// so it is plain text no longer than what the namespace keeps, and
    /// two names never give the same namespace name.
    fn check_namespace_names(&self) -> Result<(), ScenarioError> {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (h, host) in self.scenario.hosts.iter().enumerate() {
            if self.kinds[h] != HostKind::Linux {
                continue;
            }
            let field = format!("host[{h}].name");
            if host.name.chars().any(char::is_control) {
                return Err(error(
                    field,
                    format!(
                        "{:?} has control characters; a Linux host's network namespace is named after it",
                        host.name
                    ),
                ));
            }
            let length = host.name.chars().count();
            if length > netns::MAX_HOST_PART {
                return Err(error(
                    field,
                    format!(
                        "at most {} characters for a Linux host (its network namespace is named after it), got {length}",
                        netns::MAX_HOST_PART
                    ),
                ));
            }
            let part = netns::host_part(&host.name);
            if let Some(&other) = seen.get(&part) {
                return Err(error(
                    field,
                    format!(
                        "{:?} and host[{other}] {:?} give the same network namespace name {part:?} (letters, digits, '-' and '_' are kept, anything else becomes '_'); rename one",
                        host.name, self.scenario.hosts[other].name
                    ),
                ));
            }
            seen.insert(part, h);
        }
        Ok(())
    }

    /// The stack of the host called `name`.
    pub fn kind_of(&self, name: &str) -> Option<HostKind> {
        let i = self.scenario.hosts.iter().position(|h| h.name == name)?;
        self.kinds.get(i).copied()
    }

    /// Rejects what the emulator cannot run yet, naming the field.
    fn check_supported(&self) -> Result<(), ScenarioError> {
        let s = &self.scenario;
        self.check_namespace_names()?;
        for (i, link) in s.links.iter().enumerate() {
            if !link.model.emulated() {
                let kind = link.model.kind();
                // An emulated kind refused here has a setting only the
                // simulator runs: an NFC link's buffer exchange sets the MSS
                // of simulated hosts, not that of real stacks.
                let message = if LinkModelSpec::kind_emulated(kind) {
                    format!(
                        "{kind} links are emulated, but not with this one's settings: \
                         the buffer exchange (buffers.exchange) runs in the simulator only"
                    )
                } else {
                    format!(
                        "{kind} links are not emulated yet (these are: {})",
                        emulated_link_kinds().join(", ")
                    )
                };
                return Err(error(format!("link[{i}].kind"), message));
            }
        }
        // Emulated hosts have one IPv4 address per interface (TUN devices,
        // namespaces and the rtolab host alike): IPv6 is the simulator's.
        for (i, link) in s.links.iter().enumerate() {
            if let Some(e) = link
                .model
                .attachments()
                .iter()
                .position(|a| a.ipv6.is_some())
            {
                return Err(error(
                    format!("link[{i}].ends[{e}].ipv6"),
                    "IPv6 addresses are not emulated yet (only the simulator runs them)",
                ));
            }
        }
        for (i, route) in s.routes.iter().enumerate() {
            if let RouteTarget::V6 { .. } = route.target {
                return Err(error(
                    format!("route[{i}].via"),
                    "IPv6 routes are not emulated yet (only the simulator runs them)",
                ));
            }
        }
        for (i, app) in s.apps.iter().enumerate() {
            if let Some((peer @ SocketAddr::V6(_), _)) = app.kind.server() {
                return Err(error(
                    format!("app[{i}].peer"),
                    format!("{peer} is IPv6: the emulator connects over IPv4 only"),
                ));
            }
        }
        for (i, middlebox) in s.middleboxes.iter().enumerate() {
            // Packets to a Linux or lwIP host go straight into its own
            // stack; the emulator sees only what bridges and rtolab hosts
            // receive.
            if let Some(kind @ (HostKind::Linux | HostKind::Lwip)) = self.kind_of(&middlebox.host) {
                return Err(error(
                    format!("middlebox[{i}].host"),
                    format!(
                        "{:?} is a {} host: middleboxes run on bridges and rtolab hosts, which the emulator forwards for",
                        middlebox.host,
                        if kind == HostKind::Linux { "Linux" } else { "lwIP" }
                    ),
                ));
            }
        }
        for (i, app) in s.apps.iter().enumerate() {
            let kind = app.kind.kind();
            let linux = self.kind_of(&app.host) == Some(HostKind::Linux);
            if linux && !crate::apps::linux::LINUX_KINDS.contains(&kind) {
                let hint = if app.kind.uses_tcp() {
                    "put it on a host with stack = \"rtolab\""
                } else {
                    "on a Linux host, run a UDP program with `ip netns exec`"
                };
                return Err(error(
                    format!("app[{i}].kind"),
                    format!("{kind} apps run on rtolab hosts only: {hint}"),
                ));
            }
        }
        for (h, host) in s.hosts.iter().enumerate() {
            // Hosts in user space (ours, smoltcp, lwIP) have one interface.
            if !matches!(
                self.kinds[h],
                HostKind::Rtolab | HostKind::Smoltcp | HostKind::Lwip
            ) {
                continue;
            }
            let interfaces = s
                .links
                .iter()
                .filter(|l| l.model.attachments().iter().any(|e| e.host == host.name))
                .count();
            if interfaces != 1 {
                return Err(error(
                    format!("host[{h}].stack"),
                    format!(
                        "{:?} runs {} in user space, with exactly one interface; it has {interfaces}",
                        host.name,
                        self.kinds[h].name()
                    ),
                ));
            }
            let mut profiles = s
                .apps
                .iter()
                .enumerate()
                .filter(|(_, a)| a.host == host.name)
                .filter_map(|(i, a)| a.tcp.as_ref().map(|p| (i, p)));
            if let Some((_, first)) = profiles.next() {
                if let Some((i, _)) = profiles.find(|(_, p)| *p != first) {
                    return Err(error(
                        format!("app[{i}].profile"),
                        format!(
                            "the apps of rtolab host {:?} must share one TCP profile (one engine stack per host)",
                            host.name
                        ),
                    ));
                }
            }
        }
        check_lwip_hosts(self)
    }
}

/// Rejects what an lwIP host cannot run, naming the field.
fn check_lwip_hosts(emu: &EmuScenario) -> Result<(), ScenarioError> {
    let s = &emu.scenario;
    let is_lwip = |host: &str| emu.kind_of(host) == Some(HostKind::Lwip);
    for (i, route) in s.routes.iter().enumerate() {
        let default = matches!(route.target, RouteTarget::V4 { destination, .. } if destination.prefix_len == 0);
        if is_lwip(&route.host) && !default {
            return Err(error(
                format!("route[{i}]"),
                "an lwIP host takes a default route only (its interface's subnet is on-link)",
            ));
        }
    }
    for (i, app) in s.apps.iter().enumerate() {
        let kind = app.kind.kind();
        if is_lwip(&app.host) && !LWIP_KINDS.contains(&kind) {
            return Err(error(
                format!("app[{i}].kind"),
                format!(
                    "an lwIP host runs {} apps, not {kind}",
                    LWIP_KINDS.join(", ")
                ),
            ));
        }
        if let AppKindSpec::TcpBulk(b) = &app.kind {
            if is_lwip(&app.host)
                && (b.bytes.is_none() || b.stop.is_some() || b.reconnect.is_some())
            {
                return Err(error(
                    format!("app[{i}]"),
                    "a tcp-bulk app on an lwIP host sends a fixed number of bytes (set bytes; no stop or reconnect)",
                ));
            }
        }
    }
    Ok(())
}

/// The kinds of link the emulator runs, as scenario files name them.
fn emulated_link_kinds() -> Vec<&'static str> {
    rtolab_sim::link::LINK_KINDS
        .iter()
        .copied()
        .filter(|kind| LinkModelSpec::kind_emulated(kind))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "t"
duration = "2s"

[[host]]
name = "a"
stack = "rtolab"
profile = "lwip"

[[host]]
name = "b"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" } ]
rate = "10Mbps"
delay = "1ms"
"#;

    /// BASE with a third host, Linux, called `third`, and host b renamed to
    /// `second`.
    fn named(second: &str, third: &str) -> Result<EmuScenario, ScenarioError> {
        let quote = |name: &str| toml::Value::String(name.to_string()).to_string();
        let text = BASE
            .replace("name = \"b\"", &format!("name = {}", quote(second)))
            .replace("\"b\", address", &format!("{}, address", quote(second)))
            + &format!("\n[[host]]\nname = {}\n", quote(third));
        EmuScenario::from_toml_str(&text)
    }

    #[test]
    fn linux_host_names_that_give_one_namespace_name_are_refused() {
        let err = named("a;b", "a_b").unwrap_err();
        assert_eq!(err.path, "host[2].name");
        assert!(
            err.message
                .contains("give the same network namespace name \"a_b\""),
            "{err}"
        );
        let long = "x".repeat(33);
        let err = named("b", &long).unwrap_err();
        assert_eq!(err.path, "host[2].name");
        assert!(err.message.starts_with("at most 32 characters"), "{err}");
        let err = named("b", "c\u{1b}[2J").unwrap_err();
        assert_eq!(err.path, "host[2].name");
        // The name is quoted with its escapes, never raw.
        assert!(err.to_string().contains("\\u{1b}[2J"), "{err}");
        assert!(!err.to_string().contains('\u{1b}'), "{err}");
        assert!(named("b", &"x".repeat(32)).is_ok());
    }

    #[test]
    fn stack_defaults_to_linux_and_is_stripped_before_validation() {
        let emu = EmuScenario::from_toml_str(BASE).unwrap();
        assert_eq!(emu.kinds, [HostKind::Rtolab, HostKind::Linux]);
        assert_eq!(emu.kind_of("b"), Some(HostKind::Linux));
        assert!(emu.scenario.hosts[0].tcp.is_some());
    }

    #[test]
    fn bad_stack_names_its_field() {
        let text = BASE.replace("stack = \"rtolab\"", "stack = \"bsd\"");
        let e = EmuScenario::from_toml_str(&text).unwrap_err();
        assert_eq!(e.path, "host[0].stack");
        assert!(e.message.contains("\"bsd\""), "{e}");
        let text = BASE.replace("stack = \"rtolab\"", "stack = 3");
        assert_eq!(
            EmuScenario::from_toml_str(&text).unwrap_err().path,
            "host[0].stack"
        );
    }

    #[test]
    fn a_link_kind_the_emulator_runs_with_a_setting_it_does_not_says_so() {
        let text = BASE
            .replace(
                "kind = \"point-to-point\"",
                "kind = \"nfc\"\nbuffers = { bytes = [1024, 2048], exchange = true }",
            )
            .replace("rate = \"10Mbps\"\ndelay = \"1ms\"", "rate = \"11.2kbps\"");
        let e = EmuScenario::from_toml_str(&text).unwrap_err();
        assert_eq!(e.path, "link[0].kind");
        assert!(
            e.message
                .starts_with("nfc links are emulated, but not with this one's settings"),
            "{e}"
        );
        let plain = text.replace("exchange = true", "exchange = false");
        assert!(EmuScenario::from_toml_str(&plain).is_ok());
        // Header compression gets the packets' bytes, as in the simulator.
        let compressed = text.replace(
            "buffers = { bytes = [1024, 2048], exchange = true }",
            "header_compression = \"rfc1144\"",
        );
        assert!(EmuScenario::from_toml_str(&compressed).is_ok());
        // Power-control traffic and a jittered delay are timing only: the
        // emulator runs them with the same link models.
        let power = text.replace(
            "buffers = { bytes = [1024, 2048], exchange = true }",
            "power_control = { period = \"100ms\", bytes = 10 }",
        );
        assert!(EmuScenario::from_toml_str(&power).is_ok());
        let jitter = BASE.replace(
            "delay = \"1ms\"",
            "delay = \"1ms\"\njitter = { distribution = \"exponential\", mean = \"5ms\" }",
        );
        assert!(EmuScenario::from_toml_str(&jitter).is_ok());
        let text = BASE.replace("kind = \"point-to-point\"", "kind = \"slip\"");
        let e = EmuScenario::from_toml_str(&text.replace("rate = \"10Mbps\"\n", "")).unwrap_err();
        assert!(
            e.message.starts_with("slip links are not emulated yet"),
            "{e}"
        );
    }

    #[test]
    fn simulator_errors_keep_their_paths() {
        let text = BASE.replace("rate = \"10Mbps\"", "rate = \"fast\"");
        let e = EmuScenario::from_toml_str(&text).unwrap_err();
        assert_eq!(e.path, "link[0].rate");
        let e = EmuScenario::from_toml_str("name = [").unwrap_err();
        assert!(e.path.starts_with("line 1"), "{e}");
    }

    #[test]
    fn linux_options_are_read_and_checked() {
        let text = BASE.replace("name = \"b\"", "name = \"b\"\nlinux = { rto_min = \"3s\" }");
        let emu = EmuScenario::from_toml_str(&text).unwrap();
        assert_eq!(emu.linux[1].rto_min, Some(SimDuration::from_secs(3)));
        assert_eq!(emu.linux[0], LinuxOptions::default());
        let bad = text.replace("rto_min", "rto_max");
        assert_eq!(
            EmuScenario::from_toml_str(&bad).unwrap_err().path,
            "host[1].linux.rto_max"
        );
        let on_rtolab = BASE.replace(
            "stack = \"rtolab\"",
            "stack = \"rtolab\"\nlinux = { rto_min = \"3s\" }",
        );
        assert_eq!(
            EmuScenario::from_toml_str(&on_rtolab).unwrap_err().path,
            "host[0].linux"
        );
    }

    #[test]
    fn sysctls_are_read_and_checked() {
        let with = |table: &str| {
            let text = BASE.replace("name = \"b\"", &format!("name = \"b\"\nlinux = {table}"));
            EmuScenario::from_toml_str(&text)
        };
        let emu = with(
            r#"{ sysctls = { "net.ipv4.tcp_early_retrans" = 0, "net.ipv4.tcp_rmem" = "4096 131072 6291456" } }"#,
        )
        .unwrap();
        let got: Vec<(&str, &str)> = emu.linux[1]
            .sysctls
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("net.ipv4.tcp_early_retrans", "0"),
                ("net.ipv4.tcp_rmem", "4096 131072 6291456")
            ]
        );
        for (table, path) in [
            (r#"{ sysctls = 1 }"#, "host[1].linux.sysctls"),
            (
                r#"{ sysctls = { "kernel.panic" = 1 } }"#,
                "host[1].linux.sysctls.kernel.panic",
            ),
            (
                r#"{ sysctls = { "net..x" = 1 } }"#,
                "host[1].linux.sysctls.net..x",
            ),
            (
                r#"{ sysctls = { "net.ipv4.tcp_sack" = "1; reboot" } }"#,
                "host[1].linux.sysctls.net.ipv4.tcp_sack",
            ),
            (
                r#"{ sysctls = { "net.ipv4.tcp_sack" = true } }"#,
                "host[1].linux.sysctls.net.ipv4.tcp_sack",
            ),
        ] {
            assert_eq!(with(table).unwrap_err().path, path, "{table}");
        }
    }

    #[test]
    fn simulator_equivalent_models_linux_hosts_with_the_linux_profile() {
        let text = BASE.replace("name = \"b\"", "name = \"b\"\nlinux = { rto_min = \"3s\" }");
        let emu = EmuScenario::from_toml_str(&text).unwrap();
        let sim = emu.simulator_equivalent();
        assert_eq!(sim.hosts[0].tcp, emu.scenario.hosts[0].tcp);
        let b = sim.hosts[1].tcp.as_ref().unwrap();
        assert_eq!(b.name, "linux");
        match b.rto {
            RtoChoice::Rfc6298(c) => assert_eq!(c.min, SimDuration::from_secs(3)),
            other => panic!("unexpected RTO policy {other:?}"),
        }
    }

    #[test]
    fn ipv6_ends_are_rejected_with_their_path() {
        let text = BASE.replace(
            "{ host = \"b\", address = \"10.0.0.2/24\" }",
            "{ host = \"b\", address = \"10.0.0.2/24\", ipv6 = \"fd00::2/64\" }",
        );
        assert_ne!(text, BASE);
        let e = EmuScenario::from_toml_str(&text).unwrap_err();
        assert_eq!(e.path, "link[0].ends[1].ipv6");
        assert!(e.message.contains("not emulated"), "{e}");
    }

    #[test]
    fn udp_apps_on_linux_hosts_are_rejected_with_their_path() {
        let text = format!("{BASE}\n[[app]]\nkind = \"sink\"\nhost = \"b\"\nport = 9000\n");
        let e = EmuScenario::from_toml_str(&text).unwrap_err();
        assert_eq!(e.path, "app[0].kind");
        // An rtolab host runs the simulator's UDP apps itself.
        let text = format!("{BASE}\n[[app]]\nkind = \"sink\"\nhost = \"a\"\nport = 9000\n");
        EmuScenario::from_toml_str(&text).unwrap();
    }

    #[test]
    fn apps_without_a_linux_program_run_on_rtolab_hosts_only() {
        let app = "[[app]]\nkind = \"tcp-sink\"\nhost = \"{sink}\"\nport = 5001\n\n\
                   [[app]]\nkind = \"tcp-on-off\"\nhost = \"{sender}\"\n\
                   peer = \"{peer}:5001\"\non = \"100ms\"\noff = \"1s\"\n";
        let on = |sender: &str, sink: &str, peer: &str| {
            let apps = app
                .replace("{sink}", sink)
                .replace("{sender}", sender)
                .replace("{peer}", peer);
            EmuScenario::from_toml_str(&format!("{BASE}\n{apps}"))
        };
        let e = on("b", "a", "10.0.0.1").unwrap_err();
        assert_eq!(e.path, "app[1].kind");
        assert!(
            e.message
                .starts_with("tcp-on-off apps run on rtolab hosts only"),
            "{e}"
        );
        on("a", "b", "10.0.0.2").unwrap();
    }

    #[test]
    fn middleboxes_run_on_bridges_and_rtolab_hosts_only() {
        let mb = |host: &str| {
            format!("{BASE}\n[[middlebox]]\nkind = \"drop-list\"\nhost = \"{host}\"\ndrop = [1]\n")
        };
        EmuScenario::from_toml_str(&mb("a")).unwrap();
        let e = EmuScenario::from_toml_str(&mb("b")).unwrap_err();
        assert_eq!(e.path, "middlebox[0].host");
        assert!(e.message.contains("Linux host"), "{e}");
    }

    #[test]
    fn rtolab_host_with_two_interfaces_is_rejected() {
        let text = format!(
            "{BASE}\n[[host]]\nname = \"c\"\n\n[[link]]\nname = \"ac\"\nkind = \"point-to-point\"\nends = [ {{ host = \"a\", address = \"10.0.1.1/24\" }}, {{ host = \"c\", address = \"10.0.1.2/24\" }} ]\nrate = \"1Mbps\"\ndelay = \"1ms\"\n"
        );
        let e = EmuScenario::from_toml_str(&text).unwrap_err();
        assert_eq!(e.path, "host[0].stack");
    }
}
