//! The simulated Disco session: registers hold one tensor per worker;
//! collectives run their plan on the data and time it on the topology.

use std::collections::BTreeMap;

use crate::base::DType;
use crate::collective::{self, data, Algorithm, Calibration, CollectiveOp, Group, Plan, Protocol};
use crate::engine::{transfer_ps_exact, Time};
use crate::tensor::{CollectiveReduction, Scalar, Tensor};
use crate::topology::{ComponentKind, Topology};

use super::{DRef, Session, SessionError};

/// A function every worker can run: `(worker, args) -> result`.
pub type WorkerFunc = Box<dyn Fn(usize, &[&Tensor]) -> Result<Tensor, String>>;

/// Disco over simulated devices.
pub struct SimSession {
    topo: Topology,
    workers: usize,
    /// Register -> one tensor per worker.
    regs: BTreeMap<DRef, Vec<Tensor>>,
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
    /// Give each worker's flat collective output the shape of register `dst` and store it there.
    fn store_shaped(&mut self, dst: DRef, out: Vec<Tensor>) -> Result<(), SessionError> {
        let shape = self.get(dst)?[0].shape().to_vec();
        let vals = out
            .into_iter()
            .map(|b| shaped(b, &shape))
            .collect::<Result<_, _>>()?;
        self.regs.insert(dst, vals);
        Ok(())
    }

    /// A session of `workers` workers on `topo` (call `init_ccl` before collectives).
    pub fn new(topo: Topology, workers: usize) -> SimSession {
        SimSession {
            topo,
            workers,
            regs: BTreeMap::new(),
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

    fn get(&self, r: DRef) -> Result<&Vec<Tensor>, SessionError> {
        self.regs.get(&r).ok_or(SessionError::UnknownRef(r))
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

    fn add_reg(&mut self, values: Vec<Tensor>) -> DRef {
        let r = DRef(self.next);
        self.next += 1;
        self.regs.insert(r, values);
        r
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

fn flat(t: &Tensor) -> Result<Tensor, SessionError> {
    Ok(Tensor::new(
        vec![t.num_elements() as u64],
        t.data().clone(),
    )?)
}

fn shaped(t: Tensor, shape: &[u64]) -> Result<Tensor, SessionError> {
    Ok(Tensor::new(shape.to_vec(), t.into_data())?)
}

fn same_type(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    factor: (u64, u64),
) -> Result<(), SessionError> {
    let (na, nb) = (a.num_elements() as u64, b.num_elements() as u64);
    if a.dtype() != b.dtype() || na * factor.0 != nb * factor.1 {
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
        if !matches!(ccl, "nccl" | "rccl" | "mpi") {
            return Err(SessionError::Ccl(format!(
                "unknown library \"{ccl}\" (nccl, rccl, mpi)"
            )));
        }
        if device_ids.len() != self.workers {
            return Err(SessionError::Ccl(format!(
                "{} device ids for {} workers",
                device_ids.len(),
                self.workers
            )));
        }
        let group = Group::new(&self.topo, device_ids.to_vec())?;
        let cal = Calibration::for_model(&group.device_model(&self.topo))?;
        self.ccl = Some((group, cal));
        Ok(())
    }

    fn empty(
        &mut self,
        shape: &[u64],
        dtype: DType,
        device: Option<&str>,
    ) -> Result<DRef, SessionError> {
        if let Some(scope) = device {
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
                        op: "empty",
                        message: format!("device {d} has no memory scope \"{scope}\""),
                    });
                }
            }
        }
        let t = Tensor::zeros(shape.to_vec(), dtype)?;
        Ok(self.add_reg(vec![t; self.workers]))
    }

    fn call(&mut self, func: &str, args: &[DRef]) -> Result<(DRef, Time), SessionError> {
        let f = self
            .funcs
            .get(func)
            .ok_or_else(|| SessionError::UnknownFunc(func.to_string()))?;
        let mut out = Vec::with_capacity(self.workers);
        for w in 0..self.workers {
            let a: Vec<&Tensor> = args
                .iter()
                .map(|r| {
                    self.regs
                        .get(r)
                        .map(|v| &v[w])
                        .ok_or(SessionError::UnknownRef(*r))
                })
                .collect::<Result<_, _>>()?;
            out.push(f(w, &a).map_err(|message| SessionError::Func {
                func: func.to_string(),
                worker: w,
                message,
            })?);
        }
        // Device compute is not modelled here (the execution layer does it).
        Ok((self.add_reg(out), Time::ZERO))
    }

    fn allreduce(
        &mut self,
        src: DRef,
        dst: DRef,
        op: CollectiveReduction,
    ) -> Result<Time, SessionError> {
        let s = self.get(src)?.clone();
        same_type("allreduce", &s[0], &self.get(dst)?[0], (1, 1))?;
        let total = s[0].num_elements() as u64;
        let bufs = s.iter().map(flat).collect::<Result<Vec<_>, _>>()?;
        let (out, t) = self.collective(CollectiveOp::AllReduce, total, bufs, op)?;
        self.store_shaped(dst, out)?;
        Ok(t)
    }

    fn allgather(&mut self, src: DRef, dst: DRef) -> Result<Time, SessionError> {
        let n = self.workers as u64;
        let s = self.get(src)?.clone();
        same_type("allgather", &s[0], &self.get(dst)?[0], (n, 1))?;
        let k = s[0].num_elements() as u64;
        let bufs = stack_into_pieces(&s, n * k)?;
        let (out, t) = self.collective(
            CollectiveOp::AllGather,
            n * k,
            bufs,
            CollectiveReduction::Sum,
        )?;
        self.store_shaped(dst, out)?;
        Ok(t)
    }

    fn broadcast_from_worker0(&mut self, src: DRef, dst: DRef) -> Result<Time, SessionError> {
        let s = self.get(src)?.clone();
        same_type("broadcast_from_worker0", &s[0], &self.get(dst)?[0], (1, 1))?;
        let total = s[0].num_elements() as u64;
        let bufs = s.iter().map(flat).collect::<Result<Vec<_>, _>>()?;
        let (out, t) = self.collective(
            CollectiveOp::Broadcast { root: 0 },
            total,
            bufs,
            CollectiveReduction::Sum,
        )?;
        self.store_shaped(dst, out)?;
        Ok(t)
    }

    fn scatter_from_worker0(&mut self, from: DRef, to: DRef) -> Result<Time, SessionError> {
        let n = self.workers as u64;
        let f = self.get(from)?.clone();
        let to_shape = self.get(to)?[0].shape().to_vec();
        same_type("scatter_from_worker0", &self.get(to)?[0], &f[0], (n, 1))?;
        let total = f[0].num_elements() as u64;
        let bufs = f.iter().map(flat).collect::<Result<Vec<_>, _>>()?;
        let (out, t) = self.collective(
            CollectiveOp::Scatter { root: 0 },
            total,
            bufs,
            CollectiveReduction::Sum,
        )?;
        let k = total / n;
        let vals = out
            .iter()
            .enumerate()
            .map(|(w, b)| {
                let p = crate::tensor::extract_block(b, &[(w as u64 * k, (w as u64 + 1) * k)])?;
                shaped(p, &to_shape)
            })
            .collect::<Result<_, _>>()?;
        self.regs.insert(to, vals);
        Ok(t)
    }

    fn gather_to_worker0(&mut self, from: DRef, to: DRef) -> Result<Time, SessionError> {
        let n = self.workers as u64;
        let f = self.get(from)?.clone();
        same_type("gather_to_worker0", &f[0], &self.get(to)?[0], (n, 1))?;
        let k = f[0].num_elements() as u64;
        let bufs = stack_into_pieces(&f, n * k)?;
        let (out, t) = self.collective(
            CollectiveOp::Gather { root: 0 },
            n * k,
            bufs,
            CollectiveReduction::Sum,
        )?;
        let shape = self.get(to)?[0].shape().to_vec();
        let mut vals = self.get(to)?.clone();
        vals[0] = shaped(out.into_iter().next().expect("n >= 1"), &shape)?;
        self.regs.insert(to, vals);
        Ok(t)
    }

    fn copy_to_worker_0(&mut self, host: &Tensor, remote: DRef) -> Result<Time, SessionError> {
        same_type("copy_to_worker_0", host, &self.get(remote)?[0], (1, 1))?;
        let t = self.host_copy_time(host.size_bytes())?;
        let shape = self.get(remote)?[0].shape().to_vec();
        let v = shaped(host.clone(), &shape)?;
        self.regs.get_mut(&remote).expect("checked")[0] = v;
        self.advance(t)
    }

    fn copy_from_worker_0(&mut self, remote: DRef) -> Result<(Tensor, Time), SessionError> {
        let v = self.get(remote)?[0].clone();
        let t = self.host_copy_time(v.size_bytes())?;
        Ok((v, self.advance(t)?))
    }

    fn sync_worker_0(&mut self) -> Result<Time, SessionError> {
        Ok(self.clock)
    }

    fn debug_get_from_remote(&self, r: DRef, worker: usize) -> Result<Tensor, SessionError> {
        self.check_worker(worker)?;
        Ok(self.get(r)?[worker].clone())
    }

    fn debug_copy_from(
        &mut self,
        r: DRef,
        worker: usize,
        value: &Tensor,
    ) -> Result<(), SessionError> {
        self.check_worker(worker)?;
        let cur = &self.get(r)?[worker];
        same_type("debug_copy_from", value, cur, (1, 1))?;
        let v = shaped(value.clone(), cur.shape())?;
        self.regs.get_mut(&r).expect("checked")[worker] = v;
        Ok(())
    }
}

/// Buffers of `total` elements with worker `w`'s tensor at piece `w`.
fn stack_into_pieces(vals: &[Tensor], total: u64) -> Result<Vec<Tensor>, SessionError> {
    let n = vals.len();
    vals.iter()
        .enumerate()
        .map(|(w, v)| {
            let mut b = Tensor::splat(vec![total], Scalar::from_i128(v.dtype(), 0))?;
            let at = collective::plan::bound(total, n, w);
            crate::tensor::insert_block(&mut b, &flat(v)?, &[at])?;
            Ok(b)
        })
        .collect()
}
