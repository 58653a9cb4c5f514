//! Process workers: a killed worker is reported within the timeout, a hung one
//! as hung, and after the session every child is reaped (no zombies).

use std::time::{Duration, Instant};

use shardsim::runtime::{Arg, ProcessSession, Session, SessionError};

use super::backends::{exe, topo};

/// Whether process `pid` still exists (a zombie still has its /proc entry).
fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_killed_worker_is_reported_and_every_child_reaped() {
    let mut s = ProcessSession::start_processes(topo(), 3, exe()).unwrap();
    s.set_timeout(Duration::from_secs(20));
    let pids = s.transport().pids();
    assert!(pids.iter().all(|&p| exists(p)));
    let sleep = s.get_global_func("runtime.sleep").unwrap();
    let victim = pids[1];
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        std::process::Command::new("kill")
            .args(["-9", &victim.to_string()])
            .status()
            .unwrap();
    });
    let t0 = Instant::now();
    let e = s.call_packed(&sleep, &[Arg::Int(30_000)]).unwrap_err();
    killer.join().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "reported after {:?}",
        t0.elapsed()
    );
    match &e {
        SessionError::WorkerDied { worker: 1, detail } => {
            assert!(detail.contains("signal 9"), "{detail}")
        }
        other => panic!("expected worker 1 died, got {other}"),
    }
    // The session is broken from then on, with the same error.
    assert_eq!(s.sync_worker_0().unwrap_err(), e);
    // Breaking stopped and reaped every worker, the sleeping ones too.
    for p in &pids {
        assert!(
            !exists(*p),
            "process {p} is still there (zombie or running)"
        );
    }
    drop(s);
}

#[test]
fn a_hung_worker_is_reported_after_the_timeout_and_killed() {
    let mut s = ProcessSession::start_processes(topo(), 2, exe()).unwrap();
    s.set_timeout(Duration::from_millis(500));
    let pids = s.transport().pids();
    let sleep = s.get_global_func("runtime.sleep").unwrap();
    let t0 = Instant::now();
    let e = s.call_packed(&sleep, &[Arg::Int(60_000)]).unwrap_err();
    let took = t0.elapsed();
    assert!(
        matches!(e, SessionError::WorkerTimeout { ms: 500, .. }),
        "{e}"
    );
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(10),
        "{took:?}"
    );
    for p in &pids {
        assert!(!exists(*p), "process {p} is still there");
    }
}

#[test]
fn a_clean_shutdown_reaps_every_worker() {
    let mut s = ProcessSession::start_processes(topo(), 4, exe()).unwrap();
    let pids = s.transport().pids();
    s.sync_worker_0().unwrap();
    s.shutdown().unwrap();
    for p in &pids {
        assert!(!exists(*p), "process {p} is still there");
    }
    assert!(matches!(s.sync_worker_0(), Err(SessionError::Broken(_))));
}

#[test]
fn a_missing_entrypoint_is_a_clear_error() {
    let e =
        ProcessSession::start_processes(topo(), 2, std::path::Path::new("/nonexistent/shardsim"))
            .err()
            .unwrap();
    assert!(e.to_string().contains("/nonexistent/shardsim"), "{e}");
}
