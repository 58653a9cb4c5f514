//! `stablehlo.select_and_scatter`'s kernel: for each source element (one
//! per operand window, row-major), the window's selected operand element
//! (the first valid one, replaced by each later candidate the select region
//! does not keep it over, padding skipped) receives the scatter region of its
//! current value and the source value; every other result element is init.

use crate::ir::attrs::WindowAttrs;
use crate::tensor::{Scalar as TScalar, Tensor, TensorError};

/// Calls region 0 (select: keep the first argument?) or region 1 (scatter).
pub(super) type Regions<'a> =
    dyn FnMut(usize, TScalar, TScalar) -> Result<TScalar, TensorError> + 'a;

/// The result of select_and_scatter (types already verified).
pub(super) fn select_and_scatter(
    operand: &Tensor,
    source: &Tensor,
    init: TScalar,
    w: &WindowAttrs,
    regions: &mut Regions<'_>,
) -> Result<Tensor, TensorError> {
    let bad = |m: &str| TensorError::invalid("select_and_scatter", m.to_string());
    let (shape, r) = (operand.shape().to_vec(), operand.rank());
    let (strides, pad) = (w.strides_or_default(), w.padding_or_default());
    let mut out = Tensor::splat(shape.clone(), init)?;
    let positions = |dims: &[u64]| -> Vec<Vec<u64>> {
        let mut all = vec![Vec::new()];
        for &d in dims {
            all = all
                .into_iter()
                .flat_map(|p| (0..d).map(move |i| [p.clone(), vec![i]].concat()))
                .collect();
        }
        all
    };
    let window = positions(&w.dimensions);
    for s in positions(source.shape()) {
        let mut selected: Option<(Vec<u64>, TScalar)> = None;
        for k in &window {
            let idx: Option<Vec<u64>> = (0..r)
                .map(|d| {
                    let i = s[d] as i128 * strides[d] as i128 + k[d] as i128 - pad[d].0 as i128;
                    u64::try_from(i).ok().filter(|&i| i < shape[d])
                })
                .collect();
            let Some(idx) = idx else { continue };
            let v = operand.get(&idx)?;
            selected = match selected {
                None => Some((idx, v)),
                Some((si, sv)) => {
                    let keep = regions(0, sv, v)?;
                    match keep {
                        TScalar::I1(true) => Some((si, sv)),
                        TScalar::I1(false) => Some((idx, v)),
                        _ => return Err(bad("the select region must return an i1")),
                    }
                }
            };
        }
        if let Some((si, _)) = selected {
            let acc = out.get(&si)?;
            let new = regions(1, acc, source.get(&s)?)?;
            out.set(&si, new)?;
        }
    }
    Ok(out)
}
