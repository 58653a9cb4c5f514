//! Cheap lower bounds of the tuner's estimate, so `auto` skips a candidate
//! that cannot beat the best one found so far before building its plan (the
//! choice is the same: a skipped candidate's estimate is at least its bound,
//! which is above the best).
//!
//! NVLS-tree, the costliest plan to build, has one: its base latency, the
//! hops of its first chunk's path (into the switch, up and down the tree over
//! the nodes, out of the switch; the estimate pays its longest chain of hops,
//! at least that one) and rank 0's up link to the switch, which carries the
//! rank's whole buffer (the estimate's steps each cost at least that link's
//! bytes in the step over its bandwidth).
//!
//! A ring has one: its base latency and the hops of one piece's path. An
//! allreduce piece passes 2 (n - 1) ranks in a row (reduce-scatter, then
//! all-gather), each move reading what the one before wrote; the estimate
//! pays a hop (the NVLink or the network one, at least the smaller) for each
//! (per step for a ring of equal moves, along the data's path for a walked
//! plan). At small sizes, where a ring's plan is uneven and walked move by
//! move (254 steps of up to 130k moves on 16 DGX nodes), that rules it out
//! against the tree at no cost: `auto` estimates the tree first.

use crate::topology::Topology;

use super::blocks::pow2_floor;
use super::calibration::Calibration;
use super::kinds::{Algorithm, Protocol};
use super::timing::Routes;
use super::CollectiveError;

/// A lower bound (picoseconds) of the estimate of `algo` with its cheapest
/// protocol (of `protos`) for an allreduce of `bytes` over `ranks` ranks,
/// `nodes` (the group's ranks by node), or `None` where there is none (the
/// candidate is then built).
#[allow(clippy::too_many_arguments)]
pub(crate) fn lower_bound_ps(
    topo: &Topology,
    routes: &mut Routes,
    ranks: usize,
    nodes: &[Vec<usize>],
    algo: Algorithm,
    protos: &[Protocol],
    bytes: u64,
    cal: &Calibration,
) -> Result<Option<f64>, CollectiveError> {
    if algo == Algorithm::Ring && bytes > 0 {
        let hops = 2.0 * ranks.saturating_sub(1) as f64;
        let lb = protos
            .iter()
            .map(|&p| {
                let q = cal.params(algo, p);
                (q.base_us + hops * q.nvlink_hop_us.min(q.network_hop_us)) * 1e6
            })
            .fold(f64::INFINITY, f64::min);
        return Ok(lb.is_finite().then_some(lb));
    }
    if algo != Algorithm::NvlsTree || nodes.len() < 2 {
        return Ok(None);
    }
    // Not on reducing switches: no bound, the candidate's own check reports it.
    let Ok((up, _)) = routes.switch_links(0) else {
        return Ok(None);
    };
    let p = cal.params(algo, Protocol::Simple);
    // The nodes' tree is heap-shaped: floor(log2 N) levels.
    let height = pow2_floor(nodes.len()).trailing_zeros() as f64;
    let hops = 2.0 * p.nvlink_hop_us + 2.0 * height * p.network_hop_us;
    let bw = topo.links()[up].bandwidth_bytes_per_s() as f64
        * p.nvlink_fraction
        * Protocol::Simple.payload_fraction();
    Ok(Some((p.base_us + hops) * 1e6 + bytes as f64 / bw * 1e12))
}
