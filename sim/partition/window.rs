//! Halo exchange for ops that move elements along a dim: slice, pad, reverse
//! and concatenate. Instead of gathering the dims such an op changes, every
//! device builds its block of the result directly from the elements it needs:
//! those it holds itself, and the rest fetched from the devices that hold them
//! (a collective permute of exactly the halo; several rounds when a device
//! needs pieces from several neighbours). Each output index of a dim reads one
//! input index of the same dim (or padding), so the pieces are products of
//! per-dim index sets, and a device fetches at most its own output block.
//!
//! Source rule: an element held by the device itself is read locally;
//! otherwise from the holder whose mesh coordinates differ from the device's
//! in the fewest axes (then the lowest device id), so a halo comes from the
//! neighbour along the sharded axis.

use std::collections::BTreeMap;

use crate::mesh::Mesh;
use crate::sharding::{DeviceShard, ShardLayout};

/// How output indices read input indices, per op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowOp {
    /// `out[j] = in[start + j * stride]` per dim.
    Slice { start: Vec<u64>, stride: Vec<u64> },
    /// `out[j] = in[n - 1 - j]` on `dims`.
    Reverse { dims: Vec<usize> },
    /// `in[i]` lands at `out[low + i * (interior + 1)]`; elsewhere the padding value.
    Pad { low: Vec<i64>, interior: Vec<u64> },
    /// Operand `k` occupies `[offsets[k], offsets[k] + size_k)` of `dim`.
    Concat { dim: usize, offsets: Vec<u64> },
}

/// One output index's source: operand (concatenate; else 0) and input index.
type Source = Option<(usize, u64)>;

impl WindowOp {
    /// The op it stands for (`slice`, `pad`, `reverse`, `concatenate`).
    pub fn name(&self) -> &'static str {
        match self {
            WindowOp::Slice { .. } => "slice",
            WindowOp::Reverse { .. } => "reverse",
            WindowOp::Pad { .. } => "pad",
            WindowOp::Concat { .. } => "concatenate",
        }
    }

    /// The (operand, input index) output index `j` of dim `d` reads; `None`
    /// for padding. `in_sizes[k]` is operand `k`'s size along `d`.
    pub fn source(&self, d: usize, j: u64, in_sizes: &[u64]) -> Source {
        match self {
            WindowOp::Slice { start, stride } => Some((0, start[d] + j * stride[d])),
            WindowOp::Reverse { dims } => Some((
                0,
                if dims.contains(&d) {
                    in_sizes[0].checked_sub(j + 1)?
                } else {
                    j
                },
            )),
            WindowOp::Pad { low, interior } => {
                let t = j as i64 - low[d];
                let step = interior[d] as i64 + 1;
                if t < 0 || t % step != 0 {
                    return None;
                }
                let i = (t / step) as u64;
                (i < in_sizes[0]).then_some((0, i))
            }
            WindowOp::Concat { dim, offsets } => {
                if d != *dim {
                    return Some((usize::MAX, j));
                }
                let k = offsets.iter().rposition(|&o| o <= j)?;
                let i = j - offsets[k];
                (i < in_sizes[k]).then_some((k, i))
            }
        }
    }
}

/// For one output shard: per dim, the source of each local index (`None`
/// for padding, and for the shard's own padding past its range).
pub fn dim_sources(op: &WindowOp, out: &DeviceShard, in_shapes: &[&[u64]]) -> Vec<Vec<Source>> {
    (0..out.local_shape.len())
        .map(|d| {
            let sizes: Vec<u64> = in_shapes.iter().map(|s| s[d]).collect();
            let (lo, hi) = out.ranges[d];
            (0..out.local_shape[d])
                .map(|j| {
                    let g = lo + j;
                    if g >= hi {
                        None
                    } else {
                        op.source(d, g, &sizes)
                    }
                })
                .collect()
        })
        .collect()
}

/// The operand a multi-index reads: fixed by the concatenated dim (the others say `usize::MAX`).
pub fn operand_of(sources: &[(usize, u64)]) -> usize {
    sources
        .iter()
        .map(|s| s.0)
        .find(|&k| k != usize::MAX)
        .unwrap_or(0)
}

/// The device `device` reads block `block` (shard index per dim) of `layout` from.
pub fn pick_source(mesh: &Mesh, layout: &ShardLayout, device: u64, block: &[u64]) -> Option<u64> {
    let coords = mesh.coords(device).ok()?;
    layout
        .devices()
        .filter(|s| s.shard_index == block)
        .map(|s| {
            let c = mesh.coords(s.device).unwrap_or_default();
            let differ = c.iter().zip(&coords).filter(|(a, b)| a != b).count();
            (differ, s.device)
        })
        .min()
        .map(|(_, d)| d)
}

/// Elements each (source, target) pair moves to build `out` from `ins`.
pub fn plan_transfers(
    mesh: &Mesh,
    op: &WindowOp,
    ins: &[&ShardLayout],
    out: &ShardLayout,
) -> BTreeMap<(u64, u64), u64> {
    let shapes: Vec<&[u64]> = ins.iter().map(|l| l.global_shape.as_slice()).collect();
    let mut moves: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for shard in out.devices() {
        let per_dim = dim_sources(op, &shard, &shapes);
        // Per dim: (operand tag, input block) -> count of local indices.
        let counts: Vec<BTreeMap<(usize, u64), u64>> = per_dim
            .iter()
            .enumerate()
            .map(|(d, v)| {
                let mut m = BTreeMap::new();
                for &(k, i) in v.iter().flatten() {
                    let layout = ins[if k == usize::MAX { 0 } else { k }];
                    *m.entry((k, i / layout.local_shape[d].max(1))).or_default() += 1;
                }
                m
            })
            .collect();
        // Every combination of per-dim blocks is one piece.
        let mut combos: Vec<(Vec<(usize, u64)>, u64)> = vec![(Vec::new(), 1)];
        for m in &counts {
            let mut next = Vec::new();
            for (prefix, n) in &combos {
                for (&key, &c) in m {
                    let mut p = prefix.clone();
                    p.push(key);
                    next.push((p, n * c));
                }
            }
            combos = next;
        }
        for (keys, n) in combos {
            let k = operand_of(&keys);
            // Blocks of other operands along the concatenated dim do not combine.
            if keys.iter().any(|&(t, _)| t != usize::MAX && t != k) {
                continue;
            }
            let block: Vec<u64> = keys.iter().map(|&(_, b)| b).collect();
            if let Some(src) = pick_source(mesh, ins[k], shard.device, &block) {
                if src != shard.device {
                    *moves.entry((src, shard.device)).or_default() += n;
                }
            }
        }
    }
    moves
}

/// Split transfers into rounds in which every device receives at most once
/// (each round one collective permute), in (source, target) order.
pub fn rounds(transfers: &[(u64, u64, u64)]) -> Vec<Vec<(u64, u64, u64)>> {
    let mut out: Vec<Vec<(u64, u64, u64)>> = Vec::new();
    for &t in transfers {
        match out.iter_mut().find(|r| r.iter().all(|x| x.1 != t.1)) {
            Some(r) => r.push(t),
            None => out.push(vec![t]),
        }
    }
    out
}
