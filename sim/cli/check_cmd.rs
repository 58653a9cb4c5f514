//! `shardsim check IN.mlir`: parse and verify a program, print a summary
//! (functions, ops by kind, meshes, sharded values).

use std::collections::BTreeMap;

use clap::Args;
use serde::Serialize;

use shardsim::ir::mlir::parse_and_verify;
use shardsim::ir::Module;

use super::output::Format;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The MLIR file (JAX's lowered text or an XLA Shardy dump).
    input: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Serialize)]
struct FuncSummary {
    name: String,
    args: usize,
    results: usize,
    ops: usize,
    sharded_args: usize,
    sharded_results: usize,
}

#[derive(Serialize)]
struct MeshSummary {
    name: String,
    mesh: String,
    devices: u64,
}

#[derive(Serialize)]
struct Summary {
    file: String,
    functions: Vec<FuncSummary>,
    ops_by_kind: BTreeMap<String, usize>,
    meshes: Vec<MeshSummary>,
    values: usize,
    sharded_values: usize,
    ops_with_rules: usize,
}

fn summarize(file: &str, m: &Module) -> Summary {
    let mut ops_by_kind = BTreeMap::new();
    let (mut values, mut sharded_values, mut ops_with_rules) = (0, 0, 0);
    let functions = m
        .funcs
        .iter()
        .map(|f| {
            for op in &f.ops {
                *ops_by_kind.entry(op.kind.name().to_string()).or_insert(0) += 1;
                ops_with_rules += usize::from(op.rule.is_some());
            }
            values += f.values.len();
            sharded_values += f.values.iter().filter(|v| v.sharding.is_some()).count();
            FuncSummary {
                name: f.name.clone(),
                args: f.args.len(),
                results: f.result_types.len(),
                ops: f.ops.len(),
                sharded_args: f
                    .args
                    .iter()
                    .filter(|&&a| f.value(a).sharding.is_some())
                    .count(),
                sharded_results: f.result_shardings.iter().flatten().count(),
            }
        })
        .collect();
    Summary {
        file: file.to_string(),
        functions,
        ops_by_kind,
        meshes: m
            .meshes
            .iter()
            .map(|(n, mesh)| MeshSummary {
                name: n.clone(),
                mesh: mesh.to_string(),
                devices: mesh.num_devices(),
            })
            .collect(),
        values,
        sharded_values,
        ops_with_rules,
    }
}

pub fn run(args: CheckArgs) -> anyhow::Result<()> {
    let text = super::output::read_text(std::path::Path::new(&args.input))?;
    let module = parse_and_verify(&text)
        .and_then(|m| shardsim::ir::verify::require_functions(&m).map(|()| m))
        .map_err(|e| anyhow::anyhow!(e.in_file(&args.input)))?;
    let s = summarize(&args.input, &module);
    match args.format {
        Format::Json => outln!("{}", serde_json::to_string_pretty(&s)?)?,
        Format::Text => {
            outln!(
                "{}: ok ({} ops, {} values)",
                s.file,
                module.num_ops(),
                s.values
            )?;
            for m in &s.meshes {
                outln!("mesh @{} = {} ({} devices)", m.name, m.mesh, m.devices)?;
            }
            for f in &s.functions {
                outln!(
                    "func @{}: {} args ({} sharded), {} results ({} sharded), {} ops",
                    f.name,
                    f.args,
                    f.sharded_args,
                    f.results,
                    f.sharded_results,
                    f.ops
                )?;
            }
            outln!("ops by kind:")?;
            for (k, n) in &s.ops_by_kind {
                outln!("  {k:<32} {n}")?;
            }
            outln!(
                "sharded values: {} of {}; ops with sharding rules: {}",
                s.sharded_values,
                s.values,
                s.ops_with_rules
            )?;
        }
    }
    Ok(())
}
