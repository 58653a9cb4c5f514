//! Pipeline schedules against their closed forms (uniform pass times, free
//! transfers): GPipe and 1F1B idle `(p - 1) / (m + p - 1)` of the step;
//! interleaving over `v` chunks cuts the bubble to `1/v` of that time; 1F1B
//! holds at most `p` microbatches on the first stage, GPipe all `m`.

use shardsim::models::pipeline::{run_schedule, schedule_order, PassTimes};
use shardsim::models::Schedule;

fn uniform(p: u64, v: u64, f: u64, b: u64) -> PassTimes {
    PassTimes {
        forward_ps: vec![f; (p * v) as usize],
        backward_ps: vec![b; (p * v) as usize],
        transfer_ps: 0,
        blocking_sends: false,
    }
}

/// Blocking point-to-point communication (Megatron-LM 2021) keeps the
/// sending stage busy for the transfer: GPipe over 2 stages, 2
/// microbatches, forward 10, backward 20, transfer 3. Overlapped, stage 1
/// runs F0 13-23, F1 23-33, B0 33-53, B1 53-73 and stage 0 B0 56-76, B1
/// 76-96; blocking, stage 0's F1 starts at 13 and its second send ends at
/// 26, so stage 1 runs F1 26-36, B0 36-56 (sending until 59), B1 59-79 and
/// stage 0 B0 59-79, B1 82-102.
#[test]
fn blocking_sends_keep_the_sending_stage_busy() {
    let order = schedule_order(Schedule::Gpipe, 2, 2, 1);
    let mut times = uniform(2, 1, 10, 20);
    times.transfer_ps = 3;
    assert_eq!(run_schedule(&order, 1, &times).unwrap().makespan_ps, 96);
    times.blocking_sends = true;
    assert_eq!(run_schedule(&order, 1, &times).unwrap().makespan_ps, 102);
}

#[test]
fn gpipe_and_1f1b_bubbles_follow_the_closed_form() {
    for p in [1u64, 2, 4, 8] {
        for m in [1u64, 2, 4, 8, 16, 64] {
            for kind in [Schedule::Gpipe, Schedule::OneFOneB] {
                let run = run_schedule(&schedule_order(kind, p, m, 1), 1, &uniform(p, 1, 300, 600))
                    .unwrap();
                assert_eq!(run.makespan_ps, (m + p - 1) * 900, "{kind:?} p={p} m={m}");
                let want = (p - 1) as f64 / (m + p - 1) as f64;
                assert!(
                    (run.bubble_fraction() - want).abs() < 1e-12,
                    "{kind:?} p={p} m={m}"
                );
                let held = run.max_in_flight[0];
                match kind {
                    Schedule::Gpipe => assert_eq!(held, m),
                    _ => assert_eq!(held, p.min(m), "1F1B p={p} m={m}"),
                }
                // Later stages hold fewer: stage s at most p - s.
                for (s, &h) in run.max_in_flight.iter().enumerate() {
                    if kind == Schedule::OneFOneB {
                        assert!(h <= (p - s as u64).min(m));
                    }
                }
            }
        }
    }
}

#[test]
fn interleaving_cuts_the_bubble_by_the_virtual_stages() {
    for p in [2u64, 4, 8] {
        for v in [2u64, 3, 4] {
            for m in [p, 2 * p, 4 * p] {
                // A stage's layers split over v chunks: each pass 1/v as long.
                let (f, b) = (300 * 12 / v, 600 * 12 / v);
                let order = schedule_order(Schedule::Interleaved, p, m, v);
                let run = run_schedule(&order, v, &uniform(p, v, f, b)).unwrap();
                let ideal = m * v * (f + b);
                let bubble = run.makespan_ps - ideal;
                assert_eq!(bubble, (p - 1) * (f + b), "p={p} v={v} m={m}");
                // The same work without interleaving idles v times longer.
                let plain = run_schedule(
                    &schedule_order(Schedule::OneFOneB, p, m, 1),
                    1,
                    &uniform(p, 1, f * v, b * v),
                )
                .unwrap();
                assert_eq!(plain.makespan_ps - ideal, v * bubble);
            }
        }
    }
}

#[test]
fn transfers_between_stages_delay_the_pipeline() {
    for (p, m) in [(2u64, 4u64), (4, 8), (8, 32)] {
        let mut t = uniform(p, 1, 100, 200);
        let time = |kind, t: &PassTimes| {
            run_schedule(&schedule_order(kind, p, m, 1), 1, t)
                .unwrap()
                .makespan_ps
        };
        let free = [Schedule::Gpipe, Schedule::OneFOneB].map(|k| time(k, &t));
        t.transfer_ps = 10;
        let paid = [Schedule::Gpipe, Schedule::OneFOneB].map(|k| time(k, &t));
        // GPipe: the forwards and then the backwards cross p - 1 boundaries
        // once each; 1F1B also waits for transfers in its steady state.
        assert_eq!(paid[0] - free[0], 2 * (p - 1) * 10);
        assert!(paid[1] - free[1] >= 2 * (p - 1) * 10);
    }
}
