//! `dense<...>` constants: parsing the literal (splat, nested lists, hex bit
//! patterns, quoted raw buffers) and printing it back the way MLIR does.

use crate::base::{Cursor, DType, TensorType, TextError};
use crate::ir::ops::{DenseValue, Scalar};

/// A literal before its element type is known.
#[derive(Debug, Clone, Copy)]
enum Lit {
    Float(f64),
    Int(i128),
    Bool(bool),
    Bits(u64),
}

/// Parsed `dense<...>`, to be resolved against the type that follows.
#[derive(Debug, Clone)]
pub struct RawDense {
    pos: usize,
    kind: RawKind,
}

#[derive(Debug, Clone)]
enum RawKind {
    Splat(Lit),
    List(Vec<Lit>),
    Hex(Vec<u8>),
}

/// Parse `dense<...>` (the cursor at `dense`).
pub fn parse_dense(c: &mut Cursor<'_>) -> Result<RawDense, TextError> {
    c.ws();
    let pos = c.pos();
    if !c.eat("dense<") {
        return Err(c.error("a dense<...> constant"));
    }
    let kind = if c.peek() == Some('"') {
        let spos = c.pos();
        let s = c.string()?;
        let hex = s.strip_prefix("0x").ok_or_else(|| {
            c.error_with(
                spos,
                "a hex string \"0x...\"",
                format!("\"{}\"", s.chars().take(16).collect::<String>()),
            )
        })?;
        if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(c.error_with(
                spos,
                "an even number of hex digits",
                "a malformed hex string",
            ));
        }
        let bytes = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0))
            .collect();
        RawKind::Hex(bytes)
    } else if c.peek() == Some('[') {
        let mut out = Vec::new();
        parse_nested(c, &mut out, 0)?;
        RawKind::List(out)
    } else {
        RawKind::Splat(parse_lit(c)?)
    };
    c.expect(">")?;
    Ok(RawDense { pos, kind })
}

fn parse_nested(c: &mut Cursor<'_>, out: &mut Vec<Lit>, depth: usize) -> Result<(), TextError> {
    if depth > 64 {
        return Err(c.error("at most 64 nested lists"));
    }
    c.expect("[")?;
    if c.eat("]") {
        return Ok(());
    }
    loop {
        if c.peek() == Some('[') {
            parse_nested(c, out, depth + 1)?;
        } else {
            out.push(parse_lit(c)?);
        }
        if c.eat("]") {
            return Ok(());
        }
        if !c.eat(",") {
            return Err(c.error("',' or ']' in a dense list"));
        }
    }
}

fn parse_lit(c: &mut Cursor<'_>) -> Result<Lit, TextError> {
    c.ws();
    let start = c.pos();
    if c.eat_keyword("true") {
        return Ok(Lit::Bool(true));
    }
    if c.eat_keyword("false") {
        return Ok(Lit::Bool(false));
    }
    let rest = c.rest();
    if rest.starts_with("0x") || rest.starts_with("0X") {
        let len = rest[2..]
            .bytes()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        let v = u64::from_str_radix(&rest[2..2 + len], 16).map_err(|_| {
            c.error_with(
                start,
                "a hex literal of at most 16 digits",
                format!("'{}'", &rest[..(2 + len).min(24)]),
            )
        })?;
        c.set_pos(start + 2 + len);
        return Ok(Lit::Bits(v));
    }
    let bytes = rest.as_bytes();
    let mut i = 0;
    if matches!(bytes.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    let int_digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    if int_digits == 0 {
        return Err(c.error("a number, true, false or a hex literal"));
    }
    i += int_digits;
    let mut is_float = false;
    if bytes.get(i) == Some(&b'.') {
        is_float = true;
        i += 1;
        i += bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(bytes.get(j), Some(b'-' | b'+')) {
            j += 1;
        }
        let d = bytes[j..].iter().take_while(|b| b.is_ascii_digit()).count();
        if d > 0 {
            is_float = true;
            i = j + d;
        }
    }
    let text = &rest[..i];
    c.set_pos(start + i);
    if is_float {
        text.parse::<f64>()
            .map(Lit::Float)
            .map_err(|_| c.error_with(start, "a number", format!("'{text}'")))
    } else {
        text.parse::<i128>().map(Lit::Int).map_err(|_| {
            c.error_with(
                start,
                "an integer that fits in 128 bits",
                format!("'{text}'"),
            )
        })
    }
}

impl RawDense {
    /// Resolve the literal against the constant's type.
    pub fn resolve(self, c: &Cursor<'_>, ty: &TensorType) -> Result<DenseValue, TextError> {
        let conv = |l: Lit| -> Result<Scalar, TextError> {
            let bad = |what: &str| {
                c.error_with(
                    self.pos,
                    format!("a literal of type {}", ty.dtype),
                    what.to_string(),
                )
            };
            Ok(match (l, ty.dtype.is_float(), ty.dtype) {
                (Lit::Float(v), true, _) => Scalar::Float(v),
                (Lit::Int(v), true, _) => Scalar::Float(v as f64),
                (Lit::Bits(b), true, d) => Scalar::Float(float_from_bits(b, d)),
                (Lit::Bool(b), false, DType::I1) => Scalar::Bool(b),
                (Lit::Int(v @ (0 | 1)), false, DType::I1) => Scalar::Bool(v == 1),
                (Lit::Int(v), false, d) if d != DType::I1 => Scalar::Int(v),
                (Lit::Bits(b), false, d) if d != DType::I1 => Scalar::Int(i128::from(b)),
                (Lit::Float(_), false, _) => return Err(bad("a float literal")),
                (Lit::Bool(_), _, _) => return Err(bad("a boolean literal")),
                _ => return Err(bad("a literal of another type")),
            })
        };
        Ok(match self.kind {
            RawKind::Splat(l) => DenseValue::Splat(conv(l)?),
            RawKind::List(ref v) => {
                DenseValue::Elements(v.iter().map(|&l| conv(l)).collect::<Result<_, _>>()?)
            }
            RawKind::Hex(ref b) => DenseValue::Hex(b.clone()),
        })
    }
}

fn float_from_bits(b: u64, d: DType) -> f64 {
    match d {
        DType::F64 => f64::from_bits(b),
        DType::F32 => f64::from(f32::from_bits(b as u32)),
        DType::BF16 => f64::from(f32::from_bits((b as u32) << 16)),
        _ => {
            // f16: decode through the shared helper in ops (via a one-element hex buffer).
            let v = DenseValue::Hex(vec![b as u8, (b >> 8) as u8]);
            v.to_f64s(&TensorType::new(vec![], DType::F16))
                .and_then(|x| x.first().copied())
                .unwrap_or(f64::NAN)
        }
    }
}

/// Bits of a non-finite float in `dtype`, printed as MLIR does (`0xFF800000`).
fn nonfinite_hex(v: f64, d: DType) -> String {
    let (pos_inf, neg_inf, nan) = match d {
        DType::F64 => (
            "0x7FF0000000000000",
            "0xFFF0000000000000",
            "0x7FF8000000000000",
        ),
        DType::BF16 => ("0x7F80", "0xFF80", "0x7FC0"),
        DType::F16 => ("0x7C00", "0xFC00", "0x7E00"),
        _ => ("0x7F800000", "0xFF800000", "0x7FC00000"),
    };
    if v.is_nan() {
        nan.to_string()
    } else if v > 0.0 {
        pos_inf.to_string()
    } else {
        neg_inf.to_string()
    }
}

/// A float the way MLIR prints it: `1.000000e+00` when six digits give the
/// value back exactly, else the type's natural precision (`5.65685415`,
/// `9.99999997E-7`), else the bit pattern in hex.
pub fn format_float(v: f64, d: DType) -> String {
    if !v.is_finite() {
        return nonfinite_hex(v, d);
    }
    // Six significant digits, padded with a zero to six decimals (LLVM's
    // `toString(6, 0, false)`).
    let rounded = format!("{v:.5e}");
    let six = fix_exponent(&rounded.replacen('e', "0e", 1));
    // When rounding to six digits carries into a new leading digit (9.9999997e-7),
    // MLIR's short form does not give the value back; it prints the long form.
    let exp_of = |t: &str| t.split_once('e').map(|(_, e)| e.to_string());
    // The same holds when the carry reaches the leading digit (0.899999976 rounds
    // to 9.00000e-01): MLIR prints those in the long form too (seen in JAX's
    // exports of 0.9f32 and 0.01f32).
    let full = format!("{v:.15e}");
    let lead = |t: &str| t.trim_start_matches('-').chars().next();
    let carried = exp_of(&rounded) != exp_of(&full) || lead(&rounded) != lead(&full);
    if !carried && same_in_type(six.parse::<f64>().ok(), v, d) {
        return six;
    }
    let natural = natural_precision(v, d);
    if natural.contains('.') && same_in_type(natural.replace('E', "e").parse::<f64>().ok(), v, d) {
        return natural;
    }
    match d {
        DType::F64 => format!("0x{:016X}", v.to_bits()),
        _ => format!("0x{:08X}", (v as f32).to_bits()),
    }
}

fn same_in_type(parsed: Option<f64>, v: f64, d: DType) -> bool {
    match parsed {
        None => false,
        Some(x) if d == DType::F64 => x.to_bits() == v.to_bits(),
        Some(x) => (x as f32).to_bits() == (v as f32).to_bits(),
    }
}

/// LLVM's `APFloat::toString` with its defaults: the value rounded to the type's
/// natural number of digits, trailing zeros dropped, plain or `E` notation.
fn natural_precision(v: f64, d: DType) -> String {
    let prec: i32 = match d {
        DType::F64 => 17,
        DType::F16 => 5,
        DType::BF16 => 4,
        _ => 9,
    };
    let s = format!("{:.*e}", (prec - 1) as usize, v);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let neg = mant.starts_with('-');
    let mut digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    let msd: i32 = exp.parse().unwrap_or(0);
    let n = digits.len() as i32;
    let last = msd - (n - 1);
    let scientific = if last >= 0 {
        last > 3 || n + last > prec
    } else {
        msd < -3
    };
    let mut out = String::from(if neg { "-" } else { "" });
    if scientific {
        out.push_str(&digits[..1]);
        out.push('.');
        out.push_str(if n == 1 { "0" } else { &digits[1..] });
        out.push('E');
        out.push(if msd >= 0 { '+' } else { '-' });
        out.push_str(&msd.abs().to_string());
    } else if last >= 0 {
        out.push_str(&digits);
        out.push_str(&"0".repeat(last as usize));
    } else if msd >= 0 {
        let k = (msd + 1) as usize;
        out.push_str(&digits[..k]);
        out.push('.');
        out.push_str(&digits[k..]);
    } else {
        out.push_str("0.");
        out.push_str(&"0".repeat((-msd - 1) as usize));
        out.push_str(&digits);
    }
    out
}

/// Rust's `1.5e-1` → MLIR's `1.5e-01` (a mantissa with a '.' and a two-digit signed exponent).
fn fix_exponent(s: &str) -> String {
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let mant = if mant.contains('.') {
        mant.to_string()
    } else {
        format!("{mant}.0")
    };
    let (sign, digits) = match exp.strip_prefix('-') {
        Some(d) => ('-', d),
        None => ('+', exp),
    };
    format!("{mant}e{sign}{digits:0>2}")
}

fn format_scalar(s: &Scalar, d: DType) -> String {
    match *s {
        Scalar::Float(v) => format_float(v, d),
        Scalar::Int(v) => v.to_string(),
        Scalar::Bool(b) => b.to_string(),
    }
}

/// `dense<...>` text for `value` of type `ty`.
pub fn format_dense(value: &DenseValue, ty: &TensorType) -> String {
    let mut s = String::from("dense<");
    match value {
        DenseValue::Splat(x) => s.push_str(&format_scalar(x, ty.dtype)),
        DenseValue::Hex(bytes) => {
            s.push_str("\"0x");
            for b in bytes {
                s.push_str(&format!("{b:02X}"));
            }
            s.push('"');
        }
        DenseValue::Elements(v) => {
            let items: Vec<String> = v.iter().map(|x| format_scalar(x, ty.dtype)).collect();
            let fits = crate::ir::ops::checked_elements(&ty.shape) == Some(items.len() as u64)
                && ty.rank() > 0;
            if fits {
                nest(&mut s, &items, &ty.shape);
            } else {
                s.push('[');
                s.push_str(&items.join(", "));
                s.push(']');
            }
        }
    }
    s.push('>');
    s
}

fn nest(s: &mut String, items: &[String], shape: &[u64]) {
    s.push('[');
    if shape.len() <= 1 {
        s.push_str(&items.join(", "));
    } else {
        let inner: usize = shape[1..].iter().product::<u64>() as usize;
        for (i, chunk) in items.chunks(inner.max(1)).enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            nest(s, chunk, &shape[1..]);
        }
    }
    s.push(']');
}
