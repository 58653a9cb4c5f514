//! Low-level pieces of the MLIR text parser: value names, types, integer lists,
//! verbatim attribute values and `loc(...)` skipping, on top of [`Cursor`].

use crate::base::{Cursor, DType, TensorType, TextError};
use crate::ir::model::RawAttr;

/// Characters allowed in a value name after `%`.
fn is_value_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.')
}

/// `%name` (without `#k`); returns the name with its `%`.
pub fn value_name<'a>(c: &mut Cursor<'a>) -> Result<&'a str, TextError> {
    c.ws();
    let rest = c.rest();
    if !rest.starts_with('%') {
        return Err(c.error("a value name like %0"));
    }
    let len = rest.as_bytes()[1..]
        .iter()
        .take_while(|&&b| is_value_char(b))
        .count();
    if len == 0 {
        return Err(c.error("a value name like %0"));
    }
    c.set_pos(c.pos() + 1 + len);
    Ok(&rest[..1 + len])
}

/// A use `%name` or `%name#k`: the name and the result number, if any.
pub fn value_use<'a>(c: &mut Cursor<'a>) -> Result<(&'a str, Option<u64>), TextError> {
    let name = value_name(c)?;
    if c.peek_raw() == Some('#') {
        let save = c.pos();
        c.set_pos(save + 1);
        let digits = c.rest().bytes().take_while(|b| b.is_ascii_digit()).count();
        let k = c.rest()[..digits]
            .parse::<u64>()
            .map_err(|_| c.error_at(save, "a result number after '#'"))?;
        c.set_pos(c.pos() + digits);
        return Ok((name, Some(k)));
    }
    Ok((name, None))
}

/// `tensor<16x8xf32>` / `tensor<f32>`.
pub fn tensor_type(c: &mut Cursor<'_>) -> Result<TensorType, TextError> {
    c.ws();
    let start = c.pos();
    if let Some(after) = c.rest().strip_prefix("!stablehlo.token") {
        // The whole word: `!stablehlo.tokens` is no token.
        if !after.starts_with(|ch: char| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.') {
            c.set_pos(start + "!stablehlo.token".len());
            return Ok(TensorType::token());
        }
    }
    if !c.rest().starts_with("tensor<") {
        return Err(c.error("a tensor type like tensor<8x16xf32> or !stablehlo.token"));
    }
    c.set_pos(start + 7);
    let mut shape = Vec::new();
    loop {
        let rest = c.rest();
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && rest.as_bytes().get(digits) == Some(&b'x') {
            let pos = c.pos();
            let d: u64 = rest[..digits].parse().map_err(|_| {
                c.error_with(
                    pos,
                    "a dimension that fits in 64 bits",
                    rest[..digits].to_string(),
                )
            })?;
            shape.push(d);
            c.set_pos(pos + digits + 1);
            continue;
        }
        if rest.starts_with('?') || rest.starts_with('*') {
            // Shardy skips dynamically shaped values; shardsim needs every
            // size (bytes, shards), so it refuses them where they are written.
            let what = if rest.starts_with('?') {
                format!(
                    "dynamic dimension '?' (dimension {} of the type)",
                    shape.len()
                )
            } else {
                "an unranked tensor '*'".to_string()
            };
            return Err(c.error_with(
                c.pos(),
                "a static dimension (shardsim does not take dynamically shaped tensors)",
                what,
            ));
        }
        break;
    }
    let pos = c.pos();
    let rest = c.rest();
    let mut len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    // `complex<f32>` is the one element type with its own angle brackets.
    if &rest[..len] == "complex" && rest[len..].starts_with('<') {
        let inner = rest[len + 1..]
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        if rest[len + 1 + inner..].starts_with('>') {
            len += inner + 2;
        }
    }
    let name = &rest[..len];
    let dtype: DType = name.parse().map_err(|_| {
        c.error_with(
            pos,
            "an element type (f32, f64, bf16, f16, i1, i8, i32, i64, ui8, ui32, ui64, complex<f32>, complex<f64>)",
            format!("'{name}'"),
        )
    })?;
    c.set_pos(pos + len);
    if c.peek_raw() != Some('>') {
        return Err(c.error_at(c.pos(), "'>' closing the tensor type"));
    }
    c.set_pos(c.pos() + 1);
    let t = TensorType::new(shape, dtype);
    // Every later size computation may then multiply without overflow.
    if t.checked_size_bytes().is_none() {
        return Err(c.error_with(
            start,
            "a tensor type whose element count and byte size fit in a signed 64-bit integer",
            c.src()[start..c.pos()].to_string(),
        ));
    }
    Ok(t)
}

/// `(T, T)` → the types.
pub fn paren_types(c: &mut Cursor<'_>) -> Result<Vec<TensorType>, TextError> {
    c.expect("(")?;
    let mut out = Vec::new();
    if c.eat(")") {
        return Ok(out);
    }
    loop {
        out.push(tensor_type(c)?);
        if c.eat(")") {
            return Ok(out);
        }
        if !c.eat(",") {
            return Err(c.error("',' or ')' in a type list"));
        }
    }
}

/// `[1, 2, 3]` (possibly negative integers).
pub fn int_list(c: &mut Cursor<'_>) -> Result<Vec<i64>, TextError> {
    c.expect("[")?;
    let mut out = Vec::new();
    if c.eat("]") {
        return Ok(out);
    }
    loop {
        out.push(c.int()?);
        if c.eat("]") {
            return Ok(out);
        }
        if !c.eat(",") {
            return Err(c.error("',' or ']' in an integer list"));
        }
    }
}

/// `[1, 2, 3]` of non-negative integers (dimension numbers).
pub fn dim_list(c: &mut Cursor<'_>) -> Result<Vec<u64>, TextError> {
    c.expect("[")?;
    let mut out = Vec::new();
    if c.eat("]") {
        return Ok(out);
    }
    loop {
        out.push(c.uint()?);
        if c.eat("]") {
            return Ok(out);
        }
        if !c.eat(",") {
            return Err(c.error("',' or ']' in a dimension list"));
        }
    }
}

/// Expect keyword `word` (not followed by an identifier character).
pub fn keyword(c: &mut Cursor<'_>, word: &str) -> Result<(), TextError> {
    if c.eat_keyword(word) {
        Ok(())
    } else {
        Err(c.error(format!("'{word}'")))
    }
}

/// Skip a balanced `(...)` starting at the cursor (which must be at `(`).
fn skip_parens(c: &mut Cursor<'_>) -> Result<(), TextError> {
    let start = c.pos();
    let bytes = c.src().as_bytes();
    let mut i = start;
    let mut depth = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    c.set_pos(i + 1);
                    return Ok(());
                }
            }
            b'"' => i = skip_string(bytes, i),
            _ => {}
        }
        i += 1;
    }
    Err(c.error_with(start, "')' closing this '('", "end of input"))
}

/// Index of the closing quote of the string starting at `i` (or the end).
fn skip_string(bytes: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'"' => return i,
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// Skip an optional trailing `loc(...)`.
pub fn skip_loc(c: &mut Cursor<'_>) -> Result<(), TextError> {
    c.ws();
    if c.rest().starts_with("loc(") {
        c.set_pos(c.pos() + 3);
        skip_parens(c)?;
    }
    Ok(())
}

/// A verbatim attribute value: text up to the next `,` or `}` at nesting depth 0.
pub fn raw_value(c: &mut Cursor<'_>) -> Result<String, TextError> {
    c.ws();
    let start = c.pos();
    let bytes = c.src().as_bytes();
    let mut i = start;
    let mut stack: Vec<u8> = Vec::new();
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                i = skip_string(bytes, i);
                if i >= bytes.len() {
                    return Err(c.error_with(start, "a closing '\"'", "an unterminated string"));
                }
            }
            b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
            b'(' | b'[' | b'{' | b'<' => stack.push(b),
            b')' | b']' | b'}' | b'>' => {
                let open = match b {
                    b')' => b'(',
                    b']' => b'[',
                    b'}' => b'{',
                    _ => b'<',
                };
                match stack.last() {
                    Some(&top) if top == open => {
                        stack.pop();
                    }
                    None if b == b'}' => break,
                    _ => {
                        return Err(c.error_with(
                            i,
                            "balanced brackets in an attribute value",
                            format!("'{}'", b as char),
                        ))
                    }
                }
            }
            b',' if stack.is_empty() => break,
            b'\n' if stack.is_empty() => break,
            _ => {}
        }
        i += 1;
    }
    if !stack.is_empty() {
        return Err(c.error_with(start, "a complete attribute value", "unbalanced brackets"));
    }
    let text = c.src()[start..i].trim_end().to_string();
    if text.is_empty() {
        return Err(c.error("an attribute value"));
    }
    c.set_pos(i);
    Ok(text)
}

/// An attribute name: a bare identifier or a quoted string (kept with its quotes).
pub fn attr_name(c: &mut Cursor<'_>) -> Result<String, TextError> {
    c.ws();
    if c.peek_raw() == Some('"') {
        let start = c.pos();
        c.string()?;
        return Ok(c.src()[start..c.pos()].to_string());
    }
    Ok(c.ident()
        .map_err(|_| c.error("an attribute name"))?
        .to_string())
}

/// A dictionary `{a = v, b}` of verbatim values (used for module, mesh and argument attributes).
pub fn raw_dict(c: &mut Cursor<'_>) -> Result<Vec<RawAttr>, TextError> {
    c.expect("{")?;
    let mut out = Vec::new();
    if c.eat("}") {
        return Ok(out);
    }
    loop {
        let name = attr_name(c)?;
        let value = if c.eat("=") {
            raw_value(c)?
        } else {
            String::new()
        };
        out.push(RawAttr { name, value });
        if c.eat("}") {
            return Ok(out);
        }
        if !c.eat(",") {
            return Err(c.error("',' or '}' in an attribute dictionary"));
        }
    }
}
