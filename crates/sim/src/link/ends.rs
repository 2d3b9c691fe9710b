//! The two ends of a point-to-point style link, as scenario files give
//! them, shared by the wired and NFC kinds.

use serde::Deserialize;

use super::LinkCheck;
use crate::cidr::Ipv4Cidr;
use crate::config::{not_allowed, Attachment, ScenarioError};

/// One end of a two-ended link, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnd {
    /// Host name.
    pub host: String,
    /// Interface address; absent for a bridge's port.
    pub address: Option<Ipv4Cidr>,
    /// Channel sensing (NFC links only).
    pub sensing: Option<bool>,
}

/// One end of a two-ended link.
#[derive(Clone, Debug, PartialEq)]
pub struct EndSpec {
    /// Host name.
    pub host: String,
    /// Interface address; `None` for a bridge's port.
    pub address: Option<Ipv4Cidr>,
}

impl EndSpec {
    /// The interface this end attaches.
    pub fn attachment(&self) -> Attachment {
        Attachment {
            host: self.host.clone(),
            address: self.address,
            ipv6: None,
            position: None,
        }
    }
}

/// Validates the `ends` of a two-ended link: two distinct hosts, an address
/// on the same subnet for each end that is not a bridge, none for a
/// bridge's port. Records the addresses and ports in the topology. Returns
/// the ends and their `sensing` flags (which only kinds with
/// `sensing_allowed` accept).
pub fn two_ends(
    raw: &Option<Vec<RawEnd>>,
    cx: &mut LinkCheck<'_>,
    sensing_allowed: bool,
) -> Result<([EndSpec; 2], [bool; 2]), ScenarioError> {
    let raw_ends = raw
        .as_ref()
        .ok_or_else(|| ScenarioError::new(cx.at("ends"), format!("required for {}", cx.what)))?;
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
        let address = match (bridge, end.address) {
            (true, Some(_)) => {
                return Err(ScenarioError::new(
                    end_at("address"),
                    format!(
                        "not allowed: {:?} is a bridge, its ports have no address",
                        end.host
                    ),
                ))
            }
            (true, None) => {
                cx.topology.add_port(&end.host, cx.name);
                None
            }
            (false, None) => {
                return Err(ScenarioError::new(
                    end_at("address"),
                    format!("missing field (host {:?} is not a bridge)", end.host),
                ))
            }
            (false, Some(address)) => {
                cx.topology
                    .assign(&end_at("address"), &end.host, cx.name, address)?;
                Some(address)
            }
        };
        ends.push(EndSpec {
            host: end.host.clone(),
            address,
        });
    }
    if let (Some(a), Some(b)) = (first.address, second.address) {
        if a.network() != b.network() || a.prefix_len != b.prefix_len {
            return Err(ScenarioError::new(
                format!("link[{}].ends[1].address", cx.index),
                format!("{b} is not on the same subnet as the other end ({a})"),
            ));
        }
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
