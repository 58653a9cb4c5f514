//! Kernel fusion as a compiler does it for GPUs: connected chains of
//! memory-bound ops (elementwise, broadcasts, converts, iotas, layout changes,
//! reductions) run as one kernel between the ops that stay kernels of their
//! own (matmuls, convolutions, gathers, sorts, collectives...). A fused
//! kernel launches once, reads each value from outside the fusion once and
//! writes only the values used outside it; values inside never reach
//! device memory (no allocation, no traffic). Two fusions join only where
//! no path leaves them and comes back ([`super::acyclic`]): no fusion sits on
//! a cycle through a matmul or a collective, the kernel graph stays acyclic.
//!
//! A constant, or a broadcast (reshape, convert) of a one-element constant,
//! is copied into every fusion that reads it, as a compiler rematerializes
//! constants: it never joins two fusions into one, and a splat costs no
//! traffic (the kernel computes it in registers). It runs as a kernel of its
//! own only where a step outside any fusion (a matmul, a collective, a
//! loop) or the program's results read it.
//!
//! A gather read only by one matmul runs inside it, as a grouped matmul
//! reads the weights of the experts its rows are routed to: the matmul
//! reads the picked slices from the table (its operand's bytes), the
//! gathered copy is never written.

use std::collections::BTreeSet;

use crate::ir::{DenseValue, OpKind};
use crate::partition::{SpmdProgram, Step};

use super::acyclic::{fusions, step_inputs};
use super::cost::{step_cost, AttentionPass, OpCost};

/// Which steps fuse and which values stay inside a fusion.
#[derive(Debug, Clone)]
pub struct FusionPlan {
    /// Per step: its fusion (the lowest step index of the fusion), if fused.
    pub group: Vec<Option<usize>>,
    /// Per slot: produced and consumed only inside one fusion, or picked by
    /// a gather that runs inside its matmul.
    pub internal: Vec<bool>,
    /// Per step: a gather that runs inside the one matmul reading it.
    pub in_matmul: Vec<bool>,
    /// Per slot: a gather's result its matmul reads from the table.
    pub picked: Vec<bool>,
    /// Per step: an add folded into the matmul step given, whose result it
    /// adds into a donated buffer (`C = A B + C`, the matmul's epilogue).
    pub epilogue_of: Vec<Option<usize>>,
    /// Per step: a constant (or a broadcast of a splat) that each fusion
    /// reading it recomputes; it never links two fusions.
    pub cloned: Vec<bool>,
    /// Per step: a cloned step that only fusions read: it runs no kernel.
    pub clone_only: Vec<bool>,
    /// Per slot: a splat value that a fusion reading it recomputes, with
    /// no traffic.
    pub splat: Vec<bool>,
}

/// Ops a fusion may hold (with `attention`, batched matmuls too).
fn fusible(kind: &OpKind, attention: bool) -> bool {
    if let OpKind::DotGeneral { dims, .. } = kind {
        return attention && !dims.lhs_batch.is_empty();
    }
    kind.is_elementwise()
        || matches!(
            kind,
            OpKind::BroadcastInDim { .. }
                | OpKind::Iota { .. }
                | OpKind::Constant { .. }
                | OpKind::Reshape
                | OpKind::Transpose { .. }
                | OpKind::Slice { .. }
                | OpKind::Concatenate { .. }
                | OpKind::Pad { .. }
                | OpKind::Reverse { .. }
                | OpKind::Reduce { .. }
        )
}

/// The fusions of `program`'s steps; `attention`: batched matmuls fuse
/// (flash attention).
pub fn plan(program: &SpmdProgram, attention: bool) -> FusionPlan {
    plan_with(program, attention, &[])
}

/// [`plan`], with the program arguments `donated` (indices) updated in
/// place: an add of a matmul's wider result (bf16 operands, fp32 result)
/// into a donated argument, alone in its fusion, runs as the matmul's
/// epilogue with `beta = 1` (cuBLAS's
/// `C = A B + C`, as Megatron-LM's fused weight-gradient accumulation and
/// XLA's GEMM rewriter run it): the matmul's own result is never written,
/// the matmul reads and writes the buffer, and the add launches nothing.
pub fn plan_with(program: &SpmdProgram, attention: bool, donated: &[usize]) -> FusionPlan {
    let n = program.steps.len();
    let slots = program.values.len();
    let is_fusible: Vec<bool> = program
        .steps
        .iter()
        .map(|s| match s {
            Step::Local { op, .. } => fusible(&program.local_func.op(*op).kind, attention),
            _ => false,
        })
        .collect();
    let mut producer: Vec<Option<usize>> = vec![None; slots];
    for (i, s) in program.steps.iter().enumerate() {
        if let Step::Local { results, .. } = s {
            for &r in results {
                producer[r] = Some(i);
            }
        }
    }
    let (cloned, splat) = clones(program, &is_fusible, &producer);
    // A clone links nothing: each fusion has its own copy.
    let linkable: Vec<bool> = (0..n).map(|i| is_fusible[i] && !cloned[i]).collect();
    // No fusion sits on a cycle of the kernel graph.
    let roots = fusions(program, &linkable, &is_fusible);
    // A value escapes its fusion when any reader is outside it, or it is a
    // program result.
    let mut escapes = vec![false; slots];
    for &r in &program.results {
        escapes[r] = true;
    }
    for (i, s) in program.steps.iter().enumerate() {
        let inputs = step_inputs(s);
        for o in inputs {
            let inside = is_fusible[i]
                && producer[o]
                    .is_some_and(|j| is_fusible[j] && (cloned[j] || roots[j] == roots[i]));
            if !inside {
                escapes[o] = true;
            }
        }
    }
    // A non-splat constant stays a buffer its readers load.
    let mut internal: Vec<bool> = (0..slots)
        .map(|s| {
            producer[s].is_some_and(|j| is_fusible[j] && (!cloned[j] || splat[s])) && !escapes[s]
        })
        .collect();
    let clone_only: Vec<bool> = program
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            cloned[i]
                && matches!(s, Step::Local { results, .. } if results.iter().all(|&r| !escapes[r]))
        })
        .collect();
    let group: Vec<Option<usize>> = (0..n).map(|i| is_fusible[i].then_some(roots[i])).collect();
    let (in_matmul, picked) = gathers_in_matmuls(program);
    for (s, &p) in picked.iter().enumerate() {
        internal[s] |= p;
    }
    let epilogue_of = epilogues(program, &group, &producer, donated);
    // A folded matmul's own result is never written.
    for &j in epilogue_of.iter().flatten() {
        if let Step::Local { results, .. } = &program.steps[j] {
            for &r in results {
                internal[r] = true;
            }
        }
    }
    FusionPlan {
        group,
        internal,
        in_matmul,
        picked,
        epilogue_of,
        cloned,
        clone_only,
        splat,
    }
}

/// Per step: a fusible constant, or a fusible broadcast, reshape or convert
/// of a splat (every fusion reading it computes its own copy, as XLA clones
/// constants into each consumer fusion). Per slot: a splat (one element, or
/// one repeated): what such a copy costs nothing to read.
fn clones(
    program: &SpmdProgram,
    is_fusible: &[bool],
    producer: &[Option<usize>],
) -> (Vec<bool>, Vec<bool>) {
    let mut cloned = vec![false; program.steps.len()];
    let mut splat = vec![false; program.values.len()];
    // Steps are in program order: an operand's producer comes first.
    for (i, s) in program.steps.iter().enumerate() {
        let Step::Local {
            op,
            operands,
            results,
            ..
        } = s
        else {
            continue;
        };
        if !is_fusible[i] {
            continue;
        }
        let (is_clone, is_splat) = match &program.local_func.op(*op).kind {
            OpKind::Constant { value, .. } => {
                let one = results
                    .iter()
                    .all(|&r| program.values[r].global.shape.iter().product::<u64>() == 1);
                let repeated = match value {
                    DenseValue::Splat(_) => true,
                    DenseValue::Elements(v) => v.len() == 1,
                    DenseValue::Hex(b) => results
                        .iter()
                        .all(|&r| b.len() as u64 == program.values[r].global.dtype.size_bytes()),
                };
                (true, one || repeated)
            }
            OpKind::BroadcastInDim { .. } | OpKind::Reshape | OpKind::Convert => {
                let of_splat = operands.len() == 1
                    && splat[operands[0]]
                    && producer[operands[0]].is_some_and(|j| cloned[j]);
                (of_splat, of_splat)
            }
            _ => (false, false),
        };
        cloned[i] = is_clone;
        if is_splat {
            for &r in results {
                splat[r] = true;
            }
        }
    }
    (cloned, splat)
}

/// The adds that run as their matmul's epilogue (see [`plan_with`]): an add
/// alone in its fusion, of a matmul's result (wider than its operands, read
/// by nothing else and not a program result) into a donated argument of the
/// result's type.
fn epilogues(
    program: &SpmdProgram,
    group: &[Option<usize>],
    producer: &[Option<usize>],
    donated: &[usize],
) -> Vec<Option<usize>> {
    let n = program.steps.len();
    let mut epilogue_of = vec![None; n];
    if donated.is_empty() {
        return epilogue_of;
    }
    let donated: BTreeSet<usize> = donated
        .iter()
        .filter_map(|&i| program.args.get(i).copied())
        .collect();
    let mut reads = vec![0u32; program.values.len()];
    for s in &program.steps {
        for o in step_inputs(s) {
            reads[o] += 1;
        }
    }
    for &r in &program.results {
        reads[r] += 1;
    }
    let mut members = vec![0u32; n];
    for g in group.iter().flatten() {
        members[*g] += 1;
    }
    for (i, s) in program.steps.iter().enumerate() {
        let Step::Local {
            op,
            operands,
            results,
            ..
        } = s
        else {
            continue;
        };
        let alone = group[i].is_some_and(|g| members[g] == 1);
        let add = matches!(
            program.local_func.op(*op).kind,
            OpKind::Binary(crate::ir::BinaryOp::Add)
        );
        if !alone || !add || operands.len() != 2 || results.len() != 1 {
            continue;
        }
        let ty = |slot: usize| {
            (
                &program.values[slot].global,
                program.values[slot].local_bytes(),
            )
        };
        for (d, c) in [(operands[0], operands[1]), (operands[1], operands[0])] {
            // A matmul that accumulates into a wider type than it reads
            // (bf16 operands, fp32 result: cuBLAS's mixed-precision GEMM).
            let matmul = producer[d].filter(|&j| {
                matches!(&program.steps[j], Step::Local { op, operands, .. } if matches!(
                    &program.local_func.op(*op).kind,
                    OpKind::DotGeneral { dims, .. } if dims.lhs_batch.is_empty()
                ) && operands.iter().all(|&o| {
                    program.values[o].global.dtype.size_bytes()
                        < program.values[d].global.dtype.size_bytes()
                }))
            });
            if let Some(j) = matmul {
                if reads[d] == 1
                    && donated.contains(&c)
                    && ty(d) == ty(c)
                    && ty(c) == ty(results[0])
                {
                    epilogue_of[i] = Some(j);
                    break;
                }
            }
        }
    }
    epilogue_of
}

/// The gathers whose one result is read once, by a matmul, and is not a
/// program result; and those results.
fn gathers_in_matmuls(program: &SpmdProgram) -> (Vec<bool>, Vec<bool>) {
    let slots = program.values.len();
    let mut reads = vec![0u32; slots];
    let mut by_matmul = vec![false; slots];
    for s in &program.steps {
        let inputs = step_inputs(s);
        let matmul = matches!(s, Step::Local { op, .. } if matches!(
            program.local_func.op(*op).kind,
            OpKind::DotGeneral { .. } | OpKind::Dot { .. }
        ));
        for o in inputs {
            reads[o] += 1;
            by_matmul[o] = matmul;
        }
    }
    for &r in &program.results {
        reads[r] += 1;
    }
    let mut picked = vec![false; slots];
    let in_matmul = program
        .steps
        .iter()
        .map(|s| {
            let Step::Local { op, results, .. } = s else {
                return false;
            };
            let fold = matches!(program.local_func.op(*op).kind, OpKind::Gather { .. })
                && results.len() == 1
                && reads[results[0]] == 1
                && by_matmul[results[0]];
            if fold {
                picked[results[0]] = true;
            }
            fold
        })
        .collect();
    (in_matmul, picked)
}

/// Costs of every step under `plan`: a fusion's first kernel step launches the
/// kernel; each step moves only the bytes that cross the fusion's boundary
/// (an outside value read by several steps of one fusion counted once).
pub fn fused_costs(program: &SpmdProgram, plan: &FusionPlan) -> Vec<OpCost> {
    let mut read: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut launched: BTreeSet<usize> = BTreeSet::new();
    // Per matmul step: the bytes its epilogue add reads and writes.
    let mut epilogue_bytes: Vec<Option<u64>> = vec![None; program.steps.len()];
    for (i, e) in plan.epilogue_of.iter().enumerate() {
        if let (Some(j), Step::Local { results, .. }) = (e, &program.steps[i]) {
            // The buffer read and written (the same type as the result).
            let b: u64 = results
                .iter()
                .map(|&r| program.values[r].local_bytes())
                .sum();
            *epilogue_bytes[*j].get_or_insert(0) += 2 * b;
        }
    }
    // Per slot: the fusion of the step that makes it (a member reading a
    // value its own fusion makes takes it from registers, even when the
    // value is also written out for readers elsewhere).
    let mut made_in: Vec<Option<usize>> = vec![None; program.values.len()];
    for (i, s) in program.steps.iter().enumerate() {
        if let (Some(g), Step::Local { results, .. }) = (plan.group[i], s) {
            for &r in results {
                made_in[r] = Some(g);
            }
        }
    }
    // Batched matmuls per fusion (by its first step).
    let mut batched = vec![0u32; program.steps.len()];
    for (i, s) in program.steps.iter().enumerate() {
        if let (Some(g), Step::Local { op, .. }) = (plan.group[i], s) {
            if matches!(&program.local_func.op(*op).kind,
                OpKind::DotGeneral { dims, .. } if !dims.lhs_batch.is_empty())
            {
                batched[g] += 1;
            }
        }
    }
    program
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut cost = step_cost(program, s);
            if plan.epilogue_of[i].is_some() {
                // Charged to its matmul: nothing runs here.
                return OpCost {
                    flops: 0,
                    bytes: 0,
                    kernel: false,
                    launch: false,
                    ..cost
                };
            }
            if let Some(acc) = epilogue_bytes[i] {
                // The matmul reads and writes the buffer instead of writing
                // its own result.
                if let Step::Local { results, .. } = s {
                    let own: u64 = results
                        .iter()
                        .map(|&r| program.values[r].local_bytes())
                        .sum();
                    cost.bytes = cost.bytes - own.min(cost.bytes) + acc;
                }
            }
            if plan.in_matmul[i] || plan.clone_only[i] {
                // Its matmul reads the picked slices, or each fusion reading
                // it computes its own copy: nothing runs here.
                return OpCost {
                    flops: 0,
                    bytes: 0,
                    kernel: false,
                    launch: false,
                    ..cost
                };
            }
            let (
                Some(g),
                Step::Local {
                    operands, results, ..
                },
            ) = (plan.group[i], s)
            else {
                return cost;
            };
            let bytes = |slot: usize| program.values[slot].local_bytes();
            let mut moved = 0;
            for &o in operands {
                // A splat is recomputed in the kernel, never read.
                if plan.splat[o] {
                    continue;
                }
                if made_in[o] == Some(g) && !plan.picked[o] {
                    continue;
                }
                if (!plan.internal[o] || plan.picked[o]) && read.insert((g, o)) {
                    moved += bytes(o);
                }
            }
            for &r in results {
                if !plan.internal[r] {
                    moved += bytes(r);
                }
            }
            if let Some(gm) = cost.gemm.as_mut() {
                // A batched matmul inside a fusion: flash attention's; the
                // backward kernel holds more than the forward's two.
                gm.attention = Some(if batched[g] > 2 {
                    AttentionPass::Backward
                } else {
                    AttentionPass::Forward
                });
            }
            if cost.kernel {
                cost.bytes = moved;
                cost.launch = launched.insert(g);
            }
            cost
        })
        .collect()
}
