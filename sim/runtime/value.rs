//! What a register holds and what `call_packed` takes: Disco's argument kinds
//! (integers, floats, strings, dtypes, devices, registers) and the objects a
//! worker keeps (arrays, tuples of arrays, functions, modules).

use serde::{Deserialize, Serialize};

use crate::base::DType;
use crate::tensor::Tensor;

use super::DRef;

/// A device as `call_packed` passes it (TVM's `DLDevice`): kind and ordinal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub kind: String,
    pub id: u32,
}

/// One argument of [`super::Session::call_packed`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Arg {
    Int(i64),
    Float(f64),
    Str(String),
    DType(DType),
    Device(Device),
    /// The register's value on each worker.
    Ref(DRef),
}

/// The value of a register on one worker.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Tensor(Tensor),
    Int(i64),
    Float(f64),
    Str(String),
    DType(DType),
    Device(Device),
    /// Several arrays (a program's results).
    Tuple(Vec<Tensor>),
    /// A global function, by name ([`super::Session::get_global_func`]).
    Func(String),
    /// A loaded program ([`super::Session::load_vm_module`]), by its path.
    Module(String),
    /// A function of a loaded module.
    ModuleFunc {
        module: DRef,
        name: String,
    },
}

impl Value {
    /// The value an argument passes (registers are looked up by the caller).
    pub fn from_arg(a: &Arg) -> Option<Value> {
        Some(match a {
            Arg::Int(i) => Value::Int(*i),
            Arg::Float(x) => Value::Float(*x),
            Arg::Str(s) => Value::Str(s.clone()),
            Arg::DType(d) => Value::DType(*d),
            Arg::Device(d) => Value::Device(d.clone()),
            Arg::Ref(_) => return None,
        })
    }

    /// What kind of value it is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Tensor(_) => "array",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::DType(_) => "dtype",
            Value::Device(_) => "device",
            Value::Tuple(_) => "tuple",
            Value::Func(_) => "function",
            Value::Module(_) => "module",
            Value::ModuleFunc { .. } => "module function",
        }
    }

    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }
}
