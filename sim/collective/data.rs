//! Data mode: run a plan on real buffers (one flat tensor per rank), moving and
//! reducing every chunk with the tensor helpers, in the element type, in the
//! order the plan's moves arrive (as a device adds a received chunk into its
//! own). `avg` sums, then divides each finished reduction by the group size.

use crate::tensor::{
    accumulate_into, divide, extract_block, insert_block, CollectiveReduction, Scalar, Tensor,
};

use super::plan::Plan;
use super::CollectiveError;

/// Run `plan` on `buffers` (one per rank, each `plan.buffer_len` elements, 1-D).
pub fn execute(
    plan: &Plan,
    buffers: &mut [Tensor],
    reduction: CollectiveReduction,
) -> Result<(), CollectiveError> {
    if buffers.len() != plan.ranks {
        return Err(CollectiveError::Buffers(format!(
            "{} buffers for a group of {} ranks",
            buffers.len(),
            plan.ranks
        )));
    }
    if let Some((r, b)) = buffers
        .iter()
        .enumerate()
        .find(|(_, b)| b.shape() != [plan.buffer_len])
    {
        return Err(CollectiveError::Buffers(format!(
            "rank {r}: buffer shape {:?}, expected [{}]",
            b.shape(),
            plan.buffer_len
        )));
    }
    // Sum-like accumulation for avg; the division comes at the end.
    let combine = match reduction {
        CollectiveReduction::Avg => CollectiveReduction::Sum,
        other => other,
    };
    for step in &plan.steps {
        // Read every sent chunk as the step began.
        let mut sent = Vec::with_capacity(step.len());
        for m in step {
            if m.from == m.to && m.src == m.dst {
                sent.push(None);
                continue;
            }
            sent.push(Some(extract_block(
                &buffers[m.from],
                &[(m.src, m.src + m.len)],
            )?));
        }
        for (m, chunk) in step.iter().zip(sent) {
            let Some(chunk) = chunk else { continue };
            let dst = &mut buffers[m.to];
            let value = if m.reduce {
                let mut acc = extract_block(dst, &[(m.dst, m.dst + m.len)])?;
                accumulate_into(&mut acc, &chunk, combine)?;
                acc
            } else {
                chunk
            };
            insert_block(dst, &value, &[m.dst])?;
        }
    }
    if reduction == CollectiveReduction::Avg {
        let n = plan.ranks as i128;
        for &(r, off, len) in &plan.reduced {
            let block = extract_block(&buffers[r], &[(off, off + len)])?;
            let div = Tensor::splat(vec![len], Scalar::from_i128(block.dtype(), n))?;
            insert_block(&mut buffers[r], &divide(&block, &div)?, &[off])?;
        }
    }
    Ok(())
}
