//! `shardsim bench fuzz`: N mutated inputs per input format (MLIR programs,
//! shardings, meshes, topology/scenario/model TOML, .npy, measured CSV, command
//! lines) through the library's parsers (and, for programs that parse,
//! propagation and partitioning); reports throughput and counts every panic.
//! Mutations come from a seeded ChaCha stream, so a run is reproducible.

use std::time::Instant;

use clap::Args;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use shardsim::base::hostile::HOSTILE_TOKENS as HOSTILE;

use super::output::Format;

#[derive(Debug, Args)]
pub struct FuzzBenchArgs {
    /// Mutated inputs per format.
    #[arg(long, default_value_t = 10_000)]
    cases: usize,
    /// Seed of the mutation stream.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Only these formats (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// One format: its name, the real inputs mutations start from, and what runs.
struct Target {
    name: &'static str,
    seeds: Vec<&'static [u8]>,
    run: fn(&[u8]) -> bool,
}

fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

fn mlir(b: &[u8]) -> bool {
    use shardsim::propagate::{propagate_module, Strategy};
    let Ok(mut m) = shardsim::ir::mlir::parse_and_verify(&text(b)) else {
        return false;
    };
    if propagate_module(&mut m, Strategy::UserPriority).is_err() {
        return false;
    }
    shardsim::partition::partition(&m).is_ok()
}

fn cli_args(b: &[u8]) -> bool {
    use clap::Parser;
    let t = text(b);
    let args = std::iter::once("shardsim").chain(t.split_whitespace());
    super::Cli::try_parse_from(args).is_ok()
}

fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "mlir",
            seeds: vec![
                include_bytes!("../../tests/fixtures/jax/add_relu/lowered.mlir"),
                include_bytes!("../../tests/fixtures/jax/megatron_mlp/lowered.mlir"),
                include_bytes!("../../tests/fixtures/jax/shard_map_psum/lowered.mlir"),
            ],
            run: mlir,
        },
        Target {
            name: "sharding",
            seeds: vec![
                br#"#sdy.sharding<@mesh, [{"x", ?}, {"y":(1)2}p1], replicated={"z"}, unreduced={"w"}>"#,
                br#"#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, <@mesh, [{}, {"y"}p0]>]>"#,
            ],
            run: |b| {
                let t = text(b);
                shardsim::sharding::TensorSharding::parse(&t).is_ok()
                    | shardsim::sharding::ShardingPerValue::parse(&t).is_ok()
            },
        },
        Target {
            name: "mesh",
            seeds: vec![
                br#"<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>"#,
                br#"<["x"=2, "y"=4]>"#,
                br#"<[], device_ids=[3]>"#,
            ],
            run: |b| shardsim::mesh::Mesh::parse(&text(b)).is_ok(),
        },
        Target {
            name: "topology-toml",
            seeds: vec![
                include_bytes!("../../topologies/dgx-h100.toml"),
                include_bytes!("../../topologies/tpu-v4.toml"),
                include_bytes!("../../topologies/ring.toml"),
            ],
            run: |b| shardsim::topology::load_text(&text(b), "t.toml", &[]).is_ok(),
        },
        Target {
            name: "scenario-toml",
            seeds: vec![include_bytes!("../../scenarios/default.toml")],
            run: |b| shardsim::scenario::Scenario::parse(&text(b), "s.toml", None).is_ok(),
        },
        Target {
            name: "model-toml",
            seeds: vec![
                b"global_batch = 512\ntp = 8\npp = 2\nschedule = \"1f1b\"\nmicro_batch = 1\n",
            ],
            run: |b| {
                let t = text(b);
                shardsim::models::Strategy::from_toml(&t).is_ok()
                    | shardsim::models::ModelSpec::from_toml(&t).is_ok()
            },
        },
        Target {
            name: "npy",
            seeds: vec![
                include_bytes!("../../tests/fixtures/jax/add_relu/in0.npy"),
                include_bytes!("../../tests/fixtures/jax/argmax_sharded/out1.npy"),
            ],
            run: |b| shardsim::tensor::npy::parse_npy(b).is_ok(),
        },
        Target {
            name: "measured-csv",
            seeds: vec![b"# nccl-tests\nsize_bytes,busbw_gbs\n1024,3.5\n1048576,120.25\n"],
            run: |b| {
                shardsim::report::collective_plot::measured_curve_from(b, "m.csv", "m").is_ok()
            },
        },
        Target {
            name: "cli-args",
            seeds: vec![
                b"mesh --shape 2,4 --names x,y --tensor 16x30",
                b"exec p.mlir --topology dgx-h100 --nodes 2 --set nvlink.bandwidth=900GB/s --straggler 3:1.5",
                b"collective --topology ring:8 --op all_reduce --sizes 1MiB",
            ],
            run: cli_args,
        },
    ]
}

/// One to five random edits of `seed`: byte flips, hostile tokens, deletions,
/// duplications, truncation.
fn mutate(rng: &mut ChaCha8Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..rng.random_range(1..=5) {
        let at = rng.random_range(0..=b.len());
        match rng.random_range(0..5) {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] = rng.random();
            }
            1 => {
                let t = HOSTILE[rng.random_range(0..HOSTILE.len())];
                b.splice(at..at, t.iter().copied());
            }
            2 => {
                let end = (at + rng.random_range(1..64)).min(b.len());
                b.drain(at..end);
            }
            3 => {
                let end = (at + rng.random_range(1..256)).min(b.len());
                let part = b[at..end].to_vec();
                b.splice(at..at, part);
            }
            _ => b.truncate(at),
        }
    }
    b
}

#[derive(Debug, Serialize)]
struct Row {
    format: &'static str,
    cases: usize,
    ok: usize,
    errors: usize,
    panics: usize,
    cases_per_sec: f64,
    median_us: f64,
    max_ms: f64,
}

pub fn run(args: FuzzBenchArgs) -> anyhow::Result<()> {
    let chosen: Vec<Target> = targets()
        .into_iter()
        .filter(|t| args.only.is_empty() || args.only.iter().any(|o| o == t.name))
        .collect();
    if chosen.is_empty() {
        let names: Vec<&str> = targets().iter().map(|t| t.name).collect();
        anyhow::bail!("--only names no format (formats: {})", names.join(", "));
    }
    // Panics are counted, not printed (the hook is restored afterwards).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut rows = Vec::new();
    let mut panics_seen = Vec::new();
    for t in &chosen {
        let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
        let (mut ok, mut panics) = (0, 0);
        let mut times = Vec::with_capacity(args.cases);
        let start = Instant::now();
        for i in 0..args.cases {
            let input = mutate(&mut rng, t.seeds[i % t.seeds.len()]);
            let t0 = Instant::now();
            match std::panic::catch_unwind(|| (t.run)(&input)) {
                Ok(true) => ok += 1,
                Ok(false) => {}
                Err(_) => {
                    panics += 1;
                    if panics_seen.len() < 3 {
                        panics_seen.push(format!("{} case {i}", t.name));
                    }
                }
            }
            times.push(t0.elapsed().as_secs_f64());
        }
        let wall = start.elapsed().as_secs_f64();
        times.sort_by(f64::total_cmp);
        rows.push(Row {
            format: t.name,
            cases: args.cases,
            ok,
            errors: args.cases - ok - panics,
            panics,
            cases_per_sec: args.cases as f64 / wall.max(1e-9),
            median_us: times.get(times.len() / 2).copied().unwrap_or(0.0) * 1e6,
            max_ms: times.last().copied().unwrap_or(0.0) * 1e3,
        });
    }
    std::panic::set_hook(hook);
    match args.format {
        Format::Json => outln!("{}", serde_json::to_string_pretty(&rows)?)?,
        Format::Text => {
            outln!(
                "{:<14} {:>7} {:>7} {:>7} {:>7} {:>11} {:>10} {:>9}",
                "format",
                "cases",
                "ok",
                "errors",
                "panics",
                "cases/s",
                "median_us",
                "max_ms"
            )?;
            for r in &rows {
                outln!(
                    "{:<14} {:>7} {:>7} {:>7} {:>7} {:>11.0} {:>10.1} {:>9.2}",
                    r.format,
                    r.cases,
                    r.ok,
                    r.errors,
                    r.panics,
                    r.cases_per_sec,
                    r.median_us,
                    r.max_ms
                )?;
            }
        }
    }
    let total: usize = rows.iter().map(|r| r.panics).sum();
    if total > 0 {
        return Err(super::Failed(format!(
            "{total} panics (first: {})",
            panics_seen.join(", ")
        ))
        .into());
    }
    Ok(())
}
