//! The whole Disco surface run on the simulated, threaded and process
//! backends: values against hand-computed ones, and every backend's results
//! equal to the simulated session's bit for bit (2..8 workers, forced
//! algorithms, every reduction).

use shardsim::base::DType;
use shardsim::collective::Algorithm;
use shardsim::runtime::{
    Arg, Device, ProcessSession, Session, SessionError, SimSession, ThreadedSession, Value,
};
use shardsim::tensor::{CollectiveReduction, Tensor};
use shardsim::topology;

pub fn topo() -> topology::Topology {
    topology::load("dgx-h100", &[]).unwrap()
}

pub fn exe() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_shardsim"))
}

/// The three backends with `n` workers, CCL set up on devices 0..n.
pub fn backends(n: usize, algo: Option<Algorithm>) -> Vec<(&'static str, Box<dyn Session>)> {
    let ids: Vec<u32> = (0..n as u32).collect();
    let mut sim = SimSession::new(topo(), n);
    sim.algo = algo;
    let mut thr = ThreadedSession::start_threads(topo(), n).unwrap();
    thr.algo = algo;
    let mut pro = ProcessSession::start_processes(topo(), n, exe()).unwrap();
    pro.algo = algo;
    let mut v: Vec<(&str, Box<dyn Session>)> = vec![
        ("sim", Box::new(sim)),
        ("threads", Box::new(thr)),
        ("processes", Box::new(pro)),
    ];
    for (_, s) in &mut v {
        s.init_ccl("nccl", &ids).unwrap();
    }
    v
}

/// Every collective and host copy on data that rounds (x * 0.1 in f32);
/// the values every worker ends with, in order.
/// With `forced` (one algorithm for every collective) only allreduce and
/// allgather run (the worker-0 collectives have other algorithms).
fn transcript(s: &mut dyn Session, reduction: CollectiveReduction, forced: bool) -> Vec<Value> {
    let n = s.num_workers();
    let k = 37u64; // not a multiple of n: uneven plan pieces
    let iota = s.get_global_func("tensor.iota").unwrap();
    let scale = s.get_global_func("tensor.scale").unwrap();
    let (i, _) = iota
        .call(s, &[Arg::Int(k as i64), Arg::DType(DType::F32)])
        .unwrap();
    let (x, _) = scale.call(s, &[Arg::Ref(i), Arg::Float(0.1)]).unwrap();
    let red = s.empty(&[k], DType::F32, None).unwrap();
    s.allreduce(x, red, reduction).unwrap();
    let gat = s.empty(&[n as u64, k], DType::F32, None).unwrap();
    s.allgather(x, gat).unwrap();
    let host = Tensor::from_vec(
        vec![n as u64, 3],
        (0..3 * n).map(|v| v as f32 * 0.7).collect::<Vec<f32>>(),
    )
    .unwrap();
    let h = s.empty(&[n as u64, 3], DType::F32, None).unwrap();
    s.copy_to_worker_0(&host, h).unwrap();
    let b = s.empty(&[n as u64, 3], DType::F32, None).unwrap();
    if !forced {
        s.broadcast_from_worker0(h, b).unwrap();
    }
    let piece = s.empty(&[1, 3], DType::F32, None).unwrap();
    if !forced {
        s.scatter_from_worker0(h, piece).unwrap();
        let g0 = s.empty(&[n as u64, 3], DType::F32, None).unwrap();
        s.gather_to_worker0(piece, g0).unwrap();
        let (back, _) = s.copy_from_worker_0(g0).unwrap();
        assert_eq!(
            back, host,
            "scatter then gather gives worker 0's array back"
        );
    }
    s.sync_worker_0().unwrap();
    let mut out = Vec::new();
    for r in [x, red, gat, b, piece] {
        for w in 0..n {
            out.push(s.debug_get_value(r, w).unwrap());
        }
    }
    out
}

#[test]
fn every_backend_equals_the_simulated_session_bit_for_bit() {
    let reductions = [
        CollectiveReduction::Sum,
        CollectiveReduction::Avg,
        CollectiveReduction::Max,
        CollectiveReduction::Prod,
        CollectiveReduction::Min,
    ];
    for n in 2..=8usize {
        let algos: &[Option<Algorithm>] = match n {
            2 | 3 | 5 => &[None],
            4 | 8 => &[
                None,
                Some(Algorithm::Ring),
                Some(Algorithm::RecursiveDoubling),
            ],
            _ => &[None, Some(Algorithm::Ring)],
        };
        for &algo in algos {
            let red = reductions[n % reductions.len()];
            let mut results = Vec::new();
            for (name, mut s) in backends(n, algo) {
                results.push((name, transcript(s.as_mut(), red, algo.is_some())));
                s.shutdown().unwrap();
            }
            let (_, want) = &results[0];
            // Closed form for the sum: worker w holds 0.1 * (w*k + i).
            if red == CollectiveReduction::Sum {
                let Value::Tensor(t) = &want[n] else { panic!() };
                let k = 37.0;
                for (i, got) in t.to_f64_vec().into_iter().enumerate() {
                    let exact: f64 = (0..n).map(|w| 0.1 * (w as f64 * k + i as f64)).sum();
                    assert!(
                        (got - exact).abs() <= 1e-4 * exact.abs().max(1.0),
                        "{got} vs {exact}"
                    );
                }
            }
            for (name, got) in &results[1..] {
                assert_eq!(got, want, "{name} with {n} workers, {algo:?}, {red:?}");
            }
        }
    }
}

#[test]
fn call_packed_passes_scalars_dtypes_devices_strings_and_registers() {
    for (name, mut s) in backends(3, None) {
        let f = s.get_global_func("runtime.describe").unwrap();
        let arr = s.empty(&[2, 2], DType::BF16, None).unwrap();
        let dev = Device {
            kind: "cuda".into(),
            id: 3,
        };
        let args = [
            Arg::Int(-7),
            Arg::Float(2.5),
            Arg::Str("héllo".into()),
            Arg::DType(DType::I8),
            Arg::Device(dev),
            Arg::Ref(arr),
        ];
        let (r, _) = f.call(s.as_mut(), &args).unwrap();
        for w in 0..3 {
            let want = format!(
                "worker {w}: int:-7, float:2.5, str:héllo, dtype:i8, device:cuda:3, array[2, 2]:bf16"
            );
            assert_eq!(s.debug_get_value(r, w).unwrap(), Value::Str(want), "{name}");
        }
        let id = s.get_global_func("runtime.worker_id").unwrap();
        let (r, _) = id.call(s.as_mut(), &[]).unwrap();
        assert_eq!(s.debug_get_value(r, 2).unwrap(), Value::Int(2), "{name}");
        // debug_copy_from reaches one worker only.
        let a = s.empty(&[3], DType::I32, None).unwrap();
        let v = Tensor::from_vec(vec![3], vec![5i32, 6, 7]).unwrap();
        s.debug_copy_from(a, 1, &v).unwrap();
        assert_eq!(s.debug_get_from_remote(a, 1).unwrap(), v, "{name}");
        assert_eq!(
            s.debug_get_from_remote(a, 0).unwrap().to_f64_vec(),
            vec![0.0; 3],
            "{name}"
        );
    }
}

#[test]
fn errors_are_the_same_kind_on_every_backend() {
    for (name, mut s) in backends(2, None) {
        assert!(
            matches!(
                s.get_global_func("no.such"),
                Err(SessionError::UnknownFunc(_))
            ),
            "{name}"
        );
        let a = s.empty(&[4], DType::F32, None).unwrap();
        let b = s.empty(&[5], DType::F32, None).unwrap();
        let e = s.allreduce(a, b, CollectiveReduction::Sum).unwrap_err();
        assert!(
            matches!(
                e,
                SessionError::Shape {
                    op: "allreduce",
                    ..
                }
            ),
            "{name}: {e}"
        );
        let e = s.debug_get_value(a, 9).unwrap_err();
        assert!(
            matches!(
                e,
                SessionError::NoSuchWorker {
                    worker: 9,
                    workers: 2
                }
            ),
            "{name}"
        );
        let e = s
            .debug_get_value(shardsim::runtime::DRef(999), 0)
            .unwrap_err();
        assert!(matches!(e, SessionError::UnknownRef(_)), "{name}");
        // A function's own error names the worker and the signature.
        let f = s.get_global_func("tensor.matmul").unwrap();
        let e = f.call(s.as_mut(), &[Arg::Ref(a), Arg::Ref(a)]).unwrap_err();
        assert!(e.to_string().contains("rank-2"), "{name}: {e}");
        // The session still works after a failed call, and not after shutdown.
        s.sync_worker_0().unwrap();
        s.shutdown().unwrap();
        assert!(s.empty(&[1], DType::F32, None).is_err(), "{name}");
    }
}
