//! Roofline op costs: what one local step of a partitioned program does
//! (FLOPs, bytes read and written on one device's local shapes) and how long
//! it takes on a device of the topology.
//!
//! FLOPs: a dot is 2 x result elements x contracted elements; a reduce one per
//! input element and input; an elementwise op one per result element; layout
//! ops (transpose, slice, pad, broadcast, concatenate...) none. Bytes: every
//! operand read once and every result written once (no fusion). Reshapes and
//! constants only name a buffer and cost nothing.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::base::DType;
use crate::engine::time::ceil_to_ps;
use crate::engine::Time;
use crate::ir::OpKind;
use crate::partition::{CollectiveKind, SpmdProgram, Step};
use crate::topology::Topology;

use super::TimedError;

/// The compiled-in table (see the file for the model).
pub const ROOFLINE_TOML: &str = include_str!("roofline.toml");

/// Achieved fractions and launch overhead of one device model.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RooflineParams {
    pub compute_efficiency: f64,
    pub memory_efficiency: f64,
    pub launch_us: f64,
    /// Streaming multiprocessors: with it, a matmul's efficiency also counts
    /// its last partial wave of `tile_m x tile_n` output tiles (0: no shape
    /// effect).
    #[serde(default)]
    pub sms: u64,
    #[serde(default = "default_tile")]
    pub tile_m: u64,
    #[serde(default = "default_tile")]
    pub tile_n: u64,
    /// Contraction length at which a matmul reaches half its efficiency
    /// (pipeline fill of each tile: `k / (k + k_half)`; 0: none).
    #[serde(default)]
    pub k_half: f64,
    /// Fraction of the matmul peak a product reaches on the vector units,
    /// without tiles (what the tiniest products run at, e.g. a query against
    /// one key per head; 0: never).
    #[serde(default)]
    pub vector_rate: f64,
    /// Launch overhead of a kernel replayed from a CUDA graph (how serving
    /// engines run decode steps); `launch_us` when absent.
    #[serde(default)]
    pub graph_launch_us: Option<f64>,
    /// Matmuls may also run as a persistent stream-K kernel (CUTLASS 3's
    /// tile scheduler, which cuBLAS 12 ships for Hopper): see
    /// [`RooflineParams::stream_k_factor`].
    #[serde(default)]
    pub stream_k: bool,
    /// A fused attention kernel's rate, as a fraction of the matmul peak on
    /// the work it does, at long sequences (0: its matmuls are costed one by
    /// one as matmuls).
    #[serde(default)]
    pub attention_efficiency: f64,
    /// Sequence length at which the attention kernel reaches half that rate
    /// (its loop over the keys fills `s / (s + attention_s_half)`).
    #[serde(default)]
    pub attention_s_half: f64,
    /// Fraction of the counted score work a causal kernel does (it skips
    /// the masked blocks: 0.5); 1 when absent.
    #[serde(default)]
    pub attention_work: Option<f64>,
    /// The backward attention kernel's rate as a fraction of the forward's
    /// at the same length (cuDNN's flash backward is slower); 1 when absent.
    #[serde(default)]
    pub attention_backward: Option<f64>,
}

fn default_tile() -> u64 {
    128
}

impl RooflineParams {
    /// The fraction of `compute_efficiency` a matmul of this shape reaches:
    /// with `sms`, the best of the large tile (`tile_m x tile_n`), its
    /// transpose and a square tile of its shorter side (at 90% of the large tile's
    /// rate), as a library's heuristic picks the tile whose last wave
    /// wastes least (for a product narrower than a tile, also narrow
    /// tiles), the contraction split over idle multiprocessors when there
    /// are fewer tiles than them; then `k / (k + k_half)`.
    pub fn gemm_factor(&self, g: &Gemm) -> f64 {
        let mut f = 1.0;
        if self.sms > 0 && self.tile_m > 0 && self.tile_n > 0 {
            let (a, b) = (self.tile_m, self.tile_n);
            let side = a.min(b);
            let mut tiles = vec![(a, b, 1.0), (b, a, 1.0), (side, side, 0.9)];
            if g.m.min(g.n) < side {
                // A skinny product (decoding's matrix-vector work): narrow
                // tiles, as a library's small-`m` kernels use.
                tiles.extend([(SKINNY_TILE, side, 0.9), (side, SKINNY_TILE, 0.9)]);
            }
            f = tiles
                .iter()
                .map(|&(tm, tn, rate)| {
                    let tiles = g.batch * g.m.div_ceil(tm) * g.n.div_ceil(tn);
                    // Fewer tiles than multiprocessors: the contraction is
                    // split over the idle ones (split-K), in pieces of at
                    // least a tile's side.
                    let splits = (self.sms / tiles.max(1)).clamp(1, g.k.div_ceil(side).max(1));
                    let waves = (tiles * splits).div_ceil(self.sms).max(1);
                    let useful = (g.batch * g.m * g.n * splits) as f64;
                    let padded = (waves * self.sms * tm * tn) as f64;
                    rate * (useful / padded).min(1.0)
                })
                .fold(self.vector_rate, f64::max);
        }
        if self.k_half > 0.0 {
            f *= g.k as f64 / (g.k as f64 + self.k_half);
        }
        if self.stream_k && self.sms > 0 && self.tile_m > 0 && self.tile_n > 0 {
            let (a, b) = (self.tile_m, self.tile_n);
            f = [(a, b), (b, a)]
                .iter()
                .map(|&(tm, tn)| self.stream_k_factor(g, tm, tn))
                .fold(f, f64::max);
        }
        f
    }

    /// The fraction of `compute_efficiency` a kernel's matmul reaches: a
    /// fused attention kernel's at its own rate when the table has one, any
    /// other's [`RooflineParams::gemm_factor`].
    pub fn kernel_factor(&self, g: &Gemm) -> f64 {
        if let (Some(pass), true) = (g.attention, self.attention_efficiency > 0.0) {
            // The sequence is the longest side (the head dimension is short).
            let s = g.m.max(g.n).max(g.k) as f64;
            let mut rate = self.attention_efficiency * s / (s + self.attention_s_half);
            if pass == AttentionPass::Backward {
                rate *= self.attention_backward.unwrap_or(1.0);
            }
            return rate / (self.compute_efficiency * self.attention_work.unwrap_or(1.0));
        }
        self.gemm_factor(g)
    }

    /// The fraction of `compute_efficiency` a persistent stream-K kernel
    /// with `tm x tn` tiles reaches (Osama et al. 2023, CUTLASS 3's
    /// data-parallel + stream-K hybrid): all but the last full wave of
    /// output tiles run whole; the remaining tiles' `k / TILE_K` iterations
    /// are dealt out evenly over the multiprocessors, so no wave runs part
    /// empty. A multiprocessor pays the tile pipeline's fill (`k_half`)
    /// once per tile it starts in the data-parallel waves and once in the
    /// stream-K phase (its producer warps fetch the next piece's operands
    /// while the current one computes), and a tile split between
    /// multiprocessors costs its fp32 partial sums written and read back
    /// (the fixup), counted in iterations: `2 x 4 tm tn` bytes against a
    /// k-iteration's `2 (tm + tn) TILE_K` bytes of operands.
    pub fn stream_k_factor(&self, g: &Gemm, tm: u64, tn: u64) -> f64 {
        let tiles = g.batch * g.m.div_ceil(tm) * g.n.div_ceil(tn);
        let sms = self.sms;
        if sms == 0 || tm == 0 || tn == 0 || g.k == 0 || tiles % sms == 0 {
            // Whole waves: the data-parallel kernel already wastes nothing.
            return 0.0;
        }
        let iters = g.k as f64 / STREAM_K_TILE_K as f64;
        let fill = self.k_half / STREAM_K_TILE_K as f64;
        let dp_waves = (tiles / sms).saturating_sub(1);
        let sk_iters = (tiles - dp_waves * sms) as f64 * iters;
        let per_sm = (sk_iters / sms as f64).ceil();
        let fixup = if per_sm < iters || per_sm % iters.max(1.0) != 0.0 {
            (2 * 4 * tm * tn) as f64 / (2 * (tm + tn) * STREAM_K_TILE_K) as f64
        } else {
            0.0
        };
        let time = dp_waves as f64 * (iters + fill) + fill + per_sm + fixup;
        let useful = (g.batch * g.m * g.n) as f64 * iters / (tm * tn) as f64;
        (useful / (sms as f64 * time)).clamp(0.0, 1.0)
    }
}

/// The contraction depth of one stream-K iteration (a bf16 tensor-core
/// mainloop step).
const STREAM_K_TILE_K: u64 = 64;

/// The short side of the narrow output tiles of skinny products.
const SKINNY_TILE: u64 = 16;

/// The shape of a matmul: `batch` products of `m x k` by `k x n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gemm {
    pub batch: u64,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// One of a fused attention kernel's matmuls, and which kernel.
    pub attention: Option<AttentionPass>,
}

/// Which fused attention kernel a matmul belongs to: the forward (two
/// batched matmuls) or the backward (more: scores recomputed, then the
/// value, probability, query and key gradients).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionPass {
    Forward,
    Backward,
}

/// Parse a roofline table (model name -> parameters), checking every figure.
pub fn parse_roofline(text: &str) -> Result<BTreeMap<String, RooflineParams>, TimedError> {
    let t: BTreeMap<String, RooflineParams> = toml::from_str(text)
        .map_err(|e| TimedError::Roofline(crate::base::cursor::toml_located(&e, text)))?;
    for (name, p) in &t {
        let eff_ok = [p.compute_efficiency, p.memory_efficiency]
            .iter()
            .all(|f| *f > 0.0 && *f <= 1.0);
        let launch_ok = [Some(p.launch_us), p.graph_launch_us]
            .iter()
            .flatten()
            .all(|l| l.is_finite() && *l >= 0.0);
        let rate_ok = p.vector_rate.is_finite() && (0.0..=1.0).contains(&p.vector_rate);
        if !eff_ok || !launch_ok || !rate_ok {
            return Err(TimedError::Roofline(format!(
                "[{name}]: efficiencies must be in (0, 1], vector_rate in [0, 1], launch_us and graph_launch_us >= 0"
            )));
        }
        // A negative or NaN k_half would make compute faster or undefined.
        if !p.k_half.is_finite() || p.k_half < 0.0 {
            return Err(TimedError::Roofline(format!(
                "[{name}]: k_half must be finite and >= 0, got {}",
                p.k_half
            )));
        }
        // The attention kernel's rate: fractions in [0, 1] (the work and the
        // backward's share in (0, 1]) and a finite half length.
        let fraction = |f: Option<f64>| f.map_or(true, |f| f.is_finite() && f > 0.0 && f <= 1.0);
        let attention_ok = (0.0..=1.0).contains(&p.attention_efficiency)
            && p.attention_s_half.is_finite()
            && p.attention_s_half >= 0.0
            && fraction(p.attention_work)
            && fraction(p.attention_backward);
        if !attention_ok {
            return Err(TimedError::Roofline(format!(
                "[{name}]: attention_efficiency must be in [0, 1], attention_s_half finite and >= 0, attention_work and attention_backward in (0, 1]"
            )));
        }
    }
    if !t.contains_key("default") {
        return Err(TimedError::Roofline("no [default] entry".into()));
    }
    Ok(t)
}

/// The work of one step on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpCost {
    pub flops: u64,
    /// Bytes read plus bytes written.
    pub bytes: u64,
    /// The element type whose peak applies.
    pub dtype: DType,
    /// False for steps that only rename a buffer (no kernel, no time).
    pub kernel: bool,
    /// True when the step pays a kernel launch (false for the later steps of
    /// a fused kernel).
    pub launch: bool,
    /// A matmul's shape (for shape-dependent efficiency).
    pub gemm: Option<Gemm>,
}

/// The cost of compute step `step` (a local op or a local `all_slice`).
pub fn step_cost(program: &SpmdProgram, step: &Step) -> OpCost {
    let elems = |slot: usize| program.values[slot].local_elements();
    let bytes = |slot: usize| program.values[slot].local_bytes();
    match step {
        Step::Loop(l) => OpCost {
            flops: 0,
            bytes: 0,
            dtype: program.values[l.pred].global.dtype,
            kernel: false,
            launch: false,
            gemm: None,
        },
        Step::Case(c) => OpCost {
            flops: 0,
            bytes: 0,
            dtype: program.values[c.selector].global.dtype,
            kernel: false,
            launch: false,
            gemm: None,
        },
        Step::Collective(c) => OpCost {
            flops: 0,
            bytes: if matches!(c.kind, CollectiveKind::AllSlice(_)) {
                bytes(c.input) + bytes(c.output)
            } else {
                0
            },
            dtype: c.dtype,
            kernel: matches!(c.kind, CollectiveKind::AllSlice(_)),
            launch: matches!(c.kind, CollectiveKind::AllSlice(_)),
            gemm: None,
        },
        Step::Local {
            op,
            operands,
            results,
            ..
        } => {
            let kind = &program.local_func.op(*op).kind;
            let dtype = results
                .first()
                .or(operands.first())
                .map_or(DType::F32, |&s| program.values[s].global.dtype);
            let moved: u64 = match kind {
                // A lookup reads the rows it picks (as many bytes as it
                // writes) and its indices, not the whole table.
                OpKind::Gather { .. } | OpKind::DynamicSlice { .. } => {
                    let out: u64 = results.iter().map(|&s| bytes(s)).sum();
                    let indices: u64 = operands[1..].iter().map(|&s| bytes(s)).sum();
                    2 * out + indices
                }
                _ => operands.iter().chain(results).map(|&s| bytes(s)).sum(),
            };
            let out_elems = results.first().map_or(0, |&s| elems(s));
            let mut gemm = None;
            let (flops, kernel) = match kind {
                OpKind::Reshape | OpKind::Constant { .. } => (0, false),
                OpKind::DotGeneral { dims, .. } => {
                    let lhs = &program.values[operands[0]].layout.local_shape;
                    let size = |ds: &[u64]| -> u64 {
                        ds.iter()
                            .map(|&d| lhs.get(d as usize).copied().unwrap_or(1))
                            .product()
                    };
                    let k = size(&dims.lhs_contract);
                    let batch = size(&dims.lhs_batch).max(1);
                    let m = (lhs.iter().product::<u64>() / (batch * k).max(1)).max(1);
                    gemm = Some(Gemm {
                        batch,
                        m,
                        n: (out_elems / (batch * m)).max(1),
                        k,
                        attention: None,
                    });
                    (2 * out_elems * k, true)
                }
                OpKind::Dot { .. } => {
                    let lhs = &program.values[operands[0]].layout.local_shape;
                    let k = lhs.last().copied().unwrap_or(1);
                    let m = lhs.first().copied().unwrap_or(1);
                    gemm = Some(Gemm {
                        batch: 1,
                        m,
                        n: (out_elems / m.max(1)).max(1),
                        k,
                        attention: None,
                    });
                    (2 * out_elems * k, true)
                }
                OpKind::Reduce { .. } => {
                    let n = operands.len() / 2;
                    (operands[..n].iter().map(|&s| elems(s)).sum(), true)
                }
                k if k.is_elementwise() => (out_elems, true),
                _ => (0, true),
            };
            OpCost {
                flops,
                bytes: if kernel { moved } else { 0 },
                dtype: if matches!(kind, OpKind::DotGeneral { .. } | OpKind::Dot { .. }) {
                    program.values[operands[0]].global.dtype
                } else {
                    dtype
                },
                kernel,
                launch: kernel,
                gemm,
            }
        }
    }
}

/// One device's roofline: peaks from the topology, fractions from the table.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceRoofline {
    /// Peak FLOP/s per element type.
    pub flops: BTreeMap<DType, f64>,
    /// Bytes per second of the device's `global` memory.
    pub memory_bandwidth: f64,
    pub params: RooflineParams,
}

impl DeviceRoofline {
    /// The roofline of topology device `index`.
    pub fn for_device(
        topo: &Topology,
        index: u32,
        table: &BTreeMap<String, RooflineParams>,
    ) -> Result<DeviceRoofline, TimedError> {
        let c = topo
            .device(index)
            .ok_or(TimedError::NoSuchDevice(index, topo.num_devices()))?;
        let comp = topo.component(c);
        let params = *table
            .get(&comp.model)
            .or_else(|| table.get("default"))
            .ok_or_else(|| TimedError::Roofline("no [default] entry".into()))?;
        let memory_bandwidth = comp
            .memory
            .iter()
            .find(|m| m.scope == "global")
            .or(comp.memory.first())
            .map_or(0.0, |m| m.bandwidth.bytes_per_s() as f64);
        Ok(DeviceRoofline {
            flops: comp.flops.iter().map(|(d, r)| (*d, r.0 as f64)).collect(),
            memory_bandwidth,
            params,
        })
    }

    /// Peak FLOP/s for `dtype`: its own entry, else f32's, else the largest.
    fn peak(&self, dtype: DType) -> Option<f64> {
        self.flops
            .get(&dtype)
            .or_else(|| self.flops.get(&DType::F32))
            .copied()
            .or_else(|| self.flops.values().copied().reduce(f64::max))
            .filter(|p| *p > 0.0)
    }

    /// Time of `cost` on this device, rounded up to the picosecond
    /// ([`ceil_to_ps`]).
    pub fn time(&self, cost: &OpCost) -> Result<Time, TimedError> {
        if !cost.kernel {
            return Ok(Time::ZERO);
        }
        let p = &self.params;
        let compute = match self.peak(cost.dtype) {
            Some(peak) if cost.flops > 0 => {
                let shape = cost.gemm.map_or(1.0, |g| p.kernel_factor(&g));
                cost.flops as f64 / (peak * p.compute_efficiency * shape)
            }
            _ => 0.0,
        };
        let memory = if self.memory_bandwidth > 0.0 {
            cost.bytes as f64 / (self.memory_bandwidth * p.memory_efficiency)
        } else {
            0.0
        };
        let launch = if cost.launch { p.launch_us * 1e-6 } else { 0.0 };
        let secs = launch + compute.max(memory);
        ceil_to_ps(secs * 1e12).ok_or_else(|| {
            TimedError::Roofline(format!(
                "{} FLOPs and {} bytes take longer than the clock can count",
                cost.flops, cost.bytes
            ))
        })
    }
}
