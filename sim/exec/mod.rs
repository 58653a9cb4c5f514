//! The lockstep multi-device executor: runs a partitioned program on N virtual
//! devices in one process, each with its own buffers; collectives move real
//! data between the devices' buffers. Results are gathered with their output
//! shardings and can be compared with the reference interpreter.
//!
//! The interface is split so a discrete-event engine can drive it: a device's
//! local step runs alone ([`Executor::run_local`]), a collective runs once
//! every device has reached it ([`Executor::run_collective`]); [`Executor::step`]
//! does both in lockstep.

mod collectives;
mod indexing;
pub mod timed;
mod window;

use crate::ir::interp::{check_inputs, eval_single_op, taken_branch, InterpError};
use crate::partition::{Collective, Mask, SpmdProgram, Step};
use crate::tensor::{extract_block, insert_block, pad_to_shape, Scalar, Tensor, TensorError};

/// Why a partitioned program could not be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    #[error("{0}")]
    Inputs(String),
    #[error("step {step} ({what}) on device {device}: {message}")]
    Step {
        step: usize,
        what: String,
        device: u64,
        message: String,
    },
    #[error("the program has finished")]
    Finished,
}

/// One virtual device: its id, mesh position and a buffer per program value.
#[derive(Debug, Clone)]
pub struct DeviceState {
    pub device: u64,
    pub buffers: Vec<Option<Tensor>>,
}

/// What the next step of the program is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Every device runs it on its own (compute).
    Local(usize),
    /// Every device must reach it before it runs (communication).
    Collective(usize),
    /// A loop starts: every device takes its initial carried values.
    Loop(usize),
    /// A conditional starts: the replicated selector picks the branch.
    Case(usize),
    Done,
}

/// A loop being run: where it starts and whether its body is running; or
/// a conditional's taken branch.
#[derive(Debug, Clone, Copy)]
struct LoopFrame {
    at: usize,
    in_body: bool,
    trips: u64,
    branch: Option<usize>,
}

/// Iterations after which a loop is reported instead of run further.
const MAX_LOOP_TRIPS: u64 = 100_000_000;

/// Runs an [`SpmdProgram`] on virtual devices.
#[derive(Debug, Clone)]
pub struct Executor<'p> {
    program: &'p SpmdProgram,
    devices: Vec<DeviceState>,
    pc: usize,
    loops: Vec<LoopFrame>,
    /// The device whose (replicated) predicates and selectors drive control
    /// flow: 0 in lockstep, the worker's own device in a distributed run.
    control: usize,
}

/// Fills in, before collective step `c` runs, the input buffers of the
/// devices a distributed worker does not compute itself.
pub type Exchange<'a> = dyn FnMut(&Collective, &mut [DeviceState]) -> Result<(), ExecError> + 'a;

fn step_error(step: usize, what: &str, device: u64, e: impl ToString) -> ExecError {
    ExecError::Step {
        step,
        what: what.to_string(),
        device,
        message: e.to_string(),
    }
}

impl<'p> Executor<'p> {
    /// Set up the devices with their shards of the global `inputs`.
    pub fn new(program: &'p SpmdProgram, inputs: &[Tensor]) -> Result<Self, ExecError> {
        let func = program
            .module
            .entry()
            .ok_or_else(|| ExecError::Inputs("no entry function".into()))?;
        check_inputs(func, inputs).map_err(|e: InterpError| ExecError::Inputs(e.to_string()))?;
        let mut devices: Vec<DeviceState> = program
            .mesh
            .device_ids()
            .into_iter()
            .map(|device| DeviceState {
                device,
                buffers: vec![None; program.values.len()],
            })
            .collect();
        for (i, (&slot, t)) in program.args.iter().zip(inputs).enumerate() {
            let layout = &program.values[slot].layout;
            for d in &mut devices {
                let shard = layout.shard_of(d.device).expect("layout covers the mesh");
                let block = extract_block(t, &shard.ranges)
                    .and_then(|b| pad_to_shape(&b, &shard.local_shape, Scalar::zero(t.dtype())))
                    .map_err(|e| ExecError::Inputs(format!("input {i}: {e}")))?;
                d.buffers[slot] = Some(block);
            }
        }
        Ok(Executor {
            program,
            devices,
            pc: 0,
            loops: Vec::new(),
            control: 0,
        })
    }

    /// The devices' states (buffers by program value).
    pub fn devices(&self) -> &[DeviceState] {
        &self.devices
    }

    /// The devices' states, for a distributed worker to fill in what it receives.
    pub fn devices_mut(&mut self) -> &mut [DeviceState] {
        &mut self.devices
    }

    /// The step the program is at.
    pub fn next_step(&self) -> NextStep {
        match self.program.steps.get(self.pc) {
            None => NextStep::Done,
            Some(Step::Local { .. }) => NextStep::Local(self.pc),
            Some(Step::Collective(_)) => NextStep::Collective(self.pc),
            Some(Step::Loop(_)) => NextStep::Loop(self.pc),
            Some(Step::Case(_)) => NextStep::Case(self.pc),
        }
    }

    /// Copy slot `from` into slot `to` on every device, all at once (a body
    /// may yield its carried values in another order).
    fn copy_slots(&mut self, pairs: &[(usize, usize)], pc: usize) -> Result<(), ExecError> {
        for d in &mut self.devices {
            let mut taken = Vec::with_capacity(pairs.len());
            for &(from, to) in pairs {
                let t = d.buffers[from].clone().ok_or_else(|| {
                    step_error(
                        pc,
                        "while",
                        d.device,
                        format!("value {} has no buffer", self.program.values[from].name),
                    )
                })?;
                taken.push((to, t));
            }
            for (to, t) in taken {
                d.buffers[to] = Some(t);
            }
        }
        Ok(())
    }

    /// Take the loop transitions due at the current position: after the
    /// condition, go into the body or leave; after the body, carry the
    /// yielded values and run the condition again.
    fn settle(&mut self) -> Result<(), ExecError> {
        while let Some(frame) = self.loops.last().copied() {
            if let Some(b) = frame.branch {
                let Some(Step::Case(c)) = self.program.steps.get(frame.at) else {
                    return Err(ExecError::Finished);
                };
                if self.pc != c.branch(frame.at, b).end {
                    return Ok(());
                }
                let pairs: Vec<(usize, usize)> = c.yields[b]
                    .iter()
                    .copied()
                    .zip(c.results.iter().copied())
                    .collect();
                self.copy_slots(&pairs, frame.at)?;
                self.loops.pop();
                self.pc = c.end(frame.at);
                continue;
            }
            let Some(Step::Loop(l)) = self.program.steps.get(frame.at) else {
                return Err(ExecError::Finished);
            };
            if frame.in_body && self.pc == l.body_end {
                let pairs: Vec<(usize, usize)> = l
                    .yields
                    .iter()
                    .copied()
                    .zip(l.carried.iter().copied())
                    .collect();
                self.copy_slots(&pairs, frame.at)?;
                let top = self.loops.last_mut().expect("a frame");
                top.in_body = false;
                top.trips += 1;
                if top.trips > MAX_LOOP_TRIPS {
                    return Err(step_error(
                        frame.at,
                        "while",
                        0,
                        format!("ran more than {MAX_LOOP_TRIPS} iterations"),
                    ));
                }
                self.pc = frame.at + 1;
            } else if !frame.in_body && self.pc == l.cond_end {
                // The predicate is replicated: every device holds the same value.
                let dev = &self.devices[self.control];
                let go = dev.buffers[l.pred]
                    .as_ref()
                    .ok_or_else(|| step_error(frame.at, "while", dev.device, "no predicate"))?
                    .to_scalar()
                    .map_err(|e| step_error(frame.at, "while", dev.device, e))?
                    .to_i128()
                    != Some(0);
                if go {
                    self.loops.last_mut().expect("a frame").in_body = true;
                    return Ok(());
                }
                self.loops.pop();
                self.pc = l.body_end;
            } else {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Run local step `pc` on device index `d` alone.
    pub fn run_local(&mut self, pc: usize, d: usize) -> Result<(), ExecError> {
        let Some(Step::Local {
            op,
            operands,
            results,
            masks,
            device_block,
        }) = self.program.steps.get(pc)
        else {
            return Err(ExecError::Finished);
        };
        let program = self.program;
        let dev = &self.devices[d];
        let what = program.local_func.op(*op).kind.name();
        let err = |e: &dyn ToString| step_error(pc, what, dev.device, e.to_string());
        let outs = if *device_block {
            let func = program.module.entry().expect("checked in new");
            let global =
                eval_single_op(&program.module, func, *op, Vec::new()).map_err(|e| err(&e))?;
            let layout = &program.values[results[0]].layout;
            let shard = layout.shard_of(dev.device).expect("layout covers the mesh");
            let block = extract_block(&global[0], &shard.ranges)
                .and_then(|b| pad_to_shape(&b, &shard.local_shape, Scalar::zero(b.dtype())))
                .map_err(|e| err(&e))?;
            vec![block]
        } else {
            let mut args = Vec::with_capacity(operands.len());
            for &s in operands {
                let t = dev.buffers[s].clone().ok_or_else(|| {
                    err(&format!("value {} has no buffer", program.values[s].name))
                })?;
                args.push(t);
            }
            for (i, m) in masks.iter().enumerate() {
                let fill = match *m {
                    Mask::None => continue,
                    Mask::Zero => Scalar::zero(args[i].dtype()),
                    Mask::ReduceInit { init_operand } => {
                        args[init_operand].to_scalar().map_err(|e| err(&e))?
                    }
                };
                let shard = program.values[operands[i]]
                    .layout
                    .shard_of(dev.device)
                    .expect("layout covers the mesh");
                let valid: Vec<u64> = shard.ranges.iter().map(|r| r.1 - r.0).collect();
                args[i] = mask_padding(&args[i], &valid, fill).map_err(|e| err(&e))?;
            }
            let kind = &program.local_func.op(*op).kind;
            let mask = match operands.first() {
                Some(&first) => {
                    let layout = &program.values[first].layout;
                    indexing::localize(kind, layout, dev.device, &mut args).map_err(|e| err(&e))?
                }
                None => None,
            };
            let mut outs = eval_single_op(&program.module, &program.local_func, *op, args)
                .map_err(|e| err(&e))?;
            if let Some(mask) = mask {
                let r = outs.pop().ok_or_else(|| err(&"gather returned nothing"))?;
                outs.push(mask.apply(r).map_err(|e| err(&e))?);
            }
            outs
        };
        if outs.len() != results.len() {
            return Err(err(&format!(
                "{} results for {} values",
                outs.len(),
                results.len()
            )));
        }
        for (&slot, t) in results.iter().zip(&outs) {
            let want = &program.values[slot].layout.local_shape;
            if t.shape() != want.as_slice() {
                return Err(err(&format!(
                    "local result of {} has shape {:?}, expected {:?}",
                    program.values[slot].name,
                    t.shape(),
                    want
                )));
            }
        }
        let dev = &mut self.devices[d];
        for (slot, t) in results.iter().zip(outs) {
            dev.buffers[*slot] = Some(t);
        }
        Ok(())
    }

    /// Run collective step `pc` on every device.
    pub fn run_collective(&mut self, pc: usize) -> Result<(), ExecError> {
        let Some(Step::Collective(c)) = self.program.steps.get(pc) else {
            return Err(ExecError::Finished);
        };
        collectives::run(self.program, c, &mut self.devices)
            .map_err(|(device, e)| step_error(pc, c.kind.name(), device, e))
    }

    /// Run the next step on every device; false when the program is done.
    pub fn step(&mut self) -> Result<bool, ExecError> {
        self.step_inner(None)
    }

    /// Run the next step as the worker that owns device index `me` alone:
    /// local steps run only there, and before a collective `exchange` fills
    /// the other devices' inputs (what the worker received from its peers).
    /// The collective then runs as in lockstep and the worker keeps its own
    /// output, so a distributed run computes exactly what [`Executor::step`] does.
    pub fn step_as(&mut self, me: usize, exchange: &mut Exchange) -> Result<bool, ExecError> {
        self.control = me;
        self.step_inner(Some((me, exchange)))
    }

    fn step_inner(&mut self, mut only: Option<(usize, &mut Exchange)>) -> Result<bool, ExecError> {
        self.settle()?;
        match self.next_step() {
            NextStep::Done => return Ok(false),
            NextStep::Local(pc) => match only {
                Some((me, _)) => self.run_local(pc, me)?,
                None => {
                    for d in 0..self.devices.len() {
                        self.run_local(pc, d)?;
                    }
                }
            },
            NextStep::Collective(pc) => {
                if let Some((_, exchange)) = only.as_mut() {
                    let Some(Step::Collective(c)) = self.program.steps.get(pc) else {
                        return Err(ExecError::Finished);
                    };
                    exchange(c, &mut self.devices)?;
                }
                self.run_collective(pc)?
            }
            NextStep::Loop(pc) => {
                let Some(Step::Loop(l)) = self.program.steps.get(pc) else {
                    return Err(ExecError::Finished);
                };
                let pairs: Vec<(usize, usize)> = l
                    .inits
                    .iter()
                    .copied()
                    .zip(l.carried.iter().copied())
                    .collect();
                self.copy_slots(&pairs, pc)?;
                self.loops.push(LoopFrame {
                    at: pc,
                    in_body: false,
                    trips: 0,
                    branch: None,
                });
            }
            NextStep::Case(pc) => {
                let Some(Step::Case(c)) = self.program.steps.get(pc) else {
                    return Err(ExecError::Finished);
                };
                // The selector is replicated: every device holds the same value.
                let dev = &self.devices[self.control];
                let sel = dev.buffers[c.selector]
                    .as_ref()
                    .ok_or_else(|| step_error(pc, "case", dev.device, "no selector"))?
                    .to_scalar()
                    .map_err(|e| step_error(pc, "case", dev.device, e))?
                    .to_i128();
                let kind = &self.program.local_func.op(c.op).kind;
                let b = taken_branch(kind, sel, c.branch_ends.len());
                // pc moves past the case step below: onto the branch's first step.
                self.pc = c.branch(pc, b).start - 1;
                self.loops.push(LoopFrame {
                    at: pc,
                    in_body: false,
                    trips: 0,
                    branch: Some(b),
                });
            }
        }
        self.pc += 1;
        self.settle()?;
        Ok(true)
    }

    /// Run to the end.
    pub fn run(&mut self) -> Result<(), ExecError> {
        while self.step()? {}
        Ok(())
    }

    /// The global results, assembled from every device's block.
    pub fn gather_results(&self) -> Result<Vec<Tensor>, ExecError> {
        let p = self.program;
        p.results
            .iter()
            .map(|&slot| {
                let v = &p.values[slot];
                let mut out = Tensor::zeros(v.global.shape.clone(), v.global.dtype)
                    .map_err(|e| step_error(p.steps.len(), "gather", 0, e))?;
                for d in &self.devices {
                    let shard = v.layout.shard_of(d.device).expect("layout covers the mesh");
                    let buf = d.buffers[slot].as_ref().ok_or_else(|| {
                        step_error(
                            p.steps.len(),
                            "gather",
                            d.device,
                            format!("no buffer for {}", v.name),
                        )
                    })?;
                    let local: Vec<(u64, u64)> =
                        shard.ranges.iter().map(|r| (0, r.1 - r.0)).collect();
                    let block = extract_block(buf, &local)
                        .map_err(|e| step_error(p.steps.len(), "gather", d.device, e))?;
                    let starts: Vec<u64> = shard.ranges.iter().map(|r| r.0).collect();
                    insert_block(&mut out, &block, &starts)
                        .map_err(|e| step_error(p.steps.len(), "gather", d.device, e))?;
                }
                Ok(out)
            })
            .collect()
    }
}

/// `x` with every element at or past `valid[d]` along some dim set to `fill`.
pub fn mask_padding(x: &Tensor, valid: &[u64], fill: Scalar) -> Result<Tensor, TensorError> {
    if valid.iter().zip(x.shape()).all(|(v, s)| v >= s) {
        return Ok(x.clone());
    }
    let mut out = Tensor::splat(x.shape().to_vec(), fill)?;
    let ranges: Vec<(u64, u64)> = valid
        .iter()
        .zip(x.shape())
        .map(|(&v, &s)| (0, v.min(s)))
        .collect();
    let block = extract_block(x, &ranges)?;
    insert_block(&mut out, &block, &vec![0; x.rank()])?;
    Ok(out)
}

/// Run `program` on `inputs` and return the gathered global results.
pub fn execute(program: &SpmdProgram, inputs: &[Tensor]) -> Result<Vec<Tensor>, ExecError> {
    let mut ex = Executor::new(program, inputs)?;
    ex.run()?;
    ex.gather_results()
}
