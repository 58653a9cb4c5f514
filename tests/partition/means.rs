//! Means finished by an averaging all-reduce (`--avg-means`): which fixtures
//! use one, and that the bytes moved are those of the summing program.

use shardsim::ir::mlir::parse_and_verify;
use shardsim::partition::{partition_with, CollectiveKind, PartitionOptions, SpmdProgram};
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::tensor::CollectiveReduction;

fn program(case: &str, avg_means: bool) -> SpmdProgram {
    let path = crate::common::fixture(&format!("jax/{case}/before.mlir"));
    let mut module = parse_and_verify(&std::fs::read_to_string(path).unwrap()).unwrap();
    propagate_module(&mut module, Strategy::default()).unwrap();
    partition_with(&module, &PartitionOptions { avg_means }).unwrap()
}

fn reductions(p: &SpmdProgram) -> Vec<CollectiveReduction> {
    p.collectives()
        .filter_map(|c| match c.kind {
            CollectiveKind::AllReduce(r) => Some(r),
            CollectiveKind::ReduceScatter { reduction, .. } => Some(reduction),
            _ => None,
        })
        .collect()
}

#[test]
fn means_over_sharded_dims_average_in_the_collective() {
    use CollectiveReduction::{Avg, Max, Sum};
    // (case, reductions by default, with --avg-means)
    let cases = [
        // mean over dim 1 sharded on "y" (32 / 4 = 8 per device)
        ("row_mean", vec![Sum], vec![Avg]),
        // standardization (two means over "x") and a norm (a sum, not a mean)
        (
            "broadcast_elementwise_chains",
            vec![Sum, Sum, Sum],
            vec![Avg, Avg, Sum],
        ),
        // the loss is a mean over the batch on "d"; the gradients are sums
        (
            "mlp_value_and_grad",
            vec![Sum, Sum, Sum],
            vec![Avg, Sum, Sum],
        ),
        ("sum_over_sharded_dim", vec![Sum], vec![Sum]),
        (
            "softmax_sharded_reduced_dim",
            vec![Max, Sum],
            vec![Max, Sum],
        ),
    ];
    for (case, sum, avg) in cases {
        assert_eq!(reductions(&program(case, false)), sum, "{case}");
        assert_eq!(reductions(&program(case, true)), avg, "{case}");
    }
}

#[test]
fn averaging_changes_no_byte_of_communication() {
    let mut averaged = Vec::new();
    for dir in crate::common::jax_cases_with_data() {
        let case = dir.file_name().unwrap().to_string_lossy().to_string();
        let (sum, avg) = (program(&case, false), program(&case, true));
        assert_eq!(
            sum.total_collective_bytes(),
            avg.total_collective_bytes(),
            "{case}"
        );
        if reductions(&avg).contains(&CollectiveReduction::Avg) {
            averaged.push(case);
        }
    }
    assert!(averaged.len() >= 3, "{averaged:?}");
}
