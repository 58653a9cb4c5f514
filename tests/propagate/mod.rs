//! Sharding rules and propagation, against Shardy's own output in the JAX fixtures.

mod callee_reshards;
mod cases;
mod clones;
mod core;
mod custom_calls;
mod fft;
mod fixtures;
mod linalg;
mod lit;
mod props;
mod tokens;
mod unreduced;

/// A `tests/fixtures/shardy_lit` file's modules (split at `// -----` as the
/// lit files), each propagated with `options`.
fn propagated_lit(file: &str, options: shardsim::propagate::Options) -> Vec<shardsim::ir::Module> {
    let dir = crate::common::fixture("shardy_lit");
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    text.split("\n// -----\n")
        .map(|chunk| {
            let mut m = shardsim::ir::mlir::parse_and_verify(chunk).unwrap();
            let strategy = shardsim::propagate::Strategy::default();
            shardsim::propagate::propagate_module_with(&mut m, strategy, options).unwrap();
            m
        })
        .collect()
}

/// One op as `results = op operands`, an all-reduce with its axes and
/// out-sharding (` {"b"} out=...`).
fn op_line(f: &shardsim::ir::Func, id: shardsim::ir::OpId) -> String {
    use shardsim::ir::OpKind;
    let op = f.op(id);
    let names = |vs: &[shardsim::ir::ValueId]| {
        vs.iter()
            .map(|&v| f.value(v).name.clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    let extra = match &op.kind {
        OpKind::AllReduce {
            reduction_axes,
            out_sharding,
        } => format!(
            " {{{}}} out={}",
            reduction_axes
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(","),
            out_sharding.to_bare()
        ),
        _ => String::new(),
    };
    format!(
        "{} = {} {}{extra}",
        names(&op.results),
        op.kind.name(),
        names(&op.operands)
    )
}
