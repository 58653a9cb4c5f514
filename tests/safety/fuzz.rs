//! Fuzz targets, one per input format: mutated copies of real inputs (byte
//! flips, insertions of hostile tokens, deletions, duplications, truncation,
//! numbers swapped for huge or edge values)
//! must give `Ok` or a typed error, never a panic. Seeded and deterministic
//! (proptest's fixed seed); `shardsim bench fuzz` runs 10,000 cases per format.

use proptest::prelude::*;

use shardsim::base::hostile::{HOSTILE_NUMBERS, HOSTILE_TOKENS as HOSTILE};
use shardsim::ir::mlir::parse_and_verify;
use shardsim::mesh::Mesh;
use shardsim::sharding::TensorSharding;
use shardsim::tensor::npy;

use crate::common::fixture;

/// The MeshProto bytes of the first DTensor fixture (written by Python's protobuf).
fn dtensor_proto_bytes() -> Vec<u8> {
    let tsv = std::fs::read_to_string(fixture("mesh/dtensor_proto.tsv")).unwrap();
    let hex = tsv
        .lines()
        .nth(1)
        .unwrap()
        .split('\t')
        .nth(1)
        .unwrap()
        .to_string();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, usize),
    Delete(usize, usize),
    Duplicate(usize, usize),
    Truncate(usize),
    /// The number at or after a position replaced by a huge or edge value.
    Number(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), 0..HOSTILE.len()).prop_map(|(i, k)| Edit::Insert(i, k)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Edit::Delete(i, n)),
        (any::<usize>(), 1usize..256).prop_map(|(i, n)| Edit::Duplicate(i, n)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 0..HOSTILE_NUMBERS.len()).prop_map(|(i, k)| Edit::Number(i, k)),
    ]
}

fn apply(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for e in edits {
        let at = |i: usize, b: &Vec<u8>| if b.is_empty() { 0 } else { i % (b.len() + 1) };
        match *e {
            Edit::Flip(i, x) if !b.is_empty() => {
                let n = b.len();
                b[i % n] = x;
            }
            Edit::Insert(i, k) => {
                let i = at(i, &b);
                b.splice(i..i, HOSTILE[k].iter().copied());
            }
            Edit::Delete(i, n) => {
                let i = at(i, &b);
                let end = (i + n).min(b.len());
                b.drain(i..end);
            }
            Edit::Duplicate(i, n) => {
                let i = at(i, &b);
                let end = (i + n).min(b.len());
                let part = b[i..end].to_vec();
                b.splice(i..i, part);
            }
            Edit::Truncate(i) => {
                let i = at(i, &b);
                b.truncate(i);
            }
            Edit::Number(i, k) => {
                let i = at(i, &b);
                let digit = |j: &usize| b[*j].is_ascii_digit();
                if let Some(j) = (i..b.len())
                    .find(digit)
                    .or_else(|| (0..i).rev().find(digit))
                {
                    let start = (0..=j).rev().take_while(digit).last().unwrap_or(j);
                    let end = (j..b.len()).take_while(digit).last().map_or(j, |e| e + 1);
                    b.splice(start..end, HOSTILE_NUMBERS[k].iter().copied());
                }
            }
            Edit::Flip(..) => {}
        }
    }
    b
}

fn mutated(seed: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(edit(), 1..6).prop_map(move |edits| apply(&seed, &edits))
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(fixture(rel)).unwrap()
}

fn repo(rel: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mlir_text_never_panics(b in mutated(read("jax/megatron_mlp/lowered.mlir"))) {
        // Parse and verify, then propagate what parses: typed errors only.
        if let Ok(mut m) = parse_and_verify(&text(&b)) {
            let _ = shardsim::propagate::propagate_module(&mut m, shardsim::propagate::Strategy::UserPriority);
        }
    }

    #[test]
    fn sharding_text_never_panics(b in mutated(br#"#sdy.sharding<@mesh, [{"x", ?}, {"y":(1)2}p1], replicated={"z"}, unreduced={"w"}>"#.to_vec())) {
        let _ = TensorSharding::parse(&text(&b));
    }

    #[test]
    fn mesh_text_never_panics(b in mutated(br#"<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>"#.to_vec())) {
        let _ = Mesh::parse(&text(&b));
    }

    #[test]
    fn dtensor_mesh_string_never_panics(b in mutated(b"m|x=2,y=2|0,1,2,3|2,3|/job:worker/replica:0/task:1/device:TPU:0,/job:worker/replica:0/task:1/device:TPU:1|use_xla_spmd".to_vec())) {
        if let Ok(m) = shardsim::mesh::DTensorMesh::from_string(&text(&b)) {
            // Whatever is accepted prints back and survives its own proto.
            let again = shardsim::mesh::DTensorMesh::from_string(&m.to_string()).unwrap();
            prop_assert_eq!(&again, &m);
            prop_assert_eq!(&shardsim::mesh::DTensorMesh::from_proto_bytes(&m.to_proto_bytes()).unwrap(), &m);
            let _ = (m.host_mesh(), m.local_device_locations());
        }
    }

    #[test]
    fn dtensor_mesh_proto_never_panics(b in mutated(dtensor_proto_bytes())) {
        let _ = shardsim::mesh::DTensorMesh::from_proto_bytes(&b);
    }

    #[test]
    fn tvm_mesh_and_virtual_device_text_never_panic(b in mutated(b"R.device_mesh((2, 2), I.Range(4, 12, 2)) (cuda, 0, cuda -arch=sm_80, global)".to_vec())) {
        let t = text(&b);
        let _ = Mesh::from_tvm_text(&t);
        let _ = t.parse::<shardsim::plan::VirtualDevice>();
        if let Some(i) = t.find(" (") {
            let _ = Mesh::from_tvm_text(&t[..i]);
            let _ = t[i + 1..].parse::<shardsim::plan::VirtualDevice>();
        }
    }

    #[test]
    fn topology_toml_never_panics(b in mutated(repo("topologies/dgx-h100.toml"))) {
        let _ = shardsim::topology::load_text(&text(&b), "t.toml", &[]);
    }

    #[test]
    fn scenario_toml_never_panics(b in mutated(repo("scenarios/default.toml"))) {
        let _ = shardsim::scenario::Scenario::parse(&text(&b), "s.toml", None);
    }

    #[test]
    fn model_and_strategy_toml_never_panic(b in mutated(b"global_batch = 512\ntp = 8\npp = 2\nschedule = \"1f1b\"\nmicro_batch = 1\n".to_vec())) {
        let _ = shardsim::models::Strategy::from_toml(&text(&b));
        let _ = shardsim::models::ModelSpec::from_toml(&text(&b));
    }

    #[test]
    fn sweep_toml_never_panics(b in mutated(repo("scenarios/sweeps/nvlink_mesh_nodes.toml"))) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/sweeps");
        if let Ok(sw) = shardsim::scenario::sweep::Sweep::parse(&text(&b), "s.toml", &dir) {
            for p in sw.points.iter().take(2) {
                let _ = sw.scenario(p);
            }
        }
    }

    #[test]
    fn sweep_result_csv_never_panics(b in mutated(b"point,mesh.shape,topology.nodes,step_ms\n0,\"[-1, 1]\",2,8.1\n1,\"[-1, 2]\",2,7.9\n".to_vec())) {
        let _ = shardsim::scenario::sweep::read_csv_from(&b, "r.csv");
    }

    #[test]
    fn npy_never_panics(b in mutated(read("jax/add_relu/in0.npy"))) {
        let _ = npy::parse_npy(&b);
    }

    #[test]
    fn measured_csv_never_panics(b in mutated(b"# nccl-tests\nsize_bytes,busbw_gbs\n1024,3.5\n1048576,120.25\n".to_vec())) {
        let _ = shardsim::report::collective_plot::measured_curve_from(&b, "m.csv", "m");
    }
}

#[test]
fn bench_fuzz_covers_every_format_and_counts_no_panics() {
    let out = crate::common::shardsim(&["bench", "fuzz", "--cases", "40", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["format"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "mlir",
            "tvm-mesh",
            "tvm-virtual-device",
            "dtensor-string",
            "dtensor-proto",
            "sharding",
            "mesh",
            "topology-toml",
            "scenario-toml",
            "sweep-toml",
            "model-toml",
            "npy",
            "measured-csv",
            "sweep-csv",
            "flag-values",
            "cli-args"
        ]
    );
    for r in rows.as_array().unwrap() {
        assert_eq!(r["cases"], 40, "{r}");
        assert_eq!(r["panics"], 0, "{r}");
        // Mutations must not all be rejected (or all accepted): both paths run.
        let ok = r["ok"].as_u64().unwrap();
        let errors = r["errors"].as_u64().unwrap();
        assert_eq!(ok + errors, 40, "{r}");
        assert!(errors > 0, "{r}");
    }
}
