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
        .map(|d| one_dim_sources(op, d, out.ranges[d], out.local_shape[d], in_shapes))
        .collect()
}

/// The sources of dim `d`'s local indices for a shard holding `range` of it
/// in a buffer of `local` indices.
fn one_dim_sources(
    op: &WindowOp,
    d: usize,
    (lo, hi): (u64, u64),
    local: u64,
    in_shapes: &[&[u64]],
) -> Vec<Source> {
    let sizes: Vec<u64> = in_shapes.iter().map(|s| s[d]).collect();
    (0..local)
        .map(|j| {
            let g = lo + j;
            if g >= hi {
                None
            } else {
                op.source(d, g, &sizes)
            }
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

/// Per dim `d` of an output shard holding `range` of it: (operand tag,
/// input block) -> count of local indices reading it.
type DimCounts = BTreeMap<(usize, u64), u64>;

fn dim_counts(
    op: &WindowOp,
    d: usize,
    range: (u64, u64),
    local: u64,
    ins: &[&ShardLayout],
) -> DimCounts {
    let shapes: Vec<&[u64]> = ins.iter().map(|l| l.global_shape.as_slice()).collect();
    let mut m = BTreeMap::new();
    for (k, i) in one_dim_sources(op, d, range, local, &shapes)
        .into_iter()
        .flatten()
    {
        let layout = ins[if k == usize::MAX { 0 } else { k }];
        *m.entry((k, i / layout.local_shape[d].max(1))).or_default() += 1;
    }
    m
}

/// A piece of an output shard: (operand, input block, elements).
type Piece = (usize, Vec<u64>, u64);

/// The pieces an output shard needs, from its per-dim counts.
fn pieces(counts: &[&DimCounts]) -> Vec<Piece> {
    // Every combination of per-dim blocks is one piece.
    let mut combos: Vec<(Vec<(usize, u64)>, u64)> = vec![(Vec::new(), 1)];
    for m in counts {
        let mut next = Vec::new();
        for (prefix, n) in &combos {
            for (&key, &c) in m.iter() {
                let mut p = prefix.clone();
                p.push(key);
                next.push((p, n * c));
            }
        }
        combos = next;
    }
    combos
        .into_iter()
        .filter_map(|(keys, n)| {
            let k = operand_of(&keys);
            // Blocks of other operands along the concatenated dim do not combine.
            if keys.iter().any(|&(t, _)| t != usize::MAX && t != k) {
                return None;
            }
            Some((k, keys.iter().map(|&(_, b)| b).collect(), n))
        })
        .collect()
}

/// Elements each (source, target) pair moves to build `out` from `ins`
/// (the sources [`pick_source`] names). Devices holding the same output
/// shard need the same pieces, so each distinct shard is worked out once,
/// and each device looks only at the holders of the blocks it lacks: the
/// cost grows with devices times pieces, not devices squared.
pub fn plan_transfers(
    mesh: &Mesh,
    op: &WindowOp,
    ins: &[&ShardLayout],
    out: &ShardLayout,
) -> BTreeMap<(u64, u64), u64> {
    let n = out.num_devices();
    let coords: Vec<Vec<u64>> = (0..n).map(|p| mesh.coords_of_position(p)).collect();
    // Per operand, built on first need: input block -> positions holding it.
    let mut holders: Vec<Option<BTreeMap<Vec<u64>, Vec<u64>>>> = vec![None; ins.len()];
    // Per dim and shard index along it: the counts (each dim's sources
    // depend only on that dim's range).
    let mut counts_of: BTreeMap<(usize, u64), DimCounts> = BTreeMap::new();
    let mut pieces_of: BTreeMap<Vec<u64>, Vec<Piece>> = BTreeMap::new();
    let mut moves: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for pos in 0..n {
        let index = out.shard_index_at(pos);
        if !pieces_of.contains_key(&index) {
            let shard = out.device_shard(pos);
            for (d, &i) in index.iter().enumerate() {
                counts_of.entry((d, i)).or_insert_with(|| {
                    dim_counts(op, d, shard.ranges[d], shard.local_shape[d], ins)
                });
            }
            let counts: Vec<&DimCounts> = (0..index.len())
                .map(|d| &counts_of[&(d, index[d])])
                .collect();
            pieces_of.insert(index.clone(), pieces(&counts));
        }
        let device = out.device_at(pos);
        // The block of each operand the device holds itself.
        let own: Vec<Vec<u64>> = ins.iter().map(|l| l.shard_index_at(pos)).collect();
        for (k, block, count) in pieces_of[&index].iter() {
            let layout = ins[*k];
            // A device holding the block reads it itself (no other holder
            // has all its mesh coordinates).
            if own[*k] == *block {
                continue;
            }
            let by_block = holders[*k].get_or_insert_with(|| {
                let mut m: BTreeMap<Vec<u64>, Vec<u64>> = BTreeMap::new();
                for p in 0..layout.num_devices() {
                    m.entry(layout.shard_index_at(p)).or_default().push(p);
                }
                m
            });
            let here = &coords[pos as usize];
            let src = by_block.get(block).and_then(|ps| {
                ps.iter()
                    .map(|&p| {
                        let c = &coords[p as usize];
                        let differ = c.iter().zip(here).filter(|(a, b)| a != b).count();
                        (differ, layout.device_at(p))
                    })
                    .min()
            });
            if let Some((_, src)) = src {
                *moves.entry((src, device)).or_default() += count;
            }
        }
    }
    moves
}

/// Split transfers into rounds in which every device receives at most once
/// (each round one collective permute), in (source, target) order.
pub fn rounds(transfers: &[(u64, u64, u64)]) -> Vec<Vec<(u64, u64, u64)>> {
    let mut out: Vec<Vec<(u64, u64, u64)>> = Vec::new();
    // Per target, the rounds it already receives in (first fit: the first
    // round it is not in).
    let mut used: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for &t in transfers {
        let taken = used.entry(t.1).or_default();
        let r = (0..).find(|r| !taken.contains(r)).unwrap_or(0);
        taken.push(r);
        if r == out.len() {
            out.push(Vec::new());
        }
        out[r].push(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// First fit by scanning every round (the plain statement of the rule).
    fn rounds_by_scan(transfers: &[(u64, u64, u64)]) -> Vec<Vec<(u64, u64, u64)>> {
        let mut out: Vec<Vec<(u64, u64, u64)>> = Vec::new();
        for &t in transfers {
            match out.iter_mut().find(|r| r.iter().all(|x| x.1 != t.1)) {
                Some(r) => r.push(t),
                None => out.push(vec![t]),
            }
        }
        out
    }

    proptest! {
        #[test]
        fn rounds_are_first_fit_with_one_receive_per_device(
            transfers in proptest::collection::vec((0u64..6, 0u64..6, 1u64..4), 0..40)
        ) {
            let r = rounds(&transfers);
            prop_assert_eq!(&r, &rounds_by_scan(&transfers));
            for round in &r {
                let mut targets: Vec<u64> = round.iter().map(|t| t.1).collect();
                targets.sort_unstable();
                targets.dedup();
                prop_assert_eq!(targets.len(), round.len());
            }
        }
    }
}
