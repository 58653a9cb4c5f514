//! `load_vm_module` on every backend: JAX fixture programs on meshes of 2 to
//! 8 devices (the fixtures' 2 x 4 mesh and smaller ones, uneven shards
//! included), run on threads and processes, give exactly the lockstep
//! executor's results (the simulated session) and JAX's within rounding.

use std::path::{Path, PathBuf};

use shardsim::runtime::{vm, Arg, Value};
use shardsim::tensor::allclose;

use super::backends::backends;

/// (x, y) of a mesh of n devices.
fn mesh_for(n: usize) -> (usize, usize) {
    match n {
        4 => (2, 2),
        6 => (2, 3),
        8 => (2, 4),
        n => (1, n),
    }
}

/// Fixtures on the `x=2, y=4` mesh with collectives, a few.
fn cases() -> Vec<PathBuf> {
    let mesh = r#"sdy.mesh @mesh = <["x"=2, "y"=4]>"#;
    let mut v: Vec<(usize, PathBuf)> = crate::common::jax_cases_with_data()
        .into_iter()
        .filter(|d| std::fs::read_to_string(d.join("before.mlir")).is_ok_and(|t| t.contains(mesh)))
        .filter_map(|d| {
            let p = vm::load(&d.join("before.mlir")).ok()?;
            Some((p.collectives().count(), d))
        })
        .filter(|(c, _)| *c > 0)
        .collect();
    v.sort_by_key(|(c, d)| (std::cmp::Reverse(*c), d.clone()));
    v.into_iter().map(|(_, d)| d).take(3).collect()
}

/// `dir`'s program with its mesh (and `mhlo.num_partitions`) set to `n`
/// devices, in a scratch file.
fn on_mesh(dir: &Path, n: usize, scratch: &Path) -> PathBuf {
    let (x, y) = mesh_for(n);
    let text = std::fs::read_to_string(dir.join("before.mlir"))
        .unwrap()
        .replace(
            r#"sdy.mesh @mesh = <["x"=2, "y"=4]>"#,
            &format!(r#"sdy.mesh @mesh = <["x"={x}, "y"={y}]>"#),
        )
        // The partition count must stay the mesh's device count.
        .replace(
            "mhlo.num_partitions = 8 :",
            &format!("mhlo.num_partitions = {n} :"),
        );
    let name = format!("{}_{n}.mlir", dir.file_name().unwrap().to_string_lossy());
    let p = scratch.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn fixture_programs_run_alike_on_every_backend() {
    let cases = cases();
    assert!(cases.len() >= 3, "{cases:?}");
    let scratch = std::env::temp_dir().join(format!("shardsim-rt-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut ran = 0;
    for n in 2..=8usize {
        // Two fixtures per device count, rotating through the cases.
        for dir in cases.iter().cycle().skip(n).take(2) {
            let file = on_mesh(dir, n, &scratch);
            let Ok(program) = vm::load(&file) else {
                continue;
            };
            let inputs = crate::common::numbered(dir, "in");
            let jax = crate::common::numbered(dir, "out");
            let want = shardsim::exec::execute(&program, &inputs).unwrap();
            for (o, j) in want.iter().zip(&jax) {
                assert!(
                    allclose(o, j, 1e-4, 1e-5).unwrap(),
                    "{} on {n}: lockstep vs JAX",
                    dir.display()
                );
            }
            for (name, mut s) in backends(n, None) {
                let m = s.load_vm_module(&file, None).unwrap();
                let main = m.get_function(s.as_mut(), "main").unwrap();
                // Inputs: copied to worker 0, broadcast to all.
                let mut args = Vec::new();
                for x in &inputs {
                    let h = s.empty(x.shape(), x.dtype(), None).unwrap();
                    s.copy_to_worker_0(x, h).unwrap();
                    let r = s.empty(x.shape(), x.dtype(), None).unwrap();
                    s.broadcast_from_worker0(h, r).unwrap();
                    args.push(Arg::Ref(r));
                }
                let (out, _) = main
                    .call(s.as_mut(), &args)
                    .unwrap_or_else(|e| panic!("{name} {} on {n}: {e}", dir.display()));
                for w in 0..n {
                    assert_eq!(
                        s.debug_get_value(out, w).unwrap(),
                        Value::Tuple(want.clone()),
                        "{name}, worker {w}: {} on {n} devices",
                        dir.display()
                    );
                }
            }
            ran += 1;
        }
    }
    std::fs::remove_dir_all(&scratch).unwrap();
    assert!(
        ran >= 12,
        "only {ran} (program, device count) pairs partitioned"
    );
}

#[test]
fn a_module_for_another_device_count_is_refused() {
    let dir = &cases()[0];
    for (name, mut s) in backends(3, None) {
        let e = s
            .load_vm_module(&dir.join("before.mlir"), None)
            .unwrap_err();
        assert!(e.to_string().contains("8 devices"), "{name}: {e}");
        let e = s
            .load_vm_module(Path::new("no/such.mlir"), None)
            .unwrap_err();
        assert!(e.to_string().contains("no/such.mlir"), "{name}: {e}");
    }
}
