//! Collectives on the virtual devices' buffers. Data-moving collectives
//! (gather, slice, all-to-all, permute) are one operation: each device builds
//! its output block (target layout) from the input blocks of the devices it
//! receives from (its group, itself, or its permute source), copying the
//! intersection of global index ranges, so uneven (padded) shards are laid out
//! again as the target sharding pads them. `all_reduce` combines the group's
//! buffers in group order; `reduce_scatter` does the same, then each device
//! keeps its block of the result.

use std::collections::BTreeMap;

use crate::ir::interp::manual::device_collective;
use crate::ir::DeviceCollective;
use crate::partition::{Collective, CollectiveKind, SpmdProgram};
use crate::tensor::{
    extract_block, insert_block, reduce_buffers_wide, CollectiveReduction, Tensor,
};

use super::DeviceState;

type Failure = (u64, String);

fn fail(device: u64, e: impl ToString) -> Failure {
    (device, e.to_string())
}

/// Run `c` on every device.
pub fn run(
    program: &SpmdProgram,
    c: &Collective,
    devices: &mut [DeviceState],
) -> Result<(), Failure> {
    let index: BTreeMap<u64, usize> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| (d.device, i))
        .collect();
    let input = |devices: &[DeviceState], dev: u64| -> Result<Tensor, Failure> {
        devices[index[&dev]].buffers[c.input]
            .clone()
            .ok_or_else(|| {
                fail(
                    dev,
                    format!("value {} has no buffer", program.values[c.input].name),
                )
            })
    };
    match &c.kind {
        CollectiveKind::AllReduce(kind) => {
            for (d, t) in reduce_groups(c, *kind, |d| input(devices, d))? {
                devices[index[&d]].buffers[c.output] = Some(t);
            }
        }
        CollectiveKind::ReduceScatter { reduction, .. } => {
            // Each device keeps its block (output layout) of its group's sum.
            let reduced = reduce_groups(c, *reduction, |d| input(devices, d))?;
            let mut outs = Vec::with_capacity(devices.len());
            for d in devices.iter() {
                let own = |q: u64| reduced.get(&q);
                outs.push((d.device, assemble(program, c, &own, d.device, &[d.device])?));
            }
            for (d, t) in outs {
                devices[index[&d]].buffers[c.output] = Some(t);
            }
        }
        CollectiveKind::Window { op, .. } => super::window::run(program, c, op, devices)?,
        CollectiveKind::Device { op, reduction, .. } => {
            let ids: Vec<u64> = devices.iter().map(|d| d.device).collect();
            let inputs: Vec<Tensor> = ids
                .iter()
                .map(|&d| input(devices, d))
                .collect::<Result<_, _>>()?;
            let groups = match op {
                DeviceCollective::CollectivePermute { .. } => Vec::new(),
                _ => c.groups.to_vec(),
            };
            let outs = device_collective(op, &groups, *reduction, &ids, &inputs)
                .map_err(|e| fail(ids[0], e))?;
            for (d, t) in devices.iter_mut().zip(outs) {
                d.buffers[c.output] = Some(t);
            }
        }
        CollectiveKind::Relabel => {
            for d in devices.iter_mut() {
                d.buffers[c.output] = d.buffers[c.input].clone();
            }
        }
        _ => {
            let group_of: BTreeMap<u64, &Vec<u64>> = c
                .groups
                .iter()
                .flat_map(|g| g.iter().map(move |&d| (d, g)))
                .collect();
            let perm: BTreeMap<u64, u64> = match &c.kind {
                CollectiveKind::CollectivePermute(pairs) => {
                    pairs.iter().map(|&(s, t)| (t, s)).collect()
                }
                _ => BTreeMap::new(),
            };
            let mut outs = Vec::with_capacity(devices.len());
            for d in devices.iter() {
                let sources: Vec<u64> = match &c.kind {
                    CollectiveKind::AllSlice(_) => vec![d.device],
                    CollectiveKind::CollectivePermute(_) => {
                        vec![*perm.get(&d.device).unwrap_or(&d.device)]
                    }
                    _ => group_of
                        .get(&d.device)
                        .map(|g| g.to_vec())
                        .ok_or_else(|| fail(d.device, "device is in no group"))?,
                };
                let held = |q: u64| devices[index[&q]].buffers[c.input].as_ref();
                outs.push((d.device, assemble(program, c, &held, d.device, &sources)?));
            }
            for (d, t) in outs {
                devices[index[&d]].buffers[c.output] = Some(t);
            }
        }
    }
    Ok(())
}

/// Per device, the reduction of its group's input buffers.
fn reduce_groups(
    c: &Collective,
    kind: CollectiveReduction,
    input: impl Fn(u64) -> Result<Tensor, Failure>,
) -> Result<BTreeMap<u64, Tensor>, Failure> {
    let mut out = BTreeMap::new();
    for g in c.groups.iter() {
        let bufs: Vec<Tensor> = g.iter().map(|&d| input(d)).collect::<Result<_, _>>()?;
        let r = reduce_buffers_wide(&bufs, kind).map_err(|e| fail(g[0], e))?;
        for &d in g {
            out.insert(d, r.clone());
        }
    }
    Ok(out)
}

/// Device `dev`'s output block, copied from the input blocks of `sources`
/// (`held(q)`: device `q`'s buffer laid out as the input's block).
fn assemble<'a>(
    program: &SpmdProgram,
    c: &Collective,
    held: &dyn Fn(u64) -> Option<&'a Tensor>,
    dev: u64,
    sources: &[u64],
) -> Result<Tensor, Failure> {
    let src_layout = &program.values[c.input].layout;
    let dst_layout = &program.values[c.output].layout;
    let target = dst_layout
        .shard_of(dev)
        .ok_or_else(|| fail(dev, "not in the mesh"))?;
    let mut out = Tensor::zeros(target.local_shape.clone(), c.dtype).map_err(|e| fail(dev, e))?;
    let want: u64 = target.ranges.iter().map(|r| r.1 - r.0).product();
    let mut covered = 0u64;
    for &q in sources {
        let src = src_layout
            .shard_of(q)
            .ok_or_else(|| fail(q, "not in the mesh"))?;
        let lo_hi: Vec<(u64, u64)> = src
            .ranges
            .iter()
            .zip(&target.ranges)
            .map(|(a, b)| (a.0.max(b.0), a.1.min(b.1)))
            .collect();
        if lo_hi.iter().any(|(lo, hi)| lo >= hi) {
            continue;
        }
        let buf = held(q).ok_or_else(|| {
            fail(
                q,
                format!("value {} has no buffer", program.values[c.input].name),
            )
        })?;
        let local: Vec<(u64, u64)> = lo_hi
            .iter()
            .zip(&src.ranges)
            .map(|((lo, hi), s)| (lo - s.0, hi - s.0))
            .collect();
        let block = extract_block(buf, &local).map_err(|e| fail(q, e))?;
        let at: Vec<u64> = lo_hi
            .iter()
            .zip(&target.ranges)
            .map(|((lo, _), t)| lo - t.0)
            .collect();
        insert_block(&mut out, &block, &at).map_err(|e| fail(dev, e))?;
        covered += lo_hi.iter().map(|(lo, hi)| hi - lo).product::<u64>();
    }
    if covered < want {
        return Err(fail(
            dev,
            format!(
                "{} leaves part of the block of {} uncovered ({covered} of {want} elements)",
                c.kind.name(),
                program.values[c.output].name
            ),
        ));
    }
    Ok(out)
}
