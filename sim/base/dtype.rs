//! Element types and ranked tensor types (`tensor<8x16xf32>`), shared by the
//! sharding geometry, the IR and the cost models.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F64,
    BF16,
    F16,
    I1,
    I8,
    I32,
    I64,
    UI8,
    UI32,
    UI64,
    /// `complex<f32>`: two f32 (real, imaginary), 8 bytes.
    C64,
    /// `complex<f64>`: two f64 (real, imaginary), 16 bytes.
    C128,
    /// `!stablehlo.token`: orders side effects and holds no data. Always a
    /// rank-0 type (`TensorType::token()`), zero bytes, never sharded.
    Token,
}

impl DType {
    /// Every element type a `tensor<...>` may hold, in a fixed order (the
    /// token is a type of its own, not an element type).
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F64,
        DType::BF16,
        DType::F16,
        DType::I1,
        DType::I8,
        DType::I32,
        DType::I64,
        DType::UI8,
        DType::UI32,
        DType::UI64,
        DType::C64,
        DType::C128,
    ];

    /// Size of one element in bytes as stored on a device (i1 takes a byte).
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::I1 | DType::I8 | DType::UI8 => 1,
            DType::BF16 | DType::F16 => 2,
            DType::F32 | DType::I32 | DType::UI32 => 4,
            DType::F64 | DType::I64 | DType::UI64 | DType::C64 => 8,
            DType::C128 => 16,
            DType::Token => 0,
        }
    }

    /// True for floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::BF16 | DType::F16)
    }

    /// True for `complex<f32>` and `complex<f64>`.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// True for the integer types and i1 (neither float nor complex).
    pub fn is_integer_or_bool(self) -> bool {
        !self.is_float() && !self.is_complex() && self != DType::Token
    }

    /// The type of one part of a complex element (`complex<f32>` -> f32);
    /// `None` for a non-complex type.
    pub fn complex_part(self) -> Option<DType> {
        match self {
            DType::C64 => Some(DType::F32),
            DType::C128 => Some(DType::F64),
            _ => None,
        }
    }

    /// The complex type whose parts are `self` (f32 -> `complex<f32>`);
    /// `None` unless `self` is f32 or f64 (StableHLO has no other complex type).
    pub fn complex_of(self) -> Option<DType> {
        match self {
            DType::F32 => Some(DType::C64),
            DType::F64 => Some(DType::C128),
            _ => None,
        }
    }

    /// The MLIR spelling (`f32`, `bf16`, `i1`, `ui32`, ...).
    pub fn mlir_name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::I1 => "i1",
            DType::I8 => "i8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::UI8 => "ui8",
            DType::UI32 => "ui32",
            DType::UI64 => "ui64",
            DType::C64 => "complex<f32>",
            DType::C128 => "complex<f64>",
            DType::Token => "token",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mlir_name())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DType::ALL
            .into_iter()
            .find(|d| d.mlir_name() == s)
            .ok_or_else(|| format!("unknown element type '{s}' (expected one of f32, f64, bf16, f16, i1, i8, i32, i64, ui8, ui32, ui64, complex<f32>, complex<f64>)"))
    }
}

/// A ranked, statically shaped tensor type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorType {
    pub shape: Vec<u64>,
    pub dtype: DType,
}

impl TensorType {
    pub fn new(shape: Vec<u64>, dtype: DType) -> Self {
        TensorType { shape, dtype }
    }

    /// `!stablehlo.token`: rank 0, zero bytes.
    pub fn token() -> Self {
        TensorType::new(Vec::new(), DType::Token)
    }

    /// True for `!stablehlo.token`.
    pub fn is_token(&self) -> bool {
        self.dtype == DType::Token
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (1 for a scalar); saturates at `u64::MAX` (parsed
    /// types are checked with [`TensorType::checked_size_bytes`], so only a
    /// type built in code could get there).
    pub fn num_elements(&self) -> u64 {
        self.shape.iter().fold(1u64, |n, &d| n.saturating_mul(d))
    }

    /// Size in bytes (saturating, as [`TensorType::num_elements`]).
    pub fn size_bytes(&self) -> u64 {
        self.num_elements().saturating_mul(self.dtype.size_bytes())
    }

    /// Size in bytes when the element count and the byte size both fit in an
    /// `i64` (as MLIR requires of a shape), else `None`.
    pub fn checked_size_bytes(&self) -> Option<u64> {
        let n = self
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .filter(|&n| n <= i64::MAX as u64)?;
        n.checked_mul(self.dtype.size_bytes())
            .filter(|&b| b <= i64::MAX as u64)
    }

    /// Parse the shape part of a type written as `16x32` (empty string: scalar).
    pub fn parse_shape(text: &str) -> Result<Vec<u64>, String> {
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let dims = text
            .split('x')
            .map(|d| {
                d.trim().parse::<u64>().map_err(|_| {
                    format!("bad dimension '{d}' in shape '{text}' (expected e.g. 16x32)")
                })
            })
            .collect::<Result<Vec<u64>, String>>()?;
        let fits = dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .is_some_and(|n| n <= i64::MAX as u64);
        if !fits {
            return Err(format!(
                "shape '{text}' is too large: its element count does not fit in a signed 64-bit integer"
            ));
        }
        Ok(dims)
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_token() {
            return f.write_str("!stablehlo.token");
        }
        f.write_str("tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_mlir_types() {
        assert_eq!(
            TensorType::new(vec![8, 16], DType::F32).to_string(),
            "tensor<8x16xf32>"
        );
        assert_eq!(TensorType::new(vec![], DType::I1).to_string(), "tensor<i1>");
        assert_eq!(TensorType::token().to_string(), "!stablehlo.token");
        assert_eq!(TensorType::token().size_bytes(), 0);
        assert!("token".parse::<DType>().is_err());
        let c = TensorType::new(vec![8, 33], DType::C64);
        assert_eq!(c.to_string(), "tensor<8x33xcomplex<f32>>");
        assert_eq!(c.size_bytes(), 8 * 33 * 8);
        assert_eq!(TensorType::new(vec![3], DType::C128).size_bytes(), 48);
        assert!("complex<i32>".parse::<DType>().is_err());
    }

    #[test]
    fn dtype_names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.mlir_name().parse::<DType>().unwrap(), d);
        }
    }
}
