//! Preset figures against hardware.md (GB = 1e9 bytes, figures per direction)
//! and bisection bandwidths against closed forms.

use shardsim::base::DType;
use shardsim::mesh::{AxisRef, Mesh};
use shardsim::topology::{self, ComponentKind, LinkClass, MeshMapping, Override, Topology};

const GB: u64 = 1_000_000_000;
const TFLOPS: u64 = 1_000_000_000_000;

fn load(name: &str) -> Topology {
    topology::load(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn load_nodes(name: &str, nodes: u32) -> Topology {
    let o = Override {
        key: "nodes".into(),
        value: nodes.to_string(),
    };
    topology::load(name, &[o]).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The links of class `class` leaving device `d`.
fn device_links(t: &Topology, d: u32, class: LinkClass) -> Vec<&topology::Link> {
    let c = t.device(d).unwrap();
    t.out_links(c)
        .into_iter()
        .map(|l| t.link(l))
        .filter(|l| l.class == class)
        .collect()
}

/// One row of hardware.md's GPU table, as the preset must give it.
struct NodeFigures {
    preset: &'static str,
    nvlink_per_direction: u64,
    nvlink_lanes: u32,
    lane_bandwidth: u64,
    hbm_bandwidth: u64,
    bf16: u64,
    pcie_x16: u64,
    nic: u64,
    in_switch_reduction: bool,
}

const NODES: &[NodeFigures] = &[
    // H100 SXM5: 18 links x 25 GB/s = 450 GB/s per direction; HBM3 3,350 GB/s; BF16 989 TFLOP/s;
    // PCIe Gen5 x16 63.0 GB/s; NDR 400 Gb/s NICs, one per GPU.
    NodeFigures {
        preset: "dgx-h100",
        nvlink_per_direction: 450 * GB,
        nvlink_lanes: 18,
        lane_bandwidth: 25 * GB,
        hbm_bandwidth: 3350 * GB,
        bf16: 989 * TFLOPS,
        pcie_x16: 63 * GB,
        nic: 400 * GB / 8,
        in_switch_reduction: true,
    },
    // A100 SXM4: 12 links x 25 GB/s = 300 GB/s per direction; HBM2e 2,039 GB/s (80 GB);
    // BF16 312 TFLOP/s; PCIe Gen4 x16 31.5 GB/s; HDR 200 Gb/s NICs.
    NodeFigures {
        preset: "dgx-a100",
        nvlink_per_direction: 300 * GB,
        nvlink_lanes: 12,
        lane_bandwidth: 25 * GB,
        hbm_bandwidth: 2039 * GB,
        bf16: 312 * TFLOPS,
        pcie_x16: 31_500_000_000,
        nic: 200 * GB / 8,
        in_switch_reduction: false,
    },
    // H200 SXM: H100's NVLink4 and compute, NDR NICs, PCIe Gen5; 4.8 TB/s HBM3e (datasheet).
    NodeFigures {
        preset: "hgx-h200",
        nvlink_per_direction: 450 * GB,
        nvlink_lanes: 18,
        lane_bandwidth: 25 * GB,
        hbm_bandwidth: 4800 * GB,
        bf16: 989 * TFLOPS,
        pcie_x16: 63 * GB,
        nic: 400 * GB / 8,
        in_switch_reduction: true,
    },
];

#[test]
fn node_presets_match_hardware_md() {
    for f in NODES {
        let t = load(f.preset);
        assert_eq!(t.num_devices(), 8, "{}: 8 GPUs", f.preset);
        for d in 0..8 {
            let nv = device_links(&t, d, LinkClass::Nvlink);
            assert_eq!(
                nv.len(),
                1,
                "{}: one NVLink bundle to the NVSwitch",
                f.preset
            );
            assert_eq!(nv[0].bandwidth.0, f.nvlink_per_direction, "{}", f.preset);
            assert_eq!(nv[0].lanes, f.nvlink_lanes, "{}", f.preset);
            assert_eq!(
                nv[0].bandwidth.0 / nv[0].lanes as u64,
                f.lane_bandwidth,
                "{}",
                f.preset
            );
            assert!(nv[0].full_duplex);
            assert!(matches!(
                t.component(nv[0].to).kind,
                ComponentKind::NvSwitch { in_switch_reduction } if in_switch_reduction == f.in_switch_reduction
            ));
            let pcie = device_links(&t, d, LinkClass::Pcie);
            assert_eq!(pcie.len(), 1);
            assert_eq!(pcie[0].bandwidth.0, f.pcie_x16, "{}", f.preset);
            assert_eq!(pcie[0].lanes, 16);
            let gpu = t.component(t.device(d).unwrap());
            assert_eq!(gpu.flops[&DType::BF16].0, f.bf16, "{}", f.preset);
            let hbm = t.memory_scope(gpu.id, "global").unwrap();
            assert_eq!(hbm.bandwidth.0, f.hbm_bandwidth, "{}", f.preset);
        }
        let nics: Vec<_> = t
            .components()
            .iter()
            .filter(|c| c.kind == ComponentKind::Nic)
            .collect();
        assert_eq!(nics.len(), 8, "{}: 8 compute NICs", f.preset);
        // With two nodes, each NIC's network link runs at the port speed;
        // the spine layer (adaptive routing: one switch for it) meets each
        // leaf with both spines' ports.
        let two = load_nodes(f.preset, 2);
        let (to_nics, to_spine): (Vec<_>, Vec<_>) = two
            .links()
            .iter()
            .filter(|l| l.class == LinkClass::Network)
            .partition(|l| {
                [l.from, l.to]
                    .iter()
                    .any(|&c| two.component(c).kind == ComponentKind::Nic)
            });
        assert_eq!(to_nics.len(), 2 * 2 * 8, "{}", f.preset);
        assert!(
            to_nics.iter().all(|l| l.bandwidth.0 == f.nic),
            "{}",
            f.preset
        );
        assert_eq!(to_spine.len(), 2 * 8, "{}: a leaf per rail", f.preset);
        assert!(
            to_spine
                .iter()
                .all(|l| l.bandwidth.0 == 2 * f.nic && l.lanes == 2),
            "{}",
            f.preset
        );
    }
}

#[test]
fn nodes_are_rail_aligned() {
    // GPU k of one node reaches GPU k of another through one leaf switch (rail k):
    // exactly two network links, none to a spine.
    let t = load_nodes("dgx-h100", 4);
    assert_eq!(t.num_devices(), 32);
    for k in 0..8 {
        for node in 1..4 {
            let route = t.route_devices(k, node * 8 + k, 7).unwrap();
            let net: Vec<_> = route
                .iter()
                .map(|&l| t.link(l))
                .filter(|l| l.class == LinkClass::Network)
                .collect();
            assert_eq!(net.len(), 2, "gpu {k} to node {node}");
            let leaf = t.component(net[0].to);
            assert_eq!(leaf.name, format!("leaf.r{k}.0"));
        }
    }
}

#[test]
fn bisection_matches_closed_forms() {
    let cases: &[(&str, u32, u64)] = &[
        // 4 GPUs x 450 GB/s into the NVSwitch, plus 2 PCIe x16 uplinks (63 GB/s) through the host.
        ("dgx-h100", 1, 4 * 450 * GB + 2 * 63 * GB),
        ("dgx-a100", 1, 4 * 300 * GB + 2 * 31_500_000_000),
        // Nodes 0 and 1 send through their 8 + 8 NICs of 400 Gb/s (non-blocking fat tree).
        ("dgx-h100", 2, 8 * 50 * GB),
        ("dgx-h100", 4, 16 * 50 * GB),
        ("dgx-a100", 2, 8 * 25 * GB),
    ];
    for &(name, nodes, expect) in cases {
        assert_eq!(
            load_nodes(name, nodes).bisection_bandwidth().0,
            expect,
            "{name} x{nodes}"
        );
    }
    let direct: &[(&str, u64)] = &[
        // Cutting a 4x4x4 torus across dimension 0 cuts 16 rings twice.
        ("tpu-v4:4x4x4", 2 * 16 * 50 * GB),
        // 4x4x8: 4 x 8 = 32 rings along dimension 0, each cut twice.
        ("tpu-v4:4x4x8", 2 * 32 * 50 * GB),
        ("ring:8", 2 * 225 * GB),
        ("ring:2", 225 * GB),
        ("switch:8", 4 * 450 * GB),
        ("mesh2d:2x4", 4 * 100 * GB),
        ("mesh2d:4x4", 4 * 100 * GB),
        // GPUs 0-3 share one PCIe switch; the only way out is its x16 uplink.
        ("pcie-box:8", 31_500_000_000),
    ];
    for &(name, expect) in direct {
        assert_eq!(load(name).bisection_bandwidth().0, expect, "{name}");
    }
}

#[test]
fn nvlink_override_changes_the_figures() {
    let o = Override::parse("nvlink.bandwidth=900GB/s").unwrap();
    let t = topology::load("dgx-h100", &[o]).unwrap();
    assert_eq!(
        device_links(&t, 3, LinkClass::Nvlink)[0].bandwidth.0,
        900 * GB
    );
    assert_eq!(t.bisection_bandwidth().0, 4 * 900 * GB + 2 * 63 * GB);
    let n = t.neighbour_classes(0).unwrap();
    assert_eq!(n[0].class, LinkClass::Nvlink);
    assert_eq!(n[0].peers, 7);
    assert_eq!(n[0].bandwidth.0, 900 * GB);
}

#[test]
fn memory_scopes_and_host_copies() {
    let t = load("dgx-h100");
    let gpu = t.device(5).unwrap();
    let global = t.memory_scope(gpu, "global").unwrap();
    assert_eq!(global.capacity.0, 80 << 30);
    assert_eq!(global.location, gpu);
    let host = t.memory_scope(gpu, "host").unwrap();
    assert_eq!(host.capacity.0, 2 << 40);
    // Pinned host memory is read at PCIe Gen5 x16 speed, below the DRAM's 614.4 GB/s.
    assert_eq!(host.bandwidth.0, 63 * GB);
    // A copy from the host scope to the device crosses PCIe only: host -> PCIe switch -> GPU.
    let route = t.copy_route(5, "host", "global", 0).unwrap();
    assert_eq!(route, t.route(host.location, gpu, 0).unwrap());
    assert_eq!(route.len(), 2);
    assert!(route.iter().all(|&l| t.link(l).class == LinkClass::Pcie));
    assert_eq!(t.link(route[1]).to, gpu);
    // Both ends on the device: no links.
    assert!(t.copy_route(5, "global", "global", 0).unwrap().is_empty());
    let err = t
        .copy_route(5, "shared", "global", 0)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "n0.gpu5 has no memory scope \"shared\" (it has: global, host)"
    );
}

#[test]
fn mesh_axes_cross_the_expected_link_classes() {
    let t = load_nodes("dgx-h100", 2);
    let mesh = Mesh::from_pairs(&[("node", 2), ("gpu", 8)]).unwrap();
    let m = MeshMapping::new(&t, &mesh).unwrap();
    assert_eq!(t.component(m.component_at(9)).name, "n1.gpu1");
    let gpu = m.axis_link_classes(&[AxisRef::full("gpu")]).unwrap();
    assert_eq!(gpu.into_iter().collect::<Vec<_>>(), vec![LinkClass::Nvlink]);
    let node = m.axis_link_classes(&[AxisRef::full("node")]).unwrap();
    assert_eq!(
        node.into_iter().collect::<Vec<_>>(),
        vec![LinkClass::Pcie, LinkClass::Network]
    );
    assert_eq!(
        m.axis_bottleneck(&[AxisRef::full("gpu")])
            .unwrap()
            .unwrap()
            .0,
        450 * GB
    );
    assert_eq!(
        m.axis_bottleneck(&[AxisRef::full("node")])
            .unwrap()
            .unwrap()
            .0,
        50 * GB
    );

    let small = Mesh::from_pairs(&[("x", 8)]).unwrap();
    let err = MeshMapping::new(&t, &small).unwrap_err().to_string();
    assert_eq!(err, "the mesh has 8 devices but the topology has 16");

    let tpu = load("tpu-v4:4x4x4");
    let mesh = Mesh::from_pairs(&[("x", 4), ("y", 4), ("z", 4)]).unwrap();
    let m = MeshMapping::new(&tpu, &mesh).unwrap();
    for axis in ["x", "y", "z"] {
        let routes = m.axis_routes(&[AxisRef::full(axis)]).unwrap();
        // 16 rings of 4 along each axis; torus neighbours are one ICI hop apart.
        assert_eq!(routes.len(), 16 * 4);
        assert!(routes
            .iter()
            .all(|r| r.len() == 1 && tpu.link(r[0]).class == LinkClass::Ici));
    }
}

#[test]
fn every_preset_summarizes() {
    for name in topology::preset_names() {
        let t = load(name);
        let s = t.summary().unwrap();
        assert_eq!(s.devices, t.num_devices());
        let peers: u32 = s.neighbours.iter().map(|n| n.peers).sum();
        assert_eq!(
            peers,
            t.num_devices() - 1,
            "{name}: every other device is reached"
        );
        assert!(s.bisection.0 > 0, "{name}");
    }
}

#[test]
fn parameterized_names_set_dims() {
    assert_eq!(load("ring:16").num_devices(), 16);
    assert_eq!(load("tpu-v4:4x4x8").num_devices(), 128);
    assert_eq!(load("mesh2d:3x5").num_devices(), 15);
    assert_eq!(load("pcie-box:4").num_devices(), 4);
    assert_eq!(load("switch:32").num_devices(), 32);
    assert_eq!(load_nodes("hgx-h200", 3).num_devices(), 24);
}

#[test]
fn parameterized_names_keep_the_presets_number_of_dims() {
    for (name, says) in [
        (
            "tpu-v4:4x4",
            "tpu-v4 takes 3 dimension(s) such as tpu-v4:4x4x4, not 2",
        ),
        (
            "mesh2d:8",
            "mesh2d takes 2 dimension(s) such as mesh2d:2x4, not 1",
        ),
        (
            "ring:4x4",
            "ring takes 1 dimension(s) such as ring:8, not 2",
        ),
    ] {
        let err = shardsim::topology::load(name, &[]).unwrap_err().to_string();
        assert!(err.contains(says), "{name}: {err}");
    }
}

/// The AWS presets: the GPUs and NVLink of the DGX presets with the same
/// GPU, the instance's EFA (AWS's instance pages: p5.48xlarge 3,200 Gb/s
/// as 32 x 100 Gb/s, seen by NCCL through aws-ofi-nccl as 8 devices of 4
/// rails; p4de.24xlarge 400 Gb/s as 4 x 100 Gb/s, each NIC shared by a GPU
/// pair), each NIC link carrying half of aws-ofi-nccl's 20 + 3 us per
/// network step, and no in-network reduction.
#[test]
fn aws_presets_describe_their_efa_fabric() {
    for (name, dgx, nics, nic_bits, gpus_per_nic) in [
        ("aws-p5", "dgx-h100", 8usize, 400u64, 1usize),
        ("aws-p4de", "dgx-a100", 4, 100, 2),
    ] {
        let (t, d) = (load_nodes(name, 2), load_nodes(dgx, 2));
        assert_eq!(t.num_devices(), 16, "{name}");
        for dev in 0..8 {
            for class in [LinkClass::Nvlink, LinkClass::Pcie] {
                let (a, b) = (device_links(&t, dev, class), device_links(&d, dev, class));
                assert_eq!(a[0].bandwidth, b[0].bandwidth, "{name} {class:?}");
            }
            let (g, h) = (
                t.component(t.device(dev).unwrap()),
                d.component(d.device(dev).unwrap()),
            );
            assert_eq!(g.flops, h.flops, "{name}");
        }
        let node_nics: Vec<_> = t
            .components()
            .iter()
            .filter(|c| c.kind == ComponentKind::Nic && c.name.starts_with("n0."))
            .collect();
        assert_eq!(node_nics.len(), nics, "{name}");
        assert_eq!(nics * gpus_per_nic, 8, "{name}");
        // The NICs' links (the spine layer's are as wide as a leaf's
        // uplinks together).
        let net: Vec<_> = t
            .links()
            .iter()
            .filter(|l| {
                l.class == LinkClass::Network
                    && [l.from, l.to]
                        .iter()
                        .any(|&c| t.component(c).kind == ComponentKind::Nic)
            })
            .collect();
        assert_eq!(net.len(), 2 * 2 * nics, "{name}");
        assert!(
            net.iter().all(|l| l.bandwidth.0 == nic_bits * GB / 8),
            "{name}"
        );
        // Per instance: 3.2 Tb/s (p5), 400 Gb/s (p4de).
        assert_eq!(
            nics as u64 * nic_bits,
            [3200, 400][usize::from(name == "aws-p4de")]
        );
        // NIC -> leaf and leaf -> NIC: (20 + 3) us per crossing.
        let nic_links: Vec<_> = net
            .iter()
            .filter(|l| {
                [l.from, l.to]
                    .iter()
                    .any(|&c| t.component(c).kind == ComponentKind::Nic)
            })
            .collect();
        assert!(!nic_links.is_empty());
        assert!(
            nic_links.iter().all(|l| 2 * l.latency_ps() == 23_000_000),
            "{name}"
        );
        assert!(!t.components().iter().any(|c| matches!(
            c.kind,
            ComponentKind::NetworkSwitch {
                in_switch_reduction: true,
                ..
            }
        )));
    }
}
