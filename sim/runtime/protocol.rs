//! The controller/worker protocol: messages (serde) and their framing on a
//! byte stream (pipes of a [`super::ProcessSession`]). A frame is the magic
//! `SSRT`, a little-endian `u16` version, a `u32` header length, the header
//! (JSON: the message and its arrays' types), then each array's little-endian
//! bytes. Threads pass the same [`Frame`]s without encoding them.

use std::io::{Read, Write};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::base::DType;
use crate::tensor::Tensor;

use super::{Arg, DRef, Device, Value};

pub const MAGIC: [u8; 4] = *b"SSRT";
/// Bumped whenever a message changes; both ends must agree.
pub const VERSION: u16 = 1;
/// Headers are small (arrays travel outside them).
const MAX_HEADER: u32 = 64 << 20;
/// Refuse arrays beyond this (a corrupt length must not allocate without bound).
const MAX_ARRAY_BYTES: u64 = 1 << 36;

/// A message and the arrays it carries, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame<M> {
    pub msg: M,
    pub tensors: Vec<Tensor>,
}

impl<M> Frame<M> {
    pub fn new(msg: M) -> Frame<M> {
        Frame {
            msg,
            tensors: Vec::new(),
        }
    }
    pub fn with(msg: M, tensors: Vec<Tensor>) -> Frame<M> {
        Frame { msg, tensors }
    }
}

/// An array's type (its bytes follow the header).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorMeta {
    pub shape: Vec<u64>,
    pub dtype: DType,
}

impl TensorMeta {
    pub fn of(t: &Tensor) -> TensorMeta {
        TensorMeta {
            shape: t.shape().to_vec(),
            dtype: t.dtype(),
        }
    }
    pub fn num_elements(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// The collectives a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CollectiveKind {
    AllReduce,
    AllGather,
    Broadcast,
    Scatter,
    Gather,
}

/// One move of a plan (see `collective::plan::Move`), as workers run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireMove {
    pub from: usize,
    pub to: usize,
    pub src: u64,
    pub dst: u64,
    pub len: u64,
    pub reduce: bool,
}

/// A collective's plan: steps of moves, and the reduced ranges (for `avg`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WirePlan {
    pub ranks: usize,
    pub buffer_len: u64,
    pub steps: Vec<Vec<WireMove>>,
    pub reduced: Vec<(usize, u64, u64)>,
}

impl WirePlan {
    pub fn of(p: &crate::collective::Plan) -> WirePlan {
        WirePlan {
            ranks: p.ranks,
            buffer_len: p.buffer_len,
            steps: p
                .steps
                .iter()
                .map(|s| {
                    s.iter()
                        .map(|m| WireMove {
                            from: m.from,
                            to: m.to,
                            src: m.src,
                            dst: m.dst,
                            len: m.len,
                            reduce: m.reduce,
                        })
                        .collect()
                })
                .collect(),
            reduced: p.reduced.clone(),
        }
    }
}

/// A collective call: kind, registers, reduction (`sum`...), plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveCall {
    pub kind: CollectiveKind,
    pub src: DRef,
    pub dst: DRef,
    pub reduction: String,
    pub plan: WirePlan,
}

/// Controller to worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToWorker {
    Empty {
        reg: DRef,
        shape: Vec<u64>,
        dtype: DType,
    },
    GetGlobalFunc {
        reg: DRef,
        name: String,
    },
    Call {
        reg: DRef,
        func: DRef,
        args: Vec<Arg>,
    },
    LoadModule {
        reg: DRef,
        path: String,
    },
    GetFunction {
        reg: DRef,
        module: DRef,
        name: String,
    },
    /// Store the frame's array in `reg`.
    Put {
        reg: DRef,
    },
    /// Reply with `reg`'s value.
    Get {
        reg: DRef,
    },
    Collective(CollectiveCall),
    /// Arrays a peer sent (relayed by the controller).
    Peer {
        from: usize,
    },
    Sync,
    Shutdown,
}

/// A register's value as a header carries it (arrays in the frame).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WireValue {
    Tensor,
    Int(i64),
    Float(f64),
    Str(String),
    DType(DType),
    Device(Device),
    Tuple(usize),
    Func(String),
    Module(String),
    ModuleFunc { module: DRef, name: String },
}

/// Worker to controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FromWorker {
    /// The command finished; `meta` is the type of the array it stored, if any.
    Done {
        meta: Option<TensorMeta>,
    },
    Value(WireValue),
    Failed(String),
    /// Arrays for worker `to` (the controller relays them).
    Peer {
        to: usize,
    },
}

/// A value as a header and its arrays.
pub fn value_to_wire(v: Value) -> (WireValue, Vec<Tensor>) {
    match v {
        Value::Tensor(t) => (WireValue::Tensor, vec![t]),
        Value::Tuple(ts) => (WireValue::Tuple(ts.len()), ts),
        Value::Int(i) => (WireValue::Int(i), vec![]),
        Value::Float(x) => (WireValue::Float(x), vec![]),
        Value::Str(s) => (WireValue::Str(s), vec![]),
        Value::DType(d) => (WireValue::DType(d), vec![]),
        Value::Device(d) => (WireValue::Device(d), vec![]),
        Value::Func(f) => (WireValue::Func(f), vec![]),
        Value::Module(m) => (WireValue::Module(m), vec![]),
        Value::ModuleFunc { module, name } => (WireValue::ModuleFunc { module, name }, vec![]),
    }
}

/// The value back from a header and its arrays.
pub fn value_from_wire(w: WireValue, mut tensors: Vec<Tensor>) -> Result<Value, ProtocolError> {
    let want = match &w {
        WireValue::Tensor => 1,
        WireValue::Tuple(n) => *n,
        _ => 0,
    };
    if tensors.len() != want {
        return Err(ProtocolError::Malformed(format!(
            "a value with {want} arrays came with {}",
            tensors.len()
        )));
    }
    Ok(match w {
        WireValue::Tensor => Value::Tensor(tensors.pop().expect("one")),
        WireValue::Tuple(_) => Value::Tuple(tensors),
        WireValue::Int(i) => Value::Int(i),
        WireValue::Float(x) => Value::Float(x),
        WireValue::Str(s) => Value::Str(s),
        WireValue::DType(d) => Value::DType(d),
        WireValue::Device(d) => Value::Device(d),
        WireValue::Func(f) => Value::Func(f),
        WireValue::Module(m) => Value::Module(m),
        WireValue::ModuleFunc { module, name } => Value::ModuleFunc { module, name },
    })
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a shardsim worker frame (magic {0:?})")]
    BadMagic([u8; 4]),
    #[error("protocol version {found}, this build speaks {VERSION}")]
    Version { found: u16 },
    #[error("malformed frame: {0}")]
    Malformed(String),
}

#[derive(Serialize)]
struct HeaderOut<'a, M> {
    msg: &'a M,
    tensors: Vec<TensorMeta>,
}

#[derive(Deserialize)]
struct HeaderIn<M> {
    msg: M,
    tensors: Vec<TensorMeta>,
}

/// Write one frame.
pub fn write_frame<M: Serialize>(w: &mut impl Write, f: &Frame<M>) -> Result<(), ProtocolError> {
    let header = serde_json::to_vec(&HeaderOut {
        msg: &f.msg,
        tensors: f.tensors.iter().map(TensorMeta::of).collect(),
    })
    .map_err(|e| ProtocolError::Malformed(e.to_string()))?;
    let len = u32::try_from(header.len())
        .ok()
        .filter(|&l| l <= MAX_HEADER)
        .ok_or_else(|| ProtocolError::Malformed(format!("header of {} bytes", header.len())))?;
    w.write_all(&MAGIC)?;
    w.write_all(&VERSION.to_le_bytes())?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&header)?;
    for t in &f.tensors {
        w.write_all(&t.data().to_le_bytes())?;
    }
    w.flush()?;
    Ok(())
}

/// Read one frame; `None` at a clean end of stream (the peer closed it).
pub fn read_frame<M: DeserializeOwned>(
    r: &mut impl Read,
) -> Result<Option<Frame<M>>, ProtocolError> {
    let mut magic = [0u8; 4];
    match r.read(&mut magic[..1])? {
        0 => return Ok(None),
        _ => r.read_exact(&mut magic[1..])?,
    }
    if magic != MAGIC {
        return Err(ProtocolError::BadMagic(magic));
    }
    let mut v = [0u8; 2];
    r.read_exact(&mut v)?;
    let found = u16::from_le_bytes(v);
    if found != VERSION {
        return Err(ProtocolError::Version { found });
    }
    let mut l = [0u8; 4];
    r.read_exact(&mut l)?;
    let len = u32::from_le_bytes(l);
    if len > MAX_HEADER {
        return Err(ProtocolError::Malformed(format!("header of {len} bytes")));
    }
    let mut header = vec![0u8; len as usize];
    r.read_exact(&mut header)?;
    let h: HeaderIn<M> =
        serde_json::from_slice(&header).map_err(|e| ProtocolError::Malformed(e.to_string()))?;
    let mut tensors = Vec::with_capacity(h.tensors.len());
    for m in h.tensors {
        let bytes = m
            .shape
            .iter()
            .try_fold(m.dtype.size_bytes(), |a, &d| a.checked_mul(d))
            .filter(|&b| b <= MAX_ARRAY_BYTES)
            .ok_or_else(|| ProtocolError::Malformed(format!("array {:?} too large", m.shape)))?;
        let mut data = vec![0u8; bytes as usize];
        r.read_exact(&mut data)?;
        tensors.push(
            Tensor::from_le_bytes(m.shape, m.dtype, &data)
                .map_err(|e| ProtocolError::Malformed(e.to_string()))?,
        );
    }
    Ok(Some(Frame {
        msg: h.msg,
        tensors,
    }))
}
