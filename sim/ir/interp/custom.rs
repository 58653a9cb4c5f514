//! Kernels of the registry custom calls that have a closed form: the
//! markers (InspectSharding, xla.megascale.provide_metadata) keep their
//! operand, `mhlo.erf` is erf, and the x64 emulation ops split a 64-bit
//! integer into its low and high 32-bit halves (`X64SplitLow`,
//! `X64SplitHigh`) and combine them back (`X64Combine(low, high)`, XLA's
//! operand order). The linear-algebra and top-k targets are refused: shardsim
//! knows their sharding rules, not their numerics.

use crate::base::DType;
use crate::tensor::{self, Data, Tensor};

/// The results of custom call `target` on `args`; Err: the reason it cannot
/// run.
pub(super) fn eval_custom(
    target: &str,
    args: Vec<Tensor>,
    out: Option<DType>,
) -> Result<Vec<Tensor>, String> {
    let first = || {
        args.first()
            .ok_or_else(|| "takes one operand at least".to_string())
    };
    let ints = |t: &Tensor| {
        t.data()
            .to_i128_vec()
            .ok_or_else(|| format!("needs an integer operand, found {}", t.dtype()))
    };
    let build = |shape: &[u64], dtype: DType, v: &[i128]| {
        Tensor::new(shape.to_vec(), Data::from_i128s(dtype, v)).map_err(|e| e.to_string())
    };
    match target {
        "InspectSharding" | "xla.megascale.provide_metadata" => Ok(args),
        "mhlo.erf" => {
            let k = tensor::UnaryOp::from_name("erf").ok_or("no erf kernel")?;
            tensor::unary(k, first()?).map(|t| vec![t]).map_err(|e| e.to_string())
        }
        "X64SplitLow" | "X64SplitHigh" => {
            let x = first()?;
            let shift = if target == "X64SplitHigh" { 32 } else { 0 };
            // The 64 bits as unsigned, whatever the signedness.
            let v: Vec<i128> = ints(x)?
                .into_iter()
                .map(|i| ((i as u64) >> shift & 0xffff_ffff) as i128)
                .collect();
            Ok(vec![build(x.shape(), out.unwrap_or(DType::UI32), &v)?])
        }
        "X64Combine" => {
            let [lo, hi] = args.as_slice() else {
                return Err("takes two operands (low, high)".into());
            };
            let v: Vec<i128> = ints(lo)?
                .into_iter()
                .zip(ints(hi)?)
                .map(|(l, h)| (((h as u64 & 0xffff_ffff) << 32) | (l as u64 & 0xffff_ffff)) as i128)
                .collect();
            let dtype = out.unwrap_or(DType::UI64);
            // Signed results reinterpret the same 64 bits.
            let v: Vec<i128> = if dtype == DType::I64 {
                v.into_iter().map(|x| x as u64 as i64 as i128).collect()
            } else {
                v
            };
            Ok(vec![build(lo.shape(), dtype, &v)?])
        }
        _ => Err(format!(
            "custom_call @{target} has no kernel in shardsim's interpreter (its sharding rule is Shardy's)"
        )),
    }
}
