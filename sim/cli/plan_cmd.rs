//! `shardsim plan`: device planning (TVM's PlanDevices) on a program: where
//! every value lives, and `shardsim.device_copy` ops where producer and consumer differ,
//! planned across functions (callees where their call sites place them).

use std::path::PathBuf;

use clap::Args;

use shardsim::ir::mlir::print_module;
use shardsim::plan::{plan_module, VirtualDevice};

use super::output::{read_module, write_output};

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The program; arguments and results may carry `mhlo.memory_kind` or `shardsim.virtual_device`.
    input: PathBuf,
    /// The default virtual device for whatever no constraint fixes.
    #[arg(long, default_value = "(cuda, ?, cuda, global)")]
    device: String,
    /// Write the planned program here instead of stdout.
    #[arg(short, long)]
    out: Option<PathBuf>,
}

pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let mut module = read_module(&args.input)?;
    let default: VirtualDevice = args
        .device
        .parse()
        .map_err(|e| anyhow::anyhow!("--device: {e}"))?;
    let mut summary = Vec::new();
    let planned_funcs = plan_module(&module, &default)?;
    for (f, planned) in module.funcs.iter_mut().zip(planned_funcs) {
        for (value, from, to) in &planned.copies {
            summary.push(format!(
                "// @{}: device_copy {value} {from} -> {to}",
                f.name
            ));
        }
        *f = planned.func;
    }
    if summary.is_empty() {
        summary.push("// no device copies needed".into());
    }
    write_output(
        args.out.as_deref(),
        &format!("{}\n{}", summary.join("\n"), print_module(&module)),
    )
}
