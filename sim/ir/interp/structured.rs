//! Evaluation of the structured ops real JAX programs use (gather, scatter, sort,
//! top_k, reduce_window, rng_bit_generator, bitcast_convert, convolution, the
//! shifts and bit counts), each mapped to one [`crate::tensor`] kernel.
//!
//! Regions (the scatter update, the sort comparator, the reduce_window body) run
//! on rank-0 tensors, one call per kernel request, the way reduce bodies do; the
//! first error a region raises is reported as it is, not as a kernel error.

use crate::tensor::{self, Scalar as TScalar, Tensor, TensorError};

use super::super::{Func, Module, Op, OpKind, Region};
use super::eval::{run_region, Env};
use super::InterpError;

/// A region called on scalars, remembering the first interpreter error it raised.
struct ScalarRegion<'a> {
    module: &'a Module,
    func: &'a Func,
    region: &'a Region,
    env: &'a mut Env,
    failure: Option<InterpError>,
}

impl ScalarRegion<'_> {
    fn call(&mut self, args: &[TScalar]) -> Result<Vec<Tensor>, TensorError> {
        let args = args.iter().map(|&s| Tensor::scalar(s)).collect();
        run_region(self.module, self.func, self.region, args, self.env).map_err(|e| {
            let msg = e.to_string();
            self.failure.get_or_insert(e);
            TensorError::invalid("region", msg)
        })
    }

    fn scalars(&mut self, args: &[TScalar]) -> Result<Vec<TScalar>, TensorError> {
        self.call(args)?.iter().map(Tensor::to_scalar).collect()
    }

    /// The kernel's result, or the region's own error when it raised one.
    fn finish<T>(self, op: &Op, r: Result<T, TensorError>) -> Result<T, InterpError> {
        match self.failure {
            Some(e) => Err(e),
            None => r.map_err(|e| InterpError::op(op.loc, op.kind.name(), e)),
        }
    }
}

fn usizes(v: &[u64]) -> Vec<usize> {
    v.iter().map(|&d| d as usize).collect()
}

fn nonneg(op: &Op, what: &str, v: &[i64]) -> Result<Vec<u64>, InterpError> {
    v.iter()
        .map(|&x| u64::try_from(x))
        .collect::<Result<_, _>>()
        .map_err(|_| {
            InterpError::op(
                op.loc,
                op.kind.name(),
                format!("{what} {v:?} must not be negative"),
            )
        })
}

/// Evaluate one of the structured ops.
pub(super) fn eval_structured(
    module: &Module,
    func: &Func,
    op: &Op,
    env: &mut Env,
) -> Result<Vec<Tensor>, InterpError> {
    let name = op.kind.name();
    let err = |e: TensorError| InterpError::op(op.loc, name, e);
    let operands = env.operands(op)?;
    let result_ty = |i: usize| {
        op.results
            .get(i)
            .map(|&r| &func.value(r).ty)
            .ok_or_else(|| InterpError::op(op.loc, name, format!("no result {i}")))
    };
    let region = || {
        op.regions
            .first()
            .ok_or_else(|| InterpError::op(op.loc, name, "has no region"))
    };
    let arity = |n: usize| {
        if operands.len() < n {
            Err(InterpError::op(
                op.loc,
                name,
                format!("needs {n} operands, found {}", operands.len()),
            ))
        } else {
            Ok(())
        }
    };
    match &op.kind {
        OpKind::Gather {
            dims, slice_sizes, ..
        } => {
            arity(2)?;
            let p = tensor::GatherParams {
                offset_dims: usizes(&dims.offset_dims),
                collapsed_slice_dims: usizes(&dims.collapsed_slice_dims),
                operand_batching_dims: usizes(&dims.operand_batching_dims),
                start_indices_batching_dims: usizes(&dims.start_indices_batching_dims),
                start_index_map: usizes(&dims.start_index_map),
                index_vector_dim: dims.index_vector_dim as usize,
                slice_sizes: slice_sizes.clone(),
            };
            tensor::gather(&operands[0], &operands[1], &p)
                .map(|t| vec![t])
                .map_err(err)
        }
        OpKind::Scatter { dims, .. } => {
            if operands.len() < 3 || operands.len() % 2 == 0 {
                return Err(InterpError::op(
                    op.loc,
                    name,
                    "needs N inputs, the indices and N updates",
                ));
            }
            let n = (operands.len() - 1) / 2;
            let p = tensor::ScatterParams {
                update_window_dims: usizes(&dims.update_window_dims),
                inserted_window_dims: usizes(&dims.inserted_window_dims),
                input_batching_dims: usizes(&dims.input_batching_dims),
                scatter_indices_batching_dims: usizes(&dims.scatter_indices_batching_dims),
                scatter_dims_to_operand_dims: usizes(&dims.scatter_dims_to_operand_dims),
                index_vector_dim: dims.index_vector_dim as usize,
            };
            let mut r = ScalarRegion {
                module,
                func,
                region: region()?,
                env,
                failure: None,
            };
            let out = tensor::scatter(
                &operands[..n],
                &operands[n],
                &operands[n + 1..],
                &p,
                &mut |cur: &[TScalar], upd: &[TScalar]| r.scalars(&[cur, upd].concat()),
            );
            r.finish(op, out)
        }
        OpKind::Sort {
            dimension,
            is_stable,
        } => {
            let mut r = ScalarRegion {
                module,
                func,
                region: region()?,
                env,
                failure: None,
            };
            // The comparator takes (lhs0, rhs0, lhs1, rhs1, ...).
            let mut less = |a: &[TScalar], b: &[TScalar]| -> Result<bool, TensorError> {
                let args: Vec<TScalar> = a.iter().zip(b).flat_map(|(&x, &y)| [x, y]).collect();
                let out = r.call(&args)?;
                let first = out.first().ok_or_else(|| {
                    TensorError::invalid("sort", "the comparator returned nothing")
                })?;
                Ok(first.to_scalar()?.to_i128() != Some(0))
            };
            let out = tensor::sort(&operands, *dimension as usize, *is_stable, &mut less);
            r.finish(op, out)
        }
        OpKind::TopK { k, .. } => {
            arity(1)?;
            tensor::top_k(&operands[0], *k)
                .map(|(v, i)| vec![v, i])
                .map_err(err)
        }
        OpKind::ReduceWindow { window } => {
            if operands.is_empty() || operands.len() % 2 != 0 {
                return Err(InterpError::op(
                    op.loc,
                    name,
                    "needs N inputs and N init values",
                ));
            }
            let n = operands.len() / 2;
            let inits = operands[n..]
                .iter()
                .map(Tensor::to_scalar)
                .collect::<Result<Vec<_>, _>>()
                .map_err(err)?;
            let p = tensor::WindowParams {
                window_dimensions: window.dimensions.clone(),
                window_strides: window.strides_or_default(),
                base_dilations: window.base_dilations_or_default(),
                window_dilations: window.window_dilations_or_default(),
                padding: window.padding_or_default(),
            };
            let mut r = ScalarRegion {
                module,
                func,
                region: region()?,
                env,
                failure: None,
            };
            let out = tensor::reduce_window(
                &operands[..n],
                &inits,
                &p,
                &mut |acc: &[TScalar], x: &[TScalar]| r.scalars(&[acc, x].concat()),
            );
            r.finish(op, out)
        }
        OpKind::SelectAndScatter { window } => {
            arity(3)?;
            let [select, scatter] = &op.regions[..] else {
                return Err(InterpError::op(
                    op.loc,
                    name,
                    "needs two regions (select, scatter)",
                ));
            };
            let init = operands[2].to_scalar().map_err(err)?;
            let mut r = ScalarRegion {
                module,
                func,
                region: select,
                env,
                failure: None,
            };
            let out = super::select_scatter::select_and_scatter(
                &operands[0],
                &operands[1],
                init,
                window,
                &mut |which: usize, a: TScalar, b: TScalar| {
                    r.region = if which == 0 { select } else { scatter };
                    r.scalars(&[a, b])?
                        .first()
                        .copied()
                        .ok_or_else(|| TensorError::invalid("region", "returns nothing"))
                },
            );
            r.finish(op, out.map(|t| vec![t]))
        }
        OpKind::RngBitGenerator { algorithm } => {
            arity(1)?;
            use super::super::attrs::RngAlgorithm as A;
            let alg = match algorithm {
                A::Default => tensor::RngAlgorithm::Default,
                A::ThreeFry => tensor::RngAlgorithm::ThreeFry,
                A::Philox => tensor::RngAlgorithm::Philox,
            };
            let ty = result_ty(1)?;
            tensor::rng_bit_generator(&operands[0], alg, &ty.shape, ty.dtype)
                .map(|(s, b)| vec![s, b])
                .map_err(err)
        }
        OpKind::BitcastConvert => {
            arity(1)?;
            let ty = result_ty(0)?;
            let out = tensor::bitcast_convert(&operands[0], ty.dtype).map_err(err)?;
            if out.shape() != ty.shape.as_slice() {
                return Err(InterpError::op(
                    op.loc,
                    name,
                    format!(
                        "gives shape {:?}, the result type says {:?}",
                        out.shape(),
                        ty.shape
                    ),
                ));
            }
            Ok(vec![out])
        }
        OpKind::Convolution {
            dims,
            window,
            feature_group_count,
            batch_group_count,
            ..
        } => {
            arity(2)?;
            let s = dims.input_spatial.len();
            let p = tensor::ConvParams {
                input_batch_dim: dims.input_batch as usize,
                input_feature_dim: dims.input_feature as usize,
                input_spatial_dims: usizes(&dims.input_spatial),
                kernel_input_feature_dim: dims.kernel_input_feature as usize,
                kernel_output_feature_dim: dims.kernel_output_feature as usize,
                kernel_spatial_dims: usizes(&dims.kernel_spatial),
                output_batch_dim: dims.output_batch as usize,
                output_feature_dim: dims.output_feature as usize,
                output_spatial_dims: usizes(&dims.output_spatial),
                window_strides: nonneg(op, "window strides", &window.strides(s))?,
                padding: window.padding(s),
                lhs_dilation: nonneg(op, "lhs_dilation", &window.lhs_dilation(s))?,
                rhs_dilation: nonneg(op, "rhs_dilation", &window.rhs_dilation(s))?,
                window_reversal: window.reversal(s),
                feature_group_count: *feature_group_count,
                batch_group_count: *batch_group_count,
            };
            let ty = result_ty(0)?;
            tensor::convolution(&operands[0], &operands[1], &p, ty.dtype)
                .map(|t| vec![t])
                .map_err(err)
        }
        _ => Err(InterpError::op(op.loc, name, "is not a structured op")),
    }
}
