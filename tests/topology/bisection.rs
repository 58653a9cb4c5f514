//! The contracted bisection max flow equals the plain max flow over every
//! component and link: on presets of several sizes (stars, NVSwitch nodes,
//! fat trees, rings, tori, PCIe trees) and on random hand-written
//! (explicit) topologies, where only the general path applies.

use proptest::prelude::*;

use shardsim::topology::{self, Override, Topology};

fn load(spec: &str, sets: &[(&str, &str)]) -> Topology {
    let o: Vec<Override> = sets
        .iter()
        .map(|(k, v)| Override {
            key: (*k).into(),
            value: (*v).into(),
        })
        .collect();
    topology::load(spec, &o).unwrap_or_else(|e| panic!("{spec} {sets:?}: {e}"))
}

#[test]
fn contracted_bisection_equals_the_full_max_flow_on_presets() {
    let mut cases: Vec<(String, Vec<(&str, String)>)> = Vec::new();
    for n in [2, 3, 5, 8, 17, 64] {
        cases.push((format!("ring:{n}"), vec![]));
        cases.push((format!("switch:{n}"), vec![]));
    }
    for n in [1, 3, 7, 9] {
        cases.push((format!("pcie-box:{n}"), vec![]));
    }
    for s in ["mesh2d:3x5", "mesh2d:4x4", "tpu-v4:2x3x4", "tpu-v4:4x4x4"] {
        cases.push((s.to_string(), vec![]));
    }
    for nodes in [1, 2, 3, 5, 8] {
        cases.push(("dgx-h100".into(), vec![("nodes", nodes.to_string())]));
        cases.push(("dgx-a100".into(), vec![("nodes", nodes.to_string())]));
    }
    for dims in [4, 6, 16, 50, 256] {
        cases.push(("dgx-h100".into(), vec![("dims", format!("[{dims}]"))]));
    }
    for (spec, sets) in cases {
        let sets: Vec<(&str, &str)> = sets.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let t = load(&spec, &sets);
        assert_eq!(
            t.bisection_bandwidth(),
            t.bisection_bandwidth_reference(),
            "{spec} {sets:?}"
        );
    }
}

/// A hand-written topology: `devices` devices, switches of the given kinds,
/// and links `(from, to, bandwidth in GB/s, full duplex)` between component
/// indices (devices first). Few bandwidths, so that alike components occur.
fn explicit(devices: usize, switches: &[&str], links: &[(usize, usize, u32, bool)]) -> String {
    let mut s = String::from(
        "format = 1\nname = \"random\"\nlayout = \"explicit\"\n[device]\nkind = \"gpu\"\n\
         model = \"test GPU\"\nflops = { bf16 = \"100TFLOP/s\" }\n\
         memory = [ { scope = \"global\", capacity = \"24GiB\", bandwidth = \"900GB/s\" } ]\n",
    );
    for d in 0..devices {
        s += &format!("[[component]]\nname = \"c{d}\"\nkind = \"device\"\n");
    }
    for (i, kind) in switches.iter().enumerate() {
        s += &format!(
            "[[component]]\nname = \"c{}\"\nkind = \"{kind}\"\n",
            devices + i
        );
    }
    for &(a, b, bw, duplex) in links {
        s += &format!(
            "[[link]]\nfrom = \"c{a}\"\nto = \"c{b}\"\nclass = \"pcie\"\nbandwidth = \"{bw}GB/s\"\n\
             latency = \"1us\"\nfull_duplex = {duplex}\n"
        );
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn contracted_bisection_equals_the_full_max_flow_on_random_topologies(
        devices in 2usize..9,
        switches in prop::collection::vec(prop::sample::select(vec!["pcie-switch", "network-switch", "nic", "nvswitch"]), 0..6),
        raw in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), prop::sample::select(vec![10u32, 20, 30]), any::<bool>()), 1..24),
    ) {
        let total = devices + switches.len();
        let links: Vec<(usize, usize, u32, bool)> = raw
            .iter()
            .map(|(a, b, bw, d)| (a.index(total), b.index(total), *bw, *d))
            .filter(|(a, b, _, _)| a != b)
            .collect();
        let text = explicit(devices, &switches, &links);
        let t = topology::load_text(&text, "random.toml", &[]).unwrap();
        prop_assert_eq!(t.bisection_bandwidth(), t.bisection_bandwidth_reference());
    }
}
