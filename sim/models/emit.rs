//! A typed writer of StableHLO + Shardy text: the builders call ops on typed
//! values (name, shape, element type) and get the program's text, which the
//! parser and verifier then read like any other program. Shapes are inferred
//! here so a builder cannot write an op whose types disagree without a panic
//! in the builder's own tests.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::base::DType;

/// A value of the program being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Val {
    pub name: String,
    pub shape: Vec<u64>,
    pub dtype: DType,
}

impl Val {
    /// `tensor<AxBxT>`.
    pub fn ty(&self) -> String {
        ty(&self.shape, self.dtype)
    }

    /// Bytes of the whole (unsharded) value.
    pub fn bytes(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.dtype.size_bytes()
    }
}

/// `tensor<AxBxT>`.
pub fn ty(shape: &[u64], dtype: DType) -> String {
    let mut s = String::from("tensor<");
    for d in shape {
        let _ = write!(s, "{d}x");
    }
    let _ = write!(s, "{dtype}>");
    s
}

fn list<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A sharding as dimension -> mesh axes (`""` for a replicated dimension,
/// `"a,b"` for several axes), written `[{"a"}, {}, ...]`.
pub fn sharding(dims: &[&str]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| {
            let axes: Vec<String> = d
                .split(',')
                .filter(|a| !a.is_empty())
                .map(|a| format!("\"{a}\""))
                .collect();
            format!("{{{}}}", axes.join(", "))
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// An open manual computation (see [`Emitter::manual_begin`]).
#[derive(Debug)]
pub struct ManualScope {
    start: usize,
    axes: Vec<String>,
    consts: BTreeMap<(String, DType), Val>,
    operands: Vec<(Val, String)>,
    /// Each device's blocks of the operands.
    pub args: Vec<Val>,
}

/// A function being written: arguments with shardings, a body and results.
#[derive(Debug)]
pub struct Emitter {
    mesh: Vec<(String, u64)>,
    args: Vec<(Val, String)>,
    body: String,
    next: usize,
    /// Scalar constants already written, by (text, type).
    consts: BTreeMap<(String, DType), Val>,
    /// The mesh axis the whole body is manual over (see [`Emitter::manual_over`]).
    manual: Option<String>,
}

impl Emitter {
    /// A function on the mesh `axes` (name, size), major first.
    pub fn new(mesh: &[(&str, u64)]) -> Emitter {
        Emitter {
            mesh: mesh.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
            args: Vec::new(),
            body: String::new(),
            next: 0,
            consts: BTreeMap::new(),
            manual: None,
        }
    }

    /// Write the body as one manual computation over mesh axis `axis`
    /// (JAX's shard_map with the other axes left automatic): the builder
    /// writes one group's program on its local shapes, as before; every
    /// argument and result is that group's block of a global value split
    /// along its first dimension over `axis` (a scalar result becomes `[1]`).
    /// Groups exchange data only through explicit collectives such as
    /// [`Emitter::all_to_all`].
    pub fn manual_over(&mut self, axis: &str) {
        assert!(self.mesh_axis_size(axis).is_some(), "no mesh axis {axis}");
        self.manual = Some(axis.to_string());
    }

    fn mesh_axis_size(&self, axis: &str) -> Option<u64> {
        self.mesh.iter().find(|(n, _)| n == axis).map(|(_, s)| *s)
    }

    /// `stablehlo.all_to_all` of `x` among the devices that differ only in
    /// their coordinate on mesh axis `axis` (global device ids, major axis
    /// first): `split_dim` cut into one piece per device, piece `j` sent to
    /// the `j`-th device, the pieces received joined along `concat_dim`.
    pub fn all_to_all(&mut self, x: &Val, axis: &str, split_dim: usize, concat_dim: usize) -> Val {
        let pos = self
            .mesh
            .iter()
            .position(|(n, _)| n == axis)
            .expect("all_to_all over a mesh axis");
        let n = self.mesh[pos].1;
        let minor: u64 = self.mesh[pos + 1..].iter().map(|a| a.1).product();
        let total: u64 = self.mesh.iter().map(|a| a.1).product();
        let mut groups: Vec<Vec<u64>> = Vec::new();
        for d in 0..total {
            if (d / minor) % n == 0 {
                groups.push((0..n).map(|j| d + j * minor).collect());
            }
        }
        let mut to = x.shape.clone();
        assert_eq!(to[split_dim] % n, 0, "all_to_all: split dimension");
        to[split_dim] /= n;
        to[concat_dim] *= n;
        let v = self.fresh(to, x.dtype);
        let rows: Vec<String> = groups.iter().map(|g| format!("[{}]", list(g))).collect();
        self.next += 1;
        self.line(
            &v,
            &format!(
                "\"stablehlo.all_to_all\"({}) <{{channel_handle = #stablehlo.channel_handle<handle = {}, type = 0>, concat_dimension = {concat_dim} : i64, replica_groups = dense<[{}]> : tensor<{}x{n}xi64>, split_count = {n} : i64, split_dimension = {split_dim} : i64, use_global_device_ids}}> : ({}) -> {}",
                x.name,
                self.next,
                rows.join(", "),
                groups.len(),
                x.ty(),
                v.ty()
            ),
        );
        v
    }

    fn fresh(&mut self, shape: Vec<u64>, dtype: DType) -> Val {
        self.next += 1;
        Val {
            name: format!("%v{}", self.next),
            shape,
            dtype,
        }
    }

    fn line(&mut self, v: &Val, rhs: &str) {
        let _ = writeln!(self.body, "    {} = {rhs}", v.name);
    }

    /// A function argument with its sharding (see [`sharding`]).
    pub fn arg(&mut self, shape: &[u64], dtype: DType, dims: &[&str]) -> Val {
        let v = Val {
            name: format!("%arg{}", self.args.len()),
            shape: shape.to_vec(),
            dtype,
        };
        self.args.push((v.clone(), sharding(dims)));
        v
    }

    /// A scalar constant (written once per value and type).
    pub fn scalar(&mut self, value: f64, dtype: DType) -> Val {
        let text = if dtype.is_float() {
            format!("{value:e}")
        } else {
            format!("{}", value as i64)
        };
        if let Some(v) = self.consts.get(&(text.clone(), dtype)) {
            return v.clone();
        }
        let v = self.fresh(Vec::new(), dtype);
        let lit = match (dtype, value) {
            // MLIR writes infinities as their bit pattern.
            (DType::F32, v) if v == f64::NEG_INFINITY => "0xFF800000".to_string(),
            (DType::BF16, v) if v == f64::NEG_INFINITY => "0xFF80".to_string(),
            (DType::F16, v) if v == f64::NEG_INFINITY => "0xFC00".to_string(),
            (d, _) if d.is_float() => format!("{value:.6e}"),
            _ => text.clone(),
        };
        self.line(&v, &format!("stablehlo.constant dense<{lit}> : {}", v.ty()));
        self.consts.insert((text, dtype), v.clone());
        v
    }

    /// `value` broadcast to `shape`.
    pub fn splat(&mut self, value: f64, shape: &[u64], dtype: DType) -> Val {
        let s = self.scalar(value, dtype);
        self.broadcast(&s, &[], shape)
    }

    pub fn unary(&mut self, op: &str, x: &Val) -> Val {
        let v = self.fresh(x.shape.clone(), x.dtype);
        self.line(&v, &format!("stablehlo.{op} {} : {}", x.name, x.ty()));
        v
    }

    pub fn binary(&mut self, op: &str, a: &Val, b: &Val) -> Val {
        assert_eq!(a.shape, b.shape, "{op}: operand shapes differ");
        let v = self.fresh(a.shape.clone(), a.dtype);
        self.line(
            &v,
            &format!("stablehlo.{op} {}, {} : {}", a.name, b.name, a.ty()),
        );
        v
    }

    /// `a op splat(value)`.
    pub fn binary_scalar(&mut self, op: &str, a: &Val, value: f64) -> Val {
        let s = self.splat(value, &a.shape.clone(), a.dtype);
        self.binary(op, a, &s)
    }

    pub fn convert(&mut self, x: &Val, dtype: DType) -> Val {
        let v = self.fresh(x.shape.clone(), dtype);
        self.line(
            &v,
            &format!("stablehlo.convert {} : ({}) -> {}", x.name, x.ty(), v.ty()),
        );
        v
    }

    /// `compare DIR, a, b` (an `i1` result).
    pub fn compare(&mut self, dir: &str, a: &Val, b: &Val) -> Val {
        let v = self.fresh(a.shape.clone(), DType::I1);
        self.line(
            &v,
            &format!(
                "stablehlo.compare {dir}, {}, {} : ({}, {}) -> {}",
                a.name,
                b.name,
                a.ty(),
                b.ty(),
                v.ty()
            ),
        );
        v
    }

    pub fn select(&mut self, pred: &Val, a: &Val, b: &Val) -> Val {
        let v = self.fresh(a.shape.clone(), a.dtype);
        self.line(
            &v,
            &format!(
                "stablehlo.select {}, {}, {} : {}, {}",
                pred.name,
                a.name,
                b.name,
                pred.ty(),
                a.ty()
            ),
        );
        v
    }

    /// Reduce `x` over `dims` with `op` (`add`, `maximum`) from `init`.
    pub fn reduce(&mut self, op: &str, x: &Val, init: f64, dims: &[usize]) -> Val {
        let init = self.scalar(init, x.dtype);
        let out: Vec<u64> = (0..x.shape.len())
            .filter(|d| !dims.contains(d))
            .map(|d| x.shape[d])
            .collect();
        let v = self.fresh(out, x.dtype);
        self.line(
            &v,
            &format!(
                "stablehlo.reduce({} init: {}) applies stablehlo.{op} across dimensions = [{}] : ({}, {}) -> {}",
                x.name,
                init.name,
                list(dims),
                x.ty(),
                init.ty(),
                v.ty()
            ),
        );
        v
    }

    /// `x` broadcast to `to`, its dimension `i` becoming `dims[i]`.
    pub fn broadcast(&mut self, x: &Val, dims: &[usize], to: &[u64]) -> Val {
        let v = self.fresh(to.to_vec(), x.dtype);
        self.line(
            &v,
            &format!(
                "stablehlo.broadcast_in_dim {}, dims = [{}] : ({}) -> {}",
                x.name,
                list(dims),
                x.ty(),
                v.ty()
            ),
        );
        v
    }

    /// A reduction of the last dimension broadcast back to `x`'s shape.
    pub fn reduce_last_keep(&mut self, op: &str, x: &Val, init: f64) -> Val {
        let last = x.shape.len() - 1;
        let r = self.reduce(op, x, init, &[last]);
        let dims: Vec<usize> = (0..last).collect();
        self.broadcast(&r, &dims, &x.shape.clone())
    }

    pub fn reshape(&mut self, x: &Val, to: &[u64]) -> Val {
        assert_eq!(
            x.shape.iter().product::<u64>(),
            to.iter().product::<u64>(),
            "reshape changes the element count"
        );
        let v = self.fresh(to.to_vec(), x.dtype);
        self.line(
            &v,
            &format!("stablehlo.reshape {} : ({}) -> {}", x.name, x.ty(), v.ty()),
        );
        v
    }

    pub fn transpose(&mut self, x: &Val, perm: &[usize]) -> Val {
        let to: Vec<u64> = perm.iter().map(|&p| x.shape[p]).collect();
        let v = self.fresh(to, x.dtype);
        self.line(
            &v,
            &format!(
                "stablehlo.transpose {}, dims = [{}] : ({}) -> {}",
                x.name,
                list(perm),
                x.ty(),
                v.ty()
            ),
        );
        v
    }

    /// `iota` along `dim` of `shape`.
    pub fn iota(&mut self, dim: usize, shape: &[u64], dtype: DType) -> Val {
        let v = self.fresh(shape.to_vec(), dtype);
        self.line(&v, &format!("stablehlo.iota dim = {dim} : {}", v.ty()));
        v
    }

    /// `dot_general`: result dims are batch, lhs free, rhs free (StableHLO's
    /// order); the result has the lhs's element type.
    pub fn dot(
        &mut self,
        a: &Val,
        b: &Val,
        batch: (&[usize], &[usize]),
        contract: (&[usize], &[usize]),
    ) -> Val {
        self.dot_as(a, b, batch, contract, a.dtype)
    }

    /// [`Emitter::dot`] with its result in `dtype` (a matmul that
    /// accumulates and writes in another type than its operands').
    pub fn dot_as(
        &mut self,
        a: &Val,
        b: &Val,
        batch: (&[usize], &[usize]),
        contract: (&[usize], &[usize]),
        dtype: DType,
    ) -> Val {
        let mut out: Vec<u64> = batch.0.iter().map(|&d| a.shape[d]).collect();
        out.extend(
            (0..a.shape.len())
                .filter(|d| !batch.0.contains(d) && !contract.0.contains(d))
                .map(|d| a.shape[d]),
        );
        out.extend(
            (0..b.shape.len())
                .filter(|d| !batch.1.contains(d) && !contract.1.contains(d))
                .map(|d| b.shape[d]),
        );
        for (&x, &y) in contract.0.iter().zip(contract.1) {
            assert_eq!(a.shape[x], b.shape[y], "dot: contracted sizes differ");
        }
        let batching = if batch.0.is_empty() {
            String::new()
        } else {
            format!(
                "batching_dims = [{}] x [{}], ",
                list(batch.0),
                list(batch.1)
            )
        };
        let v = self.fresh(out, dtype);
        self.line(
            &v,
            &format!(
                "stablehlo.dot_general {}, {}, {batching}contracting_dims = [{}] x [{}] : ({}, {}) -> {}",
                a.name,
                b.name,
                list(contract.0),
                list(contract.1),
                a.ty(),
                b.ty(),
                v.ty()
            ),
        );
        v
    }

    /// `x[lo:hi]` along `dim` (every other dimension whole).
    pub fn slice(&mut self, x: &Val, dim: usize, lo: u64, hi: u64) -> Val {
        let mut to = x.shape.clone();
        to[dim] = hi - lo;
        let ranges: Vec<String> = x
            .shape
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                if i == dim {
                    format!("{lo}:{hi}")
                } else {
                    format!("0:{n}")
                }
            })
            .collect();
        let v = self.fresh(to, x.dtype);
        self.line(
            &v,
            &format!(
                "stablehlo.slice {} [{}] : ({}) -> {}",
                x.name,
                ranges.join(", "),
                x.ty(),
                v.ty()
            ),
        );
        v
    }

    /// `parts` joined along `dim`.
    pub fn concatenate(&mut self, parts: &[&Val], dim: usize) -> Val {
        let mut to = parts[0].shape.clone();
        to[dim] = parts.iter().map(|p| p.shape[dim]).sum();
        let v = self.fresh(to, parts[0].dtype);
        let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
        let tys: Vec<String> = parts.iter().map(|p| p.ty()).collect();
        self.line(
            &v,
            &format!(
                "stablehlo.concatenate {}, dim = {dim} : ({}) -> {}",
                names.join(", "),
                tys.join(", "),
                v.ty()
            ),
        );
        v
    }

    /// Rows of `table` (`[rows, width]`) picked by `ids` (`[..., 1]` of
    /// integers): an embedding lookup, `[..., width]`.
    pub fn take_rows(&mut self, table: &Val, ids: &Val) -> Val {
        let width = table.shape[1];
        let mut to = ids.shape.clone();
        let last = to.len() - 1;
        to[last] = width;
        let v = self.fresh(to, table.dtype);
        self.line(
            &v,
            &format!(
                "\"stablehlo.gather\"({}, {}) <{{dimension_numbers = #stablehlo.gather<offset_dims = [{last}], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = {last}>, indices_are_sorted = false, slice_sizes = array<i64: 1, {width}>}}> : ({}, {}) -> {}",
                table.name,
                ids.name,
                table.ty(),
                ids.ty(),
                v.ty()
            ),
        );
        v
    }

    /// The slices `table[i]` (`table`: `[n, rest...]`) picked by `ids`
    /// (`[m, 1]` of integers): `[m, rest...]`, as a grouped matmul reads
    /// the weights of the experts its rows are routed to.
    pub fn take_slices(&mut self, table: &Val, ids: &Val) -> Val {
        let rest = &table.shape[1..];
        let mut to = vec![ids.shape[0]];
        to.extend_from_slice(rest);
        let offset: Vec<usize> = (1..=rest.len()).collect();
        let mut sizes = vec![1];
        sizes.extend_from_slice(rest);
        let v = self.fresh(to, table.dtype);
        self.line(
            &v,
            &format!(
                "\"stablehlo.gather\"({}, {}) <{{dimension_numbers = #stablehlo.gather<offset_dims = [{}], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: {}>}}> : ({}, {}) -> {}",
                table.name,
                ids.name,
                list(&offset),
                list(&sizes),
                table.ty(),
                ids.ty(),
                v.ty()
            ),
        );
        v
    }

    /// `base` with `rows` (`[..., width]`) added at row `ids` (`[..., 1]`):
    /// the gradient of [`Emitter::take_rows`].
    pub fn add_rows(&mut self, base: &Val, ids: &Val, rows: &Val) -> Val {
        let last = ids.shape.len() - 1;
        let v = self.fresh(base.shape.clone(), base.dtype);
        self.next += 2;
        let (a, b) = (format!("%s{}", self.next - 1), format!("%s{}", self.next));
        let scalar = ty(&[], base.dtype);
        self.line(
            &v,
            &format!(
                "\"stablehlo.scatter\"({}, {}, {}) <{{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [{last}], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = {last}>, unique_indices = false}}> ({{\n    ^bb0({a}: {scalar}, {b}: {scalar}):\n      %s{n}r = stablehlo.add {a}, {b} : {scalar}\n      stablehlo.return %s{n}r : {scalar}\n    }}) : ({}, {}, {}) -> {}",
                base.name,
                ids.name,
                rows.name,
                base.ty(),
                ids.ty(),
                rows.ty(),
                v.ty(),
                n = self.next
            ),
        );
        v
    }

    /// `base` with `rows` (`[..., width]`) added at the positions `ids`
    /// (`[..., k]`: indices into `base`'s first `k` dimensions; its last
    /// dimension is the row): [`Emitter::add_rows`] into a stack of tables.
    pub fn add_rows_at(&mut self, base: &Val, ids: &Val, rows: &Val) -> Val {
        let last = ids.shape.len() - 1;
        let k = ids.shape[last] as usize;
        let v = self.fresh(base.shape.clone(), base.dtype);
        self.next += 2;
        let (a, b) = (format!("%s{}", self.next - 1), format!("%s{}", self.next));
        let scalar = ty(&[], base.dtype);
        let inserted: Vec<usize> = (0..k).collect();
        self.line(
            &v,
            &format!(
                "\"stablehlo.scatter\"({}, {}, {}) <{{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [{last}], inserted_window_dims = [{ins}], scatter_dims_to_operand_dims = [{ins}], index_vector_dim = {last}>, unique_indices = false}}> ({{\n    ^bb0({a}: {scalar}, {b}: {scalar}):\n      %s{n}r = stablehlo.add {a}, {b} : {scalar}\n      stablehlo.return %s{n}r : {scalar}\n    }}) : ({}, {}, {}) -> {}",
                base.name,
                ids.name,
                rows.name,
                base.ty(),
                ids.ty(),
                rows.ty(),
                v.ty(),
                ins = list(&inserted),
                n = self.next
            ),
        );
        v
    }

    /// `values` through an `optimization_barrier`: the results are the same
    /// values, and whatever computes any of them stays in the program as
    /// long as one result is used (no dead-code removal across it).
    pub fn barrier(&mut self, values: &[&Val]) -> Vec<Val> {
        self.next += 1;
        let group = format!("%v{}", self.next);
        let names: Vec<&str> = values.iter().map(|v| v.name.as_str()).collect();
        let tys: Vec<String> = values.iter().map(|v| v.ty()).collect();
        let _ = writeln!(
            self.body,
            "    {group}:{} = stablehlo.optimization_barrier {} : {}",
            values.len(),
            names.join(", "),
            tys.join(", ")
        );
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Val {
                name: format!("{group}#{i}"),
                shape: v.shape.clone(),
                dtype: v.dtype,
            })
            .collect()
    }

    /// Open a manual computation (JAX's `shard_map`) over every mesh axis
    /// taking `operands` with their in-shardings: the returned region
    /// arguments are each device's blocks, and every op written until
    /// [`Emitter::manual_end`] is per-device code.
    pub fn manual_begin(&mut self, operands: &[(&Val, Vec<&str>)]) -> ManualScope {
        let axes: Vec<String> = self.mesh.iter().map(|(n, _)| n.clone()).collect();
        self.manual_begin_over(&axes, operands)
    }

    /// [`Emitter::manual_begin`] manual over `axes` only: the body is
    /// partitioned over the others (its in-shardings name manual axes only,
    /// its out-shardings may add free ones).
    pub fn manual_begin_over(
        &mut self,
        axes: &[String],
        operands: &[(&Val, Vec<&str>)],
    ) -> ManualScope {
        let start = self.body.len();
        self.next += 1;
        let tag = self.next;
        let args = operands
            .iter()
            .enumerate()
            .map(|(i, (v, dims))| Val {
                name: format!("%m{tag}_{i}"),
                shape: self.local_shape(&v.shape, dims, axes),
                dtype: v.dtype,
            })
            .collect();
        ManualScope {
            // The body is isolated from above: constants are written anew
            // inside, and those written inside stay there.
            consts: std::mem::take(&mut self.consts),
            axes: axes.to_vec(),
            start,
            operands: operands
                .iter()
                .map(|(v, d)| ((*v).clone(), sharding(d)))
                .collect(),
            args,
        }
    }

    /// Close the manual computation `scope` returning the per-device blocks
    /// `results` under their out-shardings: the whole values outside.
    pub fn manual_end(&mut self, scope: ManualScope, results: &[(&Val, Vec<&str>)]) -> Vec<Val> {
        self.consts = scope.consts;
        self.next += 1;
        let group = format!("%v{}", self.next);
        let outs: Vec<Val> = results
            .iter()
            .enumerate()
            .map(|(i, (v, dims))| Val {
                name: format!("{group}#{i}"),
                shape: self.global_shape(&v.shape, dims, &scope.axes),
                dtype: v.dtype,
            })
            .collect();
        let names: Vec<&str> = results.iter().map(|(v, _)| v.name.as_str()).collect();
        let tys: Vec<String> = results.iter().map(|(v, _)| v.ty()).collect();
        let _ = writeln!(
            self.body,
            "      sdy.return {} : {}\n    }} : ({}) -> ({})",
            names.join(", "),
            tys.join(", "),
            scope
                .operands
                .iter()
                .map(|(v, _)| v.ty())
                .collect::<Vec<_>>()
                .join(", "),
            outs.iter().map(|v| v.ty()).collect::<Vec<_>>().join(", ")
        );
        let axes: Vec<String> = scope.axes.iter().map(|n| format!("\"{n}\"")).collect();
        let header = format!(
            "    {group}:{} = sdy.manual_computation({}) in_shardings=[{}] out_shardings=[{}] manual_axes={{{}}} ({}) {{\n",
            outs.len(),
            scope
                .operands
                .iter()
                .map(|(v, _)| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            scope
                .operands
                .iter()
                .map(|(_, s)| format!("<@mesh, {s}>"))
                .collect::<Vec<_>>()
                .join(", "),
            results
                .iter()
                .map(|(_, d)| format!("<@mesh, {}>", sharding(d)))
                .collect::<Vec<_>>()
                .join(", "),
            axes.join(", "),
            scope
                .args
                .iter()
                .map(|a| format!("{}: {}", a.name, a.ty()))
                .collect::<Vec<_>>()
                .join(", "),
        );
        self.body.insert_str(scope.start, &header);
        outs
    }

    /// The device count, the stride of `axis` in global device ids and its
    /// size; `axis` may name adjacent axes (`data,expert`), major first, as
    /// one group over all of them.
    fn axis_group(&self, axis: &str) -> (u64, u64, u64) {
        let sizes: Vec<u64> = self.mesh.iter().map(|(_, s)| *s).collect();
        let at: Vec<usize> = axis
            .split(',')
            .map(|a| {
                self.mesh
                    .iter()
                    .position(|(n, _)| n == a)
                    .expect("a mesh axis")
            })
            .collect();
        assert!(
            at.windows(2).all(|w| w[1] == w[0] + 1),
            "a group over adjacent mesh axes, major first"
        );
        let total: u64 = sizes.iter().product();
        let last = *at.last().expect("an axis");
        let stride: u64 = sizes[last + 1..].iter().product();
        let n: u64 = at.iter().map(|&i| sizes[i]).product();
        (total, stride, n)
    }

    /// Per-device code: send `x` to the device `shift` places further
    /// along mesh axis `axis` (a ring), receive from the one as far behind
    /// (`stablehlo.collective_permute` over global device ids).
    pub fn ring_shift(&mut self, x: &Val, axis: &str, shift: u64) -> Val {
        let (total, stride, n) = self.axis_group(axis);
        let pairs: Vec<String> = (0..total)
            .map(|d| {
                let i = (d / stride) % n;
                let j = (i + shift) % n;
                format!("[{d}, {}]", d - i * stride + j * stride)
            })
            .collect();
        let v = self.fresh(x.shape.clone(), x.dtype);
        self.next += 1;
        let channel = self.next;
        self.line(
            &v,
            &format!(
                "\"stablehlo.collective_permute\"({}) <{{channel_handle = #stablehlo.channel_handle<handle = {channel}, type = 1>, source_target_pairs = dense<[{}]> : tensor<{total}x2xi64>}}> : ({}) -> {}",
                x.name,
                pairs.join(", "),
                x.ty(),
                v.ty()
            ),
        );
        v
    }

    /// Per-device code: the sum of `x` over the devices along mesh axis
    /// `axis`, each keeping its slice of dimension `dim`
    /// (`stablehlo.reduce_scatter` over global device ids).
    pub fn reduce_scatter_over(&mut self, x: &Val, axis: &str, dim: usize) -> Val {
        let (total, stride, n) = self.axis_group(axis);
        let groups: Vec<String> = (0..total)
            .filter(|d| (d / stride) % n == 0)
            .map(|d| {
                let ids: Vec<String> = (0..n).map(|i| (d + i * stride).to_string()).collect();
                format!("[{}]", ids.join(", "))
            })
            .collect();
        let mut to = x.shape.clone();
        to[dim] /= n;
        let v = self.fresh(to, x.dtype);
        self.next += 3;
        let channel = self.next;
        let (a, b) = (
            format!("%s{}", self.next - 1),
            format!("%s{}", self.next - 2),
        );
        let scalar = ty(&[], x.dtype);
        self.line(
            &v,
            &format!(
                "\"stablehlo.reduce_scatter\"({}) <{{channel_handle = #stablehlo.channel_handle<handle = {channel}, type = 1>, replica_groups = dense<[{}]> : tensor<{}x{n}xi64>, scatter_dimension = {dim} : i64, use_global_device_ids}}> ({{\n    ^bb0({a}: {scalar}, {b}: {scalar}):\n      %s{channel}r = stablehlo.add {a}, {b} : {scalar}\n      stablehlo.return %s{channel}r : {scalar}\n    }}) : ({}) -> {}",
                x.name,
                groups.join(", "),
                groups.len(),
                x.ty(),
                v.ty()
            ),
        );
        v
    }

    /// Devices along the mesh axes `axes` (`"a,b"`) that are among `of`.
    fn axis_size(&self, axes: &str, of: &[String]) -> u64 {
        axes.split(',')
            .filter(|a| !a.is_empty() && of.iter().any(|o| o == a))
            .map(|a| {
                self.mesh
                    .iter()
                    .find(|(n, _)| n == a)
                    .map_or(1, |(_, s)| *s)
            })
            .product()
    }

    fn local_shape(&self, shape: &[u64], dims: &[&str], of: &[String]) -> Vec<u64> {
        shape
            .iter()
            .zip(dims)
            .map(|(&n, d)| n / self.axis_size(d, of))
            .collect()
    }

    fn global_shape(&self, shape: &[u64], dims: &[&str], of: &[String]) -> Vec<u64> {
        shape
            .iter()
            .zip(dims)
            .map(|(&n, d)| n * self.axis_size(d, of))
            .collect()
    }

    /// `x` constrained to a sharding (`sdy.sharding_constraint`).
    pub fn constrain(&mut self, x: &Val, dims: &[&str]) -> Val {
        let v = self.fresh(x.shape.clone(), x.dtype);
        self.line(
            &v,
            &format!(
                "sdy.sharding_constraint {} <@mesh, {}> : {}",
                x.name,
                sharding(dims),
                x.ty()
            ),
        );
        v
    }

    /// A module's first lines, `module @name {` and its mesh, in a string
    /// with room for a body of `body_len` bytes.
    fn module_header(&self, module: &str, body_len: usize) -> String {
        let mut out = String::with_capacity(body_len + 4096);
        let _ = writeln!(out, "module @{module} {{");
        let axes: Vec<String> = self
            .mesh
            .iter()
            .map(|(n, s)| format!("\"{n}\"={s}"))
            .collect();
        let _ = writeln!(out, "  sdy.mesh @mesh = <[{}]>", axes.join(", "));
        out
    }

    /// The module text: `@main` returning `results` with their shardings.
    pub fn finish(mut self, module: &str, results: &[(Val, Vec<&str>)]) -> String {
        if let Some(axis) = self.manual.take() {
            return self.finish_manual(module, results, &axis);
        }
        let mut out = self.module_header(module, self.body.len());
        let args: Vec<String> = self
            .args
            .iter()
            .map(|(v, sh)| {
                format!(
                    "{}: {} {{sdy.sharding = #sdy.sharding<@mesh, {sh}>}}",
                    v.name,
                    v.ty()
                )
            })
            .collect();
        let rtys: Vec<String> = results
            .iter()
            .map(|(v, dims)| {
                format!(
                    "{} {{sdy.sharding = #sdy.sharding<@mesh, {}>}}",
                    v.ty(),
                    sharding(dims)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  func.func @main({}) -> ({}) {{",
            args.join(", "),
            rtys.join(", ")
        );
        out.push_str(&self.body);
        let names: Vec<&str> = results.iter().map(|(v, _)| v.name.as_str()).collect();
        let tys: Vec<String> = results.iter().map(|(v, _)| v.ty()).collect();
        let _ = writeln!(
            out,
            "    return {} : {}\n  }}\n}}",
            names.join(", "),
            tys.join(", ")
        );
        out
    }

    /// [`Emitter::finish`] of a body manual over `axis`: arguments and
    /// results split along their first dimension (see
    /// [`Emitter::manual_over`]).
    fn finish_manual(self, module: &str, results: &[(Val, Vec<&str>)], axis: &str) -> String {
        let n = self.mesh_axis_size(axis).expect("manual axis");
        let global = |shape: &[u64], dtype: DType| {
            let mut g = shape.to_vec();
            g[0] *= n;
            ty(&g, dtype)
        };
        let arg_ty = |v: &Val| {
            if v.shape.is_empty() {
                v.ty()
            } else {
                global(&v.shape, v.dtype)
            }
        };
        let split = |dims: &[&str]| {
            let mut d: Vec<String> = dims.iter().map(|s| s.to_string()).collect();
            d[0] = if d[0].is_empty() {
                axis.to_string()
            } else {
                format!("{axis},{}", d[0])
            };
            let refs: Vec<&str> = d.iter().map(String::as_str).collect();
            sharding(&refs)
        };
        let mut body = self.body.clone();
        // Scalars (a loss) come back as `[1]` per group.
        let mut rets: Vec<(String, Vec<u64>, DType, String)> = Vec::new();
        let mut k = 0;
        for (v, dims) in results {
            if v.shape.is_empty() {
                k += 1;
                let name = format!("%r{k}");
                let _ = writeln!(
                    body,
                    "    {name} = stablehlo.reshape {} : ({}) -> {}",
                    v.name,
                    v.ty(),
                    ty(&[1], v.dtype)
                );
                rets.push((name, vec![1], v.dtype, split(&[""])));
            } else {
                rets.push((v.name.clone(), v.shape.clone(), v.dtype, split(dims)));
            }
        }
        let mut out = self.module_header(module, body.len());
        let arg_shardings: Vec<String> = self
            .args
            .iter()
            .map(|(v, sh)| {
                let dims = parse_dims(sh);
                let refs: Vec<&str> = dims.iter().map(String::as_str).collect();
                if v.shape.is_empty() {
                    sh.clone()
                } else {
                    split(&refs)
                }
            })
            .collect();
        let func_args: Vec<String> = self
            .args
            .iter()
            .zip(&arg_shardings)
            .enumerate()
            .map(|(i, ((v, _), sh))| {
                format!(
                    "%g{i}: {} {{sdy.sharding = #sdy.sharding<@mesh, {sh}>}}",
                    arg_ty(v)
                )
            })
            .collect();
        let gtys: Vec<String> = self.args.iter().map(|(v, _)| arg_ty(v)).collect();
        let rtys: Vec<String> = rets.iter().map(|(_, s, d, _)| global(s, *d)).collect();
        let rsh: Vec<String> = rets
            .iter()
            .map(|(_, s, d, sh)| {
                format!(
                    "{} {{sdy.sharding = #sdy.sharding<@mesh, {sh}>}}",
                    global(s, *d)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  func.func @main({}) -> ({}) {{",
            func_args.join(", "),
            rsh.join(", ")
        );
        let operands: Vec<String> = (0..self.args.len()).map(|i| format!("%g{i}")).collect();
        let ins: Vec<String> = arg_shardings
            .iter()
            .map(|s| format!("<@mesh, {s}>"))
            .collect();
        let outs: Vec<String> = rets.iter().map(|r| format!("<@mesh, {}>", r.3)).collect();
        let locals: Vec<String> = self
            .args
            .iter()
            .map(|(v, _)| format!("{}: {}", v.name, v.ty()))
            .collect();
        let _ = writeln!(
            out,
            "    %mc:{} = sdy.manual_computation({}) in_shardings=[{}] out_shardings=[{}] manual_axes={{\"{axis}\"}} ({}) {{",
            rets.len(),
            operands.join(", "),
            ins.join(", "),
            outs.join(", "),
            locals.join(", ")
        );
        out.push_str(&body);
        let names: Vec<&str> = rets.iter().map(|r| r.0.as_str()).collect();
        let ltys: Vec<String> = rets.iter().map(|(_, s, d, _)| ty(s, *d)).collect();
        let _ = writeln!(
            out,
            "    sdy.return {} : {}\n    }} : ({}) -> ({})",
            names.join(", "),
            ltys.join(", "),
            gtys.join(", "),
            rtys.join(", ")
        );
        let mcs: Vec<String> = (0..rets.len()).map(|i| format!("%mc#{i}")).collect();
        let _ = writeln!(
            out,
            "    return {} : {}\n  }}\n}}",
            mcs.join(", "),
            rtys.join(", ")
        );
        out
    }
}

/// The dims of a sharding written by [`sharding`], as [`sharding`] takes them.
fn parse_dims(sh: &str) -> Vec<String> {
    let inner = sh.trim().trim_start_matches('[').trim_end_matches(']');
    let mut dims = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    for ch in inner.chars() {
        match ch {
            '{' => {
                depth += 1;
                cur.clear();
            }
            '}' => {
                depth -= 1;
                dims.push(cur.replace(['"', ' '], ""));
            }
            _ if depth > 0 => cur.push(ch),
            _ => {}
        }
    }
    dims
}
