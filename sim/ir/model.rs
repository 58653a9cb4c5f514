//! The program data model: a module of meshes and functions; each function owns
//! an arena of values and an arena of ops, with nested regions (reduce bodies,
//! named and manual computations) pointing into the same arenas.

use crate::base::TensorType;
use crate::mesh::Mesh;
use crate::sharding::TensorSharding;

use super::ops::OpKind;
use super::rule::OpShardingRule;

/// Index of a value in its function's value arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// Index of an op in its function's op arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u32);

/// A source position (1-based line and column); `0:0` for ops built in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Loc {
    pub line: u32,
    pub col: u32,
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// An attribute kept as the text it was written with (`name = value`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawAttr {
    pub name: String,
    pub value: String,
}

/// Where a value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueDef {
    /// Argument `index` of the function.
    FuncArg(usize),
    /// Argument `index` of region `region` of `op`.
    BlockArg {
        op: OpId,
        region: usize,
        index: usize,
    },
    /// Result `index` of `op`.
    Result { op: OpId, index: usize },
}

/// An SSA value.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// The name as printed: `%arg0`, `%0`, `%cst_1`, `%4#1` for a result of a multi-result op.
    pub name: String,
    pub ty: TensorType,
    /// Its sharding (function arguments: `sdy.sharding` arg attribute; op results:
    /// the op's `sdy.sharding` per-value attribute).
    pub sharding: Option<TensorSharding>,
    pub def: ValueDef,
}

/// A block of ops with arguments (one block per region).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Region {
    pub args: Vec<ValueId>,
    pub ops: Vec<OpId>,
}

/// An operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    pub operands: Vec<ValueId>,
    pub results: Vec<ValueId>,
    pub regions: Vec<Region>,
    /// `sdy.sharding_rule`, when the text has one (after propagation) or a pass set it.
    pub rule: Option<OpShardingRule>,
    /// Other attributes, kept verbatim so printing round-trips.
    pub attrs: Vec<RawAttr>,
    pub loc: Loc,
}

/// Visibility of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Visibility {
    /// No keyword printed.
    #[default]
    Unspecified,
    Public,
    Private,
}

/// A `func.func`.
#[derive(Debug, Clone, PartialEq)]
pub struct Func {
    pub name: String,
    pub visibility: Visibility,
    /// The function's arguments (values of kind `FuncArg`), in order.
    pub args: Vec<ValueId>,
    /// Argument attributes other than `sdy.sharding` (which lives on the value).
    pub arg_attrs: Vec<Vec<RawAttr>>,
    pub result_types: Vec<TensorType>,
    pub result_shardings: Vec<Option<TensorSharding>>,
    /// Result attributes other than `sdy.sharding` (e.g. `jax.result_info`).
    pub result_attrs: Vec<Vec<RawAttr>>,
    /// `attributes {...}` after the signature.
    pub attrs: Vec<RawAttr>,
    /// The top-level ops, the last one a `return`.
    pub body: Vec<OpId>,
    pub values: Vec<Value>,
    pub ops: Vec<Op>,
    pub loc: Loc,
}

/// A module: meshes then functions.
#[derive(Debug, Clone, PartialEq)]
pub struct Module {
    /// `module @name`; `None` for `module {` or a file without a module wrapper.
    pub name: Option<String>,
    /// True when the text had a `module` wrapper.
    pub wrapped: bool,
    /// `attributes {...}` of the module, verbatim.
    pub attrs: Vec<RawAttr>,
    /// `sdy.mesh` symbols in order.
    pub meshes: Vec<(String, Mesh)>,
    /// Trailing attributes of each `sdy.mesh` (e.g. `stablehlo.mesh = {...}`), parallel to `meshes`.
    pub mesh_attrs: Vec<Vec<RawAttr>>,
    pub funcs: Vec<Func>,
}

impl Func {
    /// A value by id.
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.0 as usize]
    }

    /// A value by id, mutable (to set its sharding).
    pub fn value_mut(&mut self, id: ValueId) -> &mut Value {
        &mut self.values[id.0 as usize]
    }

    /// An op by id.
    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id.0 as usize]
    }

    /// An op by id, mutable (to set its rule).
    pub fn op_mut(&mut self, id: OpId) -> &mut Op {
        &mut self.ops[id.0 as usize]
    }

    /// Add a value to the arena.
    pub fn add_value(&mut self, value: Value) -> ValueId {
        self.values.push(value);
        ValueId((self.values.len() - 1) as u32)
    }

    /// Add an op to the arena (not to any block).
    pub fn add_op(&mut self, op: Op) -> OpId {
        self.ops.push(op);
        OpId((self.ops.len() - 1) as u32)
    }

    /// Every op id in program order, regions first-to-last, an op before its region's ops.
    pub fn walk(&self) -> Vec<OpId> {
        let mut out = Vec::with_capacity(self.ops.len());
        let mut stack: Vec<std::slice::Iter<'_, OpId>> = vec![self.body.iter()];
        while let Some(top) = stack.last_mut() {
            match top.next() {
                Some(&id) => {
                    out.push(id);
                    for r in self.op(id).regions.iter().rev() {
                        stack.push(r.ops.iter());
                    }
                }
                None => {
                    stack.pop();
                }
            }
        }
        out
    }

    /// Types of the arguments.
    pub fn arg_types(&self) -> Vec<TensorType> {
        self.args
            .iter()
            .map(|&a| self.value(a).ty.clone())
            .collect()
    }

    /// The `return` op ending the body, if present.
    pub fn return_op(&self) -> Option<&Op> {
        self.body
            .last()
            .map(|&id| self.op(id))
            .filter(|op| op.kind.is_terminator())
    }
}

impl Module {
    /// A function by name.
    pub fn func(&self, name: &str) -> Option<&Func> {
        self.funcs.iter().find(|f| f.name == name)
    }

    /// The entry function: `main` if present, else the first public one, else the first.
    pub fn entry(&self) -> Option<&Func> {
        self.func("main")
            .or_else(|| {
                self.funcs
                    .iter()
                    .find(|f| f.visibility == Visibility::Public)
            })
            .or_else(|| self.funcs.first())
    }

    /// A mesh by symbol name.
    pub fn mesh(&self, name: &str) -> Option<&Mesh> {
        self.meshes.iter().find(|(n, _)| n == name).map(|(_, m)| m)
    }

    /// Total number of ops in every function (nested ones included).
    pub fn num_ops(&self) -> usize {
        self.funcs.iter().map(|f| f.ops.len()).sum()
    }
}
