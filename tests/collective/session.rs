//! The Disco-style session over simulated devices: data results against
//! hand-computed values, times against the collectives' own timing, errors,
//! and the `shardsim collective` CLI.

use crate::common::{shardsim, shardsim_stdout};
use shardsim::base::DType;
use shardsim::collective::{run_collective, Calibration, CollectiveOp, Group};
use shardsim::runtime::{Session, SessionError, SimSession};
use shardsim::tensor::{CollectiveReduction, Tensor};
use shardsim::topology;

fn session(n: usize) -> SimSession {
    let t = topology::load("dgx-h100", &[]).unwrap();
    let mut s = SimSession::new(t, n);
    s.init_ccl("nccl", &(0..n as u32).collect::<Vec<_>>())
        .unwrap();
    s
}

fn f32s(shape: Vec<u64>, v: Vec<f32>) -> Tensor {
    Tensor::from_vec(shape, v).unwrap()
}

#[test]
fn allreduce_and_allgather_over_workers() {
    let mut s = session(4);
    let a = s.empty(&[2, 3], DType::F32, None).unwrap();
    for w in 0..4 {
        let v: Vec<f32> = (0..6).map(|i| (w * 10 + i) as f32).collect();
        s.debug_copy_from(a, w, &f32s(vec![2, 3], v)).unwrap();
    }
    let b = s.empty(&[2, 3], DType::F32, None).unwrap();
    let t = s.allreduce(a, b, CollectiveReduction::Sum).unwrap();
    // sum over w of (10w + i) = 60 + 4i.
    let want: Vec<f64> = (0..6).map(|i| 60.0 + 4.0 * i as f64).collect();
    for w in 0..4 {
        assert_eq!(s.debug_get_from_remote(b, w).unwrap().to_f64_vec(), want);
    }
    // The session's time is the collectives layer's time for the same message.
    let topo = topology::load("dgx-h100", &[]).unwrap();
    let g = Group::first(&topo, 4).unwrap();
    let cal = Calibration::for_model(&g.device_model(&topo)).unwrap();
    let r = run_collective(&topo, &g, &CollectiveOp::AllReduce, 6, 4, &cal, None, None).unwrap();
    assert_eq!(t, r.time);
    assert!(t.ps() > 0);
    let m = s.empty(&[2, 3], DType::F32, None).unwrap();
    s.allreduce(a, m, CollectiveReduction::Max).unwrap();
    assert_eq!(
        s.debug_get_from_remote(m, 2).unwrap().to_f64_vec(),
        (30..36).map(f64::from).collect::<Vec<_>>()
    );

    let g8 = s.empty(&[8, 3], DType::F32, None).unwrap();
    s.allgather(a, g8).unwrap();
    let got = s.debug_get_from_remote(g8, 3).unwrap().to_f64_vec();
    let want: Vec<f64> = (0..4)
        .flat_map(|w| (0..6).map(move |i| (w * 10 + i) as f64))
        .collect();
    assert_eq!(got, want);
    assert!(s.clock().ps() > t.ps());
}

#[test]
fn worker0_broadcast_scatter_gather_and_host_copies() {
    let mut s = session(4);
    let x = s.empty(&[4, 2], DType::F32, None).unwrap();
    let host = f32s(vec![4, 2], (0..8).map(|i| i as f32).collect());
    let t_in = s.copy_to_worker_0(&host, x).unwrap();
    assert!(t_in.ps() > 0, "a host copy crosses PCIe");
    let y = s.empty(&[4, 2], DType::F32, None).unwrap();
    s.broadcast_from_worker0(x, y).unwrap();
    assert_eq!(s.debug_get_from_remote(y, 3).unwrap(), host);
    let piece = s.empty(&[1, 2], DType::F32, None).unwrap();
    s.scatter_from_worker0(x, piece).unwrap();
    for w in 0..4 {
        let want = vec![2.0 * w as f64, 2.0 * w as f64 + 1.0];
        assert_eq!(
            s.debug_get_from_remote(piece, w).unwrap().to_f64_vec(),
            want
        );
    }
    let back = s.empty(&[4, 2], DType::F32, None).unwrap();
    s.gather_to_worker0(piece, back).unwrap();
    let (out, _) = s.copy_from_worker_0(back).unwrap();
    assert_eq!(out, host);
    assert_eq!(s.sync_worker_0().unwrap(), s.clock());
}

#[test]
fn registered_functions_run_on_every_worker() {
    let mut s = session(3);
    s.register_func(
        "iota_plus_worker",
        Box::new(|w, _args| {
            Tensor::from_vec(vec![2], vec![w as i32, w as i32 + 1]).map_err(|e| e.to_string())
        }),
    );
    let (r, _) = s.call("iota_plus_worker", &[]).unwrap();
    let sum = s.empty(&[2], DType::I32, None).unwrap();
    s.allreduce(r, sum, CollectiveReduction::Sum).unwrap();
    assert_eq!(
        s.debug_get_from_remote(sum, 1).unwrap().to_f64_vec(),
        vec![3.0, 6.0]
    );
    let avg = s.empty(&[2], DType::I32, None).unwrap();
    s.allreduce(r, avg, CollectiveReduction::Avg).unwrap();
    assert_eq!(
        s.debug_get_from_remote(avg, 0).unwrap().to_f64_vec(),
        vec![1.0, 2.0]
    );
}

#[test]
fn session_errors() {
    let t = topology::load("dgx-h100", &[]).unwrap();
    let mut s = SimSession::new(t, 2);
    let a = s.empty(&[4], DType::F32, None).unwrap();
    assert_eq!(
        s.allreduce(a, a, CollectiveReduction::Sum),
        Err(SessionError::NoCcl)
    );
    assert!(matches!(
        s.init_ccl("gloo", &[0, 1]),
        Err(SessionError::Ccl(_))
    ));
    assert!(matches!(
        s.init_ccl("nccl", &[0]),
        Err(SessionError::Ccl(_))
    ));
    assert!(s.init_ccl("nccl", &[0, 0]).is_err());
    s.init_ccl("nccl", &[2, 5]).unwrap();
    assert!(matches!(
        s.debug_get_from_remote(a, 2),
        Err(SessionError::NoSuchWorker { .. })
    ));
    let wrong = s.empty(&[3], DType::F32, None).unwrap();
    assert!(matches!(
        s.allreduce(a, wrong, CollectiveReduction::Sum),
        Err(SessionError::Shape { .. })
    ));
    assert!(matches!(
        s.call("nope", &[]),
        Err(SessionError::UnknownFunc(_))
    ));
}

#[test]
fn cli_rows_follow_nccl_tests_definitions() {
    let out = shardsim(&[
        "collective",
        "--topology",
        "dgx-a100",
        "--op",
        "allgather",
        "--sizes",
        "1MiB,64MiB",
        "--format",
        "csv",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("size_bytes,count,time_us,algbw_gbs,busbw_gbs,algo,protocol")
    );
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        let (size, count, t, alg, bus): (f64, u64, f64, f64, f64) = (
            r[0].parse().unwrap(),
            r[1].parse().unwrap(),
            r[2].parse().unwrap(),
            r[3].parse().unwrap(),
            r[4].parse().unwrap(),
        );
        assert_eq!(count * 4, size as u64);
        assert!((alg - size / (t * 1e-6) / 1e9).abs() / alg < 1e-3);
        assert!(
            (bus - alg * 7.0 / 8.0).abs() / bus < 1e-3,
            "allgather busbw = algbw (n-1)/n"
        );
    }
    let json = shardsim(&[
        "collective",
        "--topology",
        "dgx-h100",
        "--op",
        "sendrecv",
        "--sizes",
        "1KiB:4KiB:x2",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 3);
    let bad = shardsim(&["collective", "--topology", "dgx-a100", "--op", "allfoo"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown operation"));
    let bad = shardsim(&["collective", "--topology", "dgx-a100", "--sizes", "1XB"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `--ranks` as a device list and as one GPU per node (the mesh group over
/// the node axis): the json names the devices; devices that do not exist,
/// duplicates and a missing local rank are one line, exit 2.
#[test]
fn cli_ranks_lists_and_node_groups() {
    let run = |ranks: &str| {
        shardsim(&[
            "collective",
            "--topology",
            "dgx-h100",
            "--nodes",
            "4",
            "--ranks",
            ranks,
            "--sizes",
            "1MiB",
            "--format",
            "json",
        ])
    };
    for (ranks, devices) in [
        ("0,8,16,24", vec![0, 8, 16, 24]),
        ("local:3", vec![3, 11, 19, 27]),
        ("4-6,9", vec![4, 5, 6, 9]),
        ("2", vec![0, 1]),
    ] {
        let out = run(ranks);
        assert!(
            out.status.success(),
            "{ranks}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ranks"].as_u64(), Some(devices.len() as u64), "{ranks}");
        let text = v.to_string();
        for d in devices {
            let name = format!("n{}.gpu{}", d / 8, d % 8);
            assert!(text.contains(&name), "{ranks}: {name} missing in {text}");
        }
    }
    for (ranks, says) in [
        ("0,8,99", "device 99 does not exist"),
        ("0,0", "appears twice"),
        ("local:8", "local rank 8 does not exist"),
        ("0,x", "expected a device number"),
        ("0", "the topology has 32 devices"),
    ] {
        let out = run(ranks);
        assert_eq!(out.status.code(), Some(2), "{ranks}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{ranks}: {err}");
        assert!(err.contains(says), "{ranks}: {err}");
    }
}

#[test]
fn empty_checks_the_memory_scope() {
    let mut s = session(2);
    assert!(s.empty(&[4], DType::F32, Some("global")).is_ok());
    assert!(matches!(
        s.empty(&[4], DType::F32, Some("shared")),
        Err(SessionError::Shape { op: "empty", .. })
    ));
}

/// A setting the collectives do not use says so: where the network reduces
/// (`network.in_switch_reduction`, SHARP on the DGX presets) and the ranks
/// span nodes, the sweep notes that CollNet is off (NCCL_COLLNET_ENABLE),
/// text and JSON; not on one node, nor with the setting off, nor with
/// CollNet enabled.
#[test]
fn an_unused_in_network_reduction_is_noted() {
    let run = |extra: &[&str], format: &str| {
        let mut args = vec![
            "collective",
            "--topology",
            "dgx-a100",
            "--sizes",
            "1MiB",
            "--format",
            format,
        ];
        args.extend_from_slice(extra);
        shardsim_stdout(&args)
    };
    let noted = |text: &str| text.contains("CollNet only where it is enabled");
    assert!(noted(&run(&["--nodes", "2"], "text")));
    let json: serde_json::Value = serde_json::from_str(&run(&["--nodes", "2"], "json")).unwrap();
    assert_eq!(json["notes"].as_array().unwrap().len(), 1, "{json}");
    assert!(!noted(&run(&[], "text")));
    assert!(!noted(&run(
        &["--nodes", "2", "--set", "network.in_switch_reduction=false"],
        "text"
    )));
    assert!(!noted(&run(
        &["--nodes", "2", "--set", "collective.collnet=true"],
        "text"
    )));
}
