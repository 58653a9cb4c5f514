//! The simulated Disco session: registers hold one value per worker;
//! collectives run their plan on the data and time it on the topology;
//! global functions and closures run on each worker in turn; a loaded
//! program runs on the lockstep executor.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::base::DType;
use crate::collective::{self, data, Algorithm, Calibration, CollectiveOp, Group, Plan, Protocol};
use crate::engine::{transfer_ps_exact, Time};
use crate::tensor::{CollectiveReduction, Tensor};
use crate::topology::{ComponentKind, Topology};

use super::builtins::{self, Caller};
use super::collective_io;
use super::protocol::{CollectiveKind, TensorMeta};
use super::{vm, Arg, DModule, DPackedFunc, DRef, Session, SessionError, Value};
use crate::partition::SpmdProgram;

/// A function every worker can run: `(worker, args) -> result`.
pub type WorkerFunc = Box<dyn Fn(usize, &[&Tensor]) -> Result<Tensor, String>>;

/// Disco over simulated devices.
pub struct SimSession {
    topo: Topology,
    workers: usize,
    /// Register -> one value per worker.
    regs: BTreeMap<DRef, Vec<Value>>,
    /// Loaded programs, by their module register.
    programs: BTreeMap<DRef, Arc<SpmdProgram>>,
    closed: bool,
    next: u32,
    funcs: BTreeMap<String, WorkerFunc>,
    ccl: Option<(Group, Calibration)>,
    /// Force an algorithm / protocol (None: the tuner's choice).
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    clock: Time,
    /// (algorithm, protocol) of the last collective.
    pub last_choice: Option<(Algorithm, Protocol)>,
}

impl SimSession {
    /// A session of `workers` workers on `topo` (call `init_ccl` before collectives).
    pub fn new(topo: Topology, workers: usize) -> SimSession {
        SimSession {
            topo,
            workers,
            regs: BTreeMap::new(),
            programs: BTreeMap::new(),
            closed: false,
            next: 0,
            funcs: BTreeMap::new(),
            ccl: None,
            algo: None,
            proto: None,
            clock: Time::ZERO,
            last_choice: None,
        }
    }

    /// Make `f` callable by name on every worker.
    pub fn register_func(&mut self, name: &str, f: WorkerFunc) {
        self.funcs.insert(name.to_string(), f);
    }

    /// The session clock: the sum of every call's simulated time.
    pub fn clock(&self) -> Time {
        self.clock
    }

    /// Every worker's array in register `r`.
    fn get(&self, r: DRef) -> Result<Vec<Tensor>, SessionError> {
        let vals = self.regs.get(&r).ok_or(SessionError::UnknownRef(r))?;
        vals.iter()
            .map(|v| match v {
                Value::Tensor(t) => Ok(t.clone()),
                v => Err(SessionError::Shape {
                    op: "register",
                    message: format!("register {} holds a {}, not an array", r.0, v.kind()),
                }),
            })
            .collect()
    }

    fn check_open(&self) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Broken("the session was shut down".into()));
        }
        Ok(())
    }

    fn check_worker(&self, worker: usize) -> Result<(), SessionError> {
        if worker >= self.workers {
            return Err(SessionError::NoSuchWorker {
                worker,
                workers: self.workers,
            });
        }
        Ok(())
    }

    fn add_reg(&mut self, values: Vec<Value>) -> DRef {
        let r = DRef(self.next);
        self.next += 1;
        self.regs.insert(r, values);
        r
    }

    fn set_arrays(&mut self, r: DRef, values: Vec<Tensor>) {
        self.regs
            .insert(r, values.into_iter().map(Value::Tensor).collect());
    }

    /// A session collective: check, build each worker's buffer, run the plan
    /// on all of them, store what each worker keeps (as the real backends do).
    fn session_collective(
        &mut self,
        kind: CollectiveKind,
        src: DRef,
        dst: DRef,
        reduction: CollectiveReduction,
    ) -> Result<Time, SessionError> {
        self.check_open()?;
        let (s, d) = (self.get(src)?, self.get(dst)?);
        let n = self.workers;
        let (op, total) =
            collective_io::prepare(kind, n, &TensorMeta::of(&s[0]), &TensorMeta::of(&d[0]))?;
        let bufs = s
            .iter()
            .enumerate()
            .map(|(w, t)| collective_io::input_buffer(kind, n, w, t, total))
            .collect::<Result<Vec<_>, _>>()?;
        let (out, t) = self.collective(op, total, bufs, reduction)?;
        let mut vals = d;
        for (w, b) in out.into_iter().enumerate() {
            let shape = vals[w].shape().to_vec();
            if let Some(v) = collective_io::output(kind, n, w, b, &shape)? {
                vals[w] = v;
            }
        }
        self.set_arrays(dst, vals);
        Ok(t)
    }

    fn advance(&mut self, t: Time) -> Result<Time, SessionError> {
        self.clock = self.clock.checked_add(t)?;
        Ok(t)
    }

    /// Run `op` on per-worker flat buffers: choose the plan (tuner or forced
    /// algorithm), execute it on the data, time it on the topology.
    fn collective(
        &mut self,
        op: CollectiveOp,
        total: u64,
        mut buffers: Vec<Tensor>,
        reduction: CollectiveReduction,
    ) -> Result<(Vec<Tensor>, Time), SessionError> {
        let (group, cal) = self.ccl.as_ref().ok_or(SessionError::NoCcl)?;
        let dtype = buffers[0].dtype();
        let eb = dtype.size_bytes();
        let (choice, plan): (_, Plan) = collective::choose(
            &self.topo, group, &op, total, eb, cal, self.algo, self.proto,
        )?;
        data::execute(&plan, &mut buffers, reduction)?;
        let t = collective::simulate(&self.topo, group, &plan, eb, choice.algo, choice.proto, cal)?;
        self.last_choice = Some((choice.algo, choice.proto));
        Ok((buffers, self.advance(t.time)?))
    }

    fn host_copy_time(&self, bytes: u64) -> Result<Time, SessionError> {
        let (group, _) = self.ccl.as_ref().ok_or(SessionError::NoCcl)?;
        let dev = self
            .topo
            .device(group.devices[0])
            .ok_or(SessionError::Ccl("worker 0 has no device".into()))?;
        let node = self.topo.component(dev).node;
        let host = self
            .topo
            .components()
            .iter()
            .find(|c| c.kind == ComponentKind::Host && c.node == node);
        let Some(host) = host else {
            return Ok(Time::ZERO);
        };
        let route = self.topo.route(host.id, dev, 0)?;
        let links: Vec<_> = route.iter().map(|&l| self.topo.link(l)).collect();
        let lat: u64 = links.iter().map(|l| l.latency_ps()).sum();
        let bw = links
            .iter()
            .map(|l| l.bandwidth_bytes_per_s())
            .min()
            .unwrap_or(u64::MAX);
        Ok(Time(lat).checked_add(transfer_ps_exact(bytes, bw)?)?)
    }
}

fn shaped(t: Tensor, shape: &[u64]) -> Result<Tensor, SessionError> {
    Ok(Tensor::new(shape.to_vec(), t.into_data())?)
}

fn same_type(op: &'static str, a: &Tensor, b: &Tensor) -> Result<(), SessionError> {
    if a.dtype() != b.dtype() || a.num_elements() != b.num_elements() {
        return Err(SessionError::Shape {
            op,
            message: format!(
                "src {:?} {:?} and dst {:?} {:?} do not fit",
                a.shape(),
                a.dtype(),
                b.shape(),
                b.dtype()
            ),
        });
    }
    Ok(())
}

impl Session for SimSession {
    fn num_workers(&self) -> usize {
        self.workers
    }

    fn init_ccl(&mut self, ccl: &str, device_ids: &[u32]) -> Result<(), SessionError> {
        self.ccl = Some(super::init_ccl_group(
            &self.topo,
            self.workers,
            ccl,
            device_ids,
        )?);
        Ok(())
    }

    fn empty(
        &mut self,
        shape: &[u64],
        dtype: DType,
        device: Option<&str>,
    ) -> Result<DRef, SessionError> {
        self.check_open()?;
        if let Some(scope) = device {
            self.check_scope("empty", scope)?;
        }
        let t = Tensor::zeros(shape.to_vec(), dtype)?;
        Ok(self.add_reg(vec![Value::Tensor(t); self.workers]))
    }

    fn call(&mut self, func: &str, args: &[DRef]) -> Result<(DRef, Time), SessionError> {
        self.check_open()?;
        if !self.funcs.contains_key(func) {
            let f = self.get_global_func(func)?;
            let args: Vec<Arg> = args.iter().map(|&r| Arg::Ref(r)).collect();
            return self.call_packed(&f, &args);
        }
        let f = &self.funcs[func];
        let mut out = Vec::with_capacity(self.workers);
        for w in 0..self.workers {
            let a: Vec<&Tensor> = args
                .iter()
                .map(|r| match self.regs.get(r).map(|v| &v[w]) {
                    Some(Value::Tensor(t)) => Ok(t),
                    Some(v) => Err(SessionError::Shape {
                        op: "call",
                        message: format!("register {} holds a {}, not an array", r.0, v.kind()),
                    }),
                    None => Err(SessionError::UnknownRef(*r)),
                })
                .collect::<Result<_, _>>()?;
            out.push(Value::Tensor(f(w, &a).map_err(|message| {
                SessionError::Func {
                    func: func.to_string(),
                    worker: w,
                    message,
                }
            })?));
        }
        // Device compute is not modelled here (the execution layer does it).
        Ok((self.add_reg(out), Time::ZERO))
    }

    fn get_global_func(&mut self, name: &str) -> Result<DPackedFunc, SessionError> {
        self.check_open()?;
        if !builtins::exists(name) {
            return Err(SessionError::UnknownFunc(name.to_string()));
        }
        Ok(DPackedFunc(self.add_reg(vec![
            Value::Func(name.to_string());
            self.workers
        ])))
    }

    fn call_packed(
        &mut self,
        func: &DPackedFunc,
        args: &[Arg],
    ) -> Result<(DRef, Time), SessionError> {
        self.check_open()?;
        let fv = self
            .regs
            .get(&func.0)
            .ok_or(SessionError::UnknownRef(func.0))?[0]
            .clone();
        let mut per_worker = Vec::with_capacity(self.workers);
        for w in 0..self.workers {
            let vals = args
                .iter()
                .map(|a| match a {
                    Arg::Ref(r) => self
                        .regs
                        .get(r)
                        .map(|v| v[w].clone())
                        .ok_or(SessionError::UnknownRef(*r)),
                    other => Ok(Value::from_arg(other).expect("not a register")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            per_worker.push(vals);
        }
        let out = match fv {
            Value::Func(name) => per_worker
                .iter()
                .enumerate()
                .map(|(w, vals)| {
                    let caller = Caller {
                        worker: w,
                        workers: self.workers,
                    };
                    builtins::call(&name, caller, vals).map_err(|message| SessionError::Func {
                        func: name.clone(),
                        worker: w,
                        message,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            Value::ModuleFunc { module, name } => {
                let program = self.programs[&module].clone();
                // Every worker holds the same global inputs (worker 0's are used).
                let inputs = per_worker[0]
                    .iter()
                    .map(|v| match v {
                        Value::Tensor(t) => Ok(t.clone()),
                        v => Err(format!("a module takes arrays, not a {}", v.kind())),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .and_then(|inputs| vm::run_lockstep(&program, &inputs))
                    .map_err(|message| SessionError::Func {
                        func: name,
                        worker: 0,
                        message,
                    })?;
                vec![Value::Tuple(inputs); self.workers]
            }
            v => {
                return Err(SessionError::Shape {
                    op: "call_packed",
                    message: format!(
                        "register {} holds a {}, not a function",
                        func.0 .0,
                        v.kind()
                    ),
                })
            }
        };
        Ok((self.add_reg(out), Time::ZERO))
    }

    fn load_vm_module(
        &mut self,
        path: &Path,
        device: Option<&str>,
    ) -> Result<DModule, SessionError> {
        self.check_open()?;
        if let Some(scope) = device {
            self.check_scope("load_vm_module", scope)?;
        }
        let p = vm::load(path).map_err(SessionError::Module)?;
        vm::check_workers(&p, self.workers).map_err(SessionError::Module)?;
        let r = self.add_reg(vec![
            Value::Module(path.display().to_string());
            self.workers
        ]);
        self.programs.insert(r, Arc::new(p));
        Ok(DModule(r))
    }

    fn module_function(&mut self, m: &DModule, name: &str) -> Result<DPackedFunc, SessionError> {
        self.check_open()?;
        if !self.programs.contains_key(&m.0) {
            return Err(SessionError::Module(format!(
                "register {} is not a module",
                m.0 .0
            )));
        }
        if name != "main" {
            return Err(SessionError::Module(format!(
                "a module has one function, \"main\", not \"{name}\""
            )));
        }
        let v = Value::ModuleFunc {
            module: m.0,
            name: name.to_string(),
        };
        Ok(DPackedFunc(self.add_reg(vec![v; self.workers])))
    }

    fn allreduce(
        &mut self,
        src: DRef,
        dst: DRef,
        op: CollectiveReduction,
    ) -> Result<Time, SessionError> {
        self.session_collective(CollectiveKind::AllReduce, src, dst, op)
    }

    fn allgather(&mut self, src: DRef, dst: DRef) -> Result<Time, SessionError> {
        self.session_collective(
            CollectiveKind::AllGather,
            src,
            dst,
            CollectiveReduction::Sum,
        )
    }

    fn broadcast_from_worker0(&mut self, src: DRef, dst: DRef) -> Result<Time, SessionError> {
        self.session_collective(
            CollectiveKind::Broadcast,
            src,
            dst,
            CollectiveReduction::Sum,
        )
    }

    fn scatter_from_worker0(&mut self, from: DRef, to: DRef) -> Result<Time, SessionError> {
        self.session_collective(CollectiveKind::Scatter, from, to, CollectiveReduction::Sum)
    }

    fn gather_to_worker0(&mut self, from: DRef, to: DRef) -> Result<Time, SessionError> {
        self.session_collective(CollectiveKind::Gather, from, to, CollectiveReduction::Sum)
    }

    fn copy_to_worker_0(&mut self, host: &Tensor, remote: DRef) -> Result<Time, SessionError> {
        self.check_open()?;
        let mut vals = self.get(remote)?;
        same_type("copy_to_worker_0", host, &vals[0])?;
        let t = self.host_copy_time(host.size_bytes())?;
        let shape = vals[0].shape().to_vec();
        vals[0] = shaped(host.clone(), &shape)?;
        self.set_arrays(remote, vals);
        self.advance(t)
    }

    fn copy_from_worker_0(&mut self, remote: DRef) -> Result<(Tensor, Time), SessionError> {
        self.check_open()?;
        let v = self.get(remote)?.swap_remove(0);
        let t = self.host_copy_time(v.size_bytes())?;
        Ok((v, self.advance(t)?))
    }

    fn sync_worker_0(&mut self) -> Result<Time, SessionError> {
        self.check_open()?;
        Ok(self.clock)
    }

    fn debug_get_value(&mut self, r: DRef, worker: usize) -> Result<Value, SessionError> {
        self.check_worker(worker)?;
        Ok(self.regs.get(&r).ok_or(SessionError::UnknownRef(r))?[worker].clone())
    }

    fn debug_copy_from(
        &mut self,
        r: DRef,
        worker: usize,
        value: &Tensor,
    ) -> Result<(), SessionError> {
        self.check_worker(worker)?;
        let mut vals = self.get(r)?;
        same_type("debug_copy_from", value, &vals[worker])?;
        let shape = vals[worker].shape().to_vec();
        vals[worker] = shaped(value.clone(), &shape)?;
        self.set_arrays(r, vals);
        Ok(())
    }

    fn shutdown(&mut self) -> Result<(), SessionError> {
        self.closed = true;
        self.regs.clear();
        self.programs.clear();
        Ok(())
    }
}

impl SimSession {
    /// Every worker's device has memory scope `scope`.
    fn check_scope(&self, op: &'static str, scope: &str) -> Result<(), SessionError> {
        // Workers' devices: the CCL group's, or devices 0..n before init_ccl.
        let devices: Vec<u32> = match &self.ccl {
            Some((g, _)) => g.devices.clone(),
            None => (0..self.workers as u32).collect(),
        };
        for d in devices {
            let c = self
                .topo
                .device(d)
                .ok_or(crate::topology::TopologyError::NoSuchDevice(
                    d,
                    self.topo.num_devices(),
                ))?;
            if self.topo.memory_scope(c, scope).is_none() {
                return Err(SessionError::Shape {
                    op,
                    message: format!("device {d} has no memory scope \"{scope}\""),
                });
            }
        }
        Ok(())
    }
}
