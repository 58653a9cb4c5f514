//! Manual computations (JAX's shard_map) in the reference interpreter. The
//! body is per-device code: every device of the mesh gets its block of each
//! operand (the in-sharding's layout), runs the body op by op in lockstep
//! with the others, and device collectives (`stablehlo.all_reduce` & co.)
//! combine the devices' values over their replica groups. The results are
//! assembled from the devices' blocks by the out-shardings. In a partially
//! manual computation the shardings count only on the manual axes: along a
//! free axis every device holds the whole dim (see `manual_part`).

use std::collections::BTreeMap;

use crate::mesh::Mesh;
use crate::sharding::{ShardLayout, TensorSharding};
use crate::tensor::{
    self, concat_pieces, extract_block, insert_block, reduce_buffers_wide, split,
    CollectiveReduction, ReduceKind, Tensor, TensorError,
};

use super::super::{DeviceCollective, Func, Module, Op, OpKind};
use super::eval::{eval_op, reduce_kind_of, Env};
use super::InterpError;

/// The collective reduction of a device collective's reducer region.
pub fn reducer_of(func: &Func, op: &Op) -> Option<CollectiveReduction> {
    Some(match reduce_kind_of(func, op.regions.first()?)? {
        ReduceKind::Add => CollectiveReduction::Sum,
        ReduceKind::Mul => CollectiveReduction::Prod,
        ReduceKind::Max | ReduceKind::Or => CollectiveReduction::Max,
        ReduceKind::Min | ReduceKind::And => CollectiveReduction::Min,
    })
}

/// One replica group's outputs, in group order, from its members' inputs
/// (`reduction` for all-reduce and reduce-scatter). Not for permutes.
pub fn group_collective(
    c: &DeviceCollective,
    reduction: Option<CollectiveReduction>,
    bufs: &[Tensor],
) -> Result<Vec<Tensor>, TensorError> {
    let n = bufs.len();
    let reduce = || {
        let kind = reduction
            .ok_or_else(|| TensorError::invalid(c.name(), "the reducer is not one binary op"))?;
        reduce_buffers_wide(bufs, kind)
    };
    Ok(match c {
        DeviceCollective::AllReduce => vec![reduce()?; n],
        DeviceCollective::AllGather { dim } => vec![concat_pieces(bufs, *dim as usize)?; n],
        DeviceCollective::ReduceScatter { dim } => split(&reduce()?, *dim as usize, n as u64)?,
        DeviceCollective::AllToAll {
            split_dim,
            concat_dim,
            ..
        } => {
            let pieces: Vec<Vec<Tensor>> = bufs
                .iter()
                .map(|b| split(b, *split_dim as usize, n as u64))
                .collect::<Result<_, _>>()?;
            (0..n)
                .map(|r| {
                    let mine: Vec<Tensor> = pieces.iter().map(|p| p[r].clone()).collect();
                    concat_pieces(&mine, *concat_dim as usize)
                })
                .collect::<Result<_, _>>()?
        }
        DeviceCollective::CollectivePermute { .. } => {
            return Err(TensorError::invalid(c.name(), "a permute has no groups"))
        }
    })
}

/// Every device's output of a device collective, from every device's input
/// (indexed like `ids`, the mesh's device ids). A device in no replica group
/// forms a group of its own; a permute target that nothing is sent to gets
/// zeros.
pub fn device_collective(
    c: &DeviceCollective,
    groups: &[Vec<u64>],
    reduction: Option<CollectiveReduction>,
    ids: &[u64],
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, TensorError> {
    let index: BTreeMap<u64, usize> = ids.iter().enumerate().map(|(i, &d)| (d, i)).collect();
    let at = |d: u64| {
        index
            .get(&d)
            .copied()
            .ok_or_else(|| TensorError::invalid(c.name(), format!("device {d} is not in the mesh")))
    };
    let mut outs: Vec<Option<Tensor>> = vec![None; ids.len()];
    if let DeviceCollective::CollectivePermute { pairs } = c {
        for &(s, t) in pairs {
            outs[at(t)?] = Some(inputs[at(s)?].clone());
        }
        return outs
            .into_iter()
            .zip(inputs)
            .map(|(o, x)| match o {
                Some(t) => Ok(t),
                None => tensor::constant_splat(
                    x.shape().to_vec(),
                    tensor::Scalar::from_f64(x.dtype(), 0.0),
                ),
            })
            .collect();
    }
    let mut all: Vec<Vec<u64>> = groups.to_vec();
    let covered: Vec<u64> = groups.iter().flatten().copied().collect();
    all.extend(
        ids.iter()
            .filter(|d| !covered.contains(d))
            .map(|&d| vec![d]),
    );
    for g in &all {
        let members: Vec<usize> = g.iter().map(|&d| at(d)).collect::<Result<_, _>>()?;
        let bufs: Vec<Tensor> = members.iter().map(|&i| inputs[i].clone()).collect();
        for (&i, t) in members.iter().zip(group_collective(c, reduction, &bufs)?) {
            outs[i] = Some(t);
        }
    }
    Ok(outs
        .into_iter()
        .map(|o| o.expect("every device is in a group"))
        .collect())
}

/// The mesh a manual computation's shardings name.
pub fn manual_mesh<'m>(module: &'m Module, op: &'m Op) -> Option<&'m Mesh> {
    let OpKind::ManualComputation {
        in_shardings,
        out_shardings,
        ..
    } = &op.kind
    else {
        return None;
    };
    in_shardings
        .iter()
        .chain(out_shardings)
        .next()
        .and_then(|s| s.resolve_mesh(&module.meshes))
}

/// The free axes (larger than 1) of a manual computation over `manual_axes`:
/// none for a fully manual one.
pub fn free_axes(mesh: &Mesh, manual_axes: &[String]) -> Vec<String> {
    mesh.axes()
        .iter()
        .filter(|a| a.size > 1 && !manual_axes.contains(&a.name))
        .map(|a| a.name.clone())
        .collect()
}

/// The part of `s` on the manual axes. A body sees its operands split along the
/// manual axes only: along a free axis (a partially manual computation) every
/// device holds the whole dim, so each device of the full mesh runs the body on
/// the same data as its free-axis peers, and the peers' results agree.
fn manual_part(s: &TensorSharding, manual_axes: &[String]) -> TensorSharding {
    let mut s = s.clone();
    let keep = |a: &crate::mesh::AxisRef| manual_axes.contains(&a.name);
    for d in &mut s.dims {
        d.axes.retain(keep);
    }
    s.replicated.retain(keep);
    s.unreduced.retain(keep);
    s
}

fn layout(
    mesh: &Mesh,
    s: &TensorSharding,
    shape: &[u64],
    what: &str,
) -> Result<ShardLayout, String> {
    let l = ShardLayout::new(mesh, s, shape).map_err(|e| format!("{what}: {e}"))?;
    if l.padding.iter().any(|&p| p != 0) {
        return Err(format!(
            "{what}: sharding {} does not divide {shape:?} evenly",
            s.to_bare()
        ));
    }
    Ok(l)
}

/// Evaluate manual computation `op` whose operands are `args`.
pub(super) fn eval_manual(
    module: &Module,
    func: &Func,
    op: &Op,
    args: Vec<Tensor>,
) -> Result<Vec<Tensor>, InterpError> {
    let name = op.kind.name();
    let fail = |m: String| InterpError::op(op.loc, name, m);
    let OpKind::ManualComputation {
        in_shardings,
        out_shardings,
        manual_axes,
    } = &op.kind
    else {
        return Err(fail("not a manual computation".into()));
    };
    let mesh = manual_mesh(module, op).ok_or_else(|| fail("no mesh".into()))?;
    let in_shardings: Vec<TensorSharding> = in_shardings
        .iter()
        .map(|s| manual_part(s, manual_axes))
        .collect();
    let out_shardings: Vec<TensorSharding> = out_shardings
        .iter()
        .map(|s| manual_part(s, manual_axes))
        .collect();
    let region = op.regions.first().ok_or_else(|| fail("no body".into()))?;
    let ids = mesh.device_ids();
    let mut envs: Vec<Env> = ids.iter().map(|_| Env::new(func)).collect();
    for (i, (x, s)) in args.iter().zip(&in_shardings).enumerate() {
        // A token holds no data: every device gets one.
        if x.dtype() == crate::base::DType::Token {
            for env in envs.iter_mut() {
                env.set(region.args[i], Tensor::token());
            }
            continue;
        }
        let l = layout(mesh, s, x.shape(), &format!("operand {i}")).map_err(fail)?;
        for (k, &d) in ids.iter().enumerate() {
            let shard = l.shard_of(d).ok_or_else(|| fail(format!("device {d}")))?;
            let block = extract_block(x, &shard.ranges).map_err(|e| fail(e.to_string()))?;
            envs[k].set(region.args[i], block);
        }
    }
    let mut blocks: Vec<Vec<Tensor>> = Vec::new();
    for &id in &region.ops {
        let bop = func.op(id);
        if bop.kind.is_terminator() {
            for env in &envs {
                blocks.push(env.operands(bop)?);
            }
            break;
        }
        if let OpKind::DeviceCollective { op: c, groups } = &bop.kind {
            let inputs: Vec<Tensor> = envs
                .iter()
                .map(|env| env.get(bop.operands[0], bop).cloned())
                .collect::<Result<_, _>>()?;
            let outs = device_collective(c, groups, reducer_of(func, bop), &ids, &inputs)
                .map_err(|e| InterpError::op(bop.loc, bop.kind.name(), e))?;
            for (env, t) in envs.iter_mut().zip(outs) {
                env.set(bop.results[0], t);
            }
            continue;
        }
        for env in envs.iter_mut() {
            let outs = eval_op(module, func, bop, env)?;
            for (&r, t) in bop.results.iter().zip(outs) {
                env.set(r, t);
            }
        }
    }
    let mut results = Vec::with_capacity(op.results.len());
    for (j, (&r, s)) in op.results.iter().zip(&out_shardings).enumerate() {
        let ty = &func.value(r).ty;
        if ty.is_token() {
            results.push(Tensor::token());
            continue;
        }
        let l = layout(mesh, s, &ty.shape, &format!("result {j}")).map_err(fail)?;
        let zero = tensor::Scalar::from_f64(ty.dtype, 0.0);
        let mut out =
            tensor::constant_splat(ty.shape.clone(), zero).map_err(|e| fail(e.to_string()))?;
        for (k, &d) in ids.iter().enumerate() {
            let shard = l.shard_of(d).ok_or_else(|| fail(format!("device {d}")))?;
            let block = blocks
                .get(k)
                .and_then(|b| b.get(j))
                .ok_or_else(|| fail("the body returns too few values".into()))?;
            let starts: Vec<u64> = shard.ranges.iter().map(|r| r.0).collect();
            insert_block(&mut out, block, &starts).map_err(|e| fail(e.to_string()))?;
        }
        results.push(out);
    }
    Ok(results)
}
