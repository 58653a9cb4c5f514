//! Link faults during a timed run: a failed link on a grid is routed around
//! (the step gets slower, never faster, and finishes); a failed GPU uplink on
//! an NVSwitch node has no detour and the run reports the link and the lost
//! transfers; a degraded link slows the collective down. No hang, no panic.

use shardsim::engine::{FaultKind, LinkFault, Time};
use shardsim::exec::timed::{run_timed, TimedError, TimedOptions};
use shardsim::topology::{self, LinkId, Topology};

use super::{dgx_h100, program};

fn link(topo: &Topology, from: &str, to: &str) -> usize {
    let (a, b) = (topo.by_name(from).unwrap(), topo.by_name(to).unwrap());
    let l: LinkId = topo
        .out_links(a)
        .into_iter()
        .find(|&l| topo.link(l).to == b)
        .unwrap();
    l.0 as usize
}

fn with_faults(faults: Vec<LinkFault>) -> TimedOptions {
    TimedOptions {
        faults,
        ..TimedOptions::default()
    }
}

#[test]
fn a_failed_grid_link_is_routed_around() {
    let p = program("timed/dot_allreduce.mlir");
    let grid = topology::load("mesh2d:4x2", &[]).unwrap();
    let clean = run_timed(&p, &grid, &TimedOptions::default()).unwrap();
    // The all-reduce's busiest link (the lowest id of the busiest): a link
    // the algorithm `auto` picks keeps using midway through.
    let l = clean
        .links
        .iter()
        .max_by_key(|u| (u.bytes, std::cmp::Reverse(u.link)))
        .unwrap()
        .link;
    let fail_at = |at: u64| {
        run_timed(
            &p,
            &grid,
            &with_faults(vec![LinkFault {
                link: l,
                at: Time(at),
                kind: FaultKind::Fail,
            }]),
        )
        .unwrap()
    };
    let from_start = fail_at(0);
    assert!(from_start.makespan_ps > clean.makespan_ps);
    // Failing halfway through the all-reduce costs less than from its start.
    let dot_end = clean.spans[0].end_ps;
    let midway = fail_at(dot_end + (clean.makespan_ps - dot_end) / 2);
    assert!(midway.makespan_ps > clean.makespan_ps);
    assert!(midway.makespan_ps <= from_start.makespan_ps);
    // After the run, a fault changes nothing.
    assert_eq!(
        fail_at(clean.makespan_ps + 1).makespan_ps,
        clean.makespan_ps
    );
}

#[test]
fn a_failed_nvswitch_uplink_is_reported_with_the_link() {
    let p = program("timed/dot_allreduce.mlir");
    let topo = dgx_h100();
    let l = link(&topo, "n0.gpu3", "n0.nvswitch");
    let err = run_timed(
        &p,
        &topo,
        &with_faults(vec![LinkFault {
            link: l,
            at: Time(0),
            kind: FaultKind::Fail,
        }]),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            TimedError::Collective {
                what: "all_reduce",
                ..
            }
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("n0.gpu3 -> n0.nvswitch"), "{text}");
    assert!(text.contains("could not complete"), "{text}");
}

#[test]
fn a_degraded_link_slows_the_collective() {
    let p = program("timed/dot_allreduce.mlir");
    let topo = dgx_h100();
    let clean = run_timed(&p, &topo, &TimedOptions::default()).unwrap();
    let l = link(&topo, "n0.gpu3", "n0.nvswitch");
    let degrade = |f: f64| {
        run_timed(
            &p,
            &topo,
            &with_faults(vec![LinkFault {
                link: l,
                at: Time(0),
                kind: FaultKind::Degrade(f),
            }]),
        )
        .unwrap()
        .makespan_ps
    };
    let half = degrade(0.5);
    let quarter = degrade(0.25);
    assert!(
        clean.makespan_ps < half && half < quarter,
        "{} {half} {quarter}",
        clean.makespan_ps
    );
    assert_eq!(degrade(1.0), clean.makespan_ps);
}
