//! `shardsim bench fuzz`: N mutated inputs per input format (MLIR programs,
//! shardings, Shardy meshes, TF DTensor mesh strings and MeshProto bytes, TVM
//! device meshes and virtual devices, topology/scenario/sweep/model TOML,
//! .npy, measured and sweep-result CSV, flag values, command lines) through
//! the library's parsers (and, for programs that parse, propagation,
//! partitioning and planning); reports throughput and counts every panic.
//! Mutations come from a seeded ChaCha stream, so a run is reproducible.

use std::time::Instant;

use clap::Args;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use shardsim::base::hostile::{HOSTILE_NUMBERS, HOSTILE_TOKENS as HOSTILE};

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
    seeds: Vec<Vec<u8>>,
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
    if shardsim::partition::partition(&m).is_err() {
        return false;
    }
    let device = "(cuda, 0, cuda, global)"
        .parse()
        .expect("a valid virtual device");
    shardsim::plan::plan_module(&m, &device).is_ok()
}

/// The MeshProto bytes of a DTensor mesh string.
fn proto_of(dtensor: &str) -> Vec<u8> {
    shardsim::mesh::DTensorMesh::from_string(dtensor)
        .expect("a valid DTensor seed")
        .to_proto_bytes()
}

/// A DTensor mesh string: what parses prints back to itself and survives
/// its own proto, as `mesh --dtensor` relies on.
fn dtensor_string(b: &[u8]) -> bool {
    use shardsim::mesh::DTensorMesh;
    let Ok(m) = DTensorMesh::from_string(&text(b)) else {
        return false;
    };
    let again = DTensorMesh::from_string(&m.to_string());
    let proto = DTensorMesh::from_proto_bytes(&m.to_proto_bytes());
    assert!(again.as_ref() == Ok(&m), "{m} does not read back");
    assert!(proto.as_ref() == Ok(&m), "{m} does not survive its proto");
    let _ = (m.host_mesh(), m.local_device_locations(), m.local_devices());
    true
}

/// MeshProto bytes: what decodes encodes back to a proto that decodes equal.
fn dtensor_proto(b: &[u8]) -> bool {
    use shardsim::mesh::DTensorMesh;
    let Ok(m) = DTensorMesh::from_proto_bytes(b) else {
        return false;
    };
    let back = DTensorMesh::from_proto_bytes(&m.to_proto_bytes());
    assert!(back.as_ref() == Ok(&m), "{m} does not survive its proto");
    let _ = m.to_string();
    true
}

/// TVM's `R.device_mesh(...)`: what parses prints as TVM text that reads back.
fn tvm_mesh(b: &[u8]) -> bool {
    use shardsim::mesh::Mesh;
    let Ok(m) = Mesh::from_tvm_text(&text(b)) else {
        return false;
    };
    let back = Mesh::from_tvm_text(&m.to_tvm_text());
    assert!(
        back.as_ref().map(Mesh::device_ids) == Ok(m.device_ids()),
        "{} does not read back",
        m.to_tvm_text()
    );
    let _ = m.to_dtensor_string("mesh", "CPU");
    true
}

/// A TVM virtual device `(device type, id, target, scope)`, as `plan --device` reads it.
fn tvm_virtual_device(b: &[u8]) -> bool {
    text(b).parse::<shardsim::plan::VirtualDevice>().is_ok()
}

/// A sweep file (its scenario `default`; a path in it names nothing).
fn sweep_toml(b: &[u8]) -> bool {
    let dir = std::path::Path::new("/nonexistent-shardsim-fuzz");
    let Ok(sw) = shardsim::scenario::sweep::Sweep::parse(&text(b), "s.toml", dir) else {
        return false;
    };
    // Each point's scenario is checked when it runs: build the first few.
    sw.points.iter().take(4).all(|p| sw.scenario(p).is_ok())
}

/// A `sweep --shard` result CSV, as `merge` reads it.
fn sweep_csv(b: &[u8]) -> bool {
    shardsim::scenario::sweep::read_csv_from(b, "r.csv").is_ok()
}

/// Flag values one per line (`--set`, `--straggler`, `--link-fault`,
/// `--random-stragglers`, `--random-link-failures`, `--jitter`, `--sizes`,
/// `--tensor`, `--shape`, `--device-ids`, `--topology`, `--shard`, sizes and
/// rates) through the parsers the subcommands use, perturbations against
/// the topology they give.
fn flag_values(b: &[u8]) -> bool {
    use shardsim::scenario::spec::RunSpec;
    use shardsim::topology::{units, Override};
    let t = text(b);
    let mut ok = true;
    let (mut topology, mut sets) = ("dgx-h100".to_string(), Vec::new());
    let mut run = RunSpec::default();
    for line in t.lines() {
        let (flag, value) = line.split_once(' ').unwrap_or((line, ""));
        ok &= match flag {
            "--set" => Override::parse(value).map(|o| sets.push(o)).is_ok(),
            "--topology" => {
                topology = value.to_string();
                true
            }
            "--straggler" => {
                run.stragglers.push(value.to_string());
                true
            }
            "--link-fault" => {
                run.link_faults.push(value.to_string());
                true
            }
            "--random-stragglers" => {
                run.random_stragglers = Some(value.to_string());
                true
            }
            "--random-link-failures" => {
                run.random_link_failures = Some(value.to_string());
                true
            }
            "--jitter" => value.parse().map(|j| run.jitter = Some(j)).is_ok(),
            "--seed" => value.parse().map(|s| run.seed = s).is_ok(),
            "--sizes" => shardsim::collective::sizes::parse_sizes(value).is_ok(),
            "--tensor" => shardsim::base::TensorType::parse_shape(value).is_ok(),
            "--shape" | "--device-ids" => super::output::parse_u64_list(value, flag).is_ok(),
            "--shard" => shardsim::scenario::sweep::parse_shard(value).is_ok(),
            "--max-input-size" => units::ByteSize::parse(value).is_ok(),
            "--bandwidth" => units::Bandwidth::parse(value).is_ok(),
            "--latency" => units::Duration::parse(value).is_ok(),
            "--flops" => units::FlopRate::parse(value).is_ok(),
            _ => false,
        };
    }
    // Topologies of more than 4,096 devices are timed by `bench scale`, not here.
    let Ok(topo) = shardsim::topology::load(&topology, &sets) else {
        return false;
    };
    let devices = u64::from(topo.num_devices());
    ok & shardsim::scenario::options::timed_options(&run, &topo, devices).is_ok()
}

fn cli_args(b: &[u8]) -> bool {
    use clap::Parser;
    let t = text(b);
    let args = std::iter::once("shardsim").chain(t.split_whitespace());
    super::Cli::try_parse_from(args).is_ok()
}

/// DTensor mesh strings of the proto fixture (tests/fixtures/mesh/dtensor_proto.tsv).
const DTENSOR_SEEDS: [&str; 2] = [
    "mesh|x=2,y=2|0,1,2,3|2,3|/job:worker/replica:0/task:1/device:TPU:0,/job:worker/replica:0/task:1/device:TPU:1",
    "remote|x=4|0,1,2,3|||/job:worker/replica:0/task:0/device:GPU:0,/job:worker/replica:0/task:0/device:GPU:1,/job:worker/replica:0/task:0/device:GPU:2,/job:worker/replica:0/task:0/device:GPU:3",
];

fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "mlir",
            seeds: vec![
                include_bytes!("../../tests/fixtures/jax/add_relu/lowered.mlir").to_vec(),
                include_bytes!("../../tests/fixtures/jax/megatron_mlp/lowered.mlir").to_vec(),
                include_bytes!("../../tests/fixtures/jax/shard_map_psum/lowered.mlir").to_vec(),
                // complex types and fft; tokens with after_all and send.
                include_bytes!("../../tests/fixtures/shardy_lit/fft_batch_sharded.mlir").to_vec(),
                include_bytes!("../../tests/fixtures/shardy_lit/send_after_all.mlir").to_vec(),
            ],
            run: mlir,
        },
        Target {
            name: "tvm-mesh",
            seeds: vec![
                b"R.device_mesh((2, 4), I.Range(0, 8))".to_vec(),
                b"R.device_mesh((2, 2), I.Range(4, 12, 2))".to_vec(),
                b"R.device_mesh((2, 2), [8, 12, 10, 14])".to_vec(),
            ],
            run: tvm_mesh,
        },
        Target {
            name: "tvm-virtual-device",
            seeds: vec![
                b"(cuda, 0, cuda -arch=sm_80, global)".to_vec(),
                b"(?, ?, cuda -arch=sm_90 -max_threads_per_block=1024, ?)".to_vec(),
                b"(vulkan, 1, vulkan, shared)".to_vec(),
            ],
            run: tvm_virtual_device,
        },
        Target {
            name: "dtensor-string",
            seeds: vec![
                DTENSOR_SEEDS[0].as_bytes().to_vec(),
                DTENSOR_SEEDS[1].as_bytes().to_vec(),
                b"t|x=2,y=2|*TPU".to_vec(),
            ],
            run: dtensor_string,
        },
        Target {
            name: "dtensor-proto",
            seeds: DTENSOR_SEEDS.iter().map(|s| proto_of(s)).collect(),
            run: dtensor_proto,
        },
        Target {
            name: "sharding",
            seeds: vec![
                br#"#sdy.sharding<@mesh, [{"x", ?}, {"y":(1)2}p1], replicated={"z"}, unreduced={"w"}>"#.to_vec(),
                br#"#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, <@mesh, [{}, {"y"}p0]>]>"#.to_vec(),
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
                br#"<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>"#.to_vec(),
                br#"<["x"=2, "y"=4]>"#.to_vec(),
                br#"<[], device_ids=[3]>"#.to_vec(),
            ],
            run: |b| shardsim::mesh::Mesh::parse(&text(b)).is_ok(),
        },
        Target {
            name: "topology-toml",
            seeds: vec![
                include_bytes!("../../topologies/dgx-h100.toml").to_vec(),
                include_bytes!("../../topologies/tpu-v4.toml").to_vec(),
                include_bytes!("../../topologies/ring.toml").to_vec(),
            ],
            run: |b| shardsim::topology::load_text(&text(b), "t.toml", &[]).is_ok(),
        },
        Target {
            name: "scenario-toml",
            seeds: vec![include_bytes!("../../scenarios/default.toml").to_vec()],
            run: |b| shardsim::scenario::Scenario::parse(&text(b), "s.toml", None).is_ok(),
        },
        Target {
            name: "sweep-toml",
            seeds: vec![
                b"format = 1\nscenario = \"default\"\n\n[grid]\n\"mesh.shape\" = [[-1, 1], [-1, 2]]\n\"set.nvlink.bandwidth\" = [\"450GB/s\", \"900GB/s\"]\n\"topology.nodes\" = [2, 4]\n\n[plots]\nheatmap = [\"mesh.shape\", \"set.nvlink.bandwidth\"]\nscaling = \"topology.nodes\"\n".to_vec(),
                b"format = 1\nscenario = \"default\"\n\n[[points]]\n\"topology.nodes\" = 2\n\n[[points]]\n\"run.seed\" = 7\n\"set.nvlink.bandwidth\" = \"900GB/s\"\n".to_vec(),
            ],
            run: sweep_toml,
        },
        Target {
            name: "model-toml",
            seeds: vec![
                b"global_batch = 512\ntp = 8\npp = 2\nschedule = \"1f1b\"\nmicro_batch = 1\n".to_vec(),
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
                include_bytes!("../../tests/fixtures/jax/add_relu/in0.npy").to_vec(),
                include_bytes!("../../tests/fixtures/jax/argmax_sharded/out1.npy").to_vec(),
                include_bytes!("../../tests/fixtures/tensor/npy/c8_arange.npy").to_vec(),
            ],
            run: |b| shardsim::tensor::npy::parse_npy(b).is_ok(),
        },
        Target {
            name: "measured-csv",
            seeds: vec![b"# nccl-tests\nsize_bytes,busbw_gbs\n1024,3.5\n1048576,120.25\n".to_vec()],
            run: |b| {
                shardsim::report::collective_plot::measured_curve_from(b, "m.csv", "m").is_ok()
            },
        },
        Target {
            name: "sweep-csv",
            seeds: vec![
                b"point,mesh.shape,topology.nodes,step_ms,mfu\n0,\"[-1, 1]\",2,8.1,0.41\n1,\"[-1, 2]\",2,7.9,0.42\n".to_vec(),
            ],
            run: sweep_csv,
        },
        Target {
            name: "flag-values",
            seeds: vec![
                b"--topology dgx-h100\n--set nodes=2\n--set nvlink.bandwidth=900GB/s\n--straggler 3:1.5\n--random-stragglers 2:1.5\n--random-link-failures 2@50us\n--jitter 0.05\n--seed 7".to_vec(),
                b"--topology ring:8\n--link-fault gpu0->gpu1@20us:0.5\n--sizes 8B:8GiB:x2\n--tensor 16x30\n--shape 2,4\n--device-ids 8,9,10,11\n--shard 1/4".to_vec(),
                b"--max-input-size 2GiB\n--bandwidth 900GB/s\n--latency 1.5us\n--flops 989TFLOP/s\n--sizes 1MiB,1GiB".to_vec(),
            ],
            run: flag_values,
        },
        Target {
            name: "cli-args",
            seeds: vec![
                b"mesh --shape 2,4 --names x,y --device-ids 0,2,4,6,1,3,5,7".to_vec(),
                b"exec p.mlir --topology dgx-h100 --nodes 2 --set nvlink.bandwidth=900GB/s --straggler 3:1.5".to_vec(),
                b"collective --topology ring:8 --op all_reduce --sizes 1MiB".to_vec(),
                b"plan p.mlir --device (cuda,0,cuda,global) -o out.mlir".to_vec(),
                b"sweep s.toml --jobs 2 --shard 1/4 --resume".to_vec(),
            ],
            run: cli_args,
        },
    ]
}

/// One to five random edits of `seed`: byte flips, hostile tokens, deletions,
/// duplications, truncation, and a number replaced by a huge or edge value
/// (which is what finds unbounded work: the syntax stays valid).
fn mutate(rng: &mut ChaCha8Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..rng.random_range(1..=5) {
        let at = rng.random_range(0..=b.len());
        match rng.random_range(0..7) {
            5 | 6 => {
                // The first number at or after `at` (or the last before it).
                let digit = |i: &usize| b[*i].is_ascii_digit();
                let Some(i) = (at..b.len())
                    .find(digit)
                    .or_else(|| (0..at).rev().find(digit))
                else {
                    continue;
                };
                let start = (0..=i).rev().take_while(digit).last().unwrap_or(i);
                let end = (i..b.len()).take_while(digit).last().map_or(i, |e| e + 1);
                let t = HOSTILE_NUMBERS[rng.random_range(0..HOSTILE_NUMBERS.len())];
                b.splice(start..end, t.iter().copied());
            }
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
    if args.cases == 0 {
        anyhow::bail!("--cases must be at least 1");
    }
    let chosen: Vec<Target> = targets()
        .into_iter()
        .filter(|t| args.only.is_empty() || args.only.iter().any(|o| o == t.name))
        .collect();
    if chosen.is_empty() {
        let names: Vec<&str> = targets().iter().map(|t| t.name).collect();
        anyhow::bail!("--only names no format (formats: {})", names.join(", "));
    }
    // Every seed must pass unmutated, or its format's mutations test less
    // than they claim.
    let failing: Vec<String> = chosen
        .iter()
        .flat_map(|t| {
            let bad = t.seeds.iter().enumerate().filter(|(_, s)| !(t.run)(s));
            bad.map(|(i, _)| format!("{} seed {i}", t.name))
        })
        .collect();
    if !failing.is_empty() {
        anyhow::bail!("seeds that do not pass unmutated: {}", failing.join(", "));
    }
    // Panics are counted, not printed (the hook is restored afterwards).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut rows = Vec::new();
    let mut panics_seen = Vec::new();
    let mut bar = super::progress::Progress::new((chosen.len() * args.cases) as u64, "bench fuzz");
    for t in &chosen {
        bar.message(format!("bench fuzz: {}", t.name));
        let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
        let (mut ok, mut panics) = (0, 0);
        let mut times = Vec::with_capacity(args.cases);
        let start = Instant::now();
        for i in 0..args.cases {
            let input = mutate(&mut rng, &t.seeds[i % t.seeds.len()]);
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
            bar.inc();
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
    drop(bar);
    std::panic::set_hook(hook);
    match args.format {
        Format::Json => outln!("{}", serde_json::to_string_pretty(&rows)?)?,
        Format::Text => {
            outln!(
                "{:<18} {:>7} {:>7} {:>7} {:>7} {:>11} {:>10} {:>9}",
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
                    "{:<18} {:>7} {:>7} {:>7} {:>7} {:>11.0} {:>10.1} {:>9.2}",
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
