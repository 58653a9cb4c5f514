//! Type inference for the structured ops of real programs (gather, scatter,
//! sort, top_k, reduce_window, convolution, rng, bitcast, control flow), with
//! the StableHLO spec's constraints as located errors.

use crate::base::{DType, TensorType};

use super::attrs::{
    ConvDims, ConvWindow, GatherDims, ScatterDims, WindowAttrs, KNOWN_CUSTOM_CALLS,
};
use super::ops::OpKind;

type Inferred = Result<Option<Vec<TensorType>>, String>;

fn count(t: &[&TensorType], k: usize) -> Result<(), String> {
    if t.len() != k {
        return Err(format!("takes {k} operand(s), found {}", t.len()));
    }
    Ok(())
}

fn in_range(d: u64, rank: usize, what: &str) -> Result<usize, String> {
    usize::try_from(d)
        .ok()
        .filter(|&i| i < rank)
        .ok_or_else(|| format!("{what} {d} is out of range for rank {rank}"))
}

fn distinct(dims: &[u64], rank: usize, what: &str) -> Result<(), String> {
    let mut seen = vec![false; rank];
    for &d in dims {
        let i = in_range(d, rank, what)?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(format!("{what} {d} appears twice"));
        }
    }
    Ok(())
}

fn integer_indices(t: &TensorType, what: &str) -> Result<(), String> {
    if t.dtype.is_float() || t.dtype == DType::I1 {
        return Err(format!("{what} must be integers, found {t}"));
    }
    Ok(())
}

/// The batch shape of `indices` (every dim but `index_vector_dim`) and the
/// index vector length.
fn index_batch(indices: &TensorType, index_vector_dim: u64) -> Result<(Vec<u64>, u64), String> {
    let r = indices.rank() as u64;
    if index_vector_dim > r {
        return Err(format!(
            "index_vector_dim {index_vector_dim} is out of range for indices {indices}"
        ));
    }
    if index_vector_dim == r {
        return Ok((indices.shape.clone(), 1));
    }
    let mut batch = indices.shape.clone();
    let len = batch.remove(index_vector_dim as usize);
    Ok((batch, len))
}

/// Result type of `stablehlo.gather`.
pub fn gather_type(
    operand: &TensorType,
    indices: &TensorType,
    d: &GatherDims,
    slice_sizes: &[u64],
) -> Result<TensorType, String> {
    integer_indices(indices, "start indices")?;
    let r = operand.rank();
    if slice_sizes.len() != r {
        return Err(format!(
            "slice_sizes has {} entries for operand rank {r}",
            slice_sizes.len()
        ));
    }
    for (i, (&s, &n)) in slice_sizes.iter().zip(&operand.shape).enumerate() {
        if s > n {
            return Err(format!("slice size {s} of dim {i} exceeds its size {n}"));
        }
    }
    let mut dropped: Vec<u64> = d.collapsed_slice_dims.clone();
    dropped.extend(&d.operand_batching_dims);
    distinct(&dropped, r, "collapsed or batching operand dim")?;
    for &c in &dropped {
        if slice_sizes[c as usize] > 1 {
            return Err(format!(
                "collapsed or batching dim {c} must have slice size 0 or 1, found {}",
                slice_sizes[c as usize]
            ));
        }
    }
    let (batch, vec_len) = index_batch(indices, d.index_vector_dim)?;
    if d.start_index_map.len() as u64 != vec_len {
        return Err(format!(
            "start_index_map has {} entries but the index vector has {vec_len}",
            d.start_index_map.len()
        ));
    }
    distinct(&d.start_index_map, r, "start_index_map entry")?;
    if d.operand_batching_dims.len() != d.start_indices_batching_dims.len() {
        return Err("operand and start-indices batching dims differ in number".into());
    }
    let ir = indices.rank();
    distinct(
        &d.start_indices_batching_dims,
        ir,
        "start-indices batching dim",
    )?;
    if d.start_indices_batching_dims.contains(&d.index_vector_dim) {
        return Err("index_vector_dim cannot be a batching dim".into());
    }
    for (&o, &s) in d
        .operand_batching_dims
        .iter()
        .zip(&d.start_indices_batching_dims)
    {
        if operand.shape[o as usize] != indices.shape[s as usize] {
            return Err(format!(
                "operand batching dim {o} and indices batching dim {s} differ in size"
            ));
        }
    }
    let offsets: Vec<u64> = (0..r)
        .filter(|i| !dropped.contains(&(*i as u64)))
        .map(|i| slice_sizes[i])
        .collect();
    if d.offset_dims.len() != offsets.len() {
        return Err(format!(
            "offset_dims has {} entries, the slice keeps {} dims",
            d.offset_dims.len(),
            offsets.len()
        ));
    }
    let rank = batch.len() + offsets.len();
    distinct(&d.offset_dims, rank, "offset dim")?;
    if d.offset_dims.windows(2).any(|w| w[0] >= w[1]) {
        return Err("offset_dims must be sorted".into());
    }
    let (mut b, mut o) = (batch.into_iter(), offsets.into_iter());
    let shape = (0..rank as u64)
        .map(|i| {
            if d.offset_dims.contains(&i) {
                o.next()
            } else {
                b.next()
            }
        })
        .collect::<Option<Vec<u64>>>()
        .ok_or("inconsistent gather dims")?;
    Ok(TensorType::new(shape, operand.dtype))
}

/// Checks of `stablehlo.scatter` (N inputs, indices, N updates); the results
/// have the inputs' types.
pub fn scatter_types(t: &[&TensorType], d: &ScatterDims) -> Inferred {
    if t.len() < 3 || t.len() % 2 == 0 {
        return Err(format!(
            "needs N inputs, the indices and N updates, found {} operands",
            t.len()
        ));
    }
    let n = (t.len() - 1) / 2;
    let (inputs, indices, updates) = (&t[..n], t[n], &t[n + 1..]);
    integer_indices(indices, "scatter indices")?;
    let r = inputs[0].rank();
    for x in inputs {
        if x.shape != inputs[0].shape {
            return Err(format!("inputs {} and {} differ in shape", inputs[0], x));
        }
    }
    let mut dropped: Vec<u64> = d.inserted_window_dims.clone();
    dropped.extend(&d.input_batching_dims);
    distinct(&dropped, r, "inserted or batching input dim")?;
    let (batch, vec_len) = index_batch(indices, d.index_vector_dim)?;
    if d.scatter_dims_to_operand_dims.len() as u64 != vec_len {
        return Err(format!(
            "scatter_dims_to_operand_dims has {} entries but the index vector has {vec_len}",
            d.scatter_dims_to_operand_dims.len()
        ));
    }
    distinct(
        &d.scatter_dims_to_operand_dims,
        r,
        "scatter_dims_to_operand_dims entry",
    )?;
    if d.input_batching_dims.len() != d.scatter_indices_batching_dims.len() {
        return Err("input and indices batching dims differ in number".into());
    }
    let window_rank = r - dropped.len();
    if d.update_window_dims.len() != window_rank {
        return Err(format!(
            "update_window_dims has {} entries, the window has rank {window_rank}",
            d.update_window_dims.len()
        ));
    }
    for (i, u) in updates.iter().enumerate() {
        if u.rank() != batch.len() + window_rank {
            return Err(format!(
                "update #{i} {u} must have rank {}",
                batch.len() + window_rank
            ));
        }
        if u.dtype != inputs[i].dtype {
            return Err(format!(
                "update #{i} {u} does not match input {}",
                inputs[i]
            ));
        }
        distinct(&d.update_window_dims, u.rank(), "update window dim")?;
        let scatter_dims: Vec<u64> = (0..u.rank() as u64)
            .filter(|x| !d.update_window_dims.contains(x))
            .map(|x| u.shape[x as usize])
            .collect();
        if scatter_dims != batch {
            return Err(format!(
                "update #{i} {u}: its scatter dims {scatter_dims:?} must equal the indices' batch dims {batch:?}"
            ));
        }
        let window_dims: Vec<u64> = (0..r as u64).filter(|x| !dropped.contains(x)).collect();
        for (&w, &od) in d.update_window_dims.iter().zip(&window_dims) {
            if u.shape[w as usize] > inputs[0].shape[od as usize] {
                return Err(format!(
                    "update #{i} window dim {w} is larger than input dim {od}"
                ));
            }
        }
    }
    Ok(Some(inputs.iter().map(|x| (*x).clone()).collect()))
}

/// Result type of `stablehlo.reduce_window` for each input.
pub fn reduce_window_types(t: &[&TensorType], w: &WindowAttrs) -> Inferred {
    if t.is_empty() || t.len() % 2 != 0 {
        return Err(format!(
            "needs N inputs and N init values, found {} operands",
            t.len()
        ));
    }
    let n = t.len() / 2;
    let r = t[0].rank();
    let lens = [
        ("window_dimensions", Some(w.dimensions.len())),
        ("window_strides", w.strides.as_ref().map(Vec::len)),
        ("base_dilations", w.base_dilations.as_ref().map(Vec::len)),
        (
            "window_dilations",
            w.window_dilations.as_ref().map(Vec::len),
        ),
        ("padding", w.padding.as_ref().map(Vec::len)),
    ];
    for (name, len) in lens {
        if let Some(l) = len.filter(|&l| l != r) {
            return Err(format!("{name} has {l} entries for rank {r}"));
        }
    }
    let (strides, base, wdil, pad) = (
        w.strides_or_default(),
        w.base_dilations_or_default(),
        w.window_dilations_or_default(),
        w.padding_or_default(),
    );
    let mut shape = Vec::with_capacity(r);
    for i in 0..r {
        if w.dimensions[i] == 0 || strides[i] == 0 || base[i] == 0 || wdil[i] == 0 {
            return Err(format!(
                "dim {i}: window sizes, strides and dilations must be positive"
            ));
        }
        let d = i128::from(t[0].shape[i]);
        let dilated = if d == 0 {
            0
        } else {
            (d - 1) * i128::from(base[i]) + 1
        };
        let padded = dilated + i128::from(pad[i].0) + i128::from(pad[i].1);
        let window = (i128::from(w.dimensions[i]) - 1) * i128::from(wdil[i]) + 1;
        let size = if padded < window {
            0
        } else {
            (padded - window) / i128::from(strides[i]) + 1
        };
        shape.push(
            u64::try_from(size)
                .map_err(|_| format!("dim {i}: window output size {size} is out of range"))?,
        );
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if t[i].shape != t[0].shape {
            return Err(format!("inputs {} and {} differ in shape", t[0], t[i]));
        }
        let init = t[n + i];
        if init.rank() != 0 || init.dtype != t[i].dtype {
            return Err(format!(
                "init value {init} must be a scalar of {}",
                t[i].dtype
            ));
        }
        out.push(TensorType::new(shape.clone(), t[i].dtype));
    }
    Ok(Some(out))
}

/// Result type of `stablehlo.convolution` (element type from the text).
pub fn convolution_type(
    lhs: &TensorType,
    rhs: &TensorType,
    d: &ConvDims,
    w: &ConvWindow,
    feature_groups: u64,
    batch_groups: u64,
    dtype: DType,
) -> Result<TensorType, String> {
    let r = lhs.rank();
    let s = d.input_spatial.len();
    if r < 2 || rhs.rank() != r || s + 2 != r {
        return Err(format!(
            "input {lhs} and kernel {rhs} must have rank 2 + {s}"
        ));
    }
    let mut ins = vec![d.input_batch, d.input_feature];
    ins.extend(&d.input_spatial);
    distinct(&ins, r, "input dim")?;
    let mut ks = vec![d.kernel_input_feature, d.kernel_output_feature];
    ks.extend(&d.kernel_spatial);
    distinct(&ks, r, "kernel dim")?;
    let mut outs = vec![d.output_batch, d.output_feature];
    outs.extend(&d.output_spatial);
    distinct(&outs, r, "output dim")?;
    if d.kernel_spatial.len() != s || d.output_spatial.len() != s {
        return Err("input, kernel and output need the same number of spatial dims".into());
    }
    if feature_groups == 0 || batch_groups == 0 || (feature_groups > 1 && batch_groups > 1) {
        return Err(format!(
            "feature_group_count {feature_groups} and batch_group_count {batch_groups}: both positive, at most one above 1"
        ));
    }
    let in_f = lhs.shape[d.input_feature as usize];
    let k_in = rhs.shape[d.kernel_input_feature as usize];
    let k_out = rhs.shape[d.kernel_output_feature as usize];
    let batch = lhs.shape[d.input_batch as usize];
    if in_f % feature_groups != 0 || in_f / feature_groups != k_in {
        return Err(format!(
            "input features {in_f} / feature_group_count {feature_groups} must equal the kernel's input features {k_in}"
        ));
    }
    if k_out % feature_groups != 0 || k_out % batch_groups != 0 || batch % batch_groups != 0 {
        return Err(format!(
            "kernel output features {k_out} and batch {batch} must divide by the group counts"
        ));
    }
    let check_len = |v: usize, what: &str| -> Result<(), String> {
        if v != s {
            return Err(format!(
                "window {what} has {v} entries for {s} spatial dims"
            ));
        }
        Ok(())
    };
    let (stride, pad, ld, rd) = (
        w.strides(s),
        w.padding(s),
        w.lhs_dilation(s),
        w.rhs_dilation(s),
    );
    check_len(stride.len(), "stride")?;
    check_len(pad.len(), "pad")?;
    check_len(ld.len(), "lhs_dilate")?;
    check_len(rd.len(), "rhs_dilate")?;
    check_len(w.reversal(s).len(), "reverse")?;
    let mut shape = vec![0u64; r];
    shape[d.output_batch as usize] = batch / batch_groups;
    shape[d.output_feature as usize] = k_out;
    for i in 0..s {
        if stride[i] < 1 || ld[i] < 1 || rd[i] < 1 {
            return Err(format!(
                "spatial dim {i}: strides and dilations must be positive"
            ));
        }
        let x = i128::from(lhs.shape[d.input_spatial[i] as usize]);
        let k = i128::from(rhs.shape[d.kernel_spatial[i] as usize]);
        let dilated_in = if x == 0 {
            0
        } else {
            (x - 1) * i128::from(ld[i]) + 1
        };
        let padded = dilated_in + i128::from(pad[i].0) + i128::from(pad[i].1);
        let dilated_k = if k == 0 {
            0
        } else {
            (k - 1) * i128::from(rd[i]) + 1
        };
        let size = if padded < dilated_k {
            0
        } else {
            (padded - dilated_k) / i128::from(stride[i]) + 1
        };
        shape[d.output_spatial[i] as usize] = u64::try_from(size)
            .map_err(|_| format!("spatial dim {i}: size {size} out of range"))?;
    }
    Ok(TensorType::new(shape, dtype))
}

/// Infer (or check) the result types of the structured ops; `None` for the
/// other kinds.
pub fn infer_structured(
    kind: &OpKind,
    t: &[&TensorType],
    result_types: &[&TensorType],
) -> Option<Inferred> {
    Some(match kind {
        OpKind::While | OpKind::OptimizationBarrier => {
            Ok(Some(t.iter().map(|x| (*x).clone()).collect()))
        }
        OpKind::Case | OpKind::If => (|| {
            count(t, 1)?;
            let want = if matches!(kind, OpKind::Case) {
                DType::I32
            } else {
                DType::I1
            };
            if t[0].rank() != 0 || t[0].dtype != want {
                return Err(format!("selector must be a tensor<{want}>, found {}", t[0]));
            }
            Ok(None)
        })(),
        OpKind::Gather {
            dims, slice_sizes, ..
        } => (|| {
            count(t, 2)?;
            gather_type(t[0], t[1], dims, slice_sizes).map(|x| Some(vec![x]))
        })(),
        OpKind::Scatter { dims, .. } => scatter_types(t, dims),
        OpKind::Sort { dimension, .. } => (|| {
            let first = t.first().ok_or("needs at least one operand")?;
            in_range(*dimension, first.rank(), "sort dimension")?;
            for x in t {
                if x.shape != first.shape {
                    return Err(format!("operands {first} and {x} differ in shape"));
                }
            }
            Ok(Some(t.iter().map(|x| (*x).clone()).collect()))
        })(),
        OpKind::TopK { k, .. } => (|| {
            count(t, 1)?;
            let x = t[0];
            let last = *x.shape.last().ok_or("needs an operand of rank 1 or more")?;
            if *k > last {
                return Err(format!("k = {k} exceeds the last dim of {x}"));
            }
            let mut shape = x.shape.clone();
            *shape.last_mut().unwrap_or(&mut 0) = *k;
            Ok(Some(vec![
                TensorType::new(shape.clone(), x.dtype),
                TensorType::new(shape, DType::I32),
            ]))
        })(),
        OpKind::ReduceWindow { window } => reduce_window_types(t, window),
        OpKind::SelectAndScatter { window } => (|| {
            count(t, 3)?;
            if t[2].rank() != 0 || t[2].dtype != t[0].dtype {
                return Err(format!(
                    "init must be a scalar of {}, found {}",
                    t[0].dtype, t[2]
                ));
            }
            // The source holds one value per operand window.
            let windows = reduce_window_types(&[t[0], t[2]], window)?
                .and_then(|v| v.into_iter().next())
                .ok_or("no window shape")?;
            if t[1].shape != windows.shape || t[1].dtype != t[0].dtype {
                return Err(format!(
                    "source has type {}, expected one value per window: {}",
                    t[1],
                    TensorType::new(windows.shape, t[0].dtype)
                ));
            }
            Ok(Some(vec![t[0].clone()]))
        })(),
        OpKind::RngBitGenerator { .. } => (|| {
            count(t, 1)?;
            if t[0].rank() != 1 || t[0].dtype.is_float() {
                return Err(format!(
                    "state must be a 1-D integer tensor, found {}",
                    t[0]
                ));
            }
            if result_types.len() != 2 || result_types[0] != t[0] {
                return Err(format!("results must be (state {}, bits)", t[0]));
            }
            if result_types[1].dtype.is_float() || result_types[1].dtype == DType::I1 {
                return Err(format!("bits must be integers, found {}", result_types[1]));
            }
            Ok(None)
        })(),
        OpKind::BitcastConvert => (|| {
            count(t, 1)?;
            let Some(r) = result_types.first() else {
                return Ok(None);
            };
            let (a, b) = (t[0].dtype.size_bytes(), r.dtype.size_bytes());
            let ok = if a == b {
                r.shape == t[0].shape
            } else if a > b {
                // Wider to narrower: a trailing dim of a/b elements appears.
                r.shape.len() == t[0].shape.len() + 1
                    && r.shape[..t[0].rank()] == t[0].shape[..]
                    && r.shape.last() == Some(&(a / b))
            } else {
                t[0].shape.len() == r.shape.len() + 1
                    && t[0].shape[..r.rank()] == r.shape[..]
                    && t[0].shape.last() == Some(&(b / a))
            };
            if !ok {
                return Err(format!("cannot bitcast {} to {r}", t[0]));
            }
            Ok(None)
        })(),
        OpKind::Convolution {
            dims,
            window,
            feature_group_count,
            batch_group_count,
            ..
        } => (|| {
            count(t, 2)?;
            let dtype = result_types.first().map_or(t[0].dtype, |r| r.dtype);
            convolution_type(
                t[0],
                t[1],
                dims,
                window,
                *feature_group_count,
                *batch_group_count,
                dtype,
            )
            .map(|x| Some(vec![x]))
        })(),
        OpKind::CustomCall { target } if super::verify_custom::is_registry_custom_call(target) => {
            super::verify_custom::check(target, t, result_types).map(|()| None)
        }
        OpKind::CustomCall { target } => (|| {
            if !KNOWN_CUSTOM_CALLS.contains(&target.as_str()) {
                return Err(format!(
                    "custom_call target @{target} is not supported (shardsim knows {})",
                    KNOWN_CUSTOM_CALLS
                        .iter()
                        .chain(
                            super::attrs::REGISTRY_CUSTOM_CALLS
                                .iter()
                                .flat_map(|l| l.iter())
                        )
                        .map(|k| format!("@{k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            count(t, 1)?;
            Ok(None)
        })(),
        _ => return None,
    })
}
