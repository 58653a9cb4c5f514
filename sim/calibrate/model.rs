//! The fit and what comes out of it: collective times as
//! `c0 + c1 * workers + alpha * messages + beta * bytes + gamma * reduced bytes`
//! (one link class: the session's worker-to-worker path), GEMM as `g0 + flops / rate`, elementwise
//! as `e0 + bytes / bandwidth`; fitted on every other size (sorted), checked on
//! the rest (least squares on relative error); and the topology file of the machine the fit describes.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::base::DType;
use crate::topology::{
    Bandwidth, ByteSize, DeviceKind, DeviceSpec, Duration, FabricSpec, FlopRate, Layout,
    MemorySpec, TopologyFile, FORMAT_VERSION,
};

use super::bench::{Measured, Op};
use super::fit::{relative_least_squares, FitError};

/// The fitted machine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fitted {
    /// Fixed cost of a session call (s) and its growth per worker (s).
    pub call_s: f64,
    pub per_worker_s: f64,
    /// Per message between workers (s): the link's latency.
    pub alpha_s: f64,
    /// Per byte between workers (s/B): 1 / the link's bandwidth.
    pub beta_s_per_byte: f64,
    /// Per byte reduced into a receiver's buffer (s/B).
    pub gamma_s_per_byte: f64,
    pub gemm_call_s: f64,
    /// Peak GEMM rate (FLOP/s): the asymptote of the fit.
    pub gemm_flops: f64,
    pub elementwise_call_s: f64,
    /// Bytes touched per second by the elementwise kernel.
    pub elementwise_bytes_per_s: f64,
}

/// Whether `m` is in the fitting half: sizes of its (op, ranks) sorted, every other one from the smallest.
fn fitting_half(points: &[Measured]) -> Vec<bool> {
    let mut sizes: BTreeMap<(Op, usize), BTreeSet<u64>> = BTreeMap::new();
    for p in points {
        sizes.entry((p.op, p.ranks)).or_default().insert(p.size);
    }
    points
        .iter()
        .map(|p| {
            let i = sizes[&(p.op, p.ranks)].range(..p.size).count();
            i % 2 == 0
        })
        .collect()
}

fn collective_row(p: &Measured) -> Vec<f64> {
    vec![
        1.0,
        p.ranks as f64,
        p.messages as f64,
        p.moved_bytes as f64,
        p.reduced_bytes as f64,
    ]
}

/// Fit on the fitting half of `points`.
pub fn fit_machine(points: &[Measured]) -> Result<Fitted, FitError> {
    let fit = fitting_half(points);
    let chosen = |op: &dyn Fn(Op) -> bool| {
        points
            .iter()
            .zip(&fit)
            .filter(|(p, f)| **f && op(p.op))
            .map(|(p, _)| p)
            .collect::<Vec<_>>()
    };
    let coll = chosen(&|o: Op| o.is_collective());
    let rows: Vec<Vec<f64>> = coll.iter().map(|p| collective_row(p)).collect();
    let y: Vec<f64> = coll.iter().map(|p| p.stats.median_s).collect();
    let c = relative_least_squares(&rows, &y)?;
    let kernel = |op: Op| -> Result<(f64, f64), FitError> {
        let ps = chosen(&|o: Op| o == op);
        let rows: Vec<Vec<f64>> = ps.iter().map(|p| vec![1.0, p.work]).collect();
        let y: Vec<f64> = ps.iter().map(|p| p.stats.median_s).collect();
        let k = relative_least_squares(&rows, &y)?;
        Ok((
            k[0],
            if k[1] > 0.0 {
                1.0 / k[1]
            } else {
                f64::INFINITY
            },
        ))
    };
    let (g0, rate) = kernel(Op::Gemm)?;
    let (e0, bw) = kernel(Op::Elementwise)?;
    Ok(Fitted {
        call_s: c[0],
        per_worker_s: c[1],
        alpha_s: c[2],
        beta_s_per_byte: c[3],
        gamma_s_per_byte: c[4],
        gemm_call_s: g0,
        gemm_flops: rate,
        elementwise_call_s: e0,
        elementwise_bytes_per_s: bw,
    })
}

impl Fitted {
    /// Predicted median time of `p` (seconds).
    pub fn predict(&self, p: &Measured) -> f64 {
        match p.op {
            Op::Gemm => self.gemm_call_s + p.work / self.gemm_flops,
            Op::Elementwise => self.elementwise_call_s + p.work / self.elementwise_bytes_per_s,
            _ => {
                let r = collective_row(p);
                self.call_s * r[0]
                    + self.per_worker_s * r[1]
                    + self.alpha_s * r[2]
                    + self.beta_s_per_byte * r[3]
                    + self.gamma_s_per_byte * r[4]
            }
        }
    }
}

/// One line of the predicted-vs-measured table.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOutRow {
    pub op: &'static str,
    pub ranks: usize,
    pub size: u64,
    pub measured_us: f64,
    pub spread: f64,
    pub predicted_us: f64,
    /// |predicted - measured| / measured.
    pub error: f64,
    /// False: the fit saw this point.
    pub held_out: bool,
    /// GEMM and elementwise: achieved rate over the fitted peak.
    pub efficiency: Option<f64>,
}

/// Predicted vs measured for every point.
pub fn heldout_rows(fitted: &Fitted, points: &[Measured]) -> Vec<HeldOutRow> {
    let fit = fitting_half(points);
    points
        .iter()
        .zip(fit)
        .map(|(p, f)| {
            let m = p.stats.median_s;
            let pred = fitted.predict(p);
            let efficiency = match p.op {
                Op::Gemm => Some(p.work / m / fitted.gemm_flops),
                Op::Elementwise => Some(p.work / m / fitted.elementwise_bytes_per_s),
                _ => None,
            };
            HeldOutRow {
                op: p.op.name(),
                ranks: p.ranks,
                size: p.size,
                measured_us: m * 1e6,
                spread: p.stats.spread,
                predicted_us: pred * 1e6,
                error: (pred - m).abs() / m,
                held_out: !f,
                efficiency,
            }
        })
        .collect()
}

/// Median held-out error of `op` (None when it has no held-out point).
pub fn median_heldout_error(rows: &[HeldOutRow], op: &str) -> Option<f64> {
    let mut e: Vec<f64> = rows
        .iter()
        .filter(|r| r.held_out && r.op == op)
        .map(|r| r.error)
        .collect();
    if e.is_empty() {
        return None;
    }
    e.sort_by(f64::total_cmp);
    let n = e.len();
    Some(if n % 2 == 1 {
        e[n / 2]
    } else {
        (e[n / 2 - 1] + e[n / 2]) / 2.0
    })
}

/// A topology file for the machine: `devices` workers on one switch whose
/// links carry the fitted latency (half of alpha per link: a message crosses
/// two) and bandwidth, CPU devices with the fitted GEMM rate and elementwise
/// bandwidth, `memory` bytes each.
pub fn topology_file(
    f: &Fitted,
    devices: u32,
    name: &str,
    backend: &str,
    memory: u64,
) -> Result<TopologyFile, String> {
    let finite = |x: f64, what: &str| {
        if x.is_finite() && x >= 1.0 {
            Ok(x.round() as u64)
        } else {
            Err(format!(
                "the fit gives no usable {what} ({x}); measure wider --sizes or more --repeats"
            ))
        }
    };
    let bandwidth = finite(1.0 / f.beta_s_per_byte, "link bandwidth")?;
    let flops = finite(f.gemm_flops, "GEMM rate")?;
    let mem_bw = finite(f.elementwise_bytes_per_s, "memory bandwidth")?;
    let latency_ps = (f.alpha_s * 0.5e12).round().max(0.0) as u64;
    // Topology files refuse a zero latency: a fit that finds none cannot
    // describe a link.
    if latency_ps == 0 {
        return Err(format!(
            "the fit gives no usable link latency ({} s per message); measure smaller --sizes or more --repeats",
            f.alpha_s
        ));
    }
    Ok(TopologyFile {
        format: FORMAT_VERSION,
        name: name.to_string(),
        description: format!(
            "this machine as `shardsim calibrate --backend {backend}` measured it: {devices} workers on one switch (the session's worker-to-worker path)"
        ),
        sources: vec![
            format!(
                "fit: call {:.1} us + {:.2} us per worker + {:.2} us per message + {:.4} ns per byte + {:.4} ns per reduced byte",
                f.call_s * 1e6,
                f.per_worker_s * 1e6,
                f.alpha_s * 1e6,
                f.beta_s_per_byte * 1e9,
                f.gamma_s_per_byte * 1e9
            ),
            "link latency is half the per-message time (a message crosses two links); bandwidth is 1 / per-byte time".into(),
            format!(
                "GEMM f32 peak {:.3} GFLOP/s; elementwise {:.3} GB/s (touched bytes)",
                f.gemm_flops / 1e9,
                f.elementwise_bytes_per_s / 1e9
            ),
        ],
        layout: Layout::Switch,
        dims: vec![devices],
        nodes: 1,
        device: DeviceSpec {
            kind: DeviceKind::Cpu,
            model: format!("host CPU worker ({backend})"),
            flops: [(DType::F32, FlopRate(flops))].into_iter().collect(),
            memory: vec![MemorySpec {
                scope: "global".into(),
                capacity: ByteSize(memory),
                bandwidth: Bandwidth(mem_bw),
            }],
        },
        nvlink: Some(FabricSpec {
            bandwidth: Bandwidth(bandwidth),
            lanes: 1,
            latency: Duration(latency_ps),
            in_switch_reduction: false,
        }),
        ici: None,
        pcie: None,
        host: None,
        nic: None,
        network: None,
        components: Vec::new(),
        links: Vec::new(),
        collective: None,
    })
}
