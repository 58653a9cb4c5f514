//! The collectives of an XLA partitioned HLO module (`spmd.hlo`, text form):
//! all-reduce, all-gather, reduce-scatter, all-to-all and collective-permute
//! (and their `-start` forms), each with the per-device buffer size of the
//! larger of its operands and its result, counted as the partitioner counts
//! its own collectives. This is the communication budget the partitioner is
//! compared with.

use std::collections::BTreeMap;

/// One collective instruction of an HLO module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HloCollective {
    /// `all-reduce`, `all-gather`, ... (a `-start` suffix removed).
    pub op: String,
    /// The instruction name (`%all-reduce.1`).
    pub name: String,
    /// Bytes of the larger of the operands (summed) and the result (summed over a tuple).
    pub bytes: u64,
    /// 1-based line in the text.
    pub line: usize,
}

/// A line that does not read as an HLO instruction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: expected {expected}, found {found}")]
pub struct HloError {
    pub line: usize,
    pub col: usize,
    pub expected: String,
    pub found: String,
}

const COLLECTIVES: [&str; 5] = [
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
];

fn elem_bytes(t: &str) -> Option<u64> {
    Some(match t {
        "pred" | "s8" | "u8" => 1,
        "s16" | "u16" | "f16" | "bf16" => 2,
        "s32" | "u32" | "f32" => 4,
        "s64" | "u64" | "f64" | "c64" => 8,
        "c128" => 16,
        "token" => 0,
        _ => return None,
    })
}

/// Bytes of a shape text: `f32[8,16]{1,0}`, `f32[]`, or a tuple `(f32[2], s32[])`.
fn shape_bytes(text: &str) -> Option<u64> {
    let mut total = 0u64;
    let mut rest = text;
    let mut found = false;
    while let Some(open) = rest.find('[') {
        let head = &rest[..open];
        let ty = head
            .rsplit(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap_or("");
        let close = rest[open..].find(']')? + open;
        let dims = &rest[open + 1..close];
        let elems: u64 = if dims.trim().is_empty() {
            1
        } else {
            dims.split(',')
                .map(|d| d.trim().trim_start_matches("<=").parse::<u64>().ok())
                .product::<Option<u64>>()?
        };
        total += elems * elem_bytes(ty)?;
        found = true;
        rest = &rest[close + 1..];
    }
    found.then_some(total)
}

/// Split an instruction line `[ROOT ]%name = SHAPE opcode(operands), attrs`.
fn split_instruction(line: &str) -> Option<(&str, &str, &str, &str)> {
    let body = line.trim_start().trim_start_matches("ROOT ").trim_start();
    if !body.starts_with('%') {
        return None;
    }
    let eq = body.find(" = ")?;
    let name = &body[..eq];
    let rhs = &body[eq + 3..];
    // The shape ends before the opcode: the last space before the first '(' that
    // follows a tuple's closing paren or a layout.
    let mut depth = 0i32;
    let mut shape_end = None;
    for (i, c) in rhs.char_indices() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            ' ' if depth == 0 => {
                shape_end = Some(i);
                break;
            }
            _ => {}
        }
    }
    let shape_end = shape_end?;
    let shape = &rhs[..shape_end];
    let after = &rhs[shape_end + 1..];
    let paren = after.find('(')?;
    let opcode = &after[..paren];
    let close = after[paren..].find(')')? + paren;
    let operands = &after[paren + 1..close];
    Some((name, shape, opcode, operands))
}

/// Every collective of `text`, in order.
pub fn parse_collectives(text: &str) -> Result<Vec<HloCollective>, HloError> {
    let mut shapes: BTreeMap<String, u64> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((name, shape, opcode, operands)) = split_instruction(line) else {
            continue;
        };
        let col = line.find(shape).unwrap_or(0) + 1;
        let bytes = shape_bytes(shape).ok_or_else(|| HloError {
            line: i + 1,
            col,
            expected: "a shape like f32[8,16]{1,0}".into(),
            found: format!("'{shape}'"),
        })?;
        shapes.insert(name.to_string(), bytes);
        let base = opcode.trim_end_matches("-start");
        if COLLECTIVES.contains(&base) && !opcode.ends_with("-done") {
            let mut operand_bytes = 0u64;
            for o in operands.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                // An operand is `%name` (or `f32[..] %name` in older dumps).
                let oname = o.rsplit(' ').next().unwrap_or(o);
                operand_bytes += shapes.get(oname).copied().ok_or_else(|| HloError {
                    line: i + 1,
                    col: line.find(o).unwrap_or(0) + 1,
                    expected: "an operand defined earlier".into(),
                    found: format!("'{o}'"),
                })?;
            }
            // A start op's result tuple holds the operand and the output: count the output.
            let result = if opcode.ends_with("-start") {
                bytes.saturating_sub(operand_bytes).max(operand_bytes)
            } else {
                bytes
            };
            out.push(HloCollective {
                op: base.to_string(),
                name: name.to_string(),
                bytes: result.max(operand_bytes),
                line: i + 1,
            });
        }
    }
    Ok(out)
}

/// Sum of the collectives' bytes (per device).
pub fn total_bytes(text: &str) -> Result<u64, HloError> {
    Ok(parse_collectives(text)?.iter().map(|c| c.bytes).sum())
}
