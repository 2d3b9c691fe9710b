//! RPL over the test network of [`super::harness`]: the study's 4 × 4 grid,
//! repair, hysteresis, static trees, determinism.

use std::net::Ipv6Addr;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::icmpv6::{
    rpl_option, DodagConfiguration, Icmpv6Repr, PrefixInformation, RplOptions, RplRepr,
};

use super::addr::{interface_id, link_local, with_iid, ALL_RPL_NODES};
use super::harness::{grid, mac, Harness, PREFIX};
use super::*;
use crate::rng::component_stream;

const SIDE: usize = 4;
const N: usize = SIDE * SIDE;

fn grid_network(seed: u64, p: f64) -> Harness {
    Harness::new(seed, N, &grid(SIDE), p, &RplConfig::default())
}

/// Every node's path to the root takes as many hops as its grid distance.
fn hops(i: usize) -> usize {
    i / SIDE + i % SIDE
}

#[test]
fn the_grid_forms_a_tree_reaching_every_node_both_ways_within_a_minute() {
    let mut h = grid_network(1, 1.0);
    let formed = h
        .run_until_complete(SimTime::from_secs(60))
        .expect("tree formed within 60 s");
    eprintln!("grid tree complete at {:.1} s", formed.as_secs_f64());
    assert_eq!(h.nodes[0].rpl.routes().len(), N - 1);
    for i in 1..N {
        let up = h.path_up(i).unwrap();
        assert_eq!(up.len() - 1, hops(i), "node {i} climbs {up:?}");
        assert_eq!(h.path_down(i).unwrap().len() - 1, hops(i));
    }
    // All four kinds of traffic a storing-mode DODAG needs were sent, and
    // the harness parsed every message back.
    assert!(h.counts.dio > 0 && h.counts.dao > 0 && h.counts.dis > 0);
    assert_eq!(h.counts.dao_ack, 0, "Contiki asks for no DAO-ACK");
}

#[test]
fn ranks_follow_mrhof_once_links_are_measured() {
    // Perfect links and data towards the root: every preferred parent's
    // ETX is measured at 1, so the rank is 256 per hop plus the root's 256.
    let mut h = grid_network(2, 1.0).with_data(SimDuration::from_secs(2));
    h.run_until(SimTime::from_secs(120));
    for i in 0..N {
        let rank = h.nodes[i].rpl.rank();
        assert_eq!(usize::from(rank), 256 * (1 + hops(i)), "node {i}");
        if let Some(parent) = h.nodes[i].rpl.preferred_parent() {
            assert_eq!(h.nodes[i].rpl.link_etx(parent), Some(256));
        }
    }
}

/// Switches off, 120 s into a run, the root's child with the most
/// descendants, and gives the seconds until every live node's parent chain
/// reaches the root again, and until the root's routes reach every live
/// node again.
fn repair_times(seed: u64) -> (f64, f64) {
    let mut h = grid_network(seed, 1.0).with_data(SimDuration::from_secs(2));
    h.run_until(SimTime::from_secs(120));
    assert!(h.upward_complete() && h.downward_complete());
    let below = |h: &Harness, k: usize| {
        (1..N)
            .filter(|&i| i != k && h.path_up(i).is_some_and(|p| p.contains(&k)))
            .collect::<Vec<_>>()
    };
    let victim = h.neighbours(0).max_by_key(|&k| below(&h, k).len()).unwrap();
    let orphans = below(&h, victim);
    assert!(!orphans.is_empty());
    let off = h.now;
    h.nodes[victim].alive = false;
    let (mut up, mut down) = (None, None);
    while h.now < off + SimDuration::from_secs(600) && down.is_none() {
        h.run_until(h.now + SimDuration::from_secs(1));
        let since = h.now.saturating_since(off).as_secs_f64();
        if up.is_none() && h.upward_complete() {
            up = Some(since);
        }
        if up.is_some() && h.downward_complete() {
            down = Some(since);
        }
    }
    for &i in &orphans {
        assert!(!h.path_up(i).unwrap().contains(&victim));
    }
    // The victim's children reported leaving it.
    let victim_addr = h.nodes[victim].rpl.link_local();
    let switched = |i: usize| {
        h.trace.iter().any(|(t, j, e)| {
            *t > off
                && *j == i
                && matches!(e, RplEvent::ParentChanged { old: Some(p), .. } if *p == victim_addr)
        })
    };
    assert!(orphans.iter().any(|&i| switched(i)));
    (
        up.expect("parents repaired"),
        down.expect("routes repaired"),
    )
}

#[test]
fn after_a_parent_is_switched_off_its_sub_dodag_reattaches() {
    // Upward, the children see their frames to the victim go unacknowledged
    // and switch within seconds. Downward, a node whose own parent did not
    // change announces itself again only when its parent's next multicast
    // DIO carries a new DTSN: one Trickle interval per level, as in Contiki
    // 3.0, and 120 s into a run the intervals are 65 to 131 s long.
    for seed in 1..=5 {
        let (up, down) = repair_times(seed);
        eprintln!("seed {seed}: parents repaired after {up:.0} s, routes after {down:.0} s");
        assert!(up <= 30.0, "seed {seed}: parents after {up} s");
        assert!(down <= 300.0, "seed {seed}: routes after {down} s");
    }
}

#[test]
fn lossy_links_still_form_the_tree() {
    // Every frame crosses a link with probability 0.7.
    let mut h = grid_network(4, 0.7).with_data(SimDuration::from_secs(2));
    let formed = h
        .run_until_complete(SimTime::from_secs(120))
        .expect("tree formed within 120 s");
    eprintln!("lossy grid tree complete at {:.1} s", formed.as_secs_f64());
}

/// A DIO of the DODAG rooted at node 0, from a sender of rank `rank`.
fn dio(rank: u16, dtsn: u8) -> Vec<u8> {
    let mut options = Vec::new();
    DodagConfiguration {
        authentication: false,
        path_control_size: 0,
        dio_interval_doublings: 8,
        dio_interval_min: 12,
        dio_redundancy: 10,
        max_rank_increase: 1792,
        min_hop_rank_increase: 256,
        objective_code_point: 1,
        default_lifetime: 0xff,
        lifetime_unit: 0xffff,
    }
    .push(&mut options)
    .unwrap();
    PrefixInformation {
        prefix_len: 64,
        on_link: false,
        autonomous: true,
        router_address: false,
        valid_lifetime: u32::MAX,
        preferred_lifetime: u32::MAX,
        prefix: PREFIX,
    }
    .push(&mut options)
    .unwrap();
    let repr = Icmpv6Repr::Rpl(RplRepr::Dio {
        instance_id: 0x1e,
        version: 240,
        rank,
        grounded: false,
        mode_of_operation: 2,
        preference: 0,
        dtsn,
        dodag_id: with_iid(PREFIX, interface_id(mac(0))),
        options: RplOptions::parse(&options).unwrap(),
    });
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut out).unwrap();
    out
}

fn parent_changes(rpl: &mut Rpl) -> Vec<(Option<Ipv6Addr>, Option<Ipv6Addr>, u16)> {
    std::iter::from_fn(|| rpl.poll_event())
        .filter_map(|e| match e {
            RplEvent::ParentChanged { old, new, rank } => Some((old, new, rank)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_slightly_better_parent_does_not_take_over_a_much_better_one_does() {
    let root = with_iid(PREFIX, interface_id(mac(0)));
    let (a, b, c) = (link_local(mac(1)), link_local(mac(2)), link_local(mac(3)));
    let rng = component_stream(5, "rpl/hysteresis");
    let mut node = Rpl::new(SimTime::ZERO, RplConfig::default(), mac(9), Role::Node, rng).unwrap();
    let t = SimTime::from_secs(1);
    // Joins through A (rank 768) over the initial ETX 2: 768 + 512.
    node.handle_message(t, a, ALL_RPL_NODES, &dio(768, 240))
        .unwrap();
    assert_eq!(parent_changes(&mut node), [(None, Some(a), 1280)]);
    assert_eq!(
        node.global_address(),
        Some(with_iid(PREFIX, interface_id(mac(9))))
    );
    // B's path costs 668 + 512 = 1180, 100 less: within half an ETX (128).
    node.handle_message(t, b, ALL_RPL_NODES, &dio(668, 240))
        .unwrap();
    assert_eq!(node.preferred_parent(), Some(a));
    assert!(parent_changes(&mut node).is_empty());
    assert_eq!(node.rank(), 1280);
    // C's costs 512 + 512 = 1024, 256 less: switch, rank 1024.
    node.handle_message(t, c, ALL_RPL_NODES, &dio(512, 240))
        .unwrap();
    assert_eq!(parent_changes(&mut node), [(Some(a), Some(c), 1024)]);
    assert_eq!(node.next_hop(root), Some(c));
    // The switch withdrew the route from A with a No-Path DAO.
    let sent: Vec<RplTransmit> = std::iter::from_fn(|| node.poll_transmit()).collect();
    let no_path = sent
        .iter()
        .find(|tx| tx.dst == a)
        .expect("No-Path DAO to A");
    let Icmpv6Repr::Rpl(RplRepr::Dao { options, .. }) =
        Icmpv6Repr::parse(&no_path.message).unwrap()
    else {
        panic!("not a DAO");
    };
    let transit = options
        .iter()
        .find(|o| o.kind == rpl_option::TRANSIT_INFORMATION)
        .unwrap();
    assert_eq!(transit.data[3], 0, "path lifetime 0");
}

#[test]
fn a_frozen_tree_keeps_its_parent_until_that_parent_is_lost() {
    let (a, c) = (link_local(mac(1)), link_local(mac(3)));
    let config = RplConfig {
        freeze_tree_at: Some(SimDuration::from_secs(2)),
        ..RplConfig::default()
    };
    let rng = component_stream(5, "rpl/frozen");
    let mut node = Rpl::new(SimTime::ZERO, config, mac(9), Role::Node, rng).unwrap();
    // Before the freeze a much better parent takes over, as RPL would.
    let t = SimTime::from_secs(1);
    node.handle_message(t, a, ALL_RPL_NODES, &dio(768, 240))
        .unwrap();
    node.handle_message(t, c, ALL_RPL_NODES, &dio(512, 240))
        .unwrap();
    assert_eq!(
        parent_changes(&mut node),
        [(None, Some(a), 1280), (Some(a), Some(c), 1024)]
    );
    // Frozen: A becoming far better than C moves nothing, nor does C's
    // DAGRank growing past that of the node's rank plus MaxRankIncrease
    // ((1024 + 1792) / 256 = 11; 3100 / 256 = 12),
    // which would otherwise drop C as a parent.
    let t = SimTime::from_secs(3);
    node.handle_message(t, a, ALL_RPL_NODES, &dio(256, 240))
        .unwrap();
    node.handle_message(t, c, ALL_RPL_NODES, &dio(3100, 240))
        .unwrap();
    assert_eq!(node.preferred_parent(), Some(c));
    assert!(parent_changes(&mut node).is_empty());
    // C lost its own route (infinite rank): the node must move to A.
    node.handle_message(t, c, ALL_RPL_NODES, &dio(u16::MAX, 240))
        .unwrap();
    assert_eq!(node.preferred_parent(), Some(a));
    assert_eq!(parent_changes(&mut node), [(Some(c), Some(a), 768)]);
}

#[test]
fn a_parent_that_stops_acknowledging_loses_its_child() {
    let (a, b) = (link_local(mac(1)), link_local(mac(2)));
    let rng = component_stream(6, "rpl/noack");
    let mut node = Rpl::new(SimTime::ZERO, RplConfig::default(), mac(9), Role::Node, rng).unwrap();
    let t = SimTime::from_secs(1);
    node.handle_message(t, a, ALL_RPL_NODES, &dio(256, 240))
        .unwrap();
    node.handle_message(t, b, ALL_RPL_NODES, &dio(512, 240))
        .unwrap();
    node.handle_tx_outcome(t, a, TxStatus::Ok, 1);
    node.handle_timeout(SimTime::from_secs(2));
    assert_eq!(node.rank(), 512);
    parent_changes(&mut node);
    // First no-ACK: (256·90 + 2560·10)/100 = 486; A costs 742 against B's
    // 1024: stay. Second: 693, 949 against 1024, within hysteresis: stay.
    // Third: 879, 1135 > 1024 + 128? No (1152). Fourth: 1047, 1303: switch.
    let expected = [486, 693, 879, 1047];
    for (k, etx) in expected.into_iter().enumerate() {
        node.handle_tx_outcome(t, a, TxStatus::NoAck, 4);
        assert_eq!(node.link_etx(a), Some(etx));
        node.handle_timeout(SimTime::from_secs(3 + k as u64));
        let switched = node.preferred_parent() == Some(b);
        assert_eq!(switched, k == 3, "after {} no-ACKs", k + 1);
    }
    assert_eq!(parent_changes(&mut node), [(Some(a), Some(b), 1024)]);
}

#[test]
fn a_multicast_dis_resets_the_roots_trickle_timer() {
    let rng = component_stream(7, "rpl/root");
    let root_prefix = Role::Root {
        prefix: PREFIX,
        prefix_len: 64,
    };
    let mut root = Rpl::new(
        SimTime::ZERO,
        RplConfig::default(),
        mac(0),
        root_prefix,
        rng,
    )
    .unwrap();
    // Let Trickle double for ten minutes, noting DIO times.
    let mut dios = Vec::new();
    while let Some(t) = root.poll_timeout() {
        if t > SimTime::from_secs(600) {
            break;
        }
        root.handle_timeout(t);
        while let Some(tx) = root.poll_transmit() {
            assert_eq!(tx.dst, ALL_RPL_NODES);
            dios.push(t);
        }
    }
    assert!(dios.len() >= 6, "{dios:?}");
    let gaps: Vec<f64> = dios
        .windows(2)
        .map(|w| w[1].saturating_since(w[0]).as_secs_f64())
        .collect();
    assert!(gaps.last().unwrap() > &60.0, "intervals grew: {gaps:?}");
    let now = SimTime::from_secs(600);
    let dis = {
        let repr = Icmpv6Repr::Rpl(RplRepr::Dis {
            options: RplOptions::default(),
        });
        let mut out = vec![0; repr.buffer_len()];
        repr.emit(&mut out).unwrap();
        out
    };
    root.handle_message(now, link_local(mac(5)), ALL_RPL_NODES, &dis)
        .unwrap();
    // The next DIO comes in the second half of the smallest interval.
    let sent = loop {
        let t = root.poll_timeout().unwrap();
        root.handle_timeout(t);
        if let Some(tx) = root.poll_transmit() {
            assert_eq!(tx.dst, ALL_RPL_NODES);
            break t;
        }
    };
    assert!(sent >= now + SimDuration::from_millis(2048), "{sent:?}");
    assert!(sent <= now + SimDuration::from_millis(4096), "{sent:?}");
    // A unicast DIS gets a unicast DIO at once.
    root.handle_message(now, link_local(mac(5)), root.link_local(), &dis)
        .unwrap();
    assert_eq!(root.poll_transmit().unwrap().dst, link_local(mac(5)));
}

#[test]
fn a_static_tree_gives_exactly_the_configured_routes_and_sends_nothing() {
    // Column 0 hangs off the root, every row off its column-0 node.
    let parents: Vec<Option<usize>> = (0..N)
        .map(|i| match (i / SIDE, i % SIDE) {
            (0, 0) => None,
            (r, 0) => Some((r - 1) * SIDE),
            (r, c) => Some(r * SIDE + c - 1),
        })
        .collect();
    let macs: Vec<_> = (0..N).map(mac).collect();
    let mut nodes = static_tree(&RplConfig::default(), PREFIX, &macs, &parents).unwrap();
    let global = |i: usize| with_iid(PREFIX, interface_id(mac(i)));
    for (i, node) in nodes.iter_mut().enumerate() {
        assert_eq!(
            node.preferred_parent(),
            parents[i].map(|p| link_local(mac(p)))
        );
        assert_eq!(usize::from(node.rank()), 256 * (1 + hops(i)));
        assert_eq!(node.poll_timeout(), None);
        node.handle_timeout(SimTime::from_secs(1000));
        assert_eq!(node.poll_transmit(), None);
        // Descendants through the child on their chain; anything else up.
        for d in 0..N {
            let mut chain = vec![d];
            while let Some(p) = parents[*chain.last().unwrap()] {
                chain.push(p);
            }
            let expected = match chain.iter().position(|&x| x == i) {
                Some(0) => None,
                Some(k) => Some(link_local(mac(chain[k - 1]))),
                None => parents[i].map(|p| link_local(mac(p))),
            };
            assert_eq!(node.next_hop(global(d)), expected, "at {i} to {d}");
        }
    }
    assert_eq!(nodes[0].routes().len(), N - 1);
    // Node 4 heads rows 1 to 3: 11 descendants.
    assert_eq!(nodes[SIDE].routes().len(), SIDE * (SIDE - 1) - 1);
    // The tree is reported as parent changes.
    let ev: Vec<RplEvent> = std::iter::from_fn(|| nodes[5].poll_event()).collect();
    assert!(ev.contains(&RplEvent::ParentChanged {
        old: None,
        new: Some(link_local(mac(4))),
        rank: 768
    }));
}

#[test]
fn a_static_tree_refuses_cycles_roots_and_strangers_by_index() {
    let macs: Vec<_> = (0..4).map(mac).collect();
    let config = RplConfig::default();
    let cases: [(&[Option<usize>], &str); 4] = [
        (&[None, Some(2), Some(1), Some(0)], "parents[2]"),
        (&[None, None, Some(0), Some(0)], "parents[1]"),
        (&[Some(1), Some(0), Some(0), Some(0)], "parents"),
        (&[None, Some(7), Some(0), Some(0)], "parents[1]"),
    ];
    for (parents, path) in cases {
        let e = static_tree(&config, PREFIX, &macs, parents).err().unwrap();
        assert_eq!(e.path, path, "{parents:?}: {e}");
    }
}

fn trace_of(seed: u64) -> (Vec<(SimTime, usize, RplEvent)>, Vec<RplStats>) {
    let mut h = grid_network(seed, 0.9).with_data(SimDuration::from_secs(2));
    h.run_until(SimTime::from_secs(100));
    h.nodes[1].alive = false;
    h.run_until(SimTime::from_secs(200));
    let stats = h.nodes.iter().map(|n| n.rpl.stats()).collect();
    (h.trace, stats)
}

#[test]
fn runs_are_deterministic_per_seed() {
    let a = trace_of(11);
    assert_eq!(a, trace_of(11));
    assert_ne!(a.0, trace_of(12).0);
}

#[test]
fn a_root_prefix_must_leave_room_for_the_interface_identifier_and_configs_are_checked() {
    let role = Role::Root {
        prefix: PREFIX,
        prefix_len: 80,
    };
    let e = Rpl::new(
        SimTime::ZERO,
        RplConfig::default(),
        mac(0),
        role,
        component_stream(1, "r"),
    )
    .err()
    .unwrap();
    assert_eq!(e.path, "prefix_len");
    // A configuration built in code is checked as one read from a file.
    let config = RplConfig {
        probing_interval: SimDuration::ZERO,
        ..RplConfig::default()
    };
    let e = Rpl::new(
        SimTime::ZERO,
        config,
        mac(1),
        Role::Node,
        component_stream(1, "r"),
    )
    .err()
    .unwrap();
    assert_eq!(e.path, "rpl.probing_interval");
}

proptest::proptest! {
    #[test]
    fn arbitrary_messages_never_panic(
        bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..120),
        code in 0u8..4,
    ) {
        let rng = component_stream(8, "rpl/fuzz");
        let mut node = Rpl::new(SimTime::ZERO, RplConfig::default(), mac(9), Role::Node, rng).unwrap();
        let t = SimTime::from_secs(1);
        node.handle_message(t, link_local(mac(1)), ALL_RPL_NODES, &dio(256, 240)).unwrap();
        // An RPL header with random body, and fully random bytes.
        let mut message = vec![155, code, 0, 0];
        message.extend_from_slice(&bytes);
        let _ = node.handle_message(t, link_local(mac(2)), node.link_local(), &message);
        let _ = node.handle_message(t, link_local(mac(2)), ALL_RPL_NODES, &bytes);
        node.handle_timeout(SimTime::from_secs(5));
        while let Some(tx) = node.poll_transmit() {
            proptest::prop_assert!(Icmpv6Repr::parse(&tx.message).is_ok());
        }
    }
}
