//! Halo exchange on the virtual devices' buffers: every device builds its
//! block of a slice, pad, reverse or concatenate from its own input blocks and
//! its neighbours', reading each element from the device the partitioner's
//! plan names ([`crate::partition::window`]), so what runs is what was
//! counted and timed.

use std::collections::BTreeMap;

use crate::partition::window::{dim_sources, operand_of, pick_source};
use crate::partition::{Collective, SpmdProgram, WindowOp};
use crate::sharding::ShardLayout;
use crate::tensor::{for_each_index, Scalar, Tensor};

use super::DeviceState;

type Failure = (u64, String);

/// Run window collective `c` (kind `op`) on every device.
pub fn run(
    program: &SpmdProgram,
    c: &Collective,
    op: &WindowOp,
    devices: &mut [DeviceState],
) -> Result<(), Failure> {
    let mut inputs = vec![c.input];
    let mut fill_slot = None;
    match op {
        WindowOp::Concat { .. } => inputs.extend(&c.extra_inputs),
        WindowOp::Pad { .. } => fill_slot = c.extra_inputs.first().copied(),
        _ => {}
    }
    let layouts: Vec<&ShardLayout> = inputs.iter().map(|&s| &program.values[s].layout).collect();
    let shapes: Vec<&[u64]> = layouts.iter().map(|l| l.global_shape.as_slice()).collect();
    let out = &program.values[c.output];
    let index: BTreeMap<u64, usize> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| (d.device, i))
        .collect();
    let buffer = |dev: u64, slot: usize| -> Result<&Tensor, Failure> {
        devices[index[&dev]].buffers[slot].as_ref().ok_or_else(|| {
            (
                dev,
                format!("value {} has no buffer", program.values[slot].name),
            )
        })
    };
    let mut outs = Vec::with_capacity(devices.len());
    for d in devices.iter() {
        let dev = d.device;
        let shard = out
            .layout
            .shard_of(dev)
            .ok_or_else(|| (dev, "not in the mesh".to_string()))?;
        let fill = match fill_slot {
            Some(s) => buffer(dev, s)?
                .to_scalar()
                .map_err(|e| (dev, e.to_string()))?,
            None => Scalar::zero(c.dtype),
        };
        let mut t =
            Tensor::splat(shard.local_shape.clone(), fill).map_err(|e| (dev, e.to_string()))?;
        let per_dim = dim_sources(op, &shard, &shapes);
        let mut sources: BTreeMap<(usize, Vec<u64>), u64> = BTreeMap::new();
        let mut failure: Option<Failure> = None;
        let local: Vec<usize> = shard.local_shape.iter().map(|&x| x as usize).collect();
        for_each_index(&local, |idx| {
            if failure.is_some() {
                return;
            }
            let src: Option<Vec<(usize, u64)>> = idx
                .iter()
                .enumerate()
                .map(|(k, &j)| per_dim[k][j])
                .collect();
            let Some(src) = src else {
                return;
            };
            let k = operand_of(&src);
            let layout = layouts[k];
            let block: Vec<u64> = src
                .iter()
                .enumerate()
                .map(|(dim, &(_, i))| i / layout.local_shape[dim].max(1))
                .collect();
            let offset: Vec<u64> = src
                .iter()
                .enumerate()
                .map(|(dim, &(_, i))| i % layout.local_shape[dim].max(1))
                .collect();
            let from = match sources.get(&(k, block.clone())) {
                Some(&s) => s,
                None => match pick_source(&program.mesh, layout, dev, &block) {
                    Some(s) => {
                        sources.insert((k, block), s);
                        s
                    }
                    None => {
                        failure = Some((dev, format!("no device holds block {block:?}")));
                        return;
                    }
                },
            };
            let value = buffer(from, inputs[k])
                .and_then(|b| b.get(&offset).map_err(|e| (from, e.to_string())));
            let idx64: Vec<u64> = idx.iter().map(|&x| x as u64).collect();
            match value.and_then(|v| t.set(&idx64, v).map_err(|e| (dev, e.to_string()))) {
                Ok(()) => {}
                Err(e) => failure = Some(e),
            }
        });
        if let Some(f) = failure {
            return Err(f);
        }
        outs.push((index[&dev], t));
    }
    for (i, t) in outs {
        devices[i].buffers[c.output] = Some(t);
    }
    Ok(())
}
