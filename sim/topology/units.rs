//! Physical quantities parsed from and printed as text with units:
//! bandwidth (`450GB/s`, `400Gb/s`), time (`2us`, `0.6us`), sizes (`80GiB`, `80GB`)
//! and compute rates (`989TFLOP/s`). Values are exact integers (bytes/s, ps,
//! bytes, FLOP/s); decimal text is converted without floating point, and text
//! that is not a whole number of the base unit is rejected. Printing picks the
//! largest unit that keeps the number short and parses back to the same value.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A quantity that failed to parse: what was written and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad {kind} '{text}': {reason} (expected {example})")]
pub struct UnitError {
    /// The kind of quantity (`bandwidth`, `time`, ...).
    pub kind: &'static str,
    /// The text as written.
    pub text: String,
    /// What was wrong.
    pub reason: String,
    /// An example of what is accepted, naming the units.
    pub example: &'static str,
}

/// One unit of a quantity: its spelling and its size in the base unit.
struct Unit {
    name: &'static str,
    scale: u128,
}

const BANDWIDTH_UNITS: &[Unit] = &[
    Unit {
        name: "B/s",
        scale: 1,
    },
    Unit {
        name: "KB/s",
        scale: 1_000,
    },
    Unit {
        name: "MB/s",
        scale: 1_000_000,
    },
    Unit {
        name: "GB/s",
        scale: 1_000_000_000,
    },
    Unit {
        name: "TB/s",
        scale: 1_000_000_000_000,
    },
];
/// Bit rates: the scale is in bits; the value is divided by 8.
const BIT_RATE_UNITS: &[Unit] = &[
    Unit {
        name: "b/s",
        scale: 1,
    },
    Unit {
        name: "Kb/s",
        scale: 1_000,
    },
    Unit {
        name: "Mb/s",
        scale: 1_000_000,
    },
    Unit {
        name: "Gb/s",
        scale: 1_000_000_000,
    },
    Unit {
        name: "Tb/s",
        scale: 1_000_000_000_000,
    },
];
const TIME_UNITS: &[Unit] = &[
    Unit {
        name: "ps",
        scale: 1,
    },
    Unit {
        name: "ns",
        scale: 1_000,
    },
    Unit {
        name: "us",
        scale: 1_000_000,
    },
    Unit {
        name: "ms",
        scale: 1_000_000_000,
    },
    Unit {
        name: "s",
        scale: 1_000_000_000_000,
    },
];
const DECIMAL_SIZE_UNITS: &[Unit] = &[
    Unit {
        name: "B",
        scale: 1,
    },
    Unit {
        name: "KB",
        scale: 1_000,
    },
    Unit {
        name: "MB",
        scale: 1_000_000,
    },
    Unit {
        name: "GB",
        scale: 1_000_000_000,
    },
    Unit {
        name: "TB",
        scale: 1_000_000_000_000,
    },
];
const BINARY_SIZE_UNITS: &[Unit] = &[
    Unit {
        name: "KiB",
        scale: 1 << 10,
    },
    Unit {
        name: "MiB",
        scale: 1 << 20,
    },
    Unit {
        name: "GiB",
        scale: 1 << 30,
    },
    Unit {
        name: "TiB",
        scale: 1 << 40,
    },
];
const FLOP_UNITS: &[Unit] = &[
    Unit {
        name: "FLOP/s",
        scale: 1,
    },
    Unit {
        name: "GFLOP/s",
        scale: 1_000_000_000,
    },
    Unit {
        name: "TFLOP/s",
        scale: 1_000_000_000_000,
    },
    Unit {
        name: "PFLOP/s",
        scale: 1_000_000_000_000_000,
    },
];

/// Split `450.5GB/s` into the number `450.5` and the unit `GB/s`.
fn split_number(text: &str) -> (&str, &str) {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '-' || *c == '+' || *c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    (t[..end].trim(), t[end..].trim())
}

/// Exact value of decimal `number` times `scale` divided by `divisor`, or why not.
fn exact(number: &str, scale: u128, divisor: u128) -> Result<u128, String> {
    if number.starts_with('-') {
        return Err("must not be negative".into());
    }
    let number = number.trim_start_matches('+').replace('_', "");
    let (int, frac) = number.split_once('.').unwrap_or((&number, ""));
    if int.is_empty() && frac.is_empty() {
        return Err("no number".into());
    }
    if !int.chars().all(|c| c.is_ascii_digit())
        || !frac.chars().all(|c| c.is_ascii_digit())
        || frac.len() > 18
    {
        return Err(format!("'{number}' is not a decimal number"));
    }
    let digits: u128 = format!("{int}{frac}")
        .parse::<u128>()
        .map_err(|_| format!("'{number}' is too large"))?;
    let denom = 10u128.pow(frac.len() as u32) * divisor;
    let scaled = digits
        .checked_mul(scale)
        .ok_or_else(|| format!("'{number}' is too large"))?;
    if scaled % denom != 0 {
        return Err("is not a whole number of the base unit".into());
    }
    Ok(scaled / denom)
}

fn parse_with(
    text: &str,
    kind: &'static str,
    example: &'static str,
    tables: &[(&[Unit], u128)],
) -> Result<u64, UnitError> {
    let err = |reason: String| UnitError {
        kind,
        text: text.to_string(),
        reason,
        example,
    };
    let (number, unit) = split_number(text);
    if number.is_empty() {
        return Err(err("no number".into()));
    }
    if unit.is_empty() {
        return Err(err("no unit".into()));
    }
    for (table, divisor) in tables {
        if let Some(u) = table.iter().find(|u| u.name == unit) {
            let v = exact(number, u.scale, *divisor).map_err(err)?;
            return u64::try_from(v).map_err(|_| err("is too large".into()));
        }
    }
    Err(err(format!("unknown unit '{unit}'")))
}

/// Print `value` (in the base unit) with the largest unit of `table` that gives
/// a number with at most 3 decimals, exactly.
fn print_with(value: u64, table: &[Unit]) -> String {
    let v = value as u128;
    for u in table.iter().rev() {
        if v >= u.scale || u.scale == 1 {
            for decimals in 0..=3u32 {
                let p = 10u128.pow(decimals);
                if (v * p) % u.scale == 0 {
                    let scaled = v * p / u.scale;
                    let int = scaled / p;
                    let frac = scaled % p;
                    return if decimals == 0 {
                        format!("{int}{}", u.name)
                    } else {
                        format!(
                            "{int}.{:0width$}{}",
                            frac,
                            u.name,
                            width = decimals as usize
                        )
                    };
                }
            }
        }
    }
    format!("{value}{}", table[0].name)
}

macro_rules! quantity {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $example:literal, $tables:expr, $print:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u64);

        impl $name {
            /// Parse from text with a unit.
            pub fn parse(text: &str) -> Result<Self, UnitError> {
                parse_with(text, $kind, $example, $tables).map($name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&($print)(self.0))
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnitError;
            fn from_str(s: &str) -> Result<Self, UnitError> {
                $name::parse(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_string())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "a {} with a unit as a string, e.g. {}", $kind, $example)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::parse(v).map_err(E::custom)
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$name, E> {
                        Err(E::custom(format!(
                            "bad {} {v}: {}a number needs a unit (expected a string such as {})",
                            $kind,
                            if v < 0 { "must not be negative, and " } else { "" },
                            $example
                        )))
                    }
                    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<$name, E> {
                        Err(E::custom(format!(
                            "bad {} {v}: {}a number needs a unit (expected a string such as {})",
                            $kind,
                            if v < 0.0 { "must not be negative, and " } else { "" },
                            $example
                        )))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

quantity!(
    /// Bytes per second, in one direction. Parsed from `GB/s`-style byte rates
    /// (decimal: 1 GB = 1e9 B) or `Gb/s`-style bit rates; printed as a byte rate.
    Bandwidth,
    "bandwidth",
    "\"450GB/s\" or \"400Gb/s\" (units B/s KB/s MB/s GB/s TB/s, b/s Kb/s Mb/s Gb/s Tb/s)",
    &[(BANDWIDTH_UNITS, 1), (BIT_RATE_UNITS, 8)],
    |v| print_with(v, BANDWIDTH_UNITS)
);
quantity!(
    /// A duration in picoseconds (`2us`, `600ns`, `0.6us`).
    Duration,
    "time",
    "\"2us\" (units ps ns us ms s)",
    &[(TIME_UNITS, 1)],
    |v| print_with(v, TIME_UNITS)
);
quantity!(
    /// A size in bytes (`80GB` decimal, `80GiB` binary). Printed in binary units
    /// when exact, else decimal.
    ByteSize,
    "size",
    "\"80GiB\" or \"80GB\" (units B KB MB GB TB KiB MiB GiB TiB)",
    &[(DECIMAL_SIZE_UNITS, 1), (BINARY_SIZE_UNITS, 1)],
    print_size
);
quantity!(
    /// Floating-point operations per second (`989TFLOP/s`).
    FlopRate,
    "compute rate",
    "\"989TFLOP/s\" (units FLOP/s GFLOP/s TFLOP/s PFLOP/s)",
    &[(FLOP_UNITS, 1)],
    |v| print_with(v, FLOP_UNITS)
);

/// Sizes print in decimal units when that is short and exact (`80GB`), else in
/// binary units when exact (`80GiB`), else in decimal with decimals.
fn print_size(v: u64) -> String {
    let decimal = print_with(v, DECIMAL_SIZE_UNITS);
    if !decimal.contains('.') {
        return decimal;
    }
    ByteSize(v).to_binary_string().unwrap_or(decimal)
}

impl Bandwidth {
    /// Bytes per second.
    pub fn bytes_per_s(self) -> u64 {
        self.0
    }
    /// The same rate printed in bits (`400Gb/s`), as network ports are quoted.
    pub fn to_bits_string(self) -> String {
        print_with(self.0.saturating_mul(8), BIT_RATE_UNITS)
    }
}

impl Duration {
    /// Picoseconds.
    pub fn ps(self) -> u64 {
        self.0
    }
}

impl ByteSize {
    /// Print with binary units when the size is a whole number of KiB..TiB.
    pub fn to_binary_string(self) -> Option<String> {
        BINARY_SIZE_UNITS
            .iter()
            .rev()
            .find(|u| self.0 as u128 >= u.scale && self.0 as u128 % u.scale == 0)
            .map(|u| format!("{}{}", self.0 as u128 / u.scale, u.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        assert_eq!(Bandwidth::parse("450GB/s").unwrap().0, 450_000_000_000);
        assert_eq!(Bandwidth::parse("400Gb/s").unwrap().0, 50_000_000_000);
        assert_eq!(
            Bandwidth::parse("31.5GB/s").unwrap().to_string(),
            "31.5GB/s"
        );
        assert_eq!(Duration::parse("0.6us").unwrap().0, 600_000);
        assert_eq!(Duration::parse("2us").unwrap().to_string(), "2us");
        assert_eq!(ByteSize::parse("80GiB").unwrap().0, 80 << 30);
        assert_eq!(
            FlopRate::parse("989TFLOP/s").unwrap().to_string(),
            "989TFLOP/s"
        );
        assert!(Bandwidth::parse("-1GB/s")
            .unwrap_err()
            .to_string()
            .contains("negative"));
        assert!(Bandwidth::parse("450GBs")
            .unwrap_err()
            .to_string()
            .contains("GB/s"));
        assert!(Duration::parse("0.5ps").is_err());
    }
}
