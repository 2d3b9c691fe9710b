//! The two ends of a point-to-point style link, as scenario files give
//! them, shared by the wired and NFC kinds.

use serde::Deserialize;

use super::LinkCheck;
use crate::cidr::{Family, Ipv4Cidr, Ipv6Cidr};
use crate::config::{not_allowed, Attachment, ScenarioError};

/// One end of a two-ended link, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnd {
    /// Host name. Required.
    pub host: String,
    /// IPv4 interface address with the prefix, like `"10.0.0.1/24"`;
    /// absent for a bridge's port and for an IPv6-only end. Default: none.
    pub address: Option<Ipv4Cidr>,
    /// IPv6 interface address, besides or instead of `address`. Default:
    /// none.
    pub ipv6: Option<Ipv6Cidr>,
    /// Channel sensing (NFC links only). Default: false.
    pub sensing: Option<bool>,
}

/// One end of a two-ended link.
#[derive(Clone, Debug, PartialEq)]
pub struct EndSpec {
    /// Host name.
    pub host: String,
    /// IPv4 interface address; `None` for a bridge's port and for an
    /// IPv6-only end.
    pub address: Option<Ipv4Cidr>,
    /// IPv6 interface address, if the end has one.
    pub ipv6: Option<Ipv6Cidr>,
}

impl EndSpec {
    /// The interface this end attaches.
    pub fn attachment(&self) -> Attachment {
        Attachment {
            host: self.host.clone(),
            address: self.address,
            ipv6: self.ipv6,
            position: None,
        }
    }
}

/// Validates the `ends` of a two-ended link: two distinct hosts, for each
/// end that is not a bridge an IPv4 `address`, an `ipv6` one or both (each
/// family on one subnet for both ends), none for a bridge's port. Records the addresses and ports in the topology. Returns
/// the ends and their `sensing` flags (which only kinds with
/// `sensing_allowed` accept).
pub fn two_ends(
    raw: &Option<Vec<RawEnd>>,
    cx: &mut LinkCheck<'_>,
    sensing_allowed: bool,
) -> Result<([EndSpec; 2], [bool; 2]), ScenarioError> {
    let raw_ends = raw.as_ref().ok_or_else(|| cx.required("ends"))?;
    let kind = cx.what.trim_end_matches(" links").to_string();
    let [first, second] = raw_ends.as_slice() else {
        return Err(ScenarioError::new(
            cx.at("ends"),
            format!("a {kind} link has exactly 2 ends, got {}", raw_ends.len()),
        ));
    };
    let mut ends = Vec::with_capacity(2);
    for (e, end) in [first, second].into_iter().enumerate() {
        let end_at = |field: &str| format!("link[{}].ends[{e}].{field}", cx.index);
        cx.topology.host(&end_at("host"), &end.host)?;
        if e == 1 && end.host == first.host {
            return Err(ScenarioError::new(
                end_at("host"),
                format!("both ends are on host {:?}", end.host),
            ));
        }
        if !sensing_allowed {
            not_allowed(&end.sensing, end_at("sensing"), &cx.what)?;
        }
        let bridge = cx.topology.is_bridge(&end.host);
        if bridge {
            for (field, set) in [
                ("address", end.address.is_some()),
                ("ipv6", end.ipv6.is_some()),
            ] {
                if set {
                    return Err(ScenarioError::new(
                        end_at(field),
                        format!(
                            "not allowed: {:?} is a bridge, its ports have no address",
                            end.host
                        ),
                    ));
                }
            }
            cx.topology.add_port(&end.host, cx.name);
        } else if end.address.is_none() && end.ipv6.is_none() {
            return Err(ScenarioError::new(
                end_at("address"),
                format!(
                    "missing field (or ipv6; host {:?} is not a bridge)",
                    end.host
                ),
            ));
        }
        // A bridge's end has neither address (rejected above).
        if let Some(address) = end.address {
            cx.topology
                .assign(&end_at("address"), &end.host, cx.name, address)?;
        }
        if let Some(ipv6) = end.ipv6 {
            cx.topology
                .assign_v6(&end_at("ipv6"), &end.host, cx.name, ipv6)?;
        }
        ends.push(EndSpec {
            host: end.host.clone(),
            address: end.address,
            ipv6: end.ipv6,
        });
    }
    same_subnet(cx.index, "address", first.address, second.address)?;
    same_subnet(cx.index, "ipv6", first.ipv6, second.ipv6)?;
    let addressed = |e: &RawEnd| e.address.is_some() || e.ipv6.is_some();
    let shared = (first.address.is_some() && second.address.is_some())
        || (first.ipv6.is_some() && second.ipv6.is_some());
    if addressed(first) && addressed(second) && !shared {
        return Err(ScenarioError::new(
            format!("link[{}].ends[1]", cx.index),
            "the two ends have no address family in common (give both an address or both an ipv6)",
        ));
    }
    let sensing = [
        first.sensing.unwrap_or(false),
        second.sensing.unwrap_or(false),
    ];
    let ends: [EndSpec; 2] = ends.try_into().map_err(|_| {
        ScenarioError::new(cx.at("ends"), format!("a {kind} link has exactly 2 ends"))
    })?;
    Ok((ends, sensing))
}

/// Fails unless the two ends' addresses of one family, where both have
/// one, share their prefix: a link is one subnet, so routes via either end
/// reach the other.
fn same_subnet<A: Family>(
    link: usize,
    field: &str,
    first: Option<crate::cidr::Cidr<A>>,
    second: Option<crate::cidr::Cidr<A>>,
) -> Result<(), ScenarioError> {
    if let (Some(a), Some(b)) = (first, second) {
        if a.network() != b.network() || a.prefix_len != b.prefix_len {
            return Err(ScenarioError::new(
                format!("link[{link}].ends[1].{field}"),
                format!("{b} is not on the same subnet as the other end ({a})"),
            ));
        }
    }
    Ok(())
}
