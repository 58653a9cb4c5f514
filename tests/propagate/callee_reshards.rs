//! Export turns every sharding constraint into a reshard (Shardy's
//! sharding-constraint-to-reshard), in callees too: Shardy's lit files print
//! `sdy.reshard` in the callees of `propagation_pipeline.mlir` (the chained
//! constraints of `@foo`, the one left after an unused constraint goes) and
//! of `propagation_pipeline_dedup_functions_fully_true.mlir`. The programs
//! are the lit groups' own fixtures; here the ops each callee is left with.

use shardsim::ir::mlir::print_module;
use shardsim::ir::{Func, Module};
use shardsim::propagate::Options;

/// The fixture's modules (split at `// -----`), propagated.
fn propagated(file: &str, dedup_functions_fully: bool) -> Vec<Module> {
    super::propagated_lit(
        file,
        Options {
            dedup_functions_fully,
        },
    )
}

/// The function's ops, nested ones too, as `result = op operands`.
fn ops(ms: &[Module], name: &str) -> Vec<String> {
    let f: &Func = ms.iter().find_map(|m| m.func(name)).unwrap();
    f.walk()
        .into_iter()
        .map(|id| super::op_line(f, id))
        .collect()
}

#[test]
fn constraints_in_callees_become_reshards() {
    let ms = propagated("propagation_pipeline.mlir", false);
    // Shardy's @foo with two chained constraints: two chained reshards.
    assert_eq!(
        ops(&ms, "two_constraints_callee"),
        [
            "%ca = sdy.reshard %x",
            "%cb = sdy.reshard %ca",
            " = func.return %cb"
        ]
    );
    // The unused constraint goes, the used one is a reshard.
    assert_eq!(
        ops(&ms, "outer_resharding_callee"),
        [
            "%m = stablehlo.abs %x",
            "%cb = sdy.reshard %m",
            "%c = func.call %cb",
            " = func.return %c"
        ]
    );
    // The dedup pipeline's callee (Shardy: abs, reshard, abs, call).
    let ms = propagated("dedup_functions_fully.mlir", true);
    assert_eq!(
        ops(&ms, "outer_1"),
        [
            "%m = stablehlo.abs %x",
            "%cb = sdy.reshard %m",
            "%m2 = stablehlo.abs %cb",
            "%c = func.call %m2",
            " = func.return %c"
        ]
    );
    // No constraint is left in any function of either pipeline's programs.
    for m in propagated("propagation_pipeline.mlir", false)
        .iter()
        .chain(&ms)
    {
        let text = print_module(m);
        assert!(!text.contains("sdy.sharding_constraint"), "{text}");
    }
}
