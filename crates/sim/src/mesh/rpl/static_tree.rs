//! A configured tree: every node's parent is given, and routes follow from
//! it without any RPL message.
//!
//! RPL is not run pinned to the configured parents: its DIOs and DAOs would
//! still take airtime and collide with the data whose behaviour the
//! experiment isolates, while their outcome could change nothing. The
//! routes are those storing-mode RPL would build on that tree once every
//! DAO had arrived: a default route to the parent, and a route to each
//! descendant's global address through the child it lies under.

use std::net::Ipv6Addr;

use rtolab_wire::ieee802154::Address;

use super::addr::{interface_id, link_local, with_iid};
use super::{Route, Rpl, RplConfig};
use crate::config::ScenarioError;
use crate::rng::{component_stream, SimRng};

/// Builds the nodes of a configured tree: `macs[i]` is node i's MAC
/// address, `parents[i]` the index of its parent, `None` for the root (the
/// only one). Addresses take `prefix` (at most 64 bits long) and each
/// node's interface identifier; ranks are MinHopRankIncrease per hop, as
/// MRHOF gives over links of ETX 1. Errors name `parents[i]`, or
/// `rpl.<field>` for a configuration out of range.
pub fn static_tree(
    config: &RplConfig,
    prefix: Ipv6Addr,
    macs: &[Address],
    parents: &[Option<usize>],
) -> Result<Vec<Rpl>, ScenarioError> {
    config.check("rpl")?;
    let n = macs.len();
    if parents.len() != n {
        return Err(ScenarioError::new(
            "parents",
            format!("has {} entries for {n} nodes", parents.len()),
        ));
    }
    let roots: Vec<usize> = (0..n).filter(|&i| parents[i].is_none()).collect();
    let root = match roots.as_slice() {
        [r] => *r,
        [] => return Err(ScenarioError::new("parents", "no node is the root")),
        [_, second, ..] => {
            return Err(ScenarioError::new(
                format!("parents[{second}]"),
                "a second root: only one node may have no parent",
            ))
        }
    };
    // Depth of every node, refusing unknown parents and cycles.
    let mut depth = vec![None; n];
    depth[root] = Some(0u16);
    for start in 0..n {
        let mut chain = vec![start];
        let mut at = start;
        while depth[at].is_none() {
            let parent = parents[at].expect("only the root has none");
            if parent >= n {
                return Err(ScenarioError::new(
                    format!("parents[{at}]"),
                    format!("no node {parent} (there are {n})"),
                ));
            }
            if parent == at || chain.contains(&parent) {
                return Err(ScenarioError::new(
                    format!("parents[{at}]"),
                    format!("node {parent} is its own ancestor: the tree has a cycle"),
                ));
            }
            chain.push(parent);
            at = parent;
        }
        let mut d = depth[at].expect("loop ended on a known depth");
        for &node in chain.iter().rev().skip(1) {
            d += 1;
            depth[node] = Some(d);
        }
    }
    let globals: Vec<Ipv6Addr> = macs
        .iter()
        .map(|&m| with_iid(prefix, interface_id(m)))
        .collect();
    let dodag_id = globals[root];
    let mut nodes = Vec::with_capacity(n);
    for i in 0..n {
        // A route to every descendant d through the child of i on d's chain.
        let mut routes = Vec::new();
        for (d, &target) in globals.iter().enumerate() {
            let mut child = d;
            while let Some(p) = parents[child] {
                if p == i {
                    routes.push(Route {
                        target,
                        prefix_len: 128,
                        next_hop: link_local(macs[child]),
                        lifetime_secs: u32::MAX,
                        no_path: false,
                    });
                    break;
                }
                child = p;
            }
        }
        let rank = config
            .min_hop_rank_increase
            .saturating_mul(depth[i].expect("every depth found") + 1);
        let rng: SimRng = component_stream(0, "rpl/static");
        nodes.push(Rpl::new_static(
            config.clone(),
            macs[i],
            globals[i],
            dodag_id,
            parents[i].map(|p| link_local(macs[p])),
            rank,
            routes,
            rng,
        ));
    }
    Ok(nodes)
}
