//! Reference communication patterns with known closed forms: the ideal ring
//! and the ring allreduce (reduce-scatter then all-gather, 2(n-1) steps, each
//! rank sending one chunk of S/n bytes to its successor per step), both as a
//! materialized `Schedule` and as a reactive driver whose memory is linear in
//! the number of ranks (for large rings).

use crate::engine::{transfer_ps_exact, Time, TimeOverflow};

use super::link::Link;
use super::netsim::{NetSim, Occurrence};
use super::schedule::{Schedule, TaskId};
use super::NetError;

/// An ideal unidirectional ring of `n` ranks: link `r` goes from rank `r` to
/// rank `(r + 1) % n`, all with the same capacity and latency.
pub fn ring_links(n: usize, capacity: f64, latency: Time) -> Vec<Link> {
    (0..n).map(|_| Link::new(capacity, latency)).collect()
}

/// The closed form of a ring allreduce on ideal links under the engine's
/// rounding rule: `2(n-1) * (latency + ceil(chunk_bytes / capacity))`.
pub fn ring_allreduce_closed_form(
    n: u64,
    chunk_bytes: u64,
    capacity: u64,
    latency: Time,
) -> Result<Time, TimeOverflow> {
    let step = latency.checked_add(transfer_ps_exact(chunk_bytes, capacity)?)?;
    step.checked_mul(2 * n.saturating_sub(1))
}

/// Ring allreduce over ranks `0..n` on `ring_links`: at step `s` rank `r` sends
/// `chunk_bytes` over link `r`, after receiving step `s-1` from rank `r-1` and
/// after its own step `s-1` send arrived. With `reduce = Some(d)`, each receipt in
/// the reduce-scatter half is followed by a reduction of duration `d` on the
/// receiver, which the receiver's next send waits for.
/// Returns the schedule and the task of each (step, rank) transfer.
pub fn ring_allreduce_schedule(
    n: usize,
    chunk_bytes: u64,
    reduce: Option<Time>,
) -> Result<(Schedule, Vec<Vec<TaskId>>), NetError> {
    let mut sched = Schedule::new();
    let steps = 2 * n.saturating_sub(1);
    let mut sends: Vec<Vec<TaskId>> = Vec::with_capacity(steps);
    // ready[r]: what rank r's next send must wait for (receipt or reduction).
    let mut ready: Vec<Option<TaskId>> = vec![None; n];
    for s in 0..steps {
        let mut row = Vec::with_capacity(n);
        for r in 0..n {
            let mut deps = Vec::new();
            if let Some(t) = ready[r] {
                deps.push(t);
            }
            if s > 0 {
                deps.push(sends[s - 1][r]);
            }
            row.push(sched.add_transfer(&[r], chunk_bytes, &deps)?);
        }
        for (r, &send) in row.iter().enumerate() {
            let to = (r + 1) % n;
            ready[to] = Some(match reduce {
                Some(d) if s + 1 < n => sched.add_compute(to as u64, d, &[send])?,
                _ => send,
            });
        }
        sends.push(row);
    }
    Ok((sched, sends))
}

/// What a reactive ring allreduce run reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingRun {
    pub time: Time,
    /// Chunk transfers modelled (flows times the chunks each carries).
    pub flows: u64,
    /// Flows the network actually simulated.
    pub simulated_flows: u64,
}

/// [`run_ring_allreduce_per_chunk`] with chunk aggregation: the `chunks`
/// concurrent flows of one (step, rank) message take the same one-link route
/// at the same time and, sharing it max-min fairly, finish together; chunk
/// `k` of the next step then starts for every `k` at that same instant. So
/// the message behaves as one flow of `chunks x chunk_bytes`, to the
/// picosecond (no rounding differs: the aggregate's bytes and rate are the
/// chunks' times `chunks`). Exact without store-and-forward packets, where
/// packet boundaries could differ; with packets, every chunk is simulated.
pub fn run_ring_allreduce(
    sim: &mut NetSim<()>,
    n: usize,
    chunks: usize,
    chunk_bytes: u64,
) -> Result<RingRun, NetError> {
    if chunks <= 1 || sim.network().packet_bytes().is_some() {
        return run_ring_allreduce_per_chunk(sim, n, chunks, chunk_bytes);
    }
    let bytes = chunk_bytes
        .checked_mul(chunks as u64)
        .ok_or(NetError::Overflow("ring message bytes"))?;
    let run = run_ring_allreduce_per_chunk(sim, n, 1, bytes)?;
    Ok(RingRun {
        flows: run.flows * chunks as u64,
        ..run
    })
}

/// Run a ring allreduce reactively on `sim` (whose links are `ring_links(n)`):
/// each (step, rank) message is `chunks` concurrent flows of `chunk_bytes`,
/// chunk `k` of step `s+1` leaving rank `q` once chunk `k` of step `s` has both
/// arrived at `q` and left `q` (arrived at `q+1`). State is O(n * chunks).
pub fn run_ring_allreduce_per_chunk(
    sim: &mut NetSim<()>,
    n: usize,
    chunks: usize,
    chunk_bytes: u64,
) -> Result<RingRun, NetError> {
    let steps = 2 * n.saturating_sub(1);
    if steps == 0 || chunks == 0 {
        return Ok(RingRun {
            time: sim.now(),
            flows: 0,
            simulated_flows: 0,
        });
    }
    let (nu, cu) = (n as u64, chunks as u64);
    let tag = |s: usize, r: usize, k: usize| ((s as u64 * nu) + r as u64) * cu + k as u64;
    // Per (rank, chunk): steps received from the predecessor, steps delivered by own sends.
    let mut received = vec![0u32; n * chunks];
    let mut sent = vec![0u32; n * chunks];
    let mut flows = 0u64;
    for r in 0..n {
        for k in 0..chunks {
            sim.start_flow(tag(0, r, k), &[r], chunk_bytes)?;
            flows += 1;
        }
    }
    let mut end = sim.now();
    while let Some(o) = sim.step()? {
        let Occurrence::Delivered { at, tag: t } = o else {
            continue;
        };
        end = at;
        let k = (t % cu) as usize;
        let r = ((t / cu) % nu) as usize;
        let s = (t / cu / nu) as usize;
        let to = (r + 1) % n;
        received[to * chunks + k] = s as u32 + 1;
        sent[r * chunks + k] = s as u32 + 1;
        // Rank q sends step s+1 of chunk k once it has both received step s+1's
        // input (step s from q-1) and delivered its own step s: whichever of the
        // two events comes second starts it, so each send starts exactly once.
        let next = s + 1;
        if next < steps {
            if received[r * chunks + k] as usize >= next {
                sim.start_flow(tag(next, r, k), &[r], chunk_bytes)?;
                flows += 1;
            }
            if sent[to * chunks + k] as usize == next {
                sim.start_flow(tag(next, to, k), &[to], chunk_bytes)?;
                flows += 1;
            }
        }
    }
    Ok(RingRun {
        time: end,
        flows,
        simulated_flows: flows,
    })
}
