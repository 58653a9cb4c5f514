//! Text of the structured attributes of gather, scatter, convolution and
//! reduce_window: parsed from the attribute text JAX prints and printed back in
//! the same spelling (`#stablehlo.gather<...>`, `array<i64: ...>`,
//! `dense<[[lo, hi], ...]> : tensor<Nx2xi64>`, `[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`).

use crate::base::{Cursor, TextError};

use super::lex::int_list;
use crate::ir::attrs::{ConvDims, ConvWindow, GatherDims, ScatterDims};

/// Split `a = [1, 2], b = 3` at the commas outside brackets.
fn split_top(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, ch) in text.char_indices() {
        match ch {
            '[' | '<' | '(' | '{' => depth += 1,
            ']' | '>' | ')' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = text[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out
}

/// The `key = value` fields of `#stablehlo.NAME<...>`.
fn struct_fields<'t>(text: &'t str, name: &str) -> Result<Vec<(&'t str, &'t str)>, String> {
    let prefix = format!("#stablehlo.{name}<");
    let body = text
        .trim()
        .strip_prefix(prefix.as_str())
        .and_then(|r| r.strip_suffix('>'))
        .ok_or_else(|| format!("#stablehlo.{name}<...>, found {text}"))?;
    split_top(body)
        .into_iter()
        .map(|f| {
            f.split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| format!("'key = value' in #stablehlo.{name}, found '{f}'"))
        })
        .collect()
}

fn u64_list(text: &str) -> Result<Vec<u64>, String> {
    let body = text
        .trim()
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| format!("a list [..], found {text}"))?;
    body.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse()
                .map_err(|_| format!("a non-negative integer, found '{t}'"))
        })
        .collect()
}

fn u64_value(text: &str) -> Result<u64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("a non-negative integer, found '{text}'"))
}

/// `#stablehlo.gather<offset_dims = [2], ..., index_vector_dim = 2>`.
pub fn parse_gather_dims(text: &str) -> Result<GatherDims, String> {
    let mut d = GatherDims::default();
    for (k, v) in struct_fields(text, "gather")? {
        match k {
            "offset_dims" => d.offset_dims = u64_list(v)?,
            "collapsed_slice_dims" => d.collapsed_slice_dims = u64_list(v)?,
            "operand_batching_dims" => d.operand_batching_dims = u64_list(v)?,
            "start_indices_batching_dims" => d.start_indices_batching_dims = u64_list(v)?,
            "start_index_map" => d.start_index_map = u64_list(v)?,
            "index_vector_dim" => d.index_vector_dim = u64_value(v)?,
            _ => return Err(format!("a gather dimension field, found '{k}'")),
        }
    }
    Ok(d)
}

fn push_list(out: &mut Vec<String>, key: &str, v: &[u64]) {
    if !v.is_empty() {
        out.push(format!("{key} = {}", list_text(v)));
    }
}

fn list_text<T: std::fmt::Display>(v: &[T]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// The text [`parse_gather_dims`] reads.
pub fn format_gather_dims(d: &GatherDims) -> String {
    let mut f = Vec::new();
    push_list(&mut f, "offset_dims", &d.offset_dims);
    push_list(&mut f, "collapsed_slice_dims", &d.collapsed_slice_dims);
    push_list(&mut f, "operand_batching_dims", &d.operand_batching_dims);
    push_list(
        &mut f,
        "start_indices_batching_dims",
        &d.start_indices_batching_dims,
    );
    push_list(&mut f, "start_index_map", &d.start_index_map);
    f.push(format!("index_vector_dim = {}", d.index_vector_dim));
    format!("#stablehlo.gather<{}>", f.join(", "))
}

/// `#stablehlo.scatter<update_window_dims = [2], ...>`.
pub fn parse_scatter_dims(text: &str) -> Result<ScatterDims, String> {
    let mut d = ScatterDims::default();
    for (k, v) in struct_fields(text, "scatter")? {
        match k {
            "update_window_dims" => d.update_window_dims = u64_list(v)?,
            "inserted_window_dims" => d.inserted_window_dims = u64_list(v)?,
            "input_batching_dims" => d.input_batching_dims = u64_list(v)?,
            "scatter_indices_batching_dims" => d.scatter_indices_batching_dims = u64_list(v)?,
            "scatter_dims_to_operand_dims" => d.scatter_dims_to_operand_dims = u64_list(v)?,
            "index_vector_dim" => d.index_vector_dim = u64_value(v)?,
            _ => return Err(format!("a scatter dimension field, found '{k}'")),
        }
    }
    Ok(d)
}

/// The text [`parse_scatter_dims`] reads.
pub fn format_scatter_dims(d: &ScatterDims) -> String {
    let mut f = Vec::new();
    push_list(&mut f, "update_window_dims", &d.update_window_dims);
    push_list(&mut f, "inserted_window_dims", &d.inserted_window_dims);
    push_list(&mut f, "input_batching_dims", &d.input_batching_dims);
    push_list(
        &mut f,
        "scatter_indices_batching_dims",
        &d.scatter_indices_batching_dims,
    );
    push_list(
        &mut f,
        "scatter_dims_to_operand_dims",
        &d.scatter_dims_to_operand_dims,
    );
    f.push(format!("index_vector_dim = {}", d.index_vector_dim));
    format!("#stablehlo.scatter<{}>", f.join(", "))
}

/// `array<i64: 1, 2>`.
pub fn format_i64_array<T: std::fmt::Display>(v: &[T]) -> String {
    if v.is_empty() {
        return "array<i64>".into();
    }
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("array<i64: {}>", items.join(", "))
}

/// `dense<[[lo, hi], ...]> : tensor<Nx2xi64>` (or a splat `dense<0> : tensor<Nx2xi64>`).
pub fn parse_padding(text: &str) -> Result<Vec<(i64, i64)>, String> {
    let bad = || format!("dense<[[lo, hi], ...]> : tensor<Nx2xi64>, found {text}");
    let body = text.trim().strip_prefix("dense<").ok_or_else(bad)?;
    let (values, ty) = body.split_once('>').ok_or_else(bad)?;
    let rows: usize = ty
        .trim()
        .strip_prefix(':')
        .map(str::trim)
        .and_then(|t| t.strip_prefix("tensor<"))
        .and_then(|t| t.strip_suffix("x2xi64>"))
        .and_then(|t| t.parse().ok())
        .ok_or_else(bad)?;
    let flat: Vec<i64> = values
        .split(['[', ']', ','])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let flat = match flat.len() {
        1 if rows * 2 != 1 => vec![flat[0]; rows * 2],
        n if n == rows * 2 => flat,
        _ => return Err(bad()),
    };
    Ok(flat.chunks(2).map(|p| (p[0], p[1])).collect())
}

/// The text [`parse_padding`] reads.
pub fn format_padding(p: &[(i64, i64)]) -> String {
    let rows: Vec<String> = p.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
    format!("dense<[{}]> : tensor<{}x2xi64>", rows.join(", "), p.len())
}

/// `true` / `false`.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        t => Err(format!("true or false, found '{t}'")),
    }
}

/// `N : i64`.
pub fn parse_i64_attr(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t.strip_suffix(": i64").unwrap_or(t).trim();
    t.parse()
        .map_err(|_| format!("a non-negative integer attribute, found '{text}'"))
}

/// One `[b, f, 0, 1]` list: (batch-like letter position, feature-like letter
/// position, spatial dims in order of their number).
fn conv_list(c: &mut Cursor<'_>, letters: [char; 2]) -> Result<(u64, u64, Vec<u64>), TextError> {
    c.expect("[")?;
    let (mut a, mut b) = (None, None);
    let mut spatial: Vec<(u64, u64)> = Vec::new();
    let mut pos = 0u64;
    if !c.eat("]") {
        loop {
            c.ws();
            let start = c.pos();
            if c.peek().is_some_and(|ch| ch.is_ascii_digit()) {
                let n = c.uint()?;
                spatial.push((n, pos));
            } else {
                let word = c.ident()?;
                let slot = match word {
                    w if w.len() == 1 && w.starts_with(letters[0]) => &mut a,
                    w if w.len() == 1 && w.starts_with(letters[1]) => &mut b,
                    _ => {
                        return Err(c.error_with(
                            start,
                            format!("'{}', '{}' or a spatial dim number", letters[0], letters[1]),
                            format!("'{word}'"),
                        ))
                    }
                };
                if slot.replace(pos).is_some() {
                    return Err(c.error_with(
                        start,
                        "each dim role once",
                        format!("'{word}' twice"),
                    ));
                }
            }
            pos += 1;
            if c.eat("]") {
                break;
            }
            c.expect(",")?;
        }
    }
    spatial.sort_unstable();
    if spatial.iter().enumerate().any(|(i, &(n, _))| n != i as u64) {
        return Err(c.error("spatial dims numbered 0, 1, ... once each"));
    }
    let mut need = |x: Option<u64>, l: char| {
        x.ok_or_else(|| c.error(format!("a '{l}' dim in the convolution dim_numbers")))
    };
    Ok((
        need(a, letters[0])?,
        need(b, letters[1])?,
        spatial.into_iter().map(|(_, p)| p).collect(),
    ))
}

/// `[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`.
pub fn parse_conv_dims(c: &mut Cursor<'_>) -> Result<ConvDims, TextError> {
    let (input_batch, input_feature, input_spatial) = conv_list(c, ['b', 'f'])?;
    c.ws();
    if !c.eat("x") {
        return Err(c.error("'x' between the input and kernel dims"));
    }
    let (kernel_output_feature, kernel_input_feature, kernel_spatial) = conv_list(c, ['o', 'i'])?;
    c.expect("->")?;
    let (output_batch, output_feature, output_spatial) = conv_list(c, ['b', 'f'])?;
    Ok(ConvDims {
        input_batch,
        input_feature,
        input_spatial,
        kernel_input_feature,
        kernel_output_feature,
        kernel_spatial,
        output_batch,
        output_feature,
        output_spatial,
    })
}

fn conv_list_text(a: (u64, &str), b: (u64, &str), spatial: &[u64]) -> String {
    let rank = spatial.len() + 2;
    let items: Vec<String> = (0..rank as u64)
        .map(|p| {
            if p == a.0 {
                a.1.to_string()
            } else if p == b.0 {
                b.1.to_string()
            } else {
                spatial
                    .iter()
                    .position(|&s| s == p)
                    .map_or_else(|| "?".to_string(), |i| i.to_string())
            }
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// The text [`parse_conv_dims`] reads.
pub fn format_conv_dims(d: &ConvDims) -> String {
    format!(
        "{}x{}->{}",
        conv_list_text(
            (d.input_batch, "b"),
            (d.input_feature, "f"),
            &d.input_spatial
        ),
        conv_list_text(
            (d.kernel_output_feature, "o"),
            (d.kernel_input_feature, "i"),
            &d.kernel_spatial
        ),
        conv_list_text(
            (d.output_batch, "b"),
            (d.output_feature, "f"),
            &d.output_spatial
        )
    )
}

/// `{stride = [..], pad = [[l, h], ..], lhs_dilate = [..], rhs_dilate = [..], reverse = [..]}`.
pub fn parse_conv_window(c: &mut Cursor<'_>) -> Result<ConvWindow, TextError> {
    let mut w = ConvWindow::default();
    c.expect("{")?;
    if c.eat("}") {
        return Ok(w);
    }
    loop {
        c.ws();
        let kpos = c.pos();
        let key = c.ident()?;
        c.expect("=")?;
        match key {
            "stride" => w.stride = Some(int_list(c)?),
            "lhs_dilate" => w.lhs_dilate = Some(int_list(c)?),
            "rhs_dilate" => w.rhs_dilate = Some(int_list(c)?),
            "pad" => {
                c.expect("[")?;
                let mut pads = Vec::new();
                if !c.eat("]") {
                    loop {
                        let p = int_list(c)?;
                        let [lo, hi] = p[..] else {
                            return Err(c.error("a [low, high] padding pair"));
                        };
                        pads.push((lo, hi));
                        if c.eat("]") {
                            break;
                        }
                        c.expect(",")?;
                    }
                }
                w.pad = Some(pads);
            }
            "reverse" => {
                c.expect("[")?;
                let mut v = Vec::new();
                if !c.eat("]") {
                    loop {
                        c.ws();
                        let p = c.pos();
                        v.push(match c.ident()? {
                            "true" | "1" => true,
                            "false" | "0" => false,
                            other => {
                                return Err(c.error_with(p, "true or false", format!("'{other}'")))
                            }
                        });
                        if c.eat("]") {
                            break;
                        }
                        c.expect(",")?;
                    }
                }
                w.reverse = Some(v);
            }
            other => {
                return Err(c.error_with(
                    kpos,
                    "stride, pad, lhs_dilate, rhs_dilate or reverse",
                    format!("'{other}'"),
                ))
            }
        }
        if c.eat("}") {
            return Ok(w);
        }
        c.expect(",")?;
    }
}

/// The text [`parse_conv_window`] reads; `None` when nothing was written.
pub fn format_conv_window(w: &ConvWindow) -> Option<String> {
    let mut f = Vec::new();
    if let Some(s) = &w.stride {
        f.push(format!("stride = {}", list_text(s)));
    }
    if let Some(p) = &w.pad {
        let rows: Vec<String> = p.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
        f.push(format!("pad = [{}]", rows.join(", ")));
    }
    if let Some(s) = &w.lhs_dilate {
        f.push(format!("lhs_dilate = {}", list_text(s)));
    }
    if let Some(s) = &w.rhs_dilate {
        f.push(format!("rhs_dilate = {}", list_text(s)));
    }
    if let Some(r) = &w.reverse {
        f.push(format!("reverse = {}", list_text(r)));
    }
    (!f.is_empty()).then(|| format!("{{{}}}", f.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_dims_round_trip() {
        let t = "#stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>";
        assert_eq!(format_gather_dims(&parse_gather_dims(t).unwrap()), t);
    }

    #[test]
    fn padding_round_trip() {
        let t = "dense<[[127, 0], [0, -1]]> : tensor<2x2xi64>";
        assert_eq!(format_padding(&parse_padding(t).unwrap()), t);
    }

    #[test]
    fn conv_dims_round_trip() {
        let t = "[b, 0, 1, f]x[0, 1, i, o]->[b, f, 0, 1]";
        let mut c = Cursor::new(t);
        assert_eq!(format_conv_dims(&parse_conv_dims(&mut c).unwrap()), t);
    }
}
