//! Memory per device and scope: arguments stay, intermediates live from the
//! start of their producer to the end of their last reader; an allocation past
//! the capacity is reported with device, scope, time and live buffers.

use shardsim::exec::timed::{run_timed, OomPolicy, ScopePeak, StreamKind, TimedOptions, Timeline};
use shardsim::topology::{self, preset_text, Topology};

use super::{dgx_h100, program};

const KIB512: u64 = 512 * 1024;

/// Device `d`'s peak in its `global` (HBM) scope.
fn global_peak(t: &Timeline, d: u64) -> &ScopePeak {
    t.peaks
        .iter()
        .find(|p| p.device == d && p.scope == "global")
        .unwrap()
}

pub fn small_hbm(capacity: &str) -> Topology {
    let text = preset_text("dgx-h100").unwrap().replace(
        "capacity = \"80GiB\"",
        &format!("capacity = \"{capacity}\""),
    );
    assert!(text.contains(capacity));
    topology::load_text(&text, "small-hbm.toml", &[]).unwrap()
}

#[test]
fn peak_is_the_argument_and_two_intermediates() {
    let p = program("timed/chain.mlir");
    let t = run_timed(&p, &dgx_h100(), &TimedOptions::default()).unwrap();
    let first_end = t
        .spans
        .iter()
        .find(|s| s.device == 0 && s.stream == StreamKind::Compute)
        .unwrap()
        .end_ps;
    for d in 0..8 {
        let g = global_peak(&t, d);
        assert_eq!(g.peak, 3 * KIB512, "device {d}");
        // Reached when the second op allocates, right after the first ends.
        assert_eq!(g.peak_at_ps, first_end);
        assert_eq!(g.capacity, 80 << 30);
    }
    assert!(t.ooms.is_empty());
}

#[test]
fn out_of_memory_names_device_scope_time_and_live_buffers() {
    let p = program("timed/chain.mlir");
    let topo = small_hbm("1MiB");
    let t = run_timed(&p, &topo, &TimedOptions::default()).unwrap();
    assert!(t.stopped);
    assert_eq!(t.ooms.len(), 1);
    let o = &t.ooms[0];
    assert_eq!((o.device, o.scope.as_str()), (0, "global"));
    assert_eq!((o.value.as_str(), o.bytes), ("%1", KIB512));
    assert_eq!((o.in_use, o.capacity), (2 * KIB512, 1 << 20));
    let live: Vec<&str> = o.live.iter().map(|b| b.value.as_str()).collect();
    assert_eq!(live, ["%0", "%arg0"]);
    // The report comes when the first op ends and the second would start.
    let unbounded = run_timed(&p, &dgx_h100(), &TimedOptions::default()).unwrap();
    let first_end = unbounded.spans[0].end_ps;
    assert_eq!(o.time_ps, first_end);
    assert!(t.makespan_ps <= first_end);
}

#[test]
fn continuing_past_out_of_memory_reports_every_allocation_and_keeps_the_times() {
    let p = program("timed/chain.mlir");
    let opts = TimedOptions {
        on_oom: OomPolicy::Continue,
        ..TimedOptions::default()
    };
    let t = run_timed(&p, &small_hbm("1MiB"), &opts).unwrap();
    let unbounded = run_timed(&p, &dgx_h100(), &opts).unwrap();
    assert!(!t.stopped);
    // Two allocations per device do not fit: %1 and %2.
    assert_eq!(t.ooms.len(), 16);
    assert_eq!(t.makespan_ps, unbounded.makespan_ps);
    assert_eq!(t.spans, unbounded.spans);
}

/// A manual computation's result takes over its body's buffer: per device
/// the argument block and the tanh block (2 x 8 f32 each), never a copy.
#[test]
fn a_manual_result_renames_the_body_buffer() {
    let p = program("timed/manual_relabel.mlir");
    let t = run_timed(&p, &dgx_h100(), &TimedOptions::default()).unwrap();
    for d in 0..8 {
        let g = global_peak(&t, d);
        assert_eq!(g.peak, 2 * 64, "device {d}");
    }
}

/// Relabels of a kept argument, and of a value read again later, hold no
/// second buffer: per device the argument block plus each computed block
/// (2 x 8 f32, 64 bytes), however many values name them.
#[test]
fn relabels_share_their_buffer_with_kept_and_still_read_values() {
    for (fixture, blocks) in [
        // The argument (also the body's argument and the first result) and the tanh.
        ("timed/manual_relabel_kept.mlir", 2),
        // The argument, the tanh (also the body's argument and the first
        // result) and the negate.
        ("timed/manual_relabel_read_after.mlir", 3),
    ] {
        let p = program(fixture);
        let t = run_timed(&p, &dgx_h100(), &TimedOptions::default()).unwrap();
        for d in 0..8 {
            let g = global_peak(&t, d);
            assert_eq!(g.peak, blocks * 64, "{fixture}: device {d}");
        }
    }
}

/// A donated accumulator takes the update in place: per device the two
/// arguments and the new gradient (3 x 64 bytes) instead of also the sum
/// (4 x 64); donating the other argument (read by the tanh, whose result
/// is the same size) saves its buffer the same way.
#[test]
fn a_donated_argument_is_updated_in_place() {
    let p = program("timed/accumulate.mlir");
    for (donated, blocks) in [(vec![], 4), (vec![0], 3), (vec![0, 1], 2)] {
        let opts = TimedOptions {
            donated_args: donated.clone(),
            ..TimedOptions::default()
        };
        let t = run_timed(&p, &dgx_h100(), &opts).unwrap();
        for d in 0..8 {
            assert_eq!(
                global_peak(&t, d).peak,
                blocks * 64,
                "{donated:?}: device {d}"
            );
        }
    }
}
