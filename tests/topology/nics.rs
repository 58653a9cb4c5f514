//! Node layouts with several NICs per GPU, or NICs shared by GPUs (`[nic]
//! count` / `gpus`): each NIC its own component on its own rail, with its
//! own PCIe link and leaf port; a GPU's channels leave through its NIC
//! `lane` (`route_devices_lane`). Figures from the machines' own
//! descriptions: OCI BM.GPU4.8, 16 x 100 Gb/s (two per GPU, OCI's NCCL
//! topology file); AWS p4de, 4 x 100 Gb/s (one per GPU pair).

use shardsim::topology::{self, ComponentKind, LinkClass, Override, Topology};

fn load(set: &[(&str, &str)]) -> Topology {
    let over: Vec<Override> = set
        .iter()
        .map(|&(k, v)| Override {
            key: k.into(),
            value: v.into(),
        })
        .collect();
    topology::load("dgx-a100", &over).unwrap_or_else(|e| panic!("{set:?}: {e}"))
}

fn oci() -> Topology {
    load(&[
        ("nodes", "2"),
        ("nic.count", "16"),
        ("nic.bandwidth", "100Gb/s"),
    ])
}

/// The component named `name`.
fn named(t: &Topology, name: &str) -> shardsim::topology::ComponentId {
    t.components()
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .id
}

/// Names of the NICs a route passes.
fn nics_on(t: &Topology, route: &[shardsim::topology::LinkId]) -> Vec<String> {
    route
        .iter()
        .map(|&l| t.component(t.link(l).to))
        .filter(|c| c.kind == ComponentKind::Nic)
        .map(|c| c.name.clone())
        .collect()
}

#[test]
fn sixteen_nics_two_per_gpu_each_on_its_own_rail_and_port() {
    let t = oci();
    for node in 0..2u32 {
        let nics: Vec<_> = t
            .components()
            .iter()
            .filter(|c| c.kind == ComponentKind::Nic && c.node == Some(node))
            .collect();
        assert_eq!(nics.len(), 16);
        // Network bandwidth out of a node: 16 x 100 Gb/s = 1.6 Tb/s = 200 GB/s.
        let out: u64 = t
            .links()
            .iter()
            .filter(|l| l.class == LinkClass::Network && nics.iter().any(|n| n.id == l.from))
            .map(|l| l.bandwidth.0)
            .sum();
        assert_eq!(out, 16 * 100_000_000_000 / 8);
        for (r, nic) in nics.iter().enumerate() {
            assert_eq!(nic.rail, Some(r as u32));
            // One leaf port, on the NIC's own rail.
            let leaves: Vec<_> = t
                .links()
                .iter()
                .filter(|l| l.from == nic.id && l.class == LinkClass::Network)
                .map(|l| t.component(l.to))
                .collect();
            assert_eq!(leaves.len(), 1, "{}", nic.name);
            assert_eq!(leaves[0].rail, Some(r as u32), "{}", nic.name);
            // Its own PCIe link, to the switch of GPU r / 2.
            let pcie: Vec<_> = t
                .links()
                .iter()
                .filter(|l| l.from == nic.id && l.class == LinkClass::Pcie)
                .map(|l| l.to)
                .collect();
            assert_eq!(pcie.len(), 1, "{}", nic.name);
            let gpu = named(&t, &format!("n{node}.gpu{}", r / 2));
            assert!(
                t.links()
                    .iter()
                    .any(|l| l.from == gpu && l.to == pcie[0] && l.class == LinkClass::Pcie),
                "{} beside GPU {}",
                nic.name,
                r / 2
            );
        }
        for g in 0..8u32 {
            let gpu = t.component(named(&t, &format!("n{node}.gpu{g}")));
            assert_eq!(gpu.nic_rails, vec![2 * g, 2 * g + 1]);
        }
    }
    assert_eq!(t.nic_lanes(&(0..16).collect::<Vec<_>>()), 2);
}

#[test]
fn a_gpus_lanes_leave_through_its_own_nics() {
    let t = oci();
    for g in 0..8u32 {
        for lane in 0..4u32 {
            let r = t.route_devices_lane(g, 8 + g, 0, lane).unwrap();
            let nic = 2 * g + lane % 2;
            assert_eq!(
                nics_on(&t, &r),
                vec![format!("n0.nic{nic}"), format!("n1.nic{nic}")],
                "GPU {g} lane {lane}"
            );
        }
        // Lane 0 is the plain route.
        assert_eq!(
            t.route_devices_lane(g, 8 + g, 0, 0).unwrap(),
            t.route_devices(g, 8 + g, 0).unwrap()
        );
    }
}

#[test]
fn shared_nics_serve_their_gpu_pair_on_every_lane() {
    // p4de: 4 NICs, NIC k shared by GPUs 2k and 2k+1; written as a count
    // or as the list of each NIC's GPUs, the same machine.
    let count = load(&[
        ("nodes", "2"),
        ("nic.count", "4"),
        ("nic.bandwidth", "100Gb/s"),
    ]);
    let listed = load(&[
        ("nodes", "2"),
        ("nic.gpus", "[[0, 1], [2, 3], [4, 5], [6, 7]]"),
        ("nic.bandwidth", "100Gb/s"),
    ]);
    for t in [&count, &listed] {
        for g in 0..8u32 {
            let gpu = t.component(named(t, &format!("n0.gpu{g}")));
            assert_eq!(gpu.nic_rails, vec![g / 2]);
            for lane in 0..2 {
                let r = t.route_devices_lane(g, 8 + g, 0, lane).unwrap();
                let nic = g / 2;
                assert_eq!(
                    nics_on(t, &r),
                    vec![format!("n0.nic{nic}"), format!("n1.nic{nic}")]
                );
            }
        }
        assert_eq!(t.nic_lanes(&[0, 1, 8]), 1);
    }
    // The default (one NIC per GPU) is the list [0, 1, ..., 7].
    let one = load(&[("nodes", "2")]);
    let listed = load(&[("nodes", "2"), ("nic.gpus", "[0, 1, 2, 3, 4, 5, 6, 7]")]);
    assert_eq!(one.links(), listed.links());
}

/// Bad NIC layouts on the command line: the file's line and column of the
/// offending entry, or the `--set` named, and exit 2.
#[test]
fn bad_nic_layouts_exit_2_located() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardsim"))
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    let bad = crate::common::fixture("topology/bad/nic_names_missing_gpu.toml");
    let (code, err) = run(&["topology", "show", bad.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("nic_names_missing_gpu.toml:37:9: field `nic.gpus`: NIC 3 names GPU 9"),
        "{err}"
    );
    let (code, err) = run(&[
        "collective",
        "--topology",
        "dgx-a100",
        "--nodes",
        "2",
        "--set",
        "nic.count=0",
        "--sizes",
        "1MiB",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("nic.count=0") && err.contains("at least one NIC"),
        "{err}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Any even NIC layout (k NICs per GPU, or one NIC per s GPUs) on two
    /// nodes of `gpus`: every GPU lists its NICs in NIC order, and a route
    /// between two GPUs of the same local index on `lane` leaves and enters
    /// through NIC `lane mod k` of each (the shared NIC when s > 1), with
    /// lanes past k wrapping around. A NIC shared by GPUs of two PCIe
    /// switches is refused.
    #[test]
    fn lane_routes_take_the_lanes_nic(
        gpus in proptest::sample::select(vec![2u32, 4, 8]),
        per in proptest::sample::select(vec![-4i32, -2, 1, 2, 3, 4]),
        g in 0u32..8,
        lane in 0u32..9,
    ) {
        let count = if per > 0 { gpus * per as u32 } else { (gpus / per.unsigned_abs()).max(1) };
        let g = g % gpus;
        if count < gpus && gpus / count > 2 {
            // dgx-a100 has 2 GPUs per PCIe switch: a NIC cannot serve GPUs
            // of two switches (it was built and routed through the wrong NIC).
            let over: Vec<Override> = [("nodes", "2".to_string()), ("dims", format!("[{gpus}]")), ("nic.count", count.to_string())]
                .into_iter()
                .map(|(k, v)| Override { key: k.into(), value: v })
                .collect();
            let err = topology::load("dgx-a100", &over).err().map(|e| e.to_string()).unwrap_or_default();
            proptest::prop_assert!(err.contains("on different PCIe switches"), "{}", err);
            return Ok(());
        }
        let t = load(&[
            ("nodes", "2"),
            ("dims", &format!("[{gpus}]")),
            ("nic.count", &count.to_string()),
        ]);
        let rails = t.component(named(&t, &format!("n0.gpu{g}"))).nic_rails.clone();
        let want: Vec<u32> = if count >= gpus {
            let k = count / gpus;
            (g * k..(g + 1) * k).collect()
        } else {
            vec![g / (gpus / count)]
        };
        proptest::prop_assert_eq!(&rails, &want);
        let r = t.route_devices_lane(g, gpus + g, 0, lane).unwrap();
        let nic = rails[(lane as usize) % rails.len()];
        proptest::prop_assert_eq!(
            nics_on(&t, &r),
            vec![format!("n0.nic{nic}"), format!("n1.nic{nic}")]
        );
    }
}
