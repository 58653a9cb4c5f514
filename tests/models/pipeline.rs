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

/// GPipe over stages of different lengths (uneven layer splits) is a flow
/// shop of identical jobs: each phase takes the stages' sum plus `m - 1`
/// times the slowest stage, plus one transfer per boundary.
fn gpipe_flow_shop(f: &[u64], b: &[u64], m: u64, transfer: u64) -> u64 {
    let phase = |t: &[u64]| {
        t.iter().sum::<u64>() + (m - 1) * t.iter().max().unwrap() + (t.len() as u64 - 1) * transfer
    };
    phase(f) + phase(b)
}

#[test]
fn uneven_stages_pace_gpipe_by_the_slowest_stage() {
    let (f, b) = (vec![70u64, 80, 80, 90], vec![140u64, 160, 160, 175]);
    for m in [1u64, 2, 5, 16] {
        for transfer in [0u64, 7] {
            let times = PassTimes {
                forward_ps: f.clone(),
                backward_ps: b.clone(),
                transfer_ps: transfer,
                blocking_sends: false,
            };
            let run = run_schedule(&schedule_order(Schedule::Gpipe, 4, m, 1), 1, &times).unwrap();
            assert_eq!(
                run.makespan_ps,
                gpipe_flow_shop(&f, &b, m, transfer),
                "m={m} transfer={transfer}"
            );
        }
    }
}

/// Llama 3 405B's 126 layers on 16 stages, as Meta split them (one layer
/// fewer on the first and last stage, which hold the embedding and the
/// loss) through either of Megatron-Core's two ways of saying it: the
/// step's chunk classes hold 7, 8 and 7 layers and its pipeline is the
/// flow shop of their pass times.
#[test]
fn llama3_405b_stages_split_unevenly_as_meta_split_them() {
    use shardsim::models::step::{model_timed_options, simulate_step};
    use shardsim::models::{ModelSpec, Strategy};
    let model = ModelSpec::preset("llama3-405b").unwrap();
    let topo = shardsim::topology::load_nodes("dgx-h100", 16, &[]).unwrap();
    let base = "tp = 8\npp = 16\nglobal_batch = 4\nschedule = \"gpipe\"\nsequence_parallel = true\nflash_attention = true\n";
    let mut pipelines = Vec::new();
    for split in [
        "first_stage_layers = 7\nlast_stage_layers = 7",
        "embedding_in_pipeline_split = true\nloss_in_pipeline_split = true",
    ] {
        let s = Strategy::from_toml(&format!("{base}{split}")).unwrap();
        let r = simulate_step(&model, &s, &topo, &model_timed_options()).unwrap();
        let classes: Vec<(bool, bool, u64)> = r
            .chunks
            .iter()
            .map(|c| (c.embed, c.head, c.layers))
            .collect();
        assert_eq!(
            classes,
            [(false, false, 8), (false, true, 7), (true, false, 7)],
            "{split}"
        );
        let of = |embed: bool, head: bool| {
            r.chunks
                .iter()
                .find(|c| (c.embed, c.head) == (embed, head))
                .unwrap()
        };
        let stages: Vec<_> = (0..16).map(|s| of(s == 0, s == 15)).collect();
        let f: Vec<u64> = stages.iter().map(|c| c.forward_pass_ps(0)).collect();
        let b: Vec<u64> = stages.iter().map(|c| c.backward_pass_ps(0)).collect();
        assert_eq!(
            r.pipeline_ps,
            gpipe_flow_shop(&f, &b, 4, r.transfer_ps),
            "{split}"
        );
        pipelines.push(r.step_time_ps);
    }
    assert_eq!(pipelines[0], pipelines[1]);
}

/// How Megatron-Core splits layers into chunks (`get_num_layers_to_build`),
/// in model order (chunk `c` of stage `s` at `c x pp + s`), and the errors
/// that name the numbers.
#[test]
fn chunk_layers_split_as_megatron_core_splits_them() {
    use shardsim::models::{ModelSpec, Strategy};
    let model = |layers: u64| {
        ModelSpec::from_toml(&format!(
            "name = \"m\"\nlayers = {layers}\nhidden = 64\nheads = 4\nffn_hidden = 256\nvocab = 128\nseq = 16\nmlp = \"gelu\"\nnorm = \"layernorm\"\n"
        ))
        .unwrap()
    };
    let split = |layers: u64, strategy: &str| {
        let s = Strategy::from_toml(&format!("global_batch = 64\n{strategy}")).unwrap();
        s.chunk_layers(&model(layers)).map_err(|e| e.to_string())
    };
    let il = "schedule = \"interleaved\"\n";
    for (layers, strategy, want) in [
        (8, "pp = 2".to_string(), vec![4, 4]),
        (8, format!("pp = 2\nvirtual_stages = 2\n{il}"), vec![2, 2, 2, 2]),
        (126, "pp = 16\nfirst_stage_layers = 7\nlast_stage_layers = 7".into(), [vec![7], vec![8; 14], vec![7]].concat()),
        (126, "pp = 16\nembedding_in_pipeline_split = true\nloss_in_pipeline_split = true".into(), [vec![7], vec![8; 14], vec![7]].concat()),
        // One layer per chunk: the first holds only the embedding, the
        // last only the loss (Meta's description).
        (126, format!("pp = 16\nvirtual_stages = 8\n{il}embedding_in_pipeline_split = true\nloss_in_pipeline_split = true"), [vec![0], vec![1; 126], vec![0]].concat()),
        // The first stage's 2 over its 2 chunks (0 and 3), the others' 6.
        (14, format!("pp = 3\nvirtual_stages = 2\n{il}first_stage_layers = 2"), vec![1, 3, 3, 1, 3, 3]),
        (9, "pp = 2\nlast_stage_layers = 2".into(), vec![7, 2]),
        (7, "pp = 2\nembedding_in_pipeline_split = true".into(), vec![3, 4]),
        (9, "pp = 2\nfirst_stage_layers = 0\nlast_stage_layers = 9".into(), vec![0, 9]),
    ] {
        assert_eq!(split(layers, &strategy), Ok(want), "{layers} layers, {strategy}");
    }
    for (layers, strategy, says) in [
        (126, "pp = 16".to_string(), "126 layers do not split into pp x virtual_stages = 16 x 1 chunks (first_stage_layers"),
        (126, "pp = 16\nfirst_stage_layers = 7".into(), "119 layers left by first_stage_layers / last_stage_layers do not split over the 15 other stages"),
        (126, "pp = 16\nfirst_stage_layers = 200".into(), "first_stage_layers = 200: the model has 126 layers"),
        (8, "pp = 2\nfirst_stage_layers = 3\nlast_stage_layers = 3".into(), "first_stage_layers + last_stage_layers = 6 of pp = 2 stages must be the model's 8 layers"),
        (126, format!("pp = 16\nvirtual_stages = 2\n{il}first_stage_layers = 7\nlast_stage_layers = 7"), "stage 0's 7 layers do not split over virtual_stages = 2"),
        (8, "pp = 2\nembedding_in_pipeline_split = true".into(), "8 layers + 1 (embedding and loss counted as layers) = 9 do not split over pp = 2 stages"),
        (8, "pp = 2\nfirst_stage_layers = 4\nloss_in_pipeline_split = true".into(), "do not go together"),
        (8, "first_stage_layers = 4".into(), "needs pipeline stages (pp above 1), not pp = 1"),
        (8, "loss_in_pipeline_split = true".into(), "needs pipeline stages (pp above 1), not pp = 1"),
        (8, format!("pp = 2\nvirtual_stages = 2\n{il}first_stage_layers = 0"), "model chunk 2 (stage 0, virtual stage 1) holds no layers"),
        (8, "pp = 4\nvirtual_stages = 4".into(), "8 layers do not split into pp x virtual_stages = 4 x 4 chunks"),
    ] {
        let err = split(layers, &strategy).unwrap_err();
        assert!(err.contains(says), "{layers} layers, {strategy}: {err}");
    }
}
