//! Pipeline schedules and their execution: the order in which each stage
//! runs the forward and backward passes of its model chunks over the
//! microbatches (GPipe, 1F1B, interleaved 1F1B as Megatron-LM orders them),
//! and a timing of that order from per-chunk pass times and the transfer
//! time between stages. Deterministic: integer picoseconds, stages advanced
//! in a fixed order.

use super::strategy::Schedule;
use super::ModelError;

/// One pass of one chunk on one microbatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// The chunk's place on its stage (0 ..< virtual stages).
    pub local_chunk: u64,
    pub microbatch: u64,
    pub forward: bool,
}

/// The pass order of every stage.
pub fn schedule_order(kind: Schedule, p: u64, m: u64, v: u64) -> Vec<Vec<Pass>> {
    (0..p)
        .map(|s| match kind {
            Schedule::Gpipe => {
                let f = (0..m).map(|j| pass(0, j, true));
                let b = (0..m).map(|j| pass(0, j, false));
                f.chain(b).collect()
            }
            Schedule::OneFOneB => one_f_one_b(p, s, m, 1),
            Schedule::Interleaved => one_f_one_b(p, s, m, v),
        })
        .collect()
}

fn pass(local_chunk: u64, microbatch: u64, forward: bool) -> Pass {
    Pass {
        local_chunk,
        microbatch,
        forward,
    }
}

/// Megatron-LM's (interleaved) 1F1B order for stage `s`: the `k`-th
/// forward of a stage runs chunk `(k / p) % v` on microbatch
/// `(k / (p v)) p + k % p`; backwards go through the chunks in reverse.
/// Warm-up forwards: `2 (p - s - 1) + (v - 1) p` with interleaving,
/// `p - s - 1` without; then one forward and one backward in turn, then
/// the remaining backwards.
fn one_f_one_b(p: u64, s: u64, m: u64, v: u64) -> Vec<Pass> {
    let total = m * v;
    let nth = |k: u64, forward: bool| {
        let group = k / p % v;
        let chunk = if forward { group } else { v - 1 - group };
        pass(chunk, (k / (p * v)) * p + k % p, forward)
    };
    let warmup = if v == 1 {
        (p - s - 1).min(total)
    } else {
        ((p - s - 1) * 2 + (v - 1) * p).min(total)
    };
    let mut order = Vec::with_capacity(2 * total as usize);
    order.extend((0..warmup).map(|k| nth(k, true)));
    for i in 0..total - warmup {
        order.push(nth(warmup + i, true));
        order.push(nth(i, false));
    }
    order.extend((total - warmup..total).map(|k| nth(k, false)));
    order
}

/// Times of one pipeline: per global chunk (`c = local_chunk * p + stage`)
/// the forward and backward time of one microbatch, and the time to send
/// an activation (or its gradient) from one stage to the next.
#[derive(Debug, Clone)]
pub struct PassTimes {
    pub forward_ps: Vec<u64>,
    pub backward_ps: Vec<u64>,
    pub transfer_ps: u64,
    /// A stage is busy while its pass's output or input gradient is sent
    /// to another stage (blocking point-to-point communication).
    pub blocking_sends: bool,
}

/// A timed pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedPass {
    pub stage: u64,
    pub pass: Pass,
    pub start_ps: u64,
    pub end_ps: u64,
}

/// The timing of a schedule.
#[derive(Debug, Clone)]
pub struct PipelineRun {
    pub passes: Vec<TimedPass>,
    /// When each stage finished its last pass.
    pub stage_end_ps: Vec<u64>,
    /// When each stage started its last backward pass (gradient reduction
    /// can overlap from here on).
    pub last_backward_start_ps: Vec<u64>,
    /// Most chunk activations a stage held at once (forward done, backward
    /// not yet).
    pub max_in_flight: Vec<u64>,
    pub makespan_ps: u64,
}

impl PipelineRun {
    /// Time stages spent idle before their last pass ended, over the time
    /// all stages could have worked: `1 - busy / (p x makespan)`.
    pub fn bubble_fraction(&self) -> f64 {
        let busy: u64 = self.passes.iter().map(|t| t.end_ps - t.start_ps).sum();
        let p = self.stage_end_ps.len() as f64;
        1.0 - busy as f64 / (p * self.makespan_ps as f64)
    }
}

/// Longest step simulated: 2^63 ps (107 days); times are 64-bit
/// picoseconds, and sums of longer ones would overflow.
pub const MAX_STEP_PS: u64 = 1 << 63;

/// The error for a step that does not fit the time range.
pub fn too_long(what: &str, ps: u128) -> ModelError {
    ModelError::Strategy(format!(
        "{what} adds up to at least {:.3e} s, beyond the {:.3e} s (2^63 ps) that the simulator's 64-bit picosecond times hold: use a smaller batch or sequence",
        ps as f64 * 1e-12,
        MAX_STEP_PS as f64 * 1e-12
    ))
}

/// Run the schedule `order` of `p` stages with `v` chunks each.
pub fn run_schedule(
    order: &[Vec<Pass>],
    v: u64,
    times: &PassTimes,
) -> Result<PipelineRun, ModelError> {
    let p = order.len() as u64;
    let chunks = (p * v) as usize;
    if times.forward_ps.len() != chunks || times.backward_ps.len() != chunks {
        return Err(ModelError::Program(format!(
            "pipeline: {} chunks but {} forward and {} backward times",
            chunks,
            times.forward_ps.len(),
            times.backward_ps.len()
        )));
    }
    let m = order
        .iter()
        .flatten()
        .map(|x| x.microbatch + 1)
        .max()
        .unwrap_or(0) as usize;
    // No pass ends later than all passes and transfers one after another:
    // below the time range, no sum below can overflow (they wrapped).
    let mut work = 0u128;
    for (s, passes) in order.iter().enumerate() {
        for x in passes {
            let c = (x.local_chunk * p) as usize + s;
            let dur = if x.forward {
                times.forward_ps.get(c)
            } else {
                times.backward_ps.get(c)
            };
            work += u128::from(dur.copied().unwrap_or(0)) + 2 * u128::from(times.transfer_ps);
        }
    }
    if work >= u128::from(MAX_STEP_PS) {
        return Err(too_long("the step", work));
    }
    // Finish times per (global chunk, microbatch).
    let mut f_done: Vec<Option<u64>> = vec![None; chunks * m];
    let mut b_done: Vec<Option<u64>> = vec![None; chunks * m];
    let mut next = vec![0usize; p as usize];
    let mut free = vec![0u64; p as usize];
    let mut in_flight = vec![0u64; p as usize];
    let mut max_in_flight = vec![0u64; p as usize];
    let mut last_b = vec![0u64; p as usize];
    let mut passes = Vec::with_capacity(order.iter().map(Vec::len).sum());
    loop {
        let mut progressed = false;
        let mut all_done = true;
        for s in 0..p as usize {
            while next[s] < order[s].len() {
                all_done = false;
                let x = order[s][next[s]];
                let c = (x.local_chunk * p) as usize + s;
                let j = x.microbatch as usize;
                // When the pass's inputs are here, or None if not yet.
                let ready = if x.forward {
                    if c == 0 {
                        Some(0)
                    } else {
                        f_done[(c - 1) * m + j].map(|t| t + hop(c - 1, c, p, times))
                    }
                } else if c + 1 == chunks {
                    f_done[c * m + j]
                } else {
                    match (b_done[(c + 1) * m + j], f_done[c * m + j]) {
                        (Some(t), Some(f)) => Some((t + hop(c + 1, c, p, times)).max(f)),
                        _ => None,
                    }
                };
                let Some(ready) = ready else { break };
                let start = ready.max(free[s]);
                let dur = if x.forward {
                    times.forward_ps[c]
                } else {
                    times.backward_ps[c]
                };
                let end = start + dur;
                // The stage this pass sends to (none from the last chunk's
                // forward or the first chunk's backward).
                let to = if x.forward {
                    (c + 1 < chunks).then(|| c + 1)
                } else {
                    c.checked_sub(1)
                };
                free[s] = match to {
                    Some(t) if times.blocking_sends => end + hop(c, t, p, times),
                    _ => end,
                };
                if x.forward {
                    f_done[c * m + j] = Some(end);
                    in_flight[s] += 1;
                    max_in_flight[s] = max_in_flight[s].max(in_flight[s]);
                } else {
                    b_done[c * m + j] = Some(end);
                    in_flight[s] -= 1;
                    last_b[s] = start;
                }
                passes.push(TimedPass {
                    stage: s as u64,
                    pass: x,
                    start_ps: start,
                    end_ps: end,
                });
                next[s] += 1;
                progressed = true;
            }
        }
        if all_done {
            break;
        }
        if !progressed {
            return Err(ModelError::Program(
                "pipeline schedule deadlocks (a pass waits for one that never runs)".into(),
            ));
        }
    }
    let makespan_ps = free.iter().copied().max().unwrap_or(0);
    Ok(PipelineRun {
        passes,
        stage_end_ps: free,
        last_backward_start_ps: last_b,
        max_in_flight,
        makespan_ps,
    })
}

/// Transfer time between global chunks `a` and `b`: none on one stage.
fn hop(a: usize, b: usize, p: u64, times: &PassTimes) -> u64 {
    if a as u64 % p == b as u64 % p {
        0
    } else {
        times.transfer_ps
    }
}
