//! The model definitions under `models/`: the GPT-3 MLP block partitioned
//! automatically and the same block written by hand with shard_map give the
//! same per-device program on a DGX H100 — the same collectives, the same
//! step time to the picosecond, the same memory peaks and link loads.

use shardsim::exec::timed::{report, run_timed, TimedOptions};

use super::{dgx_h100, program};

#[test]
fn the_shard_map_gpt3_block_times_as_the_automatically_partitioned_one() {
    let topo = dgx_h100();
    let summarize = |rel: &str| {
        let p = program(rel);
        let t = run_timed(&p, &topo, &TimedOptions::default()).unwrap();
        let collectives: Vec<(String, u64, Vec<Vec<u64>>)> = p
            .collectives()
            .filter(|c| c.kind.moves_data())
            .map(|c| (c.kind.name().to_string(), c.bytes, c.groups.to_vec()))
            .collect();
        (collectives, report::summarize(&t, &topo))
    };
    let (auto_c, auto) = summarize("../../models/gpt3_mlp_block.mlir");
    let (manual_c, manual) = summarize("../../models/gpt3_mlp_block_shard_map.mlir");
    // One all-reduce of the 8192 x 12288 bf16 partial sums over "model".
    let want = vec![(
        "all_reduce".to_string(),
        8192 * 12288 * 2,
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]],
    )];
    assert_eq!(auto_c, want);
    assert_eq!(manual_c, want);
    assert_eq!(manual.step_time_ps, auto.step_time_ps);
    assert_eq!(manual.compute_steps, auto.compute_steps);
    assert_eq!(manual.per_device, auto.per_device);
    assert_eq!(manual.peak_memory, auto.peak_memory);
    assert_eq!(manual.links, auto.links);
}
