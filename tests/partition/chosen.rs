//! The right collectives: for each case of
//! `tests/fixtures/partition/collectives.txt`, the partitioned program's
//! data-moving collectives (op, axes, bytes) are exactly the expected ones
//! (reduce-scatter where the result is wanted sharded on a contracted or
//! reduced axis; a shard_map body's own collectives, named by the axes of
//! their groups); and the bytes each device sends match the ring volumes.

use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::text::summary;
use shardsim::partition::{partition, SpmdProgram};
use shardsim::propagate::{propagate_module, Strategy};

fn program(case: &str) -> SpmdProgram {
    let path = crate::common::fixture(&format!("jax/{case}/before.mlir"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut module = parse_and_verify(&text).unwrap();
    propagate_module(&mut module, Strategy::default()).unwrap();
    partition(&module).unwrap()
}

/// One collective as the expectations file writes it: (op, axes, bytes).
type Expected = (String, String, u64);

/// `(case, collectives)` from the expectations file.
fn expectations() -> Vec<(String, Vec<Expected>)> {
    let path = crate::common::fixture("partition/collectives.txt");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (case, rest) = l.split_once(':').expect("case: collectives");
            let collectives = rest
                .split(';')
                .map(|c| {
                    let f: Vec<&str> = c.split_whitespace().collect();
                    assert_eq!(f.len(), 3, "{l}");
                    let axes = if f[1] == "-" { "" } else { f[1] };
                    (f[0].to_string(), axes.to_string(), f[2].parse().unwrap())
                })
                .collect();
            (case.trim().to_string(), collectives)
        })
        .collect()
}

#[test]
fn each_case_gets_the_expected_collectives() {
    let cases = expectations();
    assert!(cases.len() >= 15);
    for (case, want) in cases {
        let p = program(&case);
        let got: Vec<Expected> = p
            .collectives()
            .filter(|c| c.kind.moves_data())
            .map(|c| {
                let axes: Vec<String> = c.axes.iter().map(|a| a.name.clone()).collect();
                (c.kind.name().to_string(), axes.join(","), c.bytes)
            })
            .collect();
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn a_reduce_scatter_sends_a_ring_share_of_its_input() {
    // 1024 B over groups of 4: each device sends 3/4 of it (an all-reduce
    // would send twice that).
    let s = summary(&program("matmul_reduce_scatter"));
    assert_eq!(s.collectives[0].op, "reduce_scatter");
    assert_eq!(
        s.collectives[0].groups,
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
    );
    assert!(s.per_device_bytes_sent.values().all(|&b| b == 768), "{s:?}");
}
