//! PlanDevices over an IR-independent dataflow description.
//!
//! Rules (README.md, "Topologies", says how program IR maps onto them: device planning):
//! 1. An op computes on one device: it is unified with each of its results,
//!    unless the result is *fixed* (carries a constraint of its own).
//! 2. An unfixed value lives in one place: it is unified with every op that
//!    reads it, unless the op pins that operand.
//! 3. Fixed values (a value constraint such as host-pinned optimizer state,
//!    or a result pin of its producer) are storage decisions: copies are
//!    inserted around them instead of propagating them.
//! 4. Constraints in one class are joined (union-find over `join`); a failed
//!    join is an error naming the two constraints' sources. Every class is
//!    then defaulted with the default virtual device.
//! 5. A *placement* (`place`) joins a value's class without fixing it: the
//!    value, its producer and its readers all follow it (TVM's rule that a
//!    function returning its result on a device also runs its body there).
//! 6. A `device_copy` is inserted for each (value, destination) where the
//!    value's device differs from where an operand is read, or where an op's
//!    device differs from a user-fixed result's storage.

use serde::Serialize;

use super::{PlanError, VirtualDevice};

/// A value of the dataflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ValueId(pub u32);

/// An op of the dataflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct OpId(pub u32);

/// An operand or result position of an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Port {
    Operand(u32),
    Result(u32),
}

#[derive(Debug, Clone)]
struct Constraint {
    device: VirtualDevice,
    source: String,
}

#[derive(Debug, Clone)]
struct ValueDecl {
    name: String,
    constraints: Vec<Constraint>,
    placements: Vec<Constraint>,
    producer: Option<(OpId, u32)>,
}

#[derive(Debug, Clone)]
struct OpDecl {
    name: String,
    operands: Vec<ValueId>,
    results: Vec<ValueId>,
    exec: Vec<Constraint>,
    operand_pins: Vec<(u32, Constraint)>,
    result_pins: Vec<(u32, Constraint)>,
}

/// Values, ops that read and produce them, and device constraints, each
/// with the source that imposed it (for error messages).
#[derive(Debug, Clone, Default)]
pub struct Dataflow {
    values: Vec<ValueDecl>,
    ops: Vec<OpDecl>,
}

impl Dataflow {
    pub fn new() -> Dataflow {
        Dataflow::default()
    }

    /// Declare a value.
    pub fn value(&mut self, name: &str) -> ValueId {
        self.values.push(ValueDecl {
            name: name.to_string(),
            constraints: Vec::new(),
            placements: Vec::new(),
            producer: None,
        });
        ValueId(self.values.len() as u32 - 1)
    }

    /// Fix where a value is stored (e.g. `memory_scope = host`).
    pub fn constrain(
        &mut self,
        v: ValueId,
        device: VirtualDevice,
        source: &str,
    ) -> Result<(), PlanError> {
        self.value_mut(v)?.constraints.push(Constraint {
            device,
            source: source.to_string(),
        });
        Ok(())
    }

    /// Place a value without fixing it: its class (producer, readers) joins `device`.
    pub fn place(
        &mut self,
        v: ValueId,
        device: VirtualDevice,
        source: &str,
    ) -> Result<(), PlanError> {
        self.value_mut(v)?.placements.push(Constraint {
            device,
            source: source.to_string(),
        });
        Ok(())
    }

    /// True when the value carries a constraint of its own or is a pinned result.
    pub fn is_fixed(&self, v: ValueId) -> bool {
        self.fixed(v)
    }

    /// Declare an op reading `operands` and producing `results` (each value has at most one producer).
    pub fn op(
        &mut self,
        name: &str,
        operands: &[ValueId],
        results: &[ValueId],
    ) -> Result<OpId, PlanError> {
        let id = OpId(self.ops.len() as u32);
        for &v in operands {
            self.value_mut(v)?;
        }
        for (i, &r) in results.iter().enumerate() {
            let name_r = self.values.get(r.0 as usize).map(|d| d.name.clone());
            let decl = self.value_mut(r)?;
            if let Some((p, _)) = decl.producer {
                return Err(PlanError::BadDataflow(format!(
                    "value `{}` is produced twice (by op #{} and `{name}`)",
                    name_r.unwrap_or_default(),
                    p.0
                )));
            }
            decl.producer = Some((id, i as u32));
        }
        self.ops.push(OpDecl {
            name: name.to_string(),
            operands: operands.to_vec(),
            results: results.to_vec(),
            exec: Vec::new(),
            operand_pins: Vec::new(),
            result_pins: Vec::new(),
        });
        Ok(id)
    }

    /// Constrain where an op executes.
    pub fn pin_op(
        &mut self,
        op: OpId,
        device: VirtualDevice,
        source: &str,
    ) -> Result<(), PlanError> {
        self.op_mut(op)?.exec.push(Constraint {
            device,
            source: source.to_string(),
        });
        Ok(())
    }

    /// The op reads operand `index` from `device` (defaulted with the op's device).
    pub fn pin_operand(
        &mut self,
        op: OpId,
        index: u32,
        device: VirtualDevice,
        source: &str,
    ) -> Result<(), PlanError> {
        self.pin_port(op, Port::Operand(index), device, source)
    }

    /// The op writes result `index` directly to `device` (no copy after it).
    pub fn pin_result(
        &mut self,
        op: OpId,
        index: u32,
        device: VirtualDevice,
        source: &str,
    ) -> Result<(), PlanError> {
        self.pin_port(op, Port::Result(index), device, source)
    }

    /// Record a pin on an operand or result of `op`, checking the port exists.
    fn pin_port(
        &mut self,
        op: OpId,
        port: Port,
        device: VirtualDevice,
        source: &str,
    ) -> Result<(), PlanError> {
        let o = self.op_mut(op)?;
        let (index, count, what, pins) = match port {
            Port::Operand(i) => (i, o.operands.len(), "operand", &mut o.operand_pins),
            Port::Result(i) => (i, o.results.len(), "result", &mut o.result_pins),
        };
        if index as usize >= count {
            return Err(PlanError::BadDataflow(format!(
                "op `{}` has no {what} {index}",
                o.name
            )));
        }
        pins.push((
            index,
            Constraint {
                device,
                source: source.to_string(),
            },
        ));
        Ok(())
    }

    pub fn value_name(&self, v: ValueId) -> &str {
        &self.values[v.0 as usize].name
    }

    pub fn op_name(&self, o: OpId) -> &str {
        &self.ops[o.0 as usize].name
    }

    fn value_mut(&mut self, v: ValueId) -> Result<&mut ValueDecl, PlanError> {
        self.values
            .get_mut(v.0 as usize)
            .ok_or_else(|| PlanError::BadDataflow(format!("no value #{}", v.0)))
    }

    fn op_mut(&mut self, o: OpId) -> Result<&mut OpDecl, PlanError> {
        self.ops
            .get_mut(o.0 as usize)
            .ok_or_else(|| PlanError::BadDataflow(format!("no op #{}", o.0)))
    }

    fn result_pinned(&self, v: ValueId) -> bool {
        match self.values[v.0 as usize].producer {
            Some((op, i)) => self.ops[op.0 as usize]
                .result_pins
                .iter()
                .any(|(j, _)| *j == i),
            None => false,
        }
    }

    fn fixed(&self, v: ValueId) -> bool {
        !self.values[v.0 as usize].constraints.is_empty() || self.result_pinned(v)
    }
}

/// One `device_copy` to insert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceCopy {
    pub value: ValueId,
    pub value_name: String,
    pub from: VirtualDevice,
    pub to: VirtualDevice,
    /// The ops (and ports) that need the copy: readers for operand copies,
    /// the producer for a copy into a fixed result.
    pub at: Vec<(OpId, Port)>,
}

/// Where every value lives and every op runs, and the copies to insert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub value_devices: Vec<VirtualDevice>,
    pub op_devices: Vec<VirtualDevice>,
    pub copies: Vec<DeviceCopy>,
}

/// Union-find with path halving; the smaller index is the root, so the result
/// does not depend on the order of unions.
struct UnionFind(Vec<usize>);

impl UnionFind {
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        let (lo, hi) = (ra.min(rb), ra.max(rb));
        self.0[hi] = lo;
    }
}

/// A class's joined constraint and what went into it.
#[derive(Default, Clone)]
struct Class {
    joined: VirtualDevice,
    parts: Vec<Constraint>,
}

/// Solve the constraints of `df`, defaulting unconstrained parts from `default`.
pub fn plan_devices(df: &Dataflow, default: &VirtualDevice) -> Result<Plan, PlanError> {
    let nv = df.values.len();
    let node_of_op = |o: usize| nv + o;
    let mut uf = UnionFind((0..nv + df.ops.len()).collect());
    for (o, op) in df.ops.iter().enumerate() {
        for &r in &op.results {
            if !df.fixed(r) {
                uf.union(node_of_op(o), r.0 as usize);
            }
        }
        for (i, &v) in op.operands.iter().enumerate() {
            let pinned = op.operand_pins.iter().any(|(j, _)| *j as usize == i);
            if !df.fixed(v) && !pinned {
                uf.union(node_of_op(o), v.0 as usize);
            }
        }
    }
    let mut classes: Vec<Class> = vec![Class::default(); nv + df.ops.len()];
    let place = |node: usize| -> String {
        if node < nv {
            format!("value `{}`", df.values[node].name)
        } else {
            format!("op `{}`", df.ops[node - nv].name)
        }
    };
    let mut add = |uf: &mut UnionFind, node: usize, c: &Constraint| -> Result<(), PlanError> {
        let root = uf.find(node);
        let class = &mut classes[root];
        match VirtualDevice::join(&class.joined, &c.device) {
            Some(j) => {
                class.joined = j;
                class.parts.push(c.clone());
                Ok(())
            }
            None => {
                let first = class
                    .parts
                    .iter()
                    .find(|p| VirtualDevice::join(&p.device, &c.device).is_none())
                    .cloned()
                    .unwrap_or_else(|| Constraint {
                        device: class.joined.clone(),
                        source: class
                            .parts
                            .iter()
                            .map(|p| p.source.as_str())
                            .collect::<Vec<_>>()
                            .join(" + "),
                    });
                Err(PlanError::Conflict {
                    place: place(node),
                    first: first.device.to_string(),
                    first_source: first.source,
                    second: c.device.to_string(),
                    second_source: c.source.clone(),
                })
            }
        }
    };
    for (v, decl) in df.values.iter().enumerate() {
        for c in decl.constraints.iter().chain(&decl.placements) {
            add(&mut uf, v, c)?;
        }
    }
    for (o, op) in df.ops.iter().enumerate() {
        for c in &op.exec {
            add(&mut uf, node_of_op(o), c)?;
        }
        for (i, c) in &op.result_pins {
            add(&mut uf, op.results[*i as usize].0 as usize, c)?;
        }
    }
    let device_of = |uf: &mut UnionFind, node: usize| {
        VirtualDevice::default(&classes[uf.find(node)].joined, default)
    };
    let value_devices: Vec<VirtualDevice> = (0..nv).map(|v| device_of(&mut uf, v)).collect();
    let op_devices: Vec<VirtualDevice> = (0..df.ops.len())
        .map(|o| device_of(&mut uf, node_of_op(o)))
        .collect();

    let mut copies: Vec<DeviceCopy> = Vec::new();
    let mut need = |value: ValueId, from: &VirtualDevice, to: &VirtualDevice, at: (OpId, Port)| {
        if from == to {
            return;
        }
        if let Some(c) = copies
            .iter_mut()
            .find(|c| c.value == value && c.to == *to && c.from == *from)
        {
            c.at.push(at);
        } else {
            copies.push(DeviceCopy {
                value,
                value_name: df.values[value.0 as usize].name.clone(),
                from: from.clone(),
                to: to.clone(),
                at: vec![at],
            });
        }
    };
    for (o, op) in df.ops.iter().enumerate() {
        let here = &op_devices[o];
        for (i, &v) in op.operands.iter().enumerate() {
            let to = match op.operand_pins.iter().find(|(j, _)| *j as usize == i) {
                Some((_, c)) => VirtualDevice::default(&c.device, here),
                None => here.clone(),
            };
            need(
                v,
                &value_devices[v.0 as usize],
                &to,
                (OpId(o as u32), Port::Operand(i as u32)),
            );
        }
        for (i, &r) in op.results.iter().enumerate() {
            if !df.values[r.0 as usize].constraints.is_empty() && !df.result_pinned(r) {
                need(
                    r,
                    here,
                    &value_devices[r.0 as usize],
                    (OpId(o as u32), Port::Result(i as u32)),
                );
            }
        }
    }
    Ok(Plan {
        value_devices,
        op_devices,
        copies,
    })
}
