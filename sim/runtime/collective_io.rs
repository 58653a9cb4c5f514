//! What a session collective does around its plan, the same in every backend:
//! check the registers' types, build each worker's flat buffer, and turn the
//! buffer the plan leaves into what the worker stores. Also the plan runner a
//! single worker uses: its own moves of every step, chunks to and from peers.

use std::collections::BTreeMap;

use crate::collective::{self, CollectiveOp};
use crate::tensor::{
    accumulate_into, divide, extract_block, insert_block, CollectiveReduction, Scalar, Tensor,
};

use super::protocol::{CollectiveKind, TensorMeta, WirePlan};
use super::SessionError;

/// The reduction named `name` (`sum`, `prod`, `min`, `max`, `avg`).
pub fn reduction_named(name: &str) -> Result<CollectiveReduction, String> {
    use CollectiveReduction::*;
    [Sum, Prod, Min, Max, Avg]
        .into_iter()
        .find(|r| r.name() == name)
        .ok_or_else(|| format!("unknown reduction \"{name}\" (sum, prod, min, max, avg)"))
}

fn check(
    op: &'static str,
    a: &TensorMeta,
    b: &TensorMeta,
    f: (u64, u64),
) -> Result<(), SessionError> {
    if a.dtype != b.dtype || a.num_elements() * f.0 != b.num_elements() * f.1 {
        return Err(SessionError::Shape {
            op,
            message: format!(
                "src {:?} {:?} and dst {:?} {:?} do not fit",
                a.shape, a.dtype, b.shape, b.dtype
            ),
        });
    }
    Ok(())
}

/// Check `src` and `dst` for `kind` on `n` workers; the collective and its element count.
pub fn prepare(
    kind: CollectiveKind,
    n: usize,
    src: &TensorMeta,
    dst: &TensorMeta,
) -> Result<(CollectiveOp, u64), SessionError> {
    let n = n as u64;
    Ok(match kind {
        CollectiveKind::AllReduce => {
            check("allreduce", src, dst, (1, 1))?;
            (CollectiveOp::AllReduce, src.num_elements())
        }
        CollectiveKind::AllGather => {
            check("allgather", src, dst, (n, 1))?;
            (CollectiveOp::AllGather, n * src.num_elements())
        }
        CollectiveKind::Broadcast => {
            check("broadcast_from_worker0", src, dst, (1, 1))?;
            (CollectiveOp::Broadcast { root: 0 }, src.num_elements())
        }
        CollectiveKind::Scatter => {
            check("scatter_from_worker0", dst, src, (n, 1))?;
            (CollectiveOp::Scatter { root: 0 }, src.num_elements())
        }
        CollectiveKind::Gather => {
            check("gather_to_worker0", src, dst, (n, 1))?;
            (CollectiveOp::Gather { root: 0 }, n * src.num_elements())
        }
    })
}

fn flat(t: &Tensor) -> Result<Tensor, SessionError> {
    Ok(Tensor::new(
        vec![t.num_elements() as u64],
        t.data().clone(),
    )?)
}

fn shaped(t: Tensor, shape: &[u64]) -> Result<Tensor, SessionError> {
    Ok(Tensor::new(shape.to_vec(), t.into_data())?)
}

/// Worker `w`'s flat buffer (of `total` elements) for `kind` from its `src`.
pub fn input_buffer(
    kind: CollectiveKind,
    n: usize,
    w: usize,
    src: &Tensor,
    total: u64,
) -> Result<Tensor, SessionError> {
    match kind {
        CollectiveKind::AllGather | CollectiveKind::Gather => {
            // Worker w's array at piece w of the stacked buffer.
            let mut b = Tensor::splat(vec![total], Scalar::from_i128(src.dtype(), 0))?;
            let at = collective::plan::bound(total, n, w);
            insert_block(&mut b, &flat(src)?, &[at])?;
            Ok(b)
        }
        _ => flat(src),
    }
}

/// What worker `w` stores in `dst` (shape `dst_shape`) from the buffer the
/// plan left; `None`: `dst` keeps its value (a gather's non-root workers).
pub fn output(
    kind: CollectiveKind,
    n: usize,
    w: usize,
    buf: Tensor,
    dst_shape: &[u64],
) -> Result<Option<Tensor>, SessionError> {
    match kind {
        CollectiveKind::Scatter => {
            let k = buf.num_elements() as u64 / n as u64;
            let w = w as u64;
            let p = extract_block(&buf, &[(w * k, (w + 1) * k)])?;
            Ok(Some(shaped(p, dst_shape)?))
        }
        CollectiveKind::Gather if w != 0 => Ok(None),
        _ => Ok(Some(shaped(buf, dst_shape)?)),
    }
}

/// How a worker exchanges plan chunks with its peers.
pub trait Peers {
    fn send(&mut self, to: usize, chunk: Tensor) -> Result<(), String>;
    /// The next chunk `from` sent (chunks between two workers keep their order).
    fn recv(&mut self, from: usize) -> Result<Tensor, String>;
}

/// Run worker `me`'s part of `plan` on its buffer: every step, send the chunks
/// it moves (read as the step began), then apply the chunks it receives in the
/// step's order. Moves into one rank are applied in the same order as
/// `collective::data::execute` applies them, so the result is bit for bit the same.
pub fn run_plan_as(
    plan: &WirePlan,
    me: usize,
    buf: &mut Tensor,
    reduction: CollectiveReduction,
    peers: &mut dyn Peers,
) -> Result<(), String> {
    let e = |x: crate::tensor::TensorError| x.to_string();
    if buf.shape() != [plan.buffer_len] {
        return Err(format!(
            "buffer shape {:?}, the plan needs [{}]",
            buf.shape(),
            plan.buffer_len
        ));
    }
    let combine = match reduction {
        CollectiveReduction::Avg => CollectiveReduction::Sum,
        other => other,
    };
    for step in &plan.steps {
        // Chunks to itself, by move index, read before anything lands.
        let mut own: BTreeMap<usize, Tensor> = BTreeMap::new();
        for (i, m) in step.iter().enumerate() {
            if m.from != me || (m.from == m.to && m.src == m.dst) {
                continue;
            }
            let chunk = extract_block(buf, &[(m.src, m.src + m.len)]).map_err(e)?;
            if m.to == me {
                own.insert(i, chunk);
            } else {
                peers.send(m.to, chunk)?;
            }
        }
        for (i, m) in step.iter().enumerate() {
            if m.to != me || (m.from == m.to && m.src == m.dst) {
                continue;
            }
            let chunk = match own.remove(&i) {
                Some(c) => c,
                None => peers.recv(m.from)?,
            };
            let value = if m.reduce {
                let mut acc = extract_block(buf, &[(m.dst, m.dst + m.len)]).map_err(e)?;
                accumulate_into(&mut acc, &chunk, combine).map_err(e)?;
                acc
            } else {
                chunk
            };
            insert_block(buf, &value, &[m.dst]).map_err(e)?;
        }
    }
    if reduction == CollectiveReduction::Avg {
        let n = plan.ranks as i128;
        for &(r, off, len) in plan.reduced.iter().filter(|r| r.0 == me) {
            let _ = r;
            let block = extract_block(buf, &[(off, off + len)]).map_err(e)?;
            let div = Tensor::splat(vec![len], Scalar::from_i128(block.dtype(), n)).map_err(e)?;
            insert_block(buf, &divide(&block, &div).map_err(e)?, &[off]).map_err(e)?;
        }
    }
    Ok(())
}
