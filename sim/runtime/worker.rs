//! A worker of a threaded or process session: its registers, the commands it
//! serves, and its side of collectives (chunks to and from peers, relayed by
//! the controller). Chunks that arrive early wait in a mailbox per sender.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

use crate::partition::SpmdProgram;
use crate::tensor::{Tensor, TensorError};

use super::builtins::{self, Caller};
use super::collective_io::{self, Peers};
use super::protocol::{value_to_wire, CollectiveCall, Frame, FromWorker, TensorMeta, ToWorker};
use super::{vm, Arg, DRef, Value};

/// A worker's connection to its controller.
pub trait Port {
    /// The next message; an error when the controller is gone.
    fn recv(&mut self) -> Result<Frame<ToWorker>, String>;
    fn send(&mut self, f: Frame<FromWorker>) -> Result<(), String>;
}

/// One worker's state.
pub struct Worker {
    me: usize,
    workers: usize,
    regs: BTreeMap<DRef, Value>,
    programs: BTreeMap<DRef, Arc<SpmdProgram>>,
    mailbox: BTreeMap<usize, VecDeque<Tensor>>,
}

/// What a command answers.
enum Reply {
    Done(Option<TensorMeta>),
    Value(Value),
}

struct PortPeers<'a> {
    port: &'a mut dyn Port,
    mailbox: &'a mut BTreeMap<usize, VecDeque<Tensor>>,
}

impl Peers for PortPeers<'_> {
    fn send(&mut self, to: usize, chunk: Tensor) -> Result<(), String> {
        self.port
            .send(Frame::with(FromWorker::Peer { to }, vec![chunk]))
    }

    fn recv(&mut self, from: usize) -> Result<Tensor, String> {
        loop {
            if let Some(t) = self.mailbox.get_mut(&from).and_then(|q| q.pop_front()) {
                return Ok(t);
            }
            let f = self.port.recv()?;
            match f.msg {
                ToWorker::Peer { from: src } => {
                    self.mailbox.entry(src).or_default().extend(f.tensors)
                }
                other => {
                    return Err(format!(
                        "protocol: {other:?} arrived while waiting for worker {from}"
                    ))
                }
            }
        }
    }
}

fn terr(e: TensorError) -> String {
    e.to_string()
}

impl Worker {
    pub fn new(me: usize, workers: usize) -> Worker {
        Worker {
            me,
            workers,
            regs: BTreeMap::new(),
            programs: BTreeMap::new(),
            mailbox: BTreeMap::new(),
        }
    }

    /// Serve commands until `Shutdown` or until the controller is gone.
    pub fn serve(&mut self, port: &mut dyn Port) {
        while let Ok(f) = port.recv() {
            let reply = match f.msg {
                ToWorker::Shutdown => return,
                ToWorker::Peer { from } => {
                    self.mailbox.entry(from).or_default().extend(f.tensors);
                    continue;
                }
                msg => self.handle(msg, f.tensors, port),
            };
            let out = match reply {
                Ok(Reply::Done(meta)) => Frame::new(FromWorker::Done { meta }),
                Ok(Reply::Value(v)) => {
                    let (w, ts) = value_to_wire(v);
                    Frame::with(FromWorker::Value(w), ts)
                }
                Err(e) => Frame::new(FromWorker::Failed(e)),
            };
            if port.send(out).is_err() {
                return;
            }
        }
    }

    fn get(&self, r: DRef) -> Result<&Value, String> {
        self.regs
            .get(&r)
            .ok_or_else(|| format!("register {} does not exist", r.0))
    }

    fn tensor(&self, r: DRef) -> Result<&Tensor, String> {
        match self.get(r)? {
            Value::Tensor(t) => Ok(t),
            v => Err(format!(
                "register {} holds a {}, not an array",
                r.0,
                v.kind()
            )),
        }
    }

    /// Store `v` in `reg`; the array type for the controller's bookkeeping.
    fn store(&mut self, reg: DRef, v: Value) -> Reply {
        let meta = v.as_tensor().map(TensorMeta::of);
        self.regs.insert(reg, v);
        Reply::Done(meta)
    }

    fn handle(
        &mut self,
        msg: ToWorker,
        mut tensors: Vec<Tensor>,
        port: &mut dyn Port,
    ) -> Result<Reply, String> {
        match msg {
            ToWorker::Empty { reg, shape, dtype } => {
                let t = Tensor::zeros(shape, dtype).map_err(terr)?;
                Ok(self.store(reg, Value::Tensor(t)))
            }
            ToWorker::GetGlobalFunc { reg, name } => {
                if !builtins::exists(&name) {
                    return Err(format!("no global function \"{name}\""));
                }
                Ok(self.store(reg, Value::Func(name)))
            }
            ToWorker::LoadModule { reg, path } => {
                let p = vm::load(Path::new(&path))?;
                vm::check_workers(&p, self.workers)?;
                self.programs.insert(reg, Arc::new(p));
                Ok(self.store(reg, Value::Module(path)))
            }
            ToWorker::GetFunction { reg, module, name } => {
                if !self.programs.contains_key(&module) {
                    return Err(format!("register {} is not a module", module.0));
                }
                if name != "main" {
                    return Err(format!(
                        "a module has one function, \"main\", not \"{name}\""
                    ));
                }
                Ok(self.store(reg, Value::ModuleFunc { module, name }))
            }
            ToWorker::Call { reg, func, args } => {
                let vals = args
                    .iter()
                    .map(|a| match a {
                        Arg::Ref(r) => self.get(*r).cloned(),
                        other => Ok(Value::from_arg(other).expect("not a register")),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let v = match self.get(func)?.clone() {
                    Value::Func(name) => builtins::call(
                        &name,
                        Caller {
                            worker: self.me,
                            workers: self.workers,
                        },
                        &vals,
                    )?,
                    Value::ModuleFunc { module, .. } => {
                        let program = self.programs[&module].clone();
                        let inputs = vals
                            .into_iter()
                            .map(|v| match v {
                                Value::Tensor(t) => Ok(t),
                                v => Err(format!("a module takes arrays, not a {}", v.kind())),
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        let mut peers = PortPeers {
                            port,
                            mailbox: &mut self.mailbox,
                        };
                        Value::Tuple(vm::run_as(&program, &inputs, self.me, &mut peers)?)
                    }
                    v => {
                        return Err(format!(
                            "register {} holds a {}, not a function",
                            func.0,
                            v.kind()
                        ))
                    }
                };
                Ok(self.store(reg, v))
            }
            ToWorker::Put { reg } => {
                let t = tensors.pop().ok_or("put without an array")?;
                let cur = self.tensor(reg)?;
                if cur.dtype() != t.dtype() || cur.num_elements() != t.num_elements() {
                    return Err(format!(
                        "array {:?} {} does not fit register {} ({:?} {})",
                        t.shape(),
                        t.dtype(),
                        reg.0,
                        cur.shape(),
                        cur.dtype()
                    ));
                }
                let v = Tensor::new(cur.shape().to_vec(), t.into_data()).map_err(terr)?;
                Ok(self.store(reg, Value::Tensor(v)))
            }
            ToWorker::Get { reg } => Ok(Reply::Value(self.get(reg)?.clone())),
            ToWorker::Collective(c) => self.collective(c, port),
            ToWorker::Sync => Ok(Reply::Done(None)),
            ToWorker::Peer { .. } | ToWorker::Shutdown => unreachable!("served above"),
        }
    }

    fn collective(&mut self, c: CollectiveCall, port: &mut dyn Port) -> Result<Reply, String> {
        let reduction = collective_io::reduction_named(&c.reduction)?;
        let (src, dst) = (self.tensor(c.src)?.clone(), self.tensor(c.dst)?.clone());
        let (_, total) = collective_io::prepare(
            c.kind,
            self.workers,
            &TensorMeta::of(&src),
            &TensorMeta::of(&dst),
        )
        .map_err(|e| e.to_string())?;
        let mut buf = collective_io::input_buffer(c.kind, self.workers, self.me, &src, total)
            .map_err(|e| e.to_string())?;
        let mut peers = PortPeers {
            port,
            mailbox: &mut self.mailbox,
        };
        collective_io::run_plan_as(&c.plan, self.me, &mut buf, reduction, &mut peers)?;
        match collective_io::output(c.kind, self.workers, self.me, buf, dst.shape())
            .map_err(|e| e.to_string())?
        {
            Some(t) => Ok(self.store(c.dst, Value::Tensor(t))),
            None => Ok(Reply::Done(Some(TensorMeta::of(&dst)))),
        }
    }
}
