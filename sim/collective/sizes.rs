//! Message-size lists as nccl-tests takes them: `8B:8GiB:x2` (start, end,
//! factor), `1MiB,1GiB` or plain byte counts `1048576,4194304`.

use super::CollectiveError;

/// Parse one size: a byte count with an optional unit (B, KB/MB/GB = 1e3..,
/// KiB/MiB/GiB/TiB = 2^10..; K/M/G alone mean binary units as in nccl-tests).
pub fn parse_size(text: &str) -> Result<u64, CollectiveError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        CollectiveError::Sizes(format!(
            "'{text}' is not a size (expected e.g. 8B, 1MiB, 1048576)"
        ))
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

/// Parse a size list: `START:END:xF` (geometric, END included when reached) or
/// a comma-separated list.
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, CollectiveError> {
    let parts: Vec<&str> = text.split(':').collect();
    match parts.as_slice() {
        [start, end, step] => {
            let (a, b) = (parse_size(start)?, parse_size(end)?);
            let f: u64 = step
                .strip_prefix('x')
                .and_then(|f| f.parse().ok())
                .filter(|&f| f >= 2)
                .ok_or_else(|| {
                    CollectiveError::Sizes(format!("step '{step}' should be a factor like x2"))
                })?;
            if a == 0 || a > b {
                return Err(CollectiveError::Sizes(format!(
                    "'{text}': start must be > 0 and <= end"
                )));
            }
            let mut out = Vec::new();
            let mut s = a;
            while s <= b {
                out.push(s);
                match s.checked_mul(f) {
                    Some(x) => s = x,
                    None => break,
                }
            }
            Ok(out)
        }
        [list] => list.split(',').map(parse_size).collect(),
        _ => Err(CollectiveError::Sizes(format!(
            "'{text}' should be START:END:xF or a comma-separated list"
        ))),
    }
}
