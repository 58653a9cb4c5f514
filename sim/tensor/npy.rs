//! `.npy` files (NumPy's array format, versions 1.0, 2.0 and 3.0): little-endian,
//! C-order arrays of f32, f64, f16, i8, i32, i64, u8, u32, u64 and bool.
//!
//! Headers are written byte for byte as NumPy writes them (keys in sorted order,
//! the spare space NumPy leaves for growing the first axis, padding with spaces
//! to a multiple of 64 bytes and a final newline), so NumPy reads our files and
//! files round-trip unchanged. Files are written to a temporary name and renamed.

use std::path::Path;

use crate::base::DType;

use super::{Tensor, TensorError};

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// NumPy aligns the data start to this many bytes.
const ALIGN: usize = 64;
/// NumPy pads the header so the first axis can grow to this many digits in place.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// Why a `.npy` file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// (The message carries the I/O error, so it is not also a `source`:
    /// anyhow would print it twice.)
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    /// An error in a named file (the message carries the inner one, so it
    /// is not also a `source`: anyhow would print it twice).
    #[error("{path}: {error}")]
    InFile { path: String, error: Box<NpyError> },
    #[error("not a .npy file: expected the magic bytes \\x93NUMPY, found {found}")]
    BadMagic { found: String },
    #[error("unsupported .npy format version {major}.{minor} (expected 1.0, 2.0 or 3.0)")]
    UnsupportedVersion { major: u8, minor: u8 },
    #[error("malformed .npy header: expected {expected}, found {found}")]
    Header { expected: String, found: String },
    #[error(".npy array is stored in Fortran order; only C order is supported (save np.ascontiguousarray(a))")]
    FortranOrder,
    #[error(".npy dtype '{0}' is big-endian; only little-endian data is supported")]
    BigEndian(String),
    #[error(".npy dtype '{0}' is not supported (expected one of <f4, <f8, <f2, |i1, <i4, <i8, |u1, <u4, <u8, |b1)")]
    UnsupportedDType(String),
    #[error(".npy data is truncated: shape {shape:?} of '{descr}' needs {expected} bytes, found {found}")]
    Truncated {
        shape: Vec<u64>,
        descr: String,
        expected: usize,
        found: usize,
    },
    #[error(".npy data has {extra} bytes after the array: expected the file to end")]
    TrailingBytes { extra: usize },
    #[error("element type {0} has no .npy dtype; convert it (e.g. to f32) before writing")]
    NoNpyDType(DType),
    #[error("header of {len} bytes does not fit a version {major}.0 .npy file")]
    HeaderTooLong { len: usize, major: u8 },
    #[error("larger than the input size limit of {limit} bytes (raise it with --max-input-size)")]
    TooLarge { limit: u64 },
    #[error(transparent)]
    File(crate::base::files::FileError),
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

fn header_err(expected: impl Into<String>, found: impl Into<String>) -> NpyError {
    NpyError::Header {
        expected: expected.into(),
        found: found.into(),
    }
}

/// The `.npy` descr of `dtype` (bf16 has none).
pub fn descr_of(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I1 => "|b1",
        DType::I8 => "|i1",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::UI8 => "|u1",
        DType::UI32 => "<u4",
        DType::UI64 => "<u8",
        DType::C64 => "<c8",
        DType::C128 => "<c16",
        DType::BF16 | DType::Token => return None,
    })
}

/// The element type of a `.npy` descr.
pub fn dtype_of(descr: &str) -> Result<DType, NpyError> {
    let mut chars = descr.chars();
    let order = chars.next().unwrap_or(' ');
    let code = chars.as_str();
    let one_byte = match code {
        "b1" | "?" => Some(DType::I1),
        "i1" => Some(DType::I8),
        "u1" => Some(DType::UI8),
        _ => None,
    };
    if let (Some(d), '<' | '>' | '|' | '=') = (one_byte, order) {
        return Ok(d); // byte order is meaningless for one-byte types
    }
    let multi = match code {
        "f4" => DType::F32,
        "f8" => DType::F64,
        "f2" => DType::F16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u4" => DType::UI32,
        "u8" => DType::UI64,
        "c8" => DType::C64,
        "c16" => DType::C128,
        _ => return Err(NpyError::UnsupportedDType(descr.to_string())),
    };
    match order {
        '<' => Ok(multi),
        '=' if cfg!(target_endian = "little") => Ok(multi),
        '>' => Err(NpyError::BigEndian(descr.to_string())),
        _ => Err(NpyError::UnsupportedDType(descr.to_string())),
    }
}

/// A Python dict-literal value as NumPy writes it in a header.
#[derive(Debug, PartialEq)]
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
}

/// A tiny parser for the header's Python dict literal.
struct HeaderParser<'a> {
    s: &'a [char],
    pos: usize,
}

impl HeaderParser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn found(&self) -> String {
        let rest: String = self.s[self.pos.min(self.s.len())..]
            .iter()
            .take(20)
            .collect();
        if rest.is_empty() {
            "the end of the header".to_string()
        } else {
            format!("'{rest}' at header offset {}", self.pos)
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.ws();
        if self.s.get(self.pos) == Some(&c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), NpyError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(header_err(format!("'{c}'"), self.found()))
        }
    }

    fn string(&mut self) -> Result<String, NpyError> {
        self.ws();
        let quote = match self.s.get(self.pos) {
            Some(&q @ ('\'' | '"')) => q,
            _ => return Err(header_err("a quoted string", self.found())),
        };
        let start = self.pos + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == quote)
            .ok_or_else(|| header_err("a closing quote", "an unterminated string"))?;
        self.pos = start + len + 1;
        Ok(self.s[start..start + len].iter().collect())
    }

    fn word(&mut self, w: &str) -> bool {
        let n = w.chars().count();
        if self.s.len() >= self.pos + n
            && self.s[self.pos..self.pos + n].iter().copied().eq(w.chars())
        {
            self.pos += n;
            true
        } else {
            false
        }
    }

    fn uint(&mut self) -> Result<u64, NpyError> {
        self.ws();
        let start = self.pos;
        while self.s.get(self.pos).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let text: String = self.s[start..self.pos].iter().collect();
        // Python 2 wrote long integers with an `L` suffix.
        self.eat('L');
        text.parse::<u64>().map_err(|_| {
            self.pos = start;
            header_err("a non-negative dimension size", self.found())
        })
    }

    fn value(&mut self) -> Result<Value, NpyError> {
        self.ws();
        match self.s.get(self.pos) {
            Some('\'' | '"') => Ok(Value::Str(self.string()?)),
            Some('(') => {
                self.pos += 1;
                let mut dims = Vec::new();
                loop {
                    if self.eat(')') {
                        break;
                    }
                    dims.push(self.uint()?);
                    if !self.eat(',') {
                        self.expect(')')?;
                        break;
                    }
                }
                Ok(Value::Tuple(dims))
            }
            _ if self.word("True") => Ok(Value::Bool(true)),
            _ if self.word("False") => Ok(Value::Bool(false)),
            _ => Err(header_err(
                "a string, True, False or a tuple of sizes",
                self.found(),
            )),
        }
    }
}

/// Parsed header: element type, shape and descr text.
struct Header {
    descr: String,
    dtype: DType,
    shape: Vec<u64>,
}

fn parse_header(text: &str) -> Result<Header, NpyError> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = HeaderParser { s: &chars, pos: 0 };
    p.expect('{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        if p.eat('}') {
            break;
        }
        let key = p.string()?;
        p.expect(':')?;
        let value = p.value()?;
        match (key.as_str(), value) {
            ("descr", Value::Str(s)) if descr.is_none() => descr = Some(s),
            ("fortran_order", Value::Bool(b)) if fortran.is_none() => fortran = Some(b),
            ("shape", Value::Tuple(t)) if shape.is_none() => shape = Some(t),
            (k, v) => {
                return Err(header_err(
                    "the keys 'descr' (a string), 'fortran_order' (True/False) and 'shape' (a tuple), once each",
                    format!("'{k}': {v:?}"),
                ))
            }
        }
        if !p.eat(',') {
            p.expect('}')?;
            break;
        }
    }
    p.ws();
    if p.pos != chars.len() {
        return Err(header_err(
            "only spaces and a newline after the dict",
            p.found(),
        ));
    }
    let missing = |k: &str| header_err(format!("the key '{k}'"), "a header without it");
    let descr = descr.ok_or_else(|| missing("descr"))?;
    let fortran = fortran.ok_or_else(|| missing("fortran_order"))?;
    let shape = shape.ok_or_else(|| missing("shape"))?;
    let dtype = dtype_of(&descr)?;
    // A Fortran-ordered array of rank <= 1 has the same bytes as C order.
    if fortran && shape.len() > 1 {
        return Err(NpyError::FortranOrder);
    }
    Ok(Header {
        descr,
        dtype,
        shape,
    })
}

/// Decode a whole `.npy` file held in memory.
pub fn parse_npy(bytes: &[u8]) -> Result<Tensor, NpyError> {
    if bytes.len() < 8 || &bytes[..6] != MAGIC {
        let n = bytes.len().min(6);
        return Err(NpyError::BadMagic {
            found: format!("{:?}", String::from_utf8_lossy(&bytes[..n])),
        });
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len_size, utf8) = match (major, minor) {
        (1, 0) => (2, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => return Err(NpyError::UnsupportedVersion { major, minor }),
    };
    let len_end = 8 + len_size;
    if bytes.len() < len_end {
        return Err(header_err(
            format!("a {len_size}-byte header length"),
            "the end of the file",
        ));
    }
    let mut len_bytes = [0u8; 4];
    len_bytes[..len_size].copy_from_slice(&bytes[8..len_end]);
    let header_len = u32::from_le_bytes(len_bytes) as usize;
    let data_start = len_end
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            header_err(
                format!("a header of {header_len} bytes"),
                format!("{} bytes left in the file", bytes.len() - len_end),
            )
        })?;
    let raw = &bytes[len_end..data_start];
    let text: String = if utf8 {
        std::str::from_utf8(raw)
            .map_err(|e| header_err("a UTF-8 header (version 3.0)", e.to_string()))?
            .to_string()
    } else {
        raw.iter().map(|&b| b as char).collect() // latin-1
    };
    let header = parse_header(&text)?;
    let n = super::index::element_count("npy", &header.shape)?;
    let width = header.dtype.size_bytes() as usize;
    let expected = n.checked_mul(width).ok_or_else(|| {
        header_err(
            "a shape whose byte size fits in memory",
            format!("{:?}", header.shape),
        )
    })?;
    let data = &bytes[data_start..];
    if data.len() < expected {
        return Err(NpyError::Truncated {
            shape: header.shape,
            descr: header.descr,
            expected,
            found: data.len(),
        });
    }
    if data.len() > expected {
        return Err(NpyError::TrailingBytes {
            extra: data.len() - expected,
        });
    }
    Ok(Tensor::from_le_bytes(header.shape, header.dtype, data)?)
}

/// Read a `.npy` file: the magic and version first, then the header, then
/// exactly the bytes the header's shape and dtype need (so `/dev/zero` or a
/// huge file is refused before anything large is read; the whole file is
/// capped by [`crate::base::files::input_limit`]).
pub fn read_npy(path: &Path) -> Result<Tensor, NpyError> {
    use std::io::Read;
    let shown = || path.display().to_string();
    let io = |error| NpyError::Io {
        path: shown(),
        error,
    };
    let in_file = |e: NpyError| NpyError::InFile {
        path: shown(),
        error: Box::new(e),
    };
    if path.is_dir() {
        return Err(in_file(header_err("a file", "a directory")));
    }
    let limit = crate::base::files::input_limit();
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    let mut more = |bytes: &mut Vec<u8>, n: u64| -> Result<bool, NpyError> {
        let want = bytes.len() as u64 + n;
        if want > limit {
            return Err(in_file(NpyError::TooLarge { limit }));
        }
        (&mut file).take(n).read_to_end(bytes).map_err(io)?;
        Ok(bytes.len() as u64 == want)
    };
    // Magic and version: every error below is parse_npy's own on a short prefix.
    if !more(&mut bytes, 8)? || &bytes[..6] != MAGIC {
        return parse_npy(&bytes).map_err(in_file);
    }
    let len_size = if bytes[6] == 1 { 2 } else { 4 };
    if !more(&mut bytes, len_size)? {
        return parse_npy(&bytes).map_err(in_file);
    }
    let mut len_bytes = [0u8; 4];
    len_bytes[..len_size as usize].copy_from_slice(&bytes[8..]);
    if !more(&mut bytes, u64::from(u32::from_le_bytes(len_bytes)))? {
        return parse_npy(&bytes).map_err(in_file);
    }
    let data_len = match data_size(&bytes) {
        Ok(n) => n as u64,
        Err(e) => return Err(in_file(e)),
    };
    // One byte more than needed tells trailing bytes apart.
    let _ = more(&mut bytes, data_len.saturating_add(1))?;
    parse_npy(&bytes).map_err(in_file)
}

/// The data size the header at the start of `bytes` announces.
fn data_size(bytes: &[u8]) -> Result<usize, NpyError> {
    match parse_npy(bytes) {
        Err(NpyError::Truncated { expected, .. }) => Ok(expected),
        Err(e) => Err(e),
        Ok(_) => Ok(0),
    }
}

/// The header dict exactly as NumPy formats it.
fn header_text(descr: &str, shape: &[u64]) -> String {
    let shape_repr = match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        h.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }
    h
}

/// Encode `t` as a `.npy` file of format version `major`.0 (1, 2 or 3).
pub fn to_npy_bytes_version(t: &Tensor, major: u8) -> Result<Vec<u8>, NpyError> {
    let descr = descr_of(t.dtype()).ok_or(NpyError::NoNpyDType(t.dtype()))?;
    let len_size = match major {
        1 => 2,
        2 | 3 => 4,
        _ => return Err(NpyError::UnsupportedVersion { major, minor: 0 }),
    };
    let header = header_text(descr, t.shape());
    // NumPy: total prefix + header + '\n' is a multiple of 64, with 1..=64 spaces of padding.
    let hlen = header.len() + 1;
    let pad = ALIGN - (MAGIC.len() + 2 + len_size + hlen) % ALIGN;
    let total = hlen + pad;
    if len_size == 2 && total > u16::MAX as usize {
        return Err(NpyError::HeaderTooLong { len: total, major });
    }
    let mut out = Vec::with_capacity(MAGIC.len() + 2 + len_size + total + t.num_elements() * 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[major, 0]);
    out.extend_from_slice(&(total as u32).to_le_bytes()[..len_size]);
    out.extend_from_slice(header.as_bytes());
    out.extend(vec![b' '; pad]);
    out.push(b'\n');
    out.extend_from_slice(&t.data().to_le_bytes());
    Ok(out)
}

/// Encode `t` as NumPy would: version 1.0, or 2.0 when the header is too long for 1.0.
pub fn to_npy_bytes(t: &Tensor) -> Result<Vec<u8>, NpyError> {
    match to_npy_bytes_version(t, 1) {
        Err(NpyError::HeaderTooLong { .. }) => to_npy_bytes_version(t, 2),
        other => other,
    }
}

/// Write `t` to `path` as `.npy` (via a temporary file in the same folder and
/// a rename; see [`crate::base::files::write_file`]).
pub fn write_npy(path: &Path, t: &Tensor) -> Result<(), NpyError> {
    let bytes = to_npy_bytes(t)?;
    crate::base::files::write_file(path, &bytes).map_err(NpyError::File)
}
