//! The whole-model fixtures (training and inference steps with loops, gather,
//! scatter, sort, top_k, convolution, shard_map): each one runs end to end —
//! JAX's export is propagated, partitioned and run on the virtual devices
//! against JAX's outputs, its collectives move at most XLA's bytes, and a
//! timed run on a DGX H100 reports a step time and a peak memory — or is
//! listed in `PENDING` with what it still lacks. The test checks that exactly
//! the pending cases fail, so finishing one (or breaking one) shows.
//! Loops: partitioned once (the program does not grow with the trip count)
//! and timed iteration by iteration (the step time grows linearly).

use std::path::PathBuf;

use shardsim::exec::execute;
use shardsim::exec::timed::{run_timed, TimedOptions};
use shardsim::ir::inline;
use shardsim::ir::mlir::parse_and_verify;
use shardsim::ir::Module;
use shardsim::partition::{partition, xla, SpmdProgram, Step};
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::tensor::allclose;

/// Cases that do not run end to end yet, with what they need.
const PENDING: &[(&str, &str)] = &[];

fn cases() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(crate::common::fixture("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("lowered.mlir").exists())
        .collect();
    out.sort();
    out
}

fn propagated(text: &str) -> Result<Module, String> {
    let module = parse_and_verify(text).map_err(|e| e.to_string())?;
    let mut module = inline::inline_calls(&module).map_err(|e| e.to_string())?;
    propagate_module(&mut module, Strategy::default()).map_err(|e| e.to_string())?;
    Ok(module)
}

/// Run one case end to end: (bytes per device, XLA's, step time in ps), or
/// the first thing that fails.
fn run_case(dir: &std::path::Path) -> Result<(u64, u64, u64), String> {
    let text = std::fs::read_to_string(dir.join("lowered.mlir")).unwrap();
    let module = propagated(&text)?;
    let program = partition(&module).map_err(|e| format!("partition: {e}"))?;
    let inputs = crate::common::numbered(dir, "in");
    let expected = crate::common::numbered(dir, "out");
    let outs = execute(&program, &inputs).map_err(|e| format!("exec: {e}"))?;
    if outs.len() != expected.len() {
        return Err(format!(
            "{} outputs, JAX has {}",
            outs.len(),
            expected.len()
        ));
    }
    for (i, (o, e)) in outs.iter().zip(&expected).enumerate() {
        if !allclose(o, e, 1e-4, 1e-5).unwrap_or(false) {
            return Err(format!("out{i} differs from JAX's"));
        }
    }
    let hlo = std::fs::read_to_string(dir.join("spmd.hlo")).unwrap();
    let theirs = xla::total_bytes(&hlo).map_err(|e| format!("spmd.hlo: {e}"))?;
    let ours = program.total_collective_bytes();
    if ours > theirs {
        return Err(format!("{ours} bytes per device, XLA {theirs}"));
    }
    let t = run_timed(
        &program,
        &crate::timed::dgx_h100(),
        &TimedOptions::default(),
    )
    .map_err(|e| format!("timed: {e}"))?;
    if t.makespan_ps == 0 || t.peaks.iter().all(|p| p.peak == 0) {
        return Err("the timed run reports no step time or no memory".into());
    }
    Ok((ours, theirs, t.makespan_ps))
}

#[test]
fn whole_model_fixtures_run_end_to_end_or_are_pending() {
    let cases = cases();
    assert!(cases.len() >= 9, "expected the whole-model fixtures");
    let mut wrong = Vec::new();
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let pending = PENDING.iter().any(|(n, _)| *n == name);
        match (run_case(dir), pending) {
            (Ok(_), true) => wrong.push(format!("{name}: runs now; drop it from PENDING")),
            (Err(e), false) => wrong.push(format!("{name}: {e}")),
            // The figures README quotes (`cargo test models -- --nocapture`).
            (Ok((ours, xla, ps)), false) => {
                eprintln!("{name}: {ours} bytes per device (XLA {xla}), step {ps} ps on dgx-h100")
            }
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// fori_loop_power with its bound set to `trips`.
fn fori_loop(trips: u64) -> SpmdProgram {
    let path = crate::common::fixture("models/fori_loop_power/lowered.mlir");
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.replace(
        "%c_4 = stablehlo.constant dense<5> : tensor<i32>",
        &format!("%c_4 = stablehlo.constant dense<{trips}> : tensor<i32>"),
    );
    partition(&propagated(&text).unwrap()).unwrap()
}

#[test]
fn a_loop_is_partitioned_once_whatever_its_trip_count() {
    let (a, b) = (fori_loop(5), fori_loop(500));
    assert_eq!(a.steps.len(), b.steps.len());
    let trips: Vec<Option<u64>> = b
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Loop(l) => Some(l.trip_count),
            _ => None,
        })
        .collect();
    assert_eq!(trips, vec![Some(500)]);
    assert_eq!(a.total_collective_bytes(), b.total_collective_bytes());
}

#[test]
fn a_loop_is_timed_iteration_by_iteration() {
    let topo = crate::timed::dgx_h100();
    let time = |trips| {
        run_timed(&fori_loop(trips), &topo, &TimedOptions::default())
            .unwrap()
            .makespan_ps
    };
    let (t10, t20, t30) = (time(10), time(20), time(30));
    assert!(t10 < t20, "{t10} {t20}");
    // Identical iterations: each ten more cost the same.
    assert_eq!(t30 - t20, t20 - t10);
}

#[test]
fn a_data_dependent_loop_needs_an_assumed_trip_count() {
    // The bound compared with the counter is a function argument, not a constant.
    let text = "func.func @main(%arg0: tensor<i32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg1) : tensor<i32>, tensor<4xf32>
  cond {
    %1 = stablehlo.compare LT, %iterArg, %arg0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.add %iterArg, %c_1 : tensor<i32>
    %2 = stablehlo.add %iterArg_0, %iterArg_0 : tensor<4xf32>
    stablehlo.return %1, %2 : tensor<i32>, tensor<4xf32>
  }
  return %0#1 : tensor<4xf32>
}
";
    let text = format!(
        "module @m {{\n  sdy.mesh @mesh = <[\"x\"=2]>\n{}}}\n",
        text.lines().map(|l| format!("  {l}\n")).collect::<String>()
    );
    let program = partition(&propagated(&text).unwrap()).unwrap();
    let topo = crate::timed::dgx_h100();
    let err = run_timed(&program, &topo, &TimedOptions::default()).unwrap_err();
    assert!(err.to_string().contains("--trip-count"), "{err}");
    let opts = TimedOptions {
        trip_count: Some(3),
        ..TimedOptions::default()
    };
    assert!(run_timed(&program, &topo, &opts).unwrap().makespan_ps > 0);
    // The lockstep executor runs it with real data: 3 doublings.
    let x = shardsim::tensor::Tensor::from_vec(vec![4], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let n = shardsim::tensor::Tensor::from_vec(vec![], vec![3i32]).unwrap();
    let out = execute(&program, &[n, x]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![8.0, 16.0, 24.0, 32.0]);
}

/// A loop whose every allocation is out of memory, run on: each device keeps
/// its first `MAX_OOM_REPORTS` reports and counts the rest, so memory stays
/// bounded however long the run, and the count still grows with the work.
#[test]
fn out_of_memory_reports_are_counted_past_the_kept_ones() {
    use shardsim::exec::timed::{OomPolicy, MAX_OOM_REPORTS};
    let topo = crate::timed::memory::small_hbm("1KiB");
    let opts = TimedOptions {
        on_oom: OomPolicy::Continue,
        ..TimedOptions::default()
    };
    let total = |trips| {
        let t = run_timed(&fori_loop(trips), &topo, &opts).unwrap();
        for d in &t.devices {
            let kept = t.ooms.iter().filter(|o| o.device == *d).count();
            assert!(kept <= MAX_OOM_REPORTS as usize, "device {d} keeps {kept}");
        }
        (t.ooms.len() as u64 + t.ooms_dropped, t.ooms_dropped)
    };
    let ((t100, dropped), (t200, _), (t300, _)) = (total(100), total(200), total(300));
    assert!(dropped > 0, "the cap is reached");
    assert_eq!(t300 - t200, t200 - t100);
}
