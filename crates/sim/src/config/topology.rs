//! What references in a scenario are checked against: hosts, bridges and
//! the addresses assigned so far.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::ScenarioError;
use crate::cidr::{Ipv4Cidr, Ipv6Cidr};
use crate::position::Position;

/// One interface a link attaches: an addressed interface of a host, or a
/// bridge's port (no address).
#[derive(Clone, Debug, PartialEq)]
pub struct Attachment {
    /// Host name.
    pub host: String,
    /// IPv4 interface address; `None` for a bridge's port and for
    /// interfaces that speak IPv6 only.
    pub address: Option<Ipv4Cidr>,
    /// IPv6 interface address (with its on-link prefix), if any.
    pub ipv6: Option<Ipv6Cidr>,
    /// Where the interface sits, for links that place their members.
    pub position: Option<Position>,
}

/// The scenario's hosts and the addresses assigned so far, filled in while
/// links validate and read by routes, captures and apps.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    /// Host name → its position, if it has one.
    hosts: BTreeMap<String, Option<Position>>,
    /// Bridge hosts.
    bridges: BTreeSet<String>,
    /// Address → (host, link name, path of the field that assigned it).
    addresses: BTreeMap<Ipv4Addr, (String, String, String)>,
    /// (host, link, interface address) of every addressed interface.
    attachments: Vec<(String, String, Ipv4Cidr)>,
    /// (bridge, link) of every bridge port.
    ports: Vec<(String, String)>,
    /// Host names in the order declared.
    order: Vec<String>,
    /// IPv6 address → (host, link name, path of the field or member that
    /// assigned it).
    addresses_v6: BTreeMap<Ipv6Addr, (String, String, String)>,
    /// (host, link, interface address) of every interface with an IPv6
    /// address, whether or not it also has an IPv4 one.
    attachments_v6: Vec<(String, String, Ipv6Cidr)>,
}

impl Topology {
    /// Declares a host (a bridge if `bridge`).
    pub fn add_host(&mut self, name: &str, position: Option<Position>, bridge: bool) {
        if !self.hosts.contains_key(name) {
            self.order.push(name.to_string());
        }
        self.hosts.insert(name.to_string(), position);
        if bridge {
            self.bridges.insert(name.to_string());
        }
    }

    /// Fails unless a host of that name exists.
    pub fn host(&self, path: &str, name: &str) -> Result<(), ScenarioError> {
        if self.hosts.contains_key(name) {
            Ok(())
        } else {
            Err(ScenarioError::new(path, format!("no host named {name:?}")))
        }
    }

    /// The host's own position.
    pub fn host_position(&self, name: &str) -> Option<Position> {
        self.hosts.get(name).copied().flatten()
    }

    /// Whether the host is a bridge.
    pub fn is_bridge(&self, name: &str) -> bool {
        self.bridges.contains(name)
    }

    /// Records `address` on `host`'s interface to `link`; fails if another
    /// interface has it. `path` names the field that assigns it.
    pub fn assign(
        &mut self,
        path: &str,
        host: &str,
        link: &str,
        address: Ipv4Cidr,
    ) -> Result<(), ScenarioError> {
        if let Some((_, _, first)) = self.addresses.get(&address.addr) {
            return Err(ScenarioError::new(
                path,
                format!("{} is already assigned at {first}", address.addr),
            ));
        }
        self.addresses.insert(
            address.addr,
            (host.to_string(), link.to_string(), path.to_string()),
        );
        self.attachments
            .push((host.to_string(), link.to_string(), address));
        Ok(())
    }

    /// Host names in the order they were declared.
    pub fn host_names(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// Records the IPv6 address of `host`'s interface to `link`, IPv6-only
    /// or dual-stack (a dual-stack interface is recorded by both this and
    /// [`Topology::assign`]); fails if another interface has it. `path`
    /// names the field that assigns it.
    pub fn assign_v6(
        &mut self,
        path: &str,
        host: &str,
        link: &str,
        address: Ipv6Cidr,
    ) -> Result<(), ScenarioError> {
        if let Some((_, _, first)) = self.addresses_v6.get(&address.addr) {
            return Err(ScenarioError::new(
                path,
                format!("{} is already assigned at {first}", address.addr),
            ));
        }
        self.addresses_v6.insert(
            address.addr,
            (host.to_string(), link.to_string(), path.to_string()),
        );
        self.attachments_v6
            .push((host.to_string(), link.to_string(), address));
        Ok(())
    }

    /// Records a bridge port of `host` on `link`.
    pub fn add_port(&mut self, host: &str, link: &str) {
        self.ports.push((host.to_string(), link.to_string()));
    }

    /// The (host, link) owning an address.
    pub fn owner(&self, address: Ipv4Addr) -> Option<(&str, &str)> {
        self.addresses
            .get(&address)
            .map(|(host, link, _)| (host.as_str(), link.as_str()))
    }

    /// The (host, link) owning an IPv6 address.
    pub fn owner_v6(&self, address: Ipv6Addr) -> Option<(&str, &str)> {
        self.addresses_v6
            .get(&address)
            .map(|(host, link, _)| (host.as_str(), link.as_str()))
    }

    /// The (host, link) owning an address of either family.
    pub fn owner_ip(&self, address: IpAddr) -> Option<(&str, &str)> {
        match address {
            IpAddr::V4(a) => self.owner(a),
            IpAddr::V6(a) => self.owner_v6(a),
        }
    }

    /// Fails unless some interface has `address`, of either family;
    /// `path` names the field.
    pub fn ip_address_exists(&self, path: &str, address: IpAddr) -> Result<(), ScenarioError> {
        if self.owner_ip(address).is_some() {
            Ok(())
        } else {
            Err(ScenarioError::new(
                path,
                format!("no interface has address {address}"),
            ))
        }
    }

    /// Fails unless some interface has `address`; `path` names the field.
    pub fn address_exists(&self, path: &str, address: Ipv4Addr) -> Result<(), ScenarioError> {
        if self.addresses.contains_key(&address) {
            Ok(())
        } else {
            Err(ScenarioError::new(
                path,
                format!("no interface has address {address}"),
            ))
        }
    }

    /// Interfaces with an IPv4 address as (host, link, address).
    pub fn interfaces(&self) -> impl Iterator<Item = (&str, &str, Ipv4Cidr)> {
        self.attachments
            .iter()
            .map(|(h, l, c)| (h.as_str(), l.as_str(), *c))
    }

    /// Interfaces with an IPv6 address as (host, link, address); a
    /// dual-stack interface is also among [`Topology::interfaces`].
    pub fn interfaces_v6(&self) -> impl Iterator<Item = (&str, &str, Ipv6Cidr)> {
        self.attachments_v6
            .iter()
            .map(|(h, l, c)| (h.as_str(), l.as_str(), *c))
    }

    /// Number of bridge ports `host` has.
    pub fn port_count(&self, host: &str) -> usize {
        self.ports.iter().filter(|(b, _)| b == host).count()
    }

    /// Whether `host` has an interface or bridge port on `link`.
    pub fn is_attached(&self, host: &str, link: &str) -> bool {
        self.attachments
            .iter()
            .any(|(h, l, _)| h == host && l == link)
            || self.ports.iter().any(|(h, l)| h == host && l == link)
            || self
                .attachments_v6
                .iter()
                .any(|(h, l, _)| h == host && l == link)
    }
}
