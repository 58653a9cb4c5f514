//! Shardy's `#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=16, k=32}
//! reduction={k} ...>`: how an op's operand and result dims map to factors.
//! Factors are named `i`..`z`, then `z_1`, `z_2`, ...; a dim made of several
//! factors (a reshape) is written by concatenating their names (`[ij]`).

use std::fmt;

use crate::base::{Cursor, TextError};

/// An op sharding rule as a typed value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct OpShardingRule {
    /// Size of each factor (factor index = position).
    pub factor_sizes: Vec<u64>,
    /// Per operand, per dim: the factors of that dim, major to minor.
    pub operand_mappings: Vec<Vec<Vec<usize>>>,
    /// Per result, per dim: the factors of that dim.
    pub result_mappings: Vec<Vec<Vec<usize>>>,
    pub reduction_factors: Vec<usize>,
    pub need_replication_factors: Vec<usize>,
    pub permutation_factors: Vec<usize>,
    pub blocked_propagation_factors: Vec<usize>,
    /// `, custom` suffix: a rule registered by the user.
    pub is_custom: bool,
}

/// The printed name of factor `i`: `i`..`z`, then `z_1`, `z_2`, ...
pub fn factor_name(i: usize) -> String {
    if i < 18 {
        char::from(b'i' + i as u8).to_string()
    } else {
        format!("z_{}", i - 17)
    }
}

impl OpShardingRule {
    /// Parse a whole text (with or without the `#sdy.op_sharding_rule` prefix).
    pub fn parse(text: &str) -> Result<OpShardingRule, TextError> {
        let mut c = Cursor::new(text);
        let r = OpShardingRule::parse_at(&mut c)?;
        if !c.at_end() {
            return Err(c.error("end of sharding rule"));
        }
        Ok(r)
    }

    /// Parse a rule at the cursor.
    pub fn parse_at(c: &mut Cursor<'_>) -> Result<OpShardingRule, TextError> {
        c.eat("#sdy.op_sharding_rule");
        c.expect("<")?;
        let mut rule = OpShardingRule::default();
        let mut max_factor: Option<usize> = None;
        let mut note = |f: usize| max_factor = Some(max_factor.map_or(f, |m| m.max(f)));
        rule.operand_mappings = parse_mapping_list(c, &mut note)?;
        c.expect("->")?;
        rule.result_mappings = parse_mapping_list(c, &mut note)?;
        let mut sizes: Vec<Option<u64>> = vec![None; max_factor.map_or(0, |m| m + 1)];
        if c.peek() == Some('{') {
            c.expect("{")?;
            if !c.eat("}") {
                loop {
                    c.ws();
                    let pos = c.pos();
                    let f = parse_factor(c)?;
                    c.expect("=")?;
                    let size = c.uint()?;
                    if f >= sizes.len() {
                        if f > 4096 {
                            return Err(c.error_with(
                                pos,
                                "a factor used by the mappings",
                                factor_name(f),
                            ));
                        }
                        sizes.resize(f + 1, None);
                    }
                    if sizes[f].is_some() {
                        return Err(c.error_with(
                            pos,
                            "each factor size given once",
                            format!("a second size for {}", factor_name(f)),
                        ));
                    }
                    sizes[f] = Some(size);
                    if c.eat("}") {
                        break;
                    }
                    if !c.eat(",") {
                        return Err(c.error("',' or '}' after a factor size"));
                    }
                }
            }
        }
        let end_sizes = c.pos();
        for (i, s) in sizes.iter().enumerate() {
            match s {
                Some(v) => rule.factor_sizes.push(*v),
                None => {
                    return Err(c.error_with(
                        end_sizes,
                        format!("a size for factor {}", factor_name(i)),
                        "none",
                    ))
                }
            }
        }
        let n = rule.factor_sizes.len();
        loop {
            c.ws();
            let pos = c.pos();
            let list = if c.eat_keyword("reduction") {
                &mut rule.reduction_factors
            } else if c.eat_keyword("need_replication") {
                &mut rule.need_replication_factors
            } else if c.eat_keyword("permutation") {
                &mut rule.permutation_factors
            } else if c.eat_keyword("blocked_propagation") {
                &mut rule.blocked_propagation_factors
            } else {
                break;
            };
            if !list.is_empty() {
                return Err(c.error_with(pos, "each factor list given once", "a repeated list"));
            }
            c.expect("=")?;
            c.expect("{")?;
            if !c.eat("}") {
                loop {
                    c.ws();
                    let fpos = c.pos();
                    let f = parse_factor(c)?;
                    if f >= n {
                        return Err(c.error_with(fpos, "a factor with a size", factor_name(f)));
                    }
                    list.push(f);
                    if c.eat("}") {
                        break;
                    }
                    if !c.eat(",") {
                        return Err(c.error("',' or '}' in a factor list"));
                    }
                }
            }
        }
        if c.eat(",") {
            if !c.eat_keyword("custom") {
                return Err(c.error("'custom'"));
            }
            rule.is_custom = true;
        }
        c.expect(">")?;
        Ok(rule)
    }

    /// Number of factors.
    pub fn num_factors(&self) -> usize {
        self.factor_sizes.len()
    }
}

/// `([i, j], [])` → per tensor, per dim, factor indices.
fn parse_mapping_list(
    c: &mut Cursor<'_>,
    note: &mut dyn FnMut(usize),
) -> Result<Vec<Vec<Vec<usize>>>, TextError> {
    c.expect("(")?;
    let mut tensors = Vec::new();
    if c.eat(")") {
        return Ok(tensors);
    }
    loop {
        c.expect("[")?;
        let mut dims = Vec::new();
        if !c.eat("]") {
            loop {
                c.ws();
                let mut factors = Vec::new();
                // `*`: a null mapping, the dim maps to no factor.
                if !c.eat("*") {
                    while matches!(c.peek_raw(), Some('i'..='z')) {
                        let f = parse_factor(c)?;
                        note(f);
                        factors.push(f);
                    }
                    if factors.is_empty() {
                        return Err(c.error("a factor name (i..z, z_1, ...) or *"));
                    }
                }
                dims.push(factors);
                if c.eat("]") {
                    break;
                }
                if !c.eat(",") {
                    return Err(c.error("',' or ']' after a dim's factors"));
                }
            }
        }
        tensors.push(dims);
        if c.eat(")") {
            return Ok(tensors);
        }
        if !c.eat(",") {
            return Err(c.error("',' or ')' after a tensor's mapping"));
        }
    }
}

/// One factor name at the cursor (no leading whitespace skipped after the first).
fn parse_factor(c: &mut Cursor<'_>) -> Result<usize, TextError> {
    c.ws();
    let rest = c.rest().as_bytes();
    match rest.first() {
        Some(&b) if (b'i'..=b'z').contains(&b) => {
            if b == b'z'
                && rest.get(1) == Some(&b'_')
                && rest.get(2).is_some_and(|d| d.is_ascii_digit())
            {
                let digits = rest[2..].iter().take_while(|d| d.is_ascii_digit()).count();
                let text = &c.rest()[2..2 + digits];
                let start = c.pos();
                let n: usize = text
                    .parse()
                    .ok()
                    .filter(|&n: &usize| (1..=100_000).contains(&n))
                    .ok_or_else(|| {
                        c.error_with(start, "a factor number z_1, z_2, ...", format!("z_{text}"))
                    })?;
                c.set_pos(c.pos() + 2 + digits);
                Ok(17 + n)
            } else {
                c.set_pos(c.pos() + 1);
                Ok(usize::from(b - b'i'))
            }
        }
        _ => Err(c.error("a factor name (i..z, z_1, ...)")),
    }
}

fn write_mappings(f: &mut fmt::Formatter<'_>, tensors: &[Vec<Vec<usize>>]) -> fmt::Result {
    f.write_str("(")?;
    for (t, dims) in tensors.iter().enumerate() {
        if t > 0 {
            f.write_str(", ")?;
        }
        f.write_str("[")?;
        for (d, factors) in dims.iter().enumerate() {
            if d > 0 {
                f.write_str(", ")?;
            }
            if factors.is_empty() {
                f.write_str("*")?;
            }
            for &x in factors {
                f.write_str(&factor_name(x))?;
            }
        }
        f.write_str("]")?;
    }
    f.write_str(")")
}

impl fmt::Display for OpShardingRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("#sdy.op_sharding_rule<")?;
        write_mappings(f, &self.operand_mappings)?;
        f.write_str("->")?;
        write_mappings(f, &self.result_mappings)?;
        if !self.factor_sizes.is_empty() {
            f.write_str(" {")?;
            for (i, s) in self.factor_sizes.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{}={s}", factor_name(i))?;
            }
            f.write_str("}")?;
        }
        for (kw, list) in [
            ("reduction", &self.reduction_factors),
            ("need_replication", &self.need_replication_factors),
            ("permutation", &self.permutation_factors),
            ("blocked_propagation", &self.blocked_propagation_factors),
        ] {
            if !list.is_empty() {
                write!(f, " {kw}={{")?;
                for (i, &x) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(&factor_name(x))?;
                }
                f.write_str("}")?;
            }
        }
        if self.is_custom {
            f.write_str(", custom")?;
        }
        f.write_str(">")
    }
}
