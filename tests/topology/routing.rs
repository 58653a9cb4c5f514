//! Routing invariants (proptest): reproducible, and a connected path of
//! directed links from source to destination that passes only through
//! components that forward; dimension order on grids; ECMP keeps a flow on one path.

use proptest::prelude::*;

use shardsim::topology::{self, ComponentId, ComponentKind, Override, Topology};

/// A topology from a small family of presets and parameters.
fn topology_strategy() -> impl Strategy<Value = Topology> {
    prop_oneof![
        (2u32..12).prop_map(|n| format!("ring:{n}")),
        (1u32..5, 1u32..5).prop_map(|(r, c)| format!("mesh2d:{r}x{c}")),
        (1u32..4, 1u32..4, 1u32..5).prop_map(|(a, b, c)| format!("tpu-v4:{a}x{b}x{c}")),
        (2u32..10).prop_map(|n| format!("switch:{n}")),
        (1u32..9).prop_map(|n| format!("pcie-box:{n}")),
        (1u32..5).prop_map(|n| format!("dgx-h100@{n}")),
        (1u32..4).prop_map(|n| format!("dgx-a100@{n}")),
    ]
    .prop_map(|spec| match spec.split_once('@') {
        Some((name, nodes)) => topology::load(
            name,
            &[Override {
                key: "nodes".into(),
                value: nodes.into(),
            }],
        )
        .unwrap(),
        None => topology::load(&spec, &[]).unwrap(),
    })
}

/// Traffic endpoints: devices, hosts and NICs (switches only relay).
fn endpoints(t: &Topology) -> Vec<ComponentId> {
    t.components()
        .iter()
        .filter(|c| {
            matches!(
                c.kind,
                ComponentKind::Device { .. } | ComponentKind::Host | ComponentKind::Nic
            )
        })
        .map(|c| c.id)
        .collect()
}

fn check_path(
    t: &Topology,
    src: ComponentId,
    dst: ComponentId,
    route: &[topology::LinkId],
) -> Result<(), TestCaseError> {
    if src == dst {
        prop_assert!(route.is_empty());
        return Ok(());
    }
    prop_assert!(!route.is_empty());
    prop_assert_eq!(t.link(route[0]).from, src);
    prop_assert_eq!(t.link(*route.last().unwrap()).to, dst);
    let mut seen = std::collections::BTreeSet::new();
    for w in route.windows(2) {
        let (a, b) = (t.link(w[0]), t.link(w[1]));
        prop_assert_eq!(a.to, b.from, "links must connect");
        prop_assert!(
            t.component(a.to).forwards,
            "{} does not forward",
            t.component(a.to).name
        );
    }
    for &l in route {
        prop_assert!(
            seen.insert(t.link(l).from),
            "a route never revisits a component"
        );
    }
    Ok(())
}

/// Breadth-first search from `src` to `dst` through forwarding components, never over `failed`.
fn reachable_without(
    t: &Topology,
    src: ComponentId,
    dst: ComponentId,
    failed: topology::LinkId,
) -> bool {
    let mut seen = std::collections::BTreeSet::from([src]);
    let mut queue = std::collections::VecDeque::from([src]);
    while let Some(c) = queue.pop_front() {
        if c == dst {
            return true;
        }
        if c != src && !t.component(c).forwards {
            continue;
        }
        for l in t.out_links(c) {
            let to = t.link(l).to;
            if l != failed && seen.insert(to) {
                queue.push_back(to);
            }
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn routes_are_valid_and_reproducible(t in topology_strategy(), a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>(), flow in any::<u64>()) {
        let ends = endpoints(&t);
        let (src, dst) = (ends[a.index(ends.len())], ends[b.index(ends.len())]);
        let route = t.route(src, dst, flow).unwrap();
        check_path(&t, src, dst, &route)?;
        prop_assert_eq!(&route, &t.route(src, dst, flow).unwrap());
        // A clone (a second load) routes the same way.
        let again = t.clone();
        prop_assert_eq!(&route, &again.route(src, dst, flow).unwrap());
    }

    #[test]
    fn goal_directed_routes_equal_the_full_search(t in topology_strategy(), a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>(), flow in any::<u64>()) {
        let ends = endpoints(&t);
        let (src, dst) = (ends[a.index(ends.len())], ends[b.index(ends.len())]);
        prop_assert_eq!(t.route(src, dst, flow).unwrap(), t.route_reference(src, dst, flow).unwrap());
    }

    #[test]
    fn detours_avoid_failed_links_and_are_valid(t in topology_strategy(), a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>(), k in any::<prop::sample::Index>()) {
        let ends = endpoints(&t);
        let (src, dst) = (ends[a.index(ends.len())], ends[b.index(ends.len())]);
        // With nothing failed a detour exists wherever a route does, and is as cheap.
        let free = t.route_avoiding(src, dst, &[]).expect("connected");
        check_path(&t, src, dst, &free)?;
        prop_assert_eq!(free.is_empty(), src == dst);
        if free.is_empty() {
            return Ok(());
        }
        // Fail one link of it: the detour, if any, avoids that link.
        let failed = free[k.index(free.len())];
        match t.route_avoiding(src, dst, &[failed]) {
            Some(r) => {
                check_path(&t, src, dst, &r)?;
                prop_assert!(!r.contains(&failed));
            }
            // No detour: then no path avoids it (checked by a plain search).
            None => prop_assert!(!reachable_without(&t, src, dst, failed)),
        }
    }

    #[test]
    fn torus_routes_follow_dimension_order(x in 1u32..5, y in 1u32..5, z in 1u32..5, a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>()) {
        let t = topology::load(&format!("tpu-v4:{x}x{y}x{z}"), &[]).unwrap();
        let n = t.num_devices();
        let (s, d) = (a.index(n as usize) as u32, b.index(n as usize) as u32);
        let route = t.route_devices(s, d, 0).unwrap();
        let dims = [x, y, z];
        let coords = |i: u32| [i / (y * z), (i / z) % y, i % z];
        // Hop count is the torus distance, summed over dimensions.
        let (cs, cd) = (coords(s), coords(d));
        let dist: u32 = (0..3).map(|k| {
            let up = (cd[k] + dims[k] - cs[k]) % dims[k];
            up.min(dims[k] - up)
        }).sum();
        prop_assert_eq!(route.len() as u32, dist);
        // The dimension that changes never goes back to an earlier one.
        let mut last_dim = 0;
        for &l in &route {
            let link = t.link(l);
            let (f, to) = (t.device_index(link.from).unwrap(), t.device_index(link.to).unwrap());
            let changed = (0..3).find(|&k| coords(f)[k] != coords(to)[k]).unwrap();
            prop_assert!(changed >= last_dim);
            last_dim = changed;
        }
    }
}

#[test]
fn ecmp_spreads_flows_over_spines_but_keeps_each_flow_on_one_path() {
    let t = topology::load(
        "dgx-h100",
        &[
            Override {
                key: "nodes".into(),
                value: "4".into(),
            },
            Override {
                key: "network.routing".into(),
                value: "ecmp".into(),
            },
        ],
    )
    .unwrap();
    // GPU 0 of node 0 to GPU 5 of node 1 changes rail, so it climbs to a spine.
    let spine_of = |flow| {
        let r = t.route_devices(0, 13, flow).unwrap();
        r.iter()
            .map(|&l| t.component(t.link(l).to))
            .find(|c| matches!(c.kind, ComponentKind::NetworkSwitch { level: 1, .. }))
            .map(|c| c.name.clone())
            .expect("cross-rail traffic goes through a spine")
    };
    let spines: std::collections::BTreeSet<String> = (0..64).map(spine_of).collect();
    assert!(
        spines.len() >= 3,
        "64 flows should use several of the 4 spines, used {spines:?}"
    );
    for flow in 0..16 {
        assert_eq!(spine_of(flow), spine_of(flow));
    }
}

/// ECMP treats rails alike: on a fat tree with several leaves per rail
/// (dgx-h100 x 9, 16-port switches: 2 leaves per rail, 8 spines), rotating
/// the local GPU of both ends (`k -> k + shift mod 8`) rotates every network
/// hop of the route: same node, rail shifted alike, and the very same spine. NCCL's tree
/// channels are timed once on that symmetry (`collective::channels`).
#[test]
fn ecmp_routes_of_rotated_rails_are_rotated() {
    for routing in ["destination", "ecmp"] {
        routes_of_rotated_rails_are_rotated(routing);
    }
}

fn routes_of_rotated_rails_are_rotated(routing: &str) {
    let t = topology::load(
        "dgx-h100",
        &[
            Override {
                key: "nodes".into(),
                value: "9".into(),
            },
            Override {
                key: "network.switch_radix".into(),
                value: "16".into(),
            },
            Override {
                key: "network.routing".into(),
                value: routing.into(),
            },
        ],
    )
    .unwrap();
    let mut spines = std::collections::BTreeSet::new();
    // Shift 1 on pairs of one rail (NCCL's tree channels); shift 2 on any
    // pair (PCIe switches pair GPUs 2i and 2i + 1, so only shifts by 2 carry
    // the cross-rail detours through a neighbour's NIC).
    for shift in [1u32, 2] {
        let rot = |d: u32| d / 8 * 8 + (d % 8 + shift) % 8;
        for a in (0..72u32).step_by(3) {
            let others = (0..72u32).filter(|b| b / 8 != a / 8 && (shift == 2 || b % 8 == a % 8));
            for b in others.step_by(if shift == 2 { 5 } else { 1 }) {
                // Network hops only: a PCIe switch has no rail.
                let net = |r: Vec<topology::LinkId>| -> Vec<topology::LinkId> {
                    r.into_iter()
                        .filter(|&l| t.link(l).class == topology::LinkClass::Network)
                        .collect()
                };
                let r = net(t.route_devices(a, b, 0).unwrap());
                let s = net(t.route_devices(rot(a), rot(b), 0).unwrap());
                assert_eq!(r.len(), s.len(), "{a} -> {b}");
                for (&x, &y) in r.iter().zip(&s) {
                    let (cx, cy) = (t.component(t.link(x).to), t.component(t.link(y).to));
                    assert_eq!(cx.node, cy.node, "{a} -> {b}: {} vs {}", cx.name, cy.name);
                    match cx.rail {
                        Some(k) => assert_eq!(cy.rail, Some((k + shift) % 8), "{a} -> {b}"),
                        None => {
                            assert_eq!(cx.id, cy.id, "{a} -> {b}: {} vs {}", cx.name, cy.name)
                        }
                    }
                    if matches!(cx.kind, ComponentKind::NetworkSwitch { level: 1, .. }) {
                        spines.insert(cx.name.clone());
                    }
                }
            }
        }
    }
    assert!(
        spines.len() >= 4,
        "{routing}: pairs still spread over spines: {spines:?}"
    );
}

/// Static InfiniBand routing (`network.routing = "destination"`, adaptive
/// routing off): a leaf sends a climbing route up the spine of the
/// destination's port on its own leaf, so on 64 DGX H100 nodes (two leaves
/// per rail, 32 spines) every spine-to-leaf link carries the routes of one
/// destination NIC whoever sends, and the 32 nodes of one leaf reach the
/// other leaf through 32 different uplinks. Per-flow hashing (`ecmp`)
/// puts several destinations on one down-link; adaptive routing
/// (the default) builds one spine whose link to a leaf is as wide as the
/// leaf's 32 uplinks.
#[test]
fn destination_routing_gives_each_spine_down_link_one_destination() {
    let load = |routing: &str| {
        topology::load(
            "dgx-h100",
            &[
                Override {
                    key: "nodes".into(),
                    value: "64".into(),
                },
                Override {
                    key: "network.routing".into(),
                    value: routing.into(),
                },
            ],
        )
        .unwrap()
    };
    // Down-link -> destinations, and uplinks used, for every pair of rail-0
    // GPUs on different leaves (nodes 0-31 against 32-63).
    let links = |t: &topology::Topology| {
        let mut down: std::collections::BTreeMap<String, std::collections::BTreeSet<u32>> =
            Default::default();
        let mut up = std::collections::BTreeSet::new();
        for a in 0..32u32 {
            for b in 32..64u32 {
                for (src, dst) in [(a, b), (b, a)] {
                    for &l in &t.route_devices(src * 8, dst * 8, u64::from(a)).unwrap() {
                        let link = t.link(l);
                        let (f, to) = (t.component(link.from), t.component(link.to));
                        match (&f.kind, &to.kind) {
                            (
                                ComponentKind::NetworkSwitch { level: 1, .. },
                                ComponentKind::NetworkSwitch { .. },
                            ) => {
                                down.entry(format!("{} -> {}", f.name, to.name))
                                    .or_default()
                                    .insert(dst);
                            }
                            (
                                ComponentKind::NetworkSwitch { level: 0, .. },
                                ComponentKind::NetworkSwitch { level: 1, .. },
                            ) if src == a => {
                                up.insert(to.name.clone());
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        (down, up)
    };
    let (down, up) = links(&load("destination"));
    assert_eq!(down.len(), 64, "32 spines x 2 leaves");
    assert!(
        down.values().all(|d| d.len() == 1),
        "{:?}",
        down.iter().find(|(_, d)| d.len() > 1)
    );
    assert_eq!(up.len(), 32);
    let (down, _) = links(&load("ecmp"));
    assert!(down.values().any(|d| d.len() > 1), "hashing collides");
    let t = load("adaptive");
    let (down, up) = links(&t);
    assert_eq!((down.len(), up.len()), (2, 1));
    let spine = t
        .components()
        .iter()
        .find(|c| matches!(c.kind, ComponentKind::NetworkSwitch { level: 1, .. }))
        .unwrap();
    for l in t.links().iter().filter(|l| l.to == spine.id) {
        assert_eq!((l.bandwidth.0, l.lanes), (32 * 50_000_000_000, 32));
    }
}

/// `dgx-h100` with `sets` as `--set` gives them.
/// Seconds of a bf16 all-to-all of `elements` per rank over `ranks`, as
/// NCCL would choose to run it.
fn all_to_all_seconds(t: &Topology, ranks: Vec<u32>, elements: u64) -> f64 {
    let g = shardsim::collective::Group::new(t, ranks).unwrap();
    let cal = shardsim::collective::Calibration::for_model(&g.device_model(t)).unwrap();
    let op = shardsim::collective::CollectiveOp::AllToAll;
    let r =
        shardsim::collective::time_collective(t, &g, &op, elements, 2, &cal, None, None).unwrap();
    r.time.0 as f64 * 1e-12
}

fn dgx_h100(sets: &[(&str, &str)]) -> Result<Topology, topology::TopologyError> {
    let over: Vec<Override> = sets
        .iter()
        .map(|&(k, v)| Override {
            key: k.into(),
            value: v.into(),
        })
        .collect();
    topology::load("dgx-h100", &over)
}

/// Past what one spine's ports reach, the fat tree has three levels (24 DGX
/// H100 nodes on 16-port switches: pods of 8 nodes, one leaf per rail and 8
/// spines each, cores `(s, j)` joining spine `s` of every pod, in rail
/// plane `j mod 8`): every link at the NIC speed or the width of the
/// switches it stands for, the
/// bisection full (half the NICs at 50 GB/s), a route between pods six
/// network links (NIC, leaf, spine, core, spine, leaf, NIC), and static
/// routing gives each core-to-spine and spine-to-leaf link one destination
/// node (D-mod-k: spine = node mod 8, core = node / 8 mod 8).
#[test]
fn three_level_fat_tree_routes_between_pods_through_the_cores() {
    let load = |routing: &str| {
        dgx_h100(&[
            ("nodes", "24"),
            ("network.switch_radix", "16"),
            ("network.routing", routing),
        ])
        .unwrap()
    };
    let level_count = |t: &topology::Topology, level: u32| {
        t.components()
            .iter()
            .filter(
                |c| matches!(c.kind, ComponentKind::NetworkSwitch { level: l, .. } if l == level),
            )
            .count()
    };
    for (routing, spines, cores) in [
        ("adaptive", 3, 8),
        ("destination", 24, 64),
        ("ecmp", 24, 64),
    ] {
        let t = load(routing);
        assert_eq!(
            (level_count(&t, 0), level_count(&t, 1), level_count(&t, 2)),
            (24, spines, cores),
            "{routing}"
        );
        assert_eq!(t.bisection_bandwidth().0, 96 * 50_000_000_000, "{routing}");
        for (a, b, want) in [(0u32, 8u32, 6usize), (0, 23, 6), (0, 7, 2)] {
            let route = t.route_devices(a * 8, b * 8, 0).unwrap();
            let net: Vec<_> = route
                .iter()
                .filter(|&&l| t.link(l).class == topology::LinkClass::Network)
                .collect();
            assert_eq!(net.len(), want, "{routing}: node {a} -> {b}");
        }
    }
    // Adaptive: one spine per pod, its link to a leaf as wide as the leaf's
    // 8 uplinks; one core per rail plane, its link to a pod's spine as wide
    // as the rail's eighth of the pod's 64 uplinks; a route keeps to the
    // core of its rail's plane.
    let t = load("adaptive");
    for l in t.links() {
        let (f, to) = (t.component(l.from), t.component(l.to));
        if let (ComponentKind::NetworkSwitch { .. }, ComponentKind::NetworkSwitch { .. }) =
            (&f.kind, &to.kind)
        {
            assert_eq!((l.bandwidth.0, l.lanes), (8 * 50_000_000_000, 8));
        }
    }
    for rail in 0..8u32 {
        let route = t.route_devices(rail, 8 * 8 + rail, 0).unwrap();
        let core = route
            .iter()
            .map(|&l| t.component(t.link(l).to))
            .find(|c| matches!(c.kind, ComponentKind::NetworkSwitch { level: 2, .. }))
            .unwrap();
        assert_eq!(core.rail, Some(rail), "{}", core.name);
    }
    // Destination: every rail-0 pair between pods, both ways.
    let t = load("destination");
    let mut down: std::collections::BTreeMap<(u32, u32), std::collections::BTreeSet<u32>> =
        Default::default();
    for a in 0..24u32 {
        for b in (0..24u32).filter(|b| b / 8 != a / 8) {
            for &l in &t.route_devices(a * 8, b * 8, 0).unwrap() {
                let link = t.link(l);
                let (f, to) = (t.component(link.from), t.component(link.to));
                if let (
                    ComponentKind::NetworkSwitch { level: x, .. },
                    ComponentKind::NetworkSwitch { level: y, .. },
                ) = (&f.kind, &to.kind)
                {
                    if x > y {
                        down.entry((link.from.0, link.to.0)).or_default().insert(b);
                    }
                }
            }
        }
    }
    // Each of the 24 destinations comes down one core-to-spine and one
    // spine-to-leaf link of its own.
    assert_eq!(down.len(), 48);
    assert!(
        down.values().all(|d| d.len() == 1),
        "{:?}",
        down.iter().find(|(_, d)| d.len() > 1)
    );
}

/// `network.oversubscription` tapers the leaves: at 2 (2:1) a leaf has half
/// the uplinks, so the spines (static routing) or the spine layer's width
/// (adaptive) halve and so does the bisection, on two levels (64 DGX H100
/// nodes) and three (512); a three-level tree's spines keep their core
/// uplinks. A value under 1, or not a number, is refused naming the field.
#[test]
fn oversubscription_tapers_the_leaves_uplinks_and_the_bisection() {
    let load = |nodes: u32, routing: &str, taper: &str| {
        let nodes = nodes.to_string();
        dgx_h100(&[
            ("nodes", &nodes),
            ("network.routing", routing),
            ("network.oversubscription", taper),
        ])
    };
    let spines = |t: &topology::Topology| {
        t.components()
            .iter()
            .filter(|c| matches!(c.kind, ComponentKind::NetworkSwitch { level: 1, .. }))
            .count()
    };
    let leaf_up_lanes = |t: &topology::Topology| -> u32 {
        t.links()
            .iter()
            .filter(|l| {
                matches!(
                    t.component(l.from).kind,
                    ComponentKind::NetworkSwitch { level: 0, .. }
                ) && matches!(
                    t.component(l.to).kind,
                    ComponentKind::NetworkSwitch { level: 1, .. }
                )
            })
            .map(|l| l.lanes)
            .sum()
    };
    const NIC: u64 = 50_000_000_000;
    for (nodes, leaves, static_spines) in [(64u32, 16u32, 32usize), (512, 128, 4 * 32)] {
        for (taper, div) in [("1", 1u32), ("2", 2), ("4", 4)] {
            let t = load(nodes, "adaptive", taper).unwrap();
            let half_nics = u64::from(nodes) * 8 / 2;
            assert_eq!(
                t.bisection_bandwidth().0,
                half_nics * NIC / u64::from(div),
                "{nodes} nodes, {taper}:1"
            );
            assert_eq!(
                leaf_up_lanes(&t),
                leaves * 32 / div,
                "{nodes} nodes, {taper}:1"
            );
            let t = load(nodes, "destination", taper).unwrap();
            assert_eq!(
                spines(&t),
                static_spines / div as usize,
                "{nodes} nodes, {taper}:1"
            );
            assert_eq!(
                t.bisection_bandwidth().0,
                half_nics * NIC / u64::from(div),
                "{nodes} nodes, {taper}:1 static"
            );
        }
    }
    // An all-to-all of one GPU per node over both leaves (64 MiB bf16 per
    // rank): a leaf's ranks send half their bytes across, 1 GiB per leaf,
    // through 8 NICs' worth of uplinks at 4:1 (at least 2.68 ms at line
    // rate), where the non-blocking tree is bound by each NIC (63 MiB).
    let all_to_all = |taper: &str| {
        let t = load(64, "adaptive", taper).unwrap();
        all_to_all_seconds(&t, (0..64).map(|k| 8 * k).collect(), 32 << 20)
    };
    let (open, tapered) = (all_to_all("1"), all_to_all("4"));
    let uplinks = (1u64 << 30) as f64 / (8.0 * NIC as f64);
    assert!(
        tapered >= uplinks,
        "{tapered} s under the uplinks' {uplinks} s"
    );
    assert!(
        tapered >= 1.5 * open,
        "4:1 {tapered} s against 1:1 {open} s"
    );
    for bad in ["0.5", "0", "-2", "nan", "\"two\""] {
        let err = load(64, "adaptive", bad).unwrap_err().to_string();
        assert!(err.contains("network.oversubscription"), "{bad}: {err}");
    }
}

/// A three-level tree's taper above the pods (`core_oversubscription`,
/// Meta's 1:7 above its 3,072-GPU pods): a pod spine keeps `32 / ratio` of
/// its 32 core uplinks (whole links: 7:1 keeps 4, an 8:1 cut), the cores and
/// the bisection shrink with them, rail planes stay while the rails split
/// the uplinks, and a route between pods still climbs to a core. Traffic
/// between pods meets the taper: an all-to-all over three pods of 16-port
/// switches sends two thirds of each rank's 256 MiB out of its pod, at 4:1
/// through a quarter of the NICs' worth of core uplinks (at least 14.3 ms;
/// 1:1 takes 14.6 ms, its pairwise exchange well under the NICs' rate). A two-level tree has no pods
/// to taper: refused, as are ratios under 1.
#[test]
fn core_oversubscription_tapers_the_pods_uplinks_and_the_bisection() {
    const NIC: u64 = 50_000_000_000;
    let load = |nodes: &str, routing: &str, ratio: &str| {
        dgx_h100(&[
            ("nodes", nodes),
            ("network.routing", routing),
            ("network.core_oversubscription", ratio),
        ])
    };
    let cores = |t: &Topology| {
        t.components()
            .iter()
            .filter(|c| matches!(c.kind, ComponentKind::NetworkSwitch { level: 2, .. }))
            .count()
    };
    let half_nics = 512 * 8 / 2;
    for (ratio, uplinks, planes) in [("1", 32u64, 8u32), ("2", 16, 8), ("4", 8, 8), ("7", 4, 1)] {
        for routing in ["adaptive", "destination", "ecmp"] {
            let t = load("512", routing, ratio).unwrap();
            let tree = t.fat_tree().unwrap();
            assert_eq!(
                (tree.core_uplinks, tree.cores, tree.planes),
                (uplinks as u32, 32 * uplinks as u32, planes),
                "{ratio}:1 {routing}"
            );
            assert_eq!(
                t.bisection_bandwidth().0,
                half_nics * NIC * uplinks / 32,
                "{ratio}:1 {routing}"
            );
            if routing != "adaptive" {
                assert_eq!(cores(&t), 32 * uplinks as usize, "{ratio}:1 {routing}");
            }
            // GPU 0 of node 0 to GPU 0 of node 511 (pods 0 and 3).
            let network = t
                .route_devices(0, 511 * 8, 0)
                .unwrap()
                .iter()
                .filter(|&&l| t.link(l).class == topology::LinkClass::Network)
                .count();
            assert_eq!(network, 6, "{ratio}:1 {routing}");
        }
    }
    let all_to_all = |ratio: &str| {
        let t = dgx_h100(&[
            ("nodes", "24"),
            ("network.switch_radix", "16"),
            ("network.core_oversubscription", ratio),
        ])
        .unwrap();
        assert_eq!(t.fat_tree().unwrap().pods.unwrap().count, 3);
        all_to_all_seconds(&t, (0..192).collect(), 128 << 20)
    };
    let (open, tapered) = (all_to_all("1"), all_to_all("4"));
    // 64 ranks of a pod each send two thirds of their 256 MiB out of it,
    // through 8 spines x 2 core uplinks.
    let floor = 64.0 * (2.0 / 3.0) * (256u64 << 20) as f64 / (16.0 * NIC as f64);
    assert!(
        tapered >= floor,
        "{tapered} s under the core uplinks' {floor} s"
    );
    assert!(
        tapered >= 1.2 * open,
        "4:1 {tapered} s against 1:1 {open} s"
    );
    let err = load("64", "adaptive", "2").unwrap_err().to_string();
    assert!(
        err.contains("core_oversubscription 2 tapers the links above a three-level tree's pods, but 64 nodes of 8 rails fit two levels"),
        "{err}"
    );
    for bad in ["0.5", "0", "nan"] {
        let err = load("512", "adaptive", bad).unwrap_err().to_string();
        assert!(
            err.contains("network.core_oversubscription"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn ring_goes_the_short_way_and_ties_go_up() {
    let t = topology::load("ring:6", &[]).unwrap();
    let names = |r: Vec<topology::LinkId>| -> Vec<String> {
        r.iter()
            .map(|&l| t.component(t.link(l).to).name.clone())
            .collect()
    };
    assert_eq!(names(t.route_devices(0, 5, 0).unwrap()), ["gpu5"]);
    assert_eq!(names(t.route_devices(0, 2, 0).unwrap()), ["gpu1", "gpu2"]);
    // Distance 3 either way: go up.
    assert_eq!(
        names(t.route_devices(1, 4, 0).unwrap()),
        ["gpu2", "gpu3", "gpu4"]
    );
    assert_eq!(
        names(t.route_devices(4, 1, 0).unwrap()),
        ["gpu5", "gpu0", "gpu1"]
    );
}

#[test]
fn nvlink_is_preferred_over_pcie_inside_a_node() {
    let t = topology::load("dgx-h100", &[]).unwrap();
    for d in 1..8 {
        let r = t.route_devices(0, d, 3).unwrap();
        assert_eq!(r.len(), 2);
        assert!(r
            .iter()
            .all(|&l| t.link(l).class == topology::LinkClass::Nvlink));
    }
}

/// Fat trees with several leaves per rail and a spine layer (dgx-h100 at 24
/// to 72 nodes, small switches), where the goal-directed search prunes most
/// of the machine: every device pair of a sample routes as the full search.
#[test]
fn goal_directed_routes_equal_the_full_search_on_fat_trees() {
    for (nodes, radix) in [(24u32, 64u32), (40, 64), (72, 128), (9, 16), (24, 16)] {
        let t = topology::load(
            "dgx-h100",
            &[
                Override {
                    key: "nodes".into(),
                    value: nodes.to_string(),
                },
                Override {
                    key: "network.switch_radix".into(),
                    value: radix.to_string(),
                },
            ],
        )
        .unwrap();
        let ends = endpoints(&t);
        let n = ends.len();
        for i in (0..n).step_by(7) {
            for j in [0, 1, 8, 9, 63, n / 2 + 3, n - 1] {
                let (s, d) = (ends[i], ends[(i + j) % n]);
                let flow = ((i as u64) << 32) | j as u64;
                assert_eq!(
                    t.route(s, d, flow).unwrap(),
                    t.route_reference(s, d, flow).unwrap(),
                    "{nodes} nodes: {s:?} -> {d:?}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// `neighbour_classes` on grids extends routes one link at a time
    /// instead of walking each: the same classes as grouping every route.
    #[test]
    fn grid_neighbour_classes_equal_grouped_routes(
        spec in prop_oneof![
            (2u32..40).prop_map(|n| format!("ring:{n}")),
            (1u32..6, 1u32..6).prop_map(|(r, c)| format!("mesh2d:{r}x{c}")),
            (1u32..4, 1u32..4, 1u32..5).prop_map(|(a, b, c)| format!("tpu-v4:{a}x{b}x{c}")),
        ],
        from in any::<prop::sample::Index>(),
    ) {
        let t = topology::load(&spec, &[]).unwrap();
        let from = from.index(t.num_devices() as usize) as u32;
        let mut expected: std::collections::BTreeMap<_, u32> = std::collections::BTreeMap::new();
        for to in (0..t.num_devices()).filter(|&d| d != from) {
            let route = t.route_devices(from, to, 0).unwrap();
            let mut classes = Vec::new();
            for &l in &route {
                if !classes.contains(&t.link(l).class) {
                    classes.push(t.link(l).class);
                }
            }
            let bw = route.iter().map(|&l| t.link(l).bandwidth).min().unwrap();
            let lat: u64 = route.iter().map(|&l| t.link(l).latency.0).sum();
            *expected.entry((*classes.iter().max().unwrap(), classes, route.len() as u32, bw, lat)).or_default() += 1;
        }
        let got: Vec<_> = t.neighbour_classes(from).unwrap().into_iter()
            .map(|c| ((c.class, c.path_classes, c.hops, c.bandwidth, c.latency.0), c.peers))
            .collect();
        prop_assert_eq!(got, expected.into_iter().collect::<Vec<_>>());
    }
}
