//! The controller side of the real backends: [`Remote`] sends commands to N
//! workers over a [`Transport`] (threads or processes), relays the chunks
//! workers send each other, waits for every reply and measures the wall time.
//! A worker that closes its connection is reported at once, one that sends
//! nothing for the timeout is reported as hung; either breaks the session
//! (later calls return the same error) and the transport reaps the workers.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::base::DType;
use crate::collective::{self, Algorithm, Calibration, Group, Protocol};
use crate::engine::Time;
use crate::tensor::{CollectiveReduction, Tensor};
use crate::topology::Topology;

use super::collective_io;
use super::protocol::{
    value_from_wire, CollectiveCall, CollectiveKind, Frame, FromWorker, TensorMeta, ToWorker,
    WirePlan,
};
use super::{Arg, DModule, DPackedFunc, DRef, Session, SessionError, Value};

/// What a transport reports about a worker.
pub enum Event {
    Frame(Frame<FromWorker>),
    /// The worker's connection closed (it exited, crashed or was killed), or
    /// what came on it was not a frame: why.
    Closed(String),
}

/// How the controller reaches its workers.
pub trait Transport {
    fn send(&mut self, worker: usize, f: Frame<ToWorker>) -> Result<(), String>;
    fn events(&self) -> &Receiver<(usize, Event)>;
    /// Why worker `w` is gone (its exit status, when known).
    fn why_closed(&mut self, w: usize) -> String;
    /// Stop every worker and wait for it (no zombies, no threads left running work).
    fn shutdown(&mut self);
}

/// Default time a worker may stay silent while the controller waits for it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A session whose workers run for real.
pub struct Remote<T: Transport> {
    transport: T,
    workers: usize,
    topo: Topology,
    ccl: Option<(Group, Calibration)>,
    /// Force an algorithm / protocol (None: the tuner's choice, as the simulated session).
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    /// Array type of each register (worker 0's), for checks and plans.
    metas: BTreeMap<DRef, Option<TensorMeta>>,
    next: u32,
    timeout: Duration,
    broken: Option<SessionError>,
    clock: Time,
    closed: bool,
}

fn elapsed(t0: Instant) -> Time {
    Time(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX / 1000) * 1000)
}

impl<T: Transport> Remote<T> {
    pub fn new(transport: T, workers: usize, topo: Topology) -> Remote<T> {
        Remote {
            transport,
            workers,
            topo,
            ccl: None,
            algo: None,
            proto: None,
            metas: BTreeMap::new(),
            next: 0,
            timeout: DEFAULT_TIMEOUT,
            broken: None,
            clock: Time::ZERO,
            closed: false,
        }
    }

    /// How long a worker may stay silent before it is reported as hung.
    pub fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The sum of every call's measured wall time.
    pub fn clock(&self) -> Time {
        self.clock
    }

    fn fresh(&mut self) -> DRef {
        let r = DRef(self.next);
        self.next += 1;
        r
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

    fn meta(&self, r: DRef, op: &'static str) -> Result<TensorMeta, SessionError> {
        match self.metas.get(&r) {
            None => Err(SessionError::UnknownRef(r)),
            Some(None) => Err(SessionError::Shape {
                op,
                message: format!("register {} is not an array", r.0),
            }),
            Some(Some(m)) => Ok(m.clone()),
        }
    }

    /// Send `cmds` and wait for a reply from each addressed worker, relaying
    /// peer chunks meanwhile. Replies in worker order, with the wall time.
    fn round(
        &mut self,
        cmds: Vec<(usize, Frame<ToWorker>)>,
    ) -> Result<(BTreeMap<usize, Frame<FromWorker>>, Time), SessionError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        if self.closed {
            return Err(SessionError::Broken("the session was shut down".into()));
        }
        let t0 = Instant::now();
        let mut waiting: Vec<usize> = cmds.iter().map(|c| c.0).collect();
        for (w, f) in cmds {
            if let Err(e) = self.transport.send(w, f) {
                return Err(self.break_with(SessionError::WorkerDied {
                    worker: w,
                    detail: e,
                }));
            }
        }
        let mut replies = BTreeMap::new();
        while !waiting.is_empty() {
            let ev = self.transport.events().recv_timeout(self.timeout);
            match ev {
                Ok((w, Event::Frame(f))) => match f.msg {
                    FromWorker::Peer { to } => {
                        if to >= self.workers {
                            return Err(self.break_with(SessionError::Protocol(format!(
                                "worker {w} sent to worker {to}"
                            ))));
                        }
                        let fwd = Frame::with(ToWorker::Peer { from: w }, f.tensors);
                        if let Err(e) = self.transport.send(to, fwd) {
                            return Err(self.break_with(SessionError::WorkerDied {
                                worker: to,
                                detail: e,
                            }));
                        }
                    }
                    _ => {
                        waiting.retain(|&x| x != w);
                        replies.insert(w, f);
                    }
                },
                Ok((w, Event::Closed(why))) => {
                    let detail = format!("{why}; {}", self.transport.why_closed(w));
                    return Err(self.break_with(SessionError::WorkerDied { worker: w, detail }));
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.break_with(SessionError::WorkerTimeout {
                        ms: self.timeout.as_millis() as u64,
                        workers: waiting.clone(),
                    }));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.break_with(SessionError::Broken(
                        "every worker connection is gone".into(),
                    )));
                }
            }
        }
        let t = elapsed(t0);
        self.clock = self.clock.checked_add(t)?;
        Ok((replies, t))
    }

    /// Mark the session broken by `e` and stop the workers.
    fn break_with(&mut self, e: SessionError) -> SessionError {
        self.broken = Some(e.clone());
        self.transport.shutdown();
        e
    }

    /// The first failure among `replies`, as an error.
    fn failures(replies: &BTreeMap<usize, Frame<FromWorker>>) -> Result<(), SessionError> {
        for (&w, f) in replies {
            if let FromWorker::Failed(m) = &f.msg {
                return Err(SessionError::Worker {
                    worker: w,
                    message: m.clone(),
                });
            }
        }
        Ok(())
    }

    /// Send `make(worker)` to every worker; store worker 0's array type for `reg`.
    fn all(
        &mut self,
        reg: Option<DRef>,
        make: impl Fn(usize) -> Frame<ToWorker>,
    ) -> Result<Time, SessionError> {
        let cmds = (0..self.workers).map(|w| (w, make(w))).collect();
        let (replies, t) = self.round(cmds)?;
        Self::failures(&replies)?;
        if let (Some(r), Some(f)) = (reg, replies.get(&0)) {
            let meta = match &f.msg {
                FromWorker::Done { meta } => meta.clone(),
                _ => None,
            };
            self.metas.insert(r, meta);
        }
        Ok(t)
    }

    /// Send one command to one worker and return its reply.
    fn one(
        &mut self,
        w: usize,
        f: Frame<ToWorker>,
    ) -> Result<(Frame<FromWorker>, Time), SessionError> {
        let (mut replies, t) = self.round(vec![(w, f)])?;
        Self::failures(&replies)?;
        Ok((replies.remove(&w).expect("waited for it"), t))
    }

    fn collective(
        &mut self,
        kind: CollectiveKind,
        src: DRef,
        dst: DRef,
        reduction: CollectiveReduction,
    ) -> Result<Time, SessionError> {
        let name = match kind {
            CollectiveKind::AllReduce => "allreduce",
            CollectiveKind::AllGather => "allgather",
            CollectiveKind::Broadcast => "broadcast_from_worker0",
            CollectiveKind::Scatter => "scatter_from_worker0",
            CollectiveKind::Gather => "gather_to_worker0",
        };
        let (sm, dm) = (self.meta(src, name)?, self.meta(dst, name)?);
        let (op, total) = collective_io::prepare(kind, self.workers, &sm, &dm)?;
        let (group, cal) = self.ccl.as_ref().ok_or(SessionError::NoCcl)?;
        let eb = sm.dtype.size_bytes();
        let (_, plan) = collective::choose(
            &self.topo, group, &op, total, eb, cal, self.algo, self.proto,
        )?;
        let call = CollectiveCall {
            kind,
            src,
            dst,
            reduction: reduction.name().to_string(),
            plan: WirePlan::of(&plan),
        };
        self.all(Some(dst), |_| {
            Frame::new(ToWorker::Collective(call.clone()))
        })
    }
}

impl<T: Transport> Drop for Remote<T> {
    fn drop(&mut self) {
        let _ = Session::shutdown(self);
    }
}

impl<T: Transport> Session for Remote<T> {
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
        host_scope("empty", device)?;
        let reg = self.fresh();
        self.all(Some(reg), |_| {
            Frame::new(ToWorker::Empty {
                reg,
                shape: shape.to_vec(),
                dtype,
            })
        })?;
        Ok(reg)
    }

    fn call(&mut self, func: &str, args: &[DRef]) -> Result<(DRef, Time), SessionError> {
        let f = self.get_global_func(func)?;
        let args: Vec<Arg> = args.iter().map(|&r| Arg::Ref(r)).collect();
        self.call_packed(&f, &args)
    }

    fn get_global_func(&mut self, name: &str) -> Result<DPackedFunc, SessionError> {
        if !super::builtins::exists(name) {
            return Err(SessionError::UnknownFunc(name.to_string()));
        }
        let reg = self.fresh();
        self.all(Some(reg), |_| {
            Frame::new(ToWorker::GetGlobalFunc {
                reg,
                name: name.to_string(),
            })
        })?;
        Ok(DPackedFunc(reg))
    }

    fn call_packed(
        &mut self,
        func: &DPackedFunc,
        args: &[Arg],
    ) -> Result<(DRef, Time), SessionError> {
        for a in args {
            if let Arg::Ref(r) = a {
                if !self.metas.contains_key(r) {
                    return Err(SessionError::UnknownRef(*r));
                }
            }
        }
        if !self.metas.contains_key(&func.0) {
            return Err(SessionError::UnknownRef(func.0));
        }
        let reg = self.fresh();
        let t = self.all(Some(reg), |_| {
            Frame::new(ToWorker::Call {
                reg,
                func: func.0,
                args: args.to_vec(),
            })
        })?;
        Ok((reg, t))
    }

    fn load_vm_module(
        &mut self,
        path: &Path,
        device: Option<&str>,
    ) -> Result<DModule, SessionError> {
        host_scope("load_vm_module", device)?;
        // Workers may run elsewhere (another directory): give them an absolute path.
        let abs = std::path::absolute(path)
            .map_err(|e| SessionError::Module(format!("{}: {e}", path.display())))?;
        let reg = self.fresh();
        self.all(Some(reg), |_| {
            Frame::new(ToWorker::LoadModule {
                reg,
                path: abs.display().to_string(),
            })
        })?;
        Ok(DModule(reg))
    }

    fn module_function(&mut self, m: &DModule, name: &str) -> Result<DPackedFunc, SessionError> {
        let reg = self.fresh();
        self.all(Some(reg), |_| {
            Frame::new(ToWorker::GetFunction {
                reg,
                module: m.0,
                name: name.to_string(),
            })
        })?;
        Ok(DPackedFunc(reg))
    }

    fn allreduce(
        &mut self,
        src: DRef,
        dst: DRef,
        op: CollectiveReduction,
    ) -> Result<Time, SessionError> {
        self.collective(CollectiveKind::AllReduce, src, dst, op)
    }

    fn allgather(&mut self, src: DRef, dst: DRef) -> Result<Time, SessionError> {
        self.collective(
            CollectiveKind::AllGather,
            src,
            dst,
            CollectiveReduction::Sum,
        )
    }

    fn broadcast_from_worker0(&mut self, src: DRef, dst: DRef) -> Result<Time, SessionError> {
        self.collective(
            CollectiveKind::Broadcast,
            src,
            dst,
            CollectiveReduction::Sum,
        )
    }

    fn scatter_from_worker0(&mut self, from: DRef, to: DRef) -> Result<Time, SessionError> {
        self.collective(CollectiveKind::Scatter, from, to, CollectiveReduction::Sum)
    }

    fn gather_to_worker0(&mut self, from: DRef, to: DRef) -> Result<Time, SessionError> {
        self.collective(CollectiveKind::Gather, from, to, CollectiveReduction::Sum)
    }

    fn copy_to_worker_0(&mut self, host: &Tensor, remote: DRef) -> Result<Time, SessionError> {
        self.debug_copy_timed(remote, 0, host, "copy_to_worker_0")
    }

    fn copy_from_worker_0(&mut self, remote: DRef) -> Result<(Tensor, Time), SessionError> {
        self.meta(remote, "copy_from_worker_0")?;
        let (f, t) = self.one(0, Frame::new(ToWorker::Get { reg: remote }))?;
        match reply_value(f)? {
            Value::Tensor(x) => Ok((x, t)),
            v => Err(SessionError::Protocol(format!(
                "worker 0 sent a {} for an array",
                v.kind()
            ))),
        }
    }

    fn sync_worker_0(&mut self) -> Result<Time, SessionError> {
        self.one(0, Frame::new(ToWorker::Sync))?;
        Ok(self.clock)
    }

    fn debug_get_value(&mut self, r: DRef, worker: usize) -> Result<Value, SessionError> {
        self.check_worker(worker)?;
        if !self.metas.contains_key(&r) {
            return Err(SessionError::UnknownRef(r));
        }
        let (f, _) = self.one(worker, Frame::new(ToWorker::Get { reg: r }))?;
        reply_value(f)
    }

    fn debug_copy_from(
        &mut self,
        r: DRef,
        worker: usize,
        value: &Tensor,
    ) -> Result<(), SessionError> {
        self.debug_copy_timed(r, worker, value, "debug_copy_from")
            .map(|_| ())
    }

    fn shutdown(&mut self) -> Result<(), SessionError> {
        if !self.closed {
            self.closed = true;
            for w in 0..self.workers {
                let _ = self.transport.send(w, Frame::new(ToWorker::Shutdown));
            }
            self.transport.shutdown();
        }
        Ok(())
    }
}

impl<T: Transport> Remote<T> {
    fn debug_copy_timed(
        &mut self,
        r: DRef,
        worker: usize,
        value: &Tensor,
        op: &'static str,
    ) -> Result<Time, SessionError> {
        self.check_worker(worker)?;
        let m = self.meta(r, op)?;
        if m.dtype != value.dtype() || m.num_elements() != value.num_elements() as u64 {
            return Err(SessionError::Shape {
                op,
                message: format!(
                    "host {:?} {:?} and register {:?} {:?} do not fit",
                    value.shape(),
                    value.dtype(),
                    m.shape,
                    m.dtype
                ),
            });
        }
        let (_, t) = self.one(
            worker,
            Frame::with(ToWorker::Put { reg: r }, vec![value.clone()]),
        )?;
        Ok(t)
    }
}

/// Real workers have one memory: the host's (`global`).
fn host_scope(op: &'static str, device: Option<&str>) -> Result<(), SessionError> {
    match device {
        None | Some("global") => Ok(()),
        Some(s) => Err(SessionError::Shape {
            op,
            message: format!("workers on this host have one memory scope, \"global\", not \"{s}\""),
        }),
    }
}

fn reply_value(f: Frame<FromWorker>) -> Result<Value, SessionError> {
    match f.msg {
        FromWorker::Value(w) => {
            value_from_wire(w, f.tensors).map_err(|e| SessionError::Protocol(e.to_string()))
        }
        other => Err(SessionError::Protocol(format!(
            "expected a value, got {other:?}"
        ))),
    }
}
