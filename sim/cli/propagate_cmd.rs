//! `shardsim propagate`: complete a program's shardings as Shardy would.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, ValueEnum};
use serde::Serialize;

use shardsim::ir::mlir::print_module;
use shardsim::ir::{Func, Module, ValueDef};
use shardsim::propagate::{propagate_module_with, Options, Report, Strategy};
use shardsim::sharding::TensorSharding;

use super::output::{read_module, write_output};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StrategyArg {
    Basic,
    /// Basic without sub-axis splits and through slice, pad and reduce_window's changed dims.
    BasicConservative,
    Aggressive,
    OpPriority,
    UserPriority,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PropagateFormat {
    Mlir,
    Json,
}

#[derive(Debug, Args)]
pub struct PropagateArgs {
    /// The program (StableHLO + sdy text, e.g. JAX's lowered text or Shardy's before_propagation dump).
    input: PathBuf,
    /// Propagation strategy; the default, user-priority, is what JAX's pipeline runs.
    #[arg(long, value_enum, default_value_t = StrategyArg::UserPriority)]
    strategy: StrategyArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = PropagateFormat::Mlir)]
    format: PropagateFormat,
    /// Write the output here instead of stdout.
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// Explain why a value (e.g. %3, or @func:%3) got its sharding, instead of printing the program
    /// (as text: --format, which formats the program, cannot go with it).
    #[arg(long, value_name = "VALUE", conflicts_with = "format")]
    explain: Option<String>,
    /// Shardy's dedup-functions-fully: a function called from several places is one function, so every call
    /// sees the same shardings of its values (by default each call propagates as if inlined and the callee keeps
    /// its first call's shardings).
    #[arg(long)]
    dedup_functions_fully: bool,
}

#[derive(Serialize)]
struct JsonValue {
    name: String,
    op: String,
    sharding: Option<String>,
}

#[derive(Serialize)]
struct JsonOut {
    meshes: std::collections::BTreeMap<String, String>,
    values: Vec<JsonValue>,
}

pub fn run(args: PropagateArgs) -> anyhow::Result<()> {
    let mut module = read_module(&args.input)?;
    let strategy = match args.strategy {
        StrategyArg::Basic => Strategy::Basic,
        StrategyArg::BasicConservative => Strategy::BasicConservative,
        StrategyArg::Aggressive => Strategy::Aggressive,
        StrategyArg::OpPriority => Strategy::OpPriority,
        StrategyArg::UserPriority => Strategy::UserPriority,
    };
    let options = Options {
        dedup_functions_fully: args.dedup_functions_fully,
    };
    let report = propagate_module_with(&mut module, strategy, options)?;
    if let Some(target) = &args.explain {
        return write_output(args.out.as_deref(), &explain(&module, &report, target)?);
    }
    let text = match args.format {
        PropagateFormat::Mlir => {
            fill_replicated(&mut module);
            print_module(&module)
        }
        PropagateFormat::Json => serde_json::to_string_pretty(&json(&module))? + "\n",
    };
    write_output(args.out.as_deref(), &text)
}

/// Give every result of an op with a sharding rule the closed replicated sharding
/// when it has none, so that every such op carries `sdy.sharding`; only when
/// the module has exactly one mesh.
fn fill_replicated(module: &mut Module) {
    let [(mesh, _)] = module.meshes.as_slice() else {
        return;
    };
    let mesh = mesh.clone();
    for f in &mut module.funcs {
        for id in f.walk() {
            // Propagation gives rules to every op with distributed values (not to reduce bodies).
            if f.op(id).rule.is_none() {
                continue;
            }
            for r in f.op(id).results.clone() {
                let v = f.value_mut(r);
                if v.sharding.is_none() {
                    v.sharding = Some(TensorSharding::replicated(&mesh, v.ty.rank()));
                }
            }
        }
    }
}

fn op_name(func: &Func, def: ValueDef) -> String {
    match def {
        ValueDef::FuncArg(_) => "func.arg".into(),
        ValueDef::BlockArg { op, .. } => format!("{} (block argument)", func.op(op).kind.name()),
        ValueDef::Result { op, .. } => func.op(op).kind.name().into(),
    }
}

fn json(module: &Module) -> JsonOut {
    let meshes = module
        .meshes
        .iter()
        .map(|(n, m)| (n.clone(), m.to_string()))
        .collect();
    let mut values = Vec::new();
    for f in &module.funcs {
        let prefix = if module.funcs.len() > 1 {
            format!("@{}:", f.name)
        } else {
            String::new()
        };
        let order = f
            .args
            .iter()
            .copied()
            .chain(f.walk().into_iter().flat_map(|op| f.op(op).results.clone()));
        for v in order {
            let value = f.value(v);
            values.push(JsonValue {
                name: format!("{prefix}{}", value.name),
                op: op_name(f, value.def),
                sharding: value.sharding.as_ref().map(TensorSharding::to_bare),
            });
        }
    }
    JsonOut { meshes, values }
}

/// The story of one value: where its sharding came from, step by step.
fn explain(module: &Module, report: &Report, target: &str) -> anyhow::Result<String> {
    let (func_name, value_name) = match target.split_once(':') {
        Some((f, v)) if f.starts_with('@') => (Some(&f[1..]), v),
        _ => (None, target),
    };
    let func = match func_name {
        Some(n) => module
            .func(n)
            .ok_or_else(|| anyhow::anyhow!("--explain: no function @{n}"))?,
        None => module
            .entry()
            .ok_or_else(|| anyhow::anyhow!("the module has no function"))?,
    };
    let Some(id) = func.values.iter().position(|v| v.name == value_name) else {
        bail!(
            "--explain: no value {value_name} in @{} (values are named like %0, %arg0)",
            func.name
        );
    };
    let value = &func.values[id];
    let mut out = format!(
        "{} = {} : {}\nfinal sharding: {}\n",
        value.name,
        op_name(func, value.def),
        value.ty,
        value
            .sharding
            .as_ref()
            .map(|s| s.to_bare())
            .unwrap_or_else(|| "none (fully replicated)".into())
    );
    let steps: Vec<_> = report
        .steps
        .get(&func.name)
        .into_iter()
        .flatten()
        .filter(|s| s.value.0 as usize == id)
        .collect();
    if steps.is_empty() {
        out.push_str(if value.sharding.is_some() {
            "it kept the sharding it had in the input\n"
        } else {
            "no op could give it a sharding: no sharded neighbour, or every candidate axis conflicted (closed dims, replicated axes, axes used by another dim, divisibility)\n"
        });
    }
    for (i, s) in steps.iter().enumerate() {
        out.push_str(&format!(
            "{}. [{}] {} <- {}\n",
            i + 1,
            s.pass,
            s.sharding.to_bare(),
            s.cause
        ));
    }
    Ok(out)
}
