//! Validation of a whole scenario: hosts, then each link by its kind, then
//! bridges, routes, captures, and each app by its kind. Everything a later
//! table refers to (hosts, addresses) is checked against the
//! [`Topology`] the earlier ones built.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use rtolab_time::SimDuration;

use super::layout;
use super::profiles::{default_profile, resolve};
use super::raw::{Destination, RawCapture, RawHost, RawRoute, RawScenario};
use super::{
    AppSpec, CaptureSpec, HostSpec, LinkSpec, MiddleboxEntry, RouteSpec, RouteTarget, Scenario,
    DEFAULT_SEED, OUTPUT_NAMES,
};
use crate::app::{AppCheck, AppKindSpec};
use crate::cidr::{Ipv4Cidr, Ipv6Cidr};
use crate::config::{
    check_position, check_unique, one_line, path_string, take_required, take_string, ScenarioError,
    Topology,
};
use crate::link::{LinkCheck, LinkModelSpec};
use crate::middlebox::{MiddleboxCheck, MiddleboxSpec};

pub(super) fn validate(raw: RawScenario) -> Result<Scenario, ScenarioError> {
    if raw.name.trim().is_empty() {
        return Err(ScenarioError::new("name", "must not be empty"));
    }
    if raw.duration.0 == SimDuration::ZERO {
        return Err(ScenarioError::new("duration", "must be positive"));
    }
    check_unique(
        raw.host.iter().map(|h| h.name.as_str()),
        |i| format!("host[{i}].name"),
        "host",
    )?;
    let mut raw = raw;
    // Where each host was written, for error paths: `host[i]`, or the
    // `host_group[g]` that generated it.
    let mut host_paths: Vec<String> = (0..raw.host.len()).map(|i| format!("host[{i}]")).collect();
    let mut names: BTreeMap<String, usize> = raw
        .host
        .iter()
        .enumerate()
        .map(|(i, h)| (h.name.clone(), i))
        .collect();
    let groups = std::mem::take(&mut raw.host_group);
    let scenario_seed = raw.seed.unwrap_or(DEFAULT_SEED);
    for (g, group) in groups.iter().enumerate() {
        for host in layout::expand(g, group, scenario_seed)? {
            if let Some(&other) = names.get(&host.name) {
                return Err(ScenarioError::new(
                    format!("host_group[{g}].prefix"),
                    format!(
                        "generates host {:?}, already defined by {}",
                        host.name, host_paths[other]
                    ),
                ));
            }
            names.insert(host.name.clone(), raw.host.len());
            host_paths.push(format!("host_group[{g}]"));
            raw.host.push(host);
        }
    }
    let links = named_tables(raw.link, "link")?;
    check_unique(
        links.iter().map(|(name, _, _)| name.as_str()),
        |i| format!("link[{i}].name"),
        "link",
    )?;

    let mut topology = Topology::default();
    for h in &raw.host {
        topology.add_host(&h.name, h.position, h.bridge == Some(true));
    }
    let mut hosts = raw
        .host
        .iter()
        .enumerate()
        .map(|(i, h)| validate_host(&host_paths[i], h))
        .collect::<Result<Vec<_>, _>>()?;

    let mut link_specs = Vec::with_capacity(links.len());
    for (index, (name, kind, table)) in links.into_iter().enumerate() {
        let mut cx = LinkCheck {
            topology: &mut topology,
            index,
            name: &name,
            what: String::new(),
        };
        let model = LinkModelSpec::parse(&kind, table, &mut cx)?;
        link_specs.push(LinkSpec { name, model });
    }

    for (i, h) in raw.host.iter().enumerate() {
        if !topology.is_bridge(&h.name) {
            continue;
        }
        let ports = topology.port_count(&h.name);
        if ports != 2 {
            return Err(ScenarioError::new(
                format!("host[{i}].bridge"),
                format!("a bridge joins exactly 2 links, {:?} is on {ports}", h.name),
            ));
        }
    }

    for (i, h) in hosts.iter().enumerate() {
        if h.smoltcp.is_none() {
            continue;
        }
        // smoltcp runs on one IPv4 interface (crate::smol).
        let v4 = topology.interfaces().filter(|(n, ..)| *n == h.name).count();
        let v6 = topology
            .interfaces_v6()
            .filter(|(n, ..)| *n == h.name)
            .count();
        if v4 != 1 || v6 != 0 {
            return Err(ScenarioError::new(
                format!("{}.stack", host_paths[i]),
                format!(
                    "a smoltcp host has exactly one interface, with an IPv4 address; \
                     {:?} has {v4} IPv4 and {v6} IPv6",
                    h.name
                ),
            ));
        }
    }

    let routes = raw
        .route
        .iter()
        .enumerate()
        .map(|(i, r)| validate_route(&topology, i, r))
        .collect::<Result<Vec<_>, _>>()?;
    let captures = validate_captures(&topology, &link_specs, &raw.capture)?;
    let mut apps = validate_apps(&topology, &hosts, raw.app)?;
    follow_link_mss(&link_specs, &mut hosts, &mut apps);
    check_offered_load(&topology, &link_specs, &apps)?;
    let middleboxes = validate_middleboxes(&topology, raw.middlebox)?;

    Ok(Scenario {
        name: raw.name,
        seed: raw.seed.unwrap_or(DEFAULT_SEED),
        duration: raw.duration.0,
        hosts,
        links: link_specs,
        routes,
        captures,
        apps,
        middleboxes,
    })
}

/// The TCP hosts at a link that negotiates an MSS (an NFC link's buffer
/// exchange) use it, clamped as a peer's MSS option would be: never raised
/// above their own.
fn follow_link_mss(links: &[LinkSpec], hosts: &mut [HostSpec], apps: &mut [AppSpec]) {
    for link in links {
        let Some(limit) = link.model.mss_limit() else {
            continue;
        };
        for end in link.model.attachments() {
            let host_profiles = hosts.iter_mut().filter(|h| h.name == end.host);
            let app_profiles = apps.iter_mut().filter(|a| a.host == end.host);
            for host in host_profiles {
                if let Some(profile) = host.tcp.as_mut() {
                    profile.mss = profile.mss.min(limit);
                }
                // smoltcp derives its MSS from the MTU (never below IPv4's
                // minimum of 68 bytes).
                if let Some(smol) = host.smoltcp.as_mut() {
                    let mtu = usize::from(limit) + 40;
                    smol.mtu = smol.mtu.min(mtu.max(rtolab_smoltcp::MIN_MTU));
                }
            }
            for profile in app_profiles.filter_map(|a| a.tcp.as_deref_mut()) {
                profile.mss = profile.mss.min(limit);
            }
        }
    }
}

fn validate_middleboxes(
    topology: &Topology,
    raw: Vec<toml::Table>,
) -> Result<Vec<MiddleboxEntry>, ScenarioError> {
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut middleboxes = Vec::with_capacity(raw.len());
    for (i, mut table) in raw.into_iter().enumerate() {
        let path = format!("middlebox[{i}]");
        let at = |field: &str| format!("{path}.{field}");
        let kind = take_required(&mut table, "kind", &path)?;
        let name = take_string(&mut table, "name", &path)?.unwrap_or_else(|| format!("{kind}{i}"));
        if name.is_empty() {
            return Err(ScenarioError::new(at("name"), "must not be empty"));
        }
        if let Some(first) = names.insert(name.clone(), i) {
            return Err(ScenarioError::new(
                at("name"),
                format!("duplicate middlebox name {name:?} (also middlebox[{first}])"),
            ));
        }
        let host = take_required(&mut table, "host", &path)?;
        topology.host(&at("host"), &host)?;
        let mut cx = MiddleboxCheck {
            topology,
            index: i,
            host: &host,
            what: String::new(),
        };
        let kind = MiddleboxSpec::parse(&kind, table, &mut cx)?;
        middleboxes.push(MiddleboxEntry { name, host, kind });
    }
    Ok(middleboxes)
}

/// Takes the `name` (required) and `kind` (required) out of each entry of
/// a `[[link]]`-style array.
fn named_tables(
    tables: Vec<toml::Table>,
    what: &str,
) -> Result<Vec<(String, String, toml::Table)>, ScenarioError> {
    tables
        .into_iter()
        .enumerate()
        .map(|(i, mut table)| {
            let path = format!("{what}[{i}]");
            let name = take_required(&mut table, "name", &path)?;
            let kind = take_required(&mut table, "kind", &path)?;
            Ok((name, kind, table))
        })
        .collect()
}

fn validate_host(path: &str, h: &RawHost) -> Result<HostSpec, ScenarioError> {
    let at = |field: &str| format!("{path}.{field}");
    if let Some(p) = &h.position {
        check_position(at("position"), p)?;
    }
    let bridge = h.bridge.unwrap_or(false);
    if bridge {
        for (field, set) in [("profile", h.profile.is_some()), ("tcp", h.tcp.is_some())] {
            if set {
                return Err(ScenarioError::new(
                    at(field),
                    "not allowed for a bridge (it runs no TCP)",
                ));
            }
        }
    }
    match h.stack.as_deref() {
        None | Some("rtolab") => {}
        Some("smoltcp") => {
            if bridge {
                return Err(ScenarioError::new(
                    at("stack"),
                    "not allowed for a bridge (it runs no TCP)",
                ));
            }
            if h.profile.is_some() {
                return Err(ScenarioError::new(
                    at("profile"),
                    "not taken by a smoltcp host: its TCP is smoltcp's (set its \
                     buffers, mtu, nagle and ack_delay in `tcp`)",
                ));
            }
            return Ok(HostSpec {
                bridge,
                name: h.name.clone(),
                position: h.position,
                tcp: None,
                smoltcp: Some(smoltcp_settings(h.tcp.as_ref(), &at)?),
            });
        }
        Some(other) => {
            return Err(ScenarioError::new(
                at("stack"),
                format!("unknown stack {other:?}: expected \"rtolab\" or \"smoltcp\""),
            ))
        }
    }
    let tcp = match (&h.profile, &h.tcp) {
        (None, None) => None,
        (name, overrides) => Some(resolve(
            name.as_deref(),
            overrides.as_ref(),
            default_profile,
            at,
        )?),
    };
    Ok(HostSpec {
        bridge,
        name: h.name.clone(),
        position: h.position,
        tcp,
        smoltcp: None,
    })
}

/// The apps a smoltcp host runs: the TCP kinds that use only the calls
/// smoltcp can answer (see `crate::smol`).
pub const SMOLTCP_APP_KINDS: [&str; 4] = ["exchange", "exchange-server", "tcp-bulk", "tcp-sink"];

/// A smoltcp host's `[host.tcp]` table, read and checked field by field.
fn smoltcp_settings(
    table: Option<&toml::Table>,
    at: &dyn Fn(&str) -> String,
) -> Result<rtolab_smoltcp::Settings, ScenarioError> {
    use rtolab_smoltcp::SettingsError;
    let settings: rtolab_smoltcp::Settings = match table {
        None => rtolab_smoltcp::Settings::default(),
        Some(t) => {
            serde_path_to_error::deserialize(toml::Value::Table(t.clone())).map_err(|e| {
                let path = path_string(e.path());
                let field = if path.is_empty() {
                    at("tcp")
                } else {
                    at(&format!("tcp.{path}"))
                };
                ScenarioError::new(field, one_line(&e.inner().to_string()))
            })?
        }
    };
    settings.validate().map_err(|e| {
        let field = match &e {
            SettingsError::Buffer { field, .. } => field,
            SettingsError::Mtu(_) => "mtu",
            SettingsError::AckDelay(_) => "ack_delay",
        };
        ScenarioError::new(at(&format!("tcp.{field}")), e.to_string())
    })?;
    Ok(settings)
}

fn validate_route(topology: &Topology, i: usize, r: &RawRoute) -> Result<RouteSpec, ScenarioError> {
    let at = |field: &str| format!("route[{i}].{field}");
    topology.host(&at("host"), &r.host)?;
    if topology.is_bridge(&r.host) {
        return Err(ScenarioError::new(
            at("host"),
            format!("{:?} is a bridge: it does not route", r.host),
        ));
    }
    let target = match (r.destination, r.via) {
        (Destination::Default, IpAddr::V4(via)) => RouteTarget::V4 {
            destination: Ipv4Cidr::DEFAULT,
            via,
        },
        (Destination::V4(destination), IpAddr::V4(via)) => RouteTarget::V4 { destination, via },
        (Destination::Default, IpAddr::V6(via)) => RouteTarget::V6 {
            destination: Ipv6Cidr::DEFAULT,
            via,
        },
        (Destination::V6(destination), IpAddr::V6(via)) => RouteTarget::V6 { destination, via },
        (Destination::V4(d), IpAddr::V6(via)) => {
            return Err(family_mismatch(at("destination"), d, via.into()))
        }
        (Destination::V6(d), IpAddr::V4(via)) => {
            return Err(family_mismatch(at("destination"), d, via.into()))
        }
    };
    // The subnet of the host's that holds `via`, in via's family.
    let on_subnet = match target {
        RouteTarget::V4 { via, .. } => topology
            .interfaces()
            .find(|(host, _, cidr)| *host == r.host && cidr.contains(via))
            .map(|(_, link, _)| link),
        RouteTarget::V6 { via, .. } => topology
            .interfaces_v6()
            .find(|(host, _, cidr)| *host == r.host && cidr.contains(via))
            .map(|(_, link, _)| link),
    };
    let Some(link) = on_subnet else {
        return Err(ScenarioError::new(
            at("via"),
            format!("{} is not on a subnet of host {:?}", r.via, r.host),
        ));
    };
    match topology.owner_ip(r.via) {
        Some((owner, owner_link)) if owner_link == link && owner != r.host => {}
        Some((owner, _)) if owner == r.host => {
            return Err(ScenarioError::new(
                at("via"),
                format!("{} is an address of host {:?} itself", r.via, r.host),
            ))
        }
        _ => {
            return Err(ScenarioError::new(
                at("via"),
                format!(
                    "no neighbour of host {:?} on link {link:?} has address {}",
                    r.host, r.via
                ),
            ))
        }
    }
    Ok(RouteSpec {
        host: r.host.clone(),
        target,
    })
}

/// A route whose destination and next hop are of different families.
fn family_mismatch(
    path: String,
    destination: impl std::fmt::Display,
    via: IpAddr,
) -> ScenarioError {
    let (dest_family, via_family) = match via {
        IpAddr::V4(_) => ("IPv6", "IPv4"),
        IpAddr::V6(_) => ("IPv4", "IPv6"),
    };
    ScenarioError::new(
        path,
        format!(
            "{destination} is an {dest_family} prefix but via {via} is {via_family}: \
             a route's destination and next hop are of one family"
        ),
    )
}

fn validate_captures(
    topology: &Topology,
    links: &[LinkSpec],
    raw: &[RawCapture],
) -> Result<Vec<CaptureSpec>, ScenarioError> {
    let mut captures = Vec::new();
    let mut files: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, c) in raw.iter().enumerate() {
        let at = |field: &str| format!("capture[{i}].{field}");
        topology.host(&at("host"), &c.host)?;
        let link = match (&c.link, &c.interface) {
            (Some(link), None) => {
                if !links.iter().any(|l| l.name == *link) {
                    return Err(ScenarioError::new(
                        at("link"),
                        format!("no link named {link:?}"),
                    ));
                }
                if !topology.is_attached(&c.host, link) {
                    return Err(ScenarioError::new(
                        at("link"),
                        format!("host {:?} is not attached to link {link:?}", c.host),
                    ));
                }
                link.clone()
            }
            (None, Some(addr)) => match addr {
                IpAddr::V4(addr) => topology
                    .interfaces()
                    .find(|(h, _, cidr)| *h == c.host && cidr.addr == *addr)
                    .map(|(_, l, _)| l.to_string()),
                IpAddr::V6(addr) => topology
                    .interfaces_v6()
                    .find(|(h, _, cidr)| *h == c.host && cidr.addr == *addr)
                    .map(|(_, l, _)| l.to_string()),
            }
            .ok_or_else(|| {
                ScenarioError::new(
                    at("interface"),
                    format!("host {:?} has no interface with address {addr}", c.host),
                )
            })?,
            (Some(_), Some(_)) => {
                return Err(ScenarioError::new(
                    at("interface"),
                    "give either link or interface, not both",
                ))
            }
            (None, None) => {
                return Err(ScenarioError::new(
                    at("link"),
                    "missing field (or give interface)",
                ))
            }
        };
        let file = c.file.as_str();
        if let Some(problem) = file_name_problem(file) {
            return Err(ScenarioError::new(
                at("file"),
                format!("{problem}, got {:?}", shortened(file)),
            ));
        }
        if let Some(first) = files.insert(file, i) {
            return Err(ScenarioError::new(
                at("file"),
                format!("{file:?} is already written by capture[{first}]"),
            ));
        }
        captures.push(CaptureSpec {
            host: c.host.clone(),
            link,
            file: c.file.clone(),
            direction: c.direction,
        });
    }
    Ok(captures)
}

/// Longest capture file name, in bytes: the usual file-system limit, so a
/// name that validates can always be created.
const MAX_FILE_NAME_BYTES: usize = 255;

/// Why `file` cannot be a capture file name, if it cannot: it must be a
/// plain name in the output directory that any file system accepts and that
/// no other output of the run uses.
fn file_name_problem(file: &str) -> Option<String> {
    if file.is_empty() || file.chars().all(|c| c == '.' || c == ' ') {
        return Some("must be a file name, not empty or only dots and spaces".to_string());
    }
    if file.contains(['/', '\\']) {
        return Some("must be a plain file name, without / or \\".to_string());
    }
    if file.chars().any(char::is_control) {
        return Some("must not contain NUL or other control characters".to_string());
    }
    if file.len() > MAX_FILE_NAME_BYTES {
        return Some(format!(
            "must be at most {MAX_FILE_NAME_BYTES} bytes long (this one has {})",
            file.len()
        ));
    }
    if OUTPUT_NAMES.contains(&file) {
        return Some(format!(
            "must be another name than {} (the run writes them)",
            OUTPUT_NAMES.join(", ")
        ));
    }
    None
}

/// At most the first 40 characters of `text`, so that an error about a huge
/// value stays one readable line.
fn shortened(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn validate_apps(
    topology: &Topology,
    hosts: &[HostSpec],
    raw: Vec<toml::Table>,
) -> Result<Vec<AppSpec>, ScenarioError> {
    let mut apps = Vec::with_capacity(raw.len());
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut udp_ports = BTreeMap::new();
    let mut tcp_ports = BTreeMap::new();
    // Looked up once per app: a scan of the hosts would make the check
    // grow with apps times hosts.
    let by_name: BTreeMap<&str, &HostSpec> = hosts.iter().map(|h| (h.name.as_str(), h)).collect();
    for (i, mut table) in raw.into_iter().enumerate() {
        let path = format!("app[{i}]");
        let at = |field: &str| format!("app[{i}].{field}");
        let kind = take_required(&mut table, "kind", &path)?;
        let uses_tcp = AppKindSpec::kind_uses_tcp(&kind);
        let name = take_string(&mut table, "name", &path)?;
        let host = take_required(&mut table, "host", &path)?;
        topology.host(&at("host"), &host)?;
        let on_smoltcp = by_name
            .get(host.as_str())
            .is_some_and(|h| h.smoltcp.is_some());
        if on_smoltcp {
            if !SMOLTCP_APP_KINDS.contains(&kind.as_str()) {
                return Err(ScenarioError::new(
                    at("kind"),
                    format!(
                        "{kind:?} apps cannot run on smoltcp host {host:?}; it runs {}",
                        SMOLTCP_APP_KINDS.join(", ")
                    ),
                ));
            }
            for field in ["profile", "tcp"] {
                if table.contains_key(field) {
                    return Err(ScenarioError::new(
                        at(field),
                        format!("not taken on smoltcp host {host:?}: set `tcp` on the host"),
                    ));
                }
            }
        }
        if topology.is_bridge(&host) {
            return Err(ScenarioError::new(
                at("host"),
                format!("{host:?} is a bridge: it runs no apps"),
            ));
        }
        // TCP kinds share `profile` and `tcp`; other kinds reject them as
        // fields they do not take.
        let (profile, overrides) = if uses_tcp == Some(true) {
            let profile = take_string(&mut table, "profile", &path)?;
            let overrides = match table.remove("tcp") {
                None => None,
                Some(toml::Value::Table(t)) => Some(t),
                Some(other) => {
                    return Err(ScenarioError::new(
                        at("tcp"),
                        format!("invalid type: {}, expected a table", other.type_str()),
                    ))
                }
            };
            (profile, overrides)
        } else {
            (None, None)
        };
        let name = name.unwrap_or_else(|| format!("{kind}{i}"));
        if name.is_empty() {
            return Err(ScenarioError::new(at("name"), "must not be empty"));
        }
        if let Some(first) = names.insert(name.clone(), i) {
            return Err(ScenarioError::new(
                at("name"),
                format!("duplicate app name {name:?} (also app[{first}])"),
            ));
        }
        let mut cx = AppCheck {
            topology,
            index: i,
            host: &host,
            what: String::new(),
            udp_ports: &mut udp_ports,
            tcp_ports: &mut tcp_ports,
        };
        let spec = AppKindSpec::parse(&kind, table, &mut cx)?;
        let tcp = if spec.uses_tcp() {
            let host_profile = || {
                by_name
                    .get(host.as_str())
                    .and_then(|h| h.tcp.clone())
                    .unwrap_or_else(default_profile)
            };
            Some(Box::new(resolve(
                profile.as_deref(),
                overrides.as_ref(),
                host_profile,
                at,
            )?))
        } else {
            None
        };
        apps.push(AppSpec {
            name,
            host,
            kind: spec,
            tcp,
        });
    }
    check_listeners(topology, &apps)?;
    Ok(apps)
}

/// How many times its fastest link's rate the CBR sources of a host may
/// offer together. Overload up to this factor is legitimate (saturating a
/// link, filling its queue); far beyond it, all but a sliver is dropped at
/// the first queue and the run only burns time and disk on the excess.
pub const MAX_OVERLOAD: u64 = 100;

/// The CBR sources of each host offer at most [`MAX_OVERLOAD`] times the
/// rate of its fastest link; the error names the source that goes over.
fn check_offered_load(
    topology: &Topology,
    links: &[LinkSpec],
    apps: &[AppSpec],
) -> Result<(), ScenarioError> {
    let mut offered: BTreeMap<&str, u64> = BTreeMap::new();
    // Each host's fastest link, found in one pass over the interfaces.
    let rates: BTreeMap<&str, u64> = links
        .iter()
        .map(|l| (l.name.as_str(), l.model.rate_bps()))
        .collect();
    let mut fastest: BTreeMap<&str, (u64, &str)> = BTreeMap::new();
    for (host, link, _) in topology.interfaces() {
        let Some((&link, &rate)) = rates.get_key_value(link) else {
            continue;
        };
        let best = fastest.entry(host).or_insert((rate, link));
        *best = (*best).max((rate, link));
    }
    for (i, app) in apps.iter().enumerate() {
        let AppKindSpec::Cbr(cbr) = &app.kind else {
            continue;
        };
        // A host without links sends nothing anywhere: nothing to bound.
        let Some(&(capacity, link)) = fastest.get(app.host.as_str()) else {
            continue;
        };
        let total = offered.entry(app.host.as_str()).or_default();
        *total = total.saturating_add(cbr.rate_bps);
        if *total > capacity.saturating_mul(MAX_OVERLOAD) {
            return Err(ScenarioError::new(
                format!("app[{i}].rate"),
                format!(
                    "the CBR sources of host {:?} offer {} bit/s, more than {MAX_OVERLOAD} \
                     times its fastest link ({link:?}, {capacity} bit/s)",
                    app.host, *total
                ),
            ));
        }
    }
    Ok(())
}

/// Every TCP client needs a listener of the matching kind at its peer;
/// the listeners are gathered once, so the check is linear in the apps
/// wherever the servers come in the file.
fn check_listeners(topology: &Topology, apps: &[AppSpec]) -> Result<(), ScenarioError> {
    let listening: BTreeSet<(&str, &str, u16)> = apps
        .iter()
        .filter_map(|b| Some((b.kind.kind(), b.host.as_str(), b.kind.listen_port()?)))
        .collect();
    for (i, a) in apps.iter().enumerate() {
        let Some((peer, server)) = a.kind.server() else {
            continue;
        };
        let Some((host, _)) = topology.owner_ip(peer.ip()) else {
            continue;
        };
        if !listening.contains(&(server, host, peer.port())) {
            return Err(ScenarioError::new(
                format!("app[{i}].peer"),
                format!(
                    "no {server} app listens on port {} of host {host:?}",
                    peer.port()
                ),
            ));
        }
    }
    Ok(())
}
