//! The MLIR text parser: modules, `sdy.mesh`, `func.func`, and the pretty and
//! generic forms of every op the IR knows. One pass, no backtracking beyond a
//! token; value names resolve through one hash map per function.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::base::{Cursor, TensorType, TextError};
use crate::ir::attrs::{ConvWindow, RngAlgorithm, WindowAttrs};
use crate::ir::model::{
    Func, Loc, Module, Op, OpId, RawAttr, Region, Value, ValueDef, ValueId, Visibility,
};
use crate::ir::ops::{
    AllToAllParam, BinaryOp, CompareDir, CompareType, DeviceCollective, DotDims, OpKind,
    PropagationDirection, TransposeA, UnaryOp,
};
use crate::ir::rule::OpShardingRule;
use crate::mesh::{AxisRef, Mesh, SubAxis};
use crate::sharding::{ShardingPerValue, TensorSharding};

use super::dense::parse_dense;
use super::lex::{
    attr_name, dim_list, int_list, keyword, paren_types, raw_dict, raw_value, skip_loc,
    tensor_type, value_name, value_use,
};
use super::structured;

/// Parse a module from MLIR text.
pub fn parse_module(text: &str) -> Result<Module, TextError> {
    let mut p = Parser {
        c: Cursor::new(text),
        line_starts: line_starts(text),
        meshes: Vec::new(),
        depth: 0,
    };
    p.module()
}

fn line_starts(text: &str) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(
        text.bytes()
            .enumerate()
            .filter(|&(_, b)| b == b'\n')
            .map(|(i, _)| i + 1),
    );
    v
}

/// The deepest nesting of ops in regions a program may have. Every later walk
/// (verifier, propagation, partitioner, interpreter) recurses over regions, so
/// bounding the depth here keeps all of them within the stack; JAX programs
/// nest a few levels (a `while` in a `case` in a `while`...).
pub const MAX_REGION_DEPTH: usize = 64;

struct Parser<'a> {
    c: Cursor<'a>,
    line_starts: Vec<usize>,
    meshes: Vec<(String, Mesh)>,
    /// Ops being parsed, outermost first (regions nest ops in ops).
    depth: usize,
}

/// A function being built: the function and the names in scope.
struct FuncBuilder<'a> {
    func: Func,
    /// Name (a slice of the source) → first value and number of values (`%1:2`).
    names: Names<'a>,
}

/// Value names in scope. Numbered names (`%12`, `%arg3`) — nearly all of them
/// in printed MLIR — live in vectors indexed by their number, which keeps lookups
/// cache-friendly on huge modules; other names go to a hash map.
struct Names<'a> {
    numbered: Vec<Option<(ValueId, u32)>>,
    args: Vec<Option<(ValueId, u32)>>,
    other: HashMap<&'a str, (ValueId, u32), BuildHasherDefault<FxHasher>>,
    /// Numbers at or above this use the hash map (bounds the vectors).
    limit: usize,
}

enum Slot<'b> {
    Numbered(usize),
    Arg(usize),
    Other(&'b str),
}

/// `123` → 123 when it is a canonical decimal number below `limit`.
fn small_number(digits: &str, limit: usize) -> Option<usize> {
    if digits.is_empty()
        || digits.len() > 9
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse::<usize>().ok().filter(|&n| n < limit)
}

impl<'a> Names<'a> {
    fn new(limit: usize) -> Self {
        Names {
            numbered: Vec::new(),
            args: Vec::new(),
            other: HashMap::default(),
            limit,
        }
    }

    fn slot<'b>(&self, name: &'b str) -> Slot<'b> {
        let body = name.get(1..).unwrap_or("");
        if let Some(n) = small_number(body, self.limit) {
            return Slot::Numbered(n);
        }
        if let Some(n) = body
            .strip_prefix("arg")
            .and_then(|d| small_number(d, self.limit))
        {
            return Slot::Arg(n);
        }
        Slot::Other(name)
    }

    fn get(&self, name: &'a str) -> Option<(ValueId, u32)> {
        match self.slot(name) {
            Slot::Numbered(n) => self.numbered.get(n).copied().flatten(),
            Slot::Arg(n) => self.args.get(n).copied().flatten(),
            Slot::Other(s) => self.other.get(s).copied(),
        }
    }

    /// Insert; false when the name is already in scope.
    fn insert(&mut self, name: &'a str, v: (ValueId, u32)) -> bool {
        let (vec, n) = match self.slot(name) {
            Slot::Numbered(n) => (&mut self.numbered, n),
            Slot::Arg(n) => (&mut self.args, n),
            Slot::Other(s) => {
                if self.other.contains_key(s) {
                    return false;
                }
                self.other.insert(s, v);
                return true;
            }
        };
        if vec.len() <= n {
            vec.resize(n + 1, None);
        }
        if vec[n].is_some() {
            return false;
        }
        vec[n] = Some(v);
        true
    }

    fn remove(&mut self, name: &str) {
        match self.slot(name) {
            Slot::Numbered(n) => {
                if let Some(x) = self.numbered.get_mut(n) {
                    *x = None;
                }
            }
            Slot::Arg(n) => {
                if let Some(x) = self.args.get_mut(n) {
                    *x = None;
                }
            }
            Slot::Other(s) => {
                self.other.remove(s);
            }
        }
    }
}

/// A small multiplicative hasher for value names (faster than SipHash; the map
/// is only used for lookups, never iterated, so results stay deterministic).
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        // Final avalanche so that the low bits (the bucket index) depend on every byte.
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The `: ...` type signature of an op.
enum Sig {
    /// `(A, B) -> C` or `A -> B`.
    Functional(Vec<TensorType>, Vec<TensorType>),
    /// `A` or `A, B`.
    Bare(Vec<TensorType>),
    /// No signature (a bare `return`).
    None,
}

/// Attributes of an op's `{...}` dictionary, the known ones typed.
#[derive(Default)]
struct OpAttrs {
    sharding: Option<(usize, ShardingPerValue)>,
    rule: Option<OpShardingRule>,
    raw: Vec<RawAttr>,
}

impl<'a> Parser<'a> {
    fn loc_at(&self, pos: usize) -> Loc {
        let line = self.line_starts.partition_point(|&s| s <= pos);
        let start = self.line_starts[line - 1];
        let src = self.c.src();
        let mut end = pos.min(src.len());
        while !src.is_char_boundary(end) {
            end -= 1;
        }
        let col = src[start.min(end)..end].chars().count() + 1;
        Loc {
            line: line as u32,
            col: col as u32,
        }
    }

    fn here(&mut self) -> usize {
        self.c.ws();
        self.c.pos()
    }

    // ---------------------------------------------------------------- module

    fn module(&mut self) -> Result<Module, TextError> {
        let mut m = Module {
            name: None,
            wrapped: false,
            attrs: Vec::new(),
            meshes: Vec::new(),
            mesh_attrs: Vec::new(),
            funcs: Vec::new(),
        };
        self.skip_aliases()?;
        if self.c.eat_keyword("module") {
            m.wrapped = true;
            if self.c.eat("@") {
                m.name = Some(self.symbol_name()?);
            }
            let mut partitions = None;
            if self.c.eat_keyword("attributes") {
                self.c.ws();
                let start = self.c.pos();
                m.attrs = raw_dict(&mut self.c)?;
                let dict = &self.c.src()[start..self.c.pos()];
                partitions = dict.find("mhlo.num_partitions").map(|i| start + i).zip(
                    m.attrs
                        .iter()
                        .find(|a| a.name == "mhlo.num_partitions")
                        .cloned(),
                );
                if let Some((pos, a)) = &partitions {
                    num_partitions_of(a).ok_or_else(|| {
                        self.c.error_with(
                            *pos,
                            "an integer 'mhlo.num_partitions = N : i32'",
                            format!("'{}'", a.value),
                        )
                    })?;
                }
            }
            self.c.expect("{")?;
            self.items(&mut m, true)?;
            skip_loc(&mut self.c)?;
            if let Some((pos, a)) = &partitions {
                self.check_num_partitions(*pos, a)?;
            }
        } else {
            self.items(&mut m, false)?;
        }
        self.skip_aliases()?;
        if !self.c.at_end() {
            return Err(self.c.error("end of input"));
        }
        m.meshes = std::mem::take(&mut self.meshes);
        Ok(m)
    }

    /// Skip `#loc1 = loc(...)` alias definitions and `{-# ... #-}` resource blocks.
    fn skip_aliases(&mut self) -> Result<(), TextError> {
        loop {
            self.c.ws();
            if self.c.rest().starts_with("#loc") {
                let _ = self.c.eat("#");
                self.c.ident()?;
                self.c.expect("=")?;
                self.c.ws();
                if !self.c.rest().starts_with("loc(") {
                    return Err(self.c.error("'loc(' after a location alias"));
                }
                skip_loc(&mut self.c)?;
            } else if self.c.rest().starts_with("{-#") {
                let start = self.c.pos();
                match self.c.rest().find("#-}") {
                    Some(i) => self.c.set_pos(start + i + 3),
                    None => {
                        return Err(self.c.error_with(
                            start,
                            "'#-}' closing a resource block",
                            "end of input",
                        ))
                    }
                }
            } else {
                return Ok(());
            }
        }
    }

    fn symbol_name(&mut self) -> Result<String, TextError> {
        if self.c.peek_raw() == Some('"') {
            return self.c.string();
        }
        let pos = self.c.pos();
        let rest = self.c.rest();
        let len = rest
            .bytes()
            .take_while(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'-'))
            .count();
        if len == 0 {
            return Err(self.c.error_at(pos, "a symbol name after '@'"));
        }
        self.c.set_pos(pos + len);
        Ok(rest[..len].to_string())
    }

    fn items(&mut self, m: &mut Module, wrapped: bool) -> Result<(), TextError> {
        // Names seen so far: a set, so many functions parse in linear time.
        let mut names: std::collections::BTreeSet<String> =
            m.funcs.iter().map(|g| g.name.clone()).collect();
        loop {
            self.skip_aliases()?;
            if wrapped && self.c.eat("}") {
                return Ok(());
            }
            if !wrapped && self.c.at_end() {
                return Ok(());
            }
            if self.c.eat_keyword("sdy.mesh") {
                self.mesh_decl(m)?;
            } else if self.c.eat_keyword("func.func") {
                let at = self.c.pos();
                let f = self.func()?;
                if !names.insert(f.name.clone()) {
                    return Err(self.c.error_with(
                        at,
                        "distinct function names",
                        format!("a second @{}", f.name),
                    ));
                }
                m.funcs.push(f);
            } else {
                return Err(self.c.error(if wrapped {
                    "'sdy.mesh', 'func.func' or '}'"
                } else {
                    "'sdy.mesh', 'func.func' or 'module'"
                }));
            }
        }
    }

    /// `mhlo.num_partitions` (the SPMD partition count XLA compiles for) must
    /// equal the device count of the module's meshes; single-device meshes
    /// (maximal shardings) fit any count.
    fn check_num_partitions(&self, pos: usize, a: &RawAttr) -> Result<(), TextError> {
        let n = num_partitions_of(a).unwrap_or(0);
        match self.meshes.iter().find(|(_, m)| m.num_devices() > 1) {
            Some((name, mesh)) if mesh.num_devices() != n => Err(self.c.error_with(
                pos,
                format!(
                    "mhlo.num_partitions = {} (the device count of mesh @{name})",
                    mesh.num_devices()
                ),
                format!("mhlo.num_partitions = {n}"),
            )),
            _ => Ok(()),
        }
    }

    fn mesh_decl(&mut self, m: &mut Module) -> Result<(), TextError> {
        self.c.expect("@")?;
        let pos = self.c.pos();
        let name = self.symbol_name()?;
        if self.meshes.iter().any(|(n, _)| *n == name) {
            return Err(self
                .c
                .error_with(pos, "distinct mesh names", format!("a second @{name}")));
        }
        self.c.expect("=")?;
        let mesh = Mesh::parse_at(&mut self.c)?;
        let attrs = if self.c.peek() == Some('{') {
            raw_dict(&mut self.c)?
        } else {
            Vec::new()
        };
        skip_loc(&mut self.c)?;
        // All meshes of a module have one device count, single-device ones aside.
        if mesh.num_devices() > 1 {
            if let Some((other, o)) = self.meshes.iter().find(|(_, o)| o.num_devices() > 1) {
                if o.num_devices() != mesh.num_devices() {
                    return Err(self.c.error_with(
                        pos,
                        format!("{} devices like @{other} (all meshes of a module have one device count)", o.num_devices()),
                        format!("@{name} with {} devices", mesh.num_devices()),
                    ));
                }
            }
        }
        self.meshes.push((name, mesh));
        m.mesh_attrs.push(attrs);
        Ok(())
    }

    // ---------------------------------------------------------------- functions

    fn func(&mut self) -> Result<Func, TextError> {
        let start = self.c.pos().saturating_sub("func.func".len());
        let loc = self.loc_at(start);
        let visibility = if self.c.eat_keyword("public") {
            Visibility::Public
        } else if self.c.eat_keyword("private") {
            Visibility::Private
        } else {
            Visibility::Unspecified
        };
        self.c.expect("@")?;
        let name = self.symbol_name()?;
        let mut fb = FuncBuilder {
            func: Func {
                name,
                visibility,
                args: Vec::new(),
                arg_attrs: Vec::new(),
                result_types: Vec::new(),
                result_shardings: Vec::new(),
                result_attrs: Vec::new(),
                attrs: Vec::new(),
                body: Vec::new(),
                values: Vec::new(),
                ops: Vec::new(),
                loc,
            },
            names: Names::new(self.c.src().len().min(1 << 26)),
        };
        // Reserve for the lines of this function (an op per line) so the arenas
        // and the name map are not regrown on large modules.
        let rest = self.c.rest();
        let end = rest
            .find("\n  func.func")
            .or_else(|| rest.find("\nfunc.func"))
            .unwrap_or(rest.len());
        let lines = rest.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        fb.func.ops.reserve(lines);
        fb.func.values.reserve(lines + 8);
        fb.names.numbered.reserve(lines + 8);
        self.c.expect("(")?;
        if !self.c.eat(")") {
            loop {
                let pos = self.here();
                let vname = value_name(&mut self.c)?;
                self.c.expect(":")?;
                let ty = tensor_type(&mut self.c)?;
                let (sharding, attrs) = self.arg_attrs(&ty)?;
                skip_loc(&mut self.c)?;
                let index = fb.func.args.len();
                let id = fb.func.add_value(Value {
                    name: vname.to_string(),
                    ty,
                    sharding,
                    def: ValueDef::FuncArg(index),
                });
                self.define(&mut fb, vname, id, 1, pos)?;
                fb.func.args.push(id);
                fb.func.arg_attrs.push(attrs);
                if self.c.eat(")") {
                    break;
                }
                if !self.c.eat(",") {
                    return Err(self.c.error("',' or ')' after a function argument"));
                }
            }
        }
        if self.c.eat("->") {
            if self.c.peek() == Some('(') {
                self.c.expect("(")?;
                if !self.c.eat(")") {
                    loop {
                        self.func_result(&mut fb.func, true)?;
                        if self.c.eat(")") {
                            break;
                        }
                        if !self.c.eat(",") {
                            return Err(self.c.error("',' or ')' after a result type"));
                        }
                    }
                }
            } else {
                self.func_result(&mut fb.func, false)?;
            }
        }
        if self.c.eat_keyword("attributes") {
            fb.func.attrs = raw_dict(&mut self.c)?;
        }
        self.c.expect("{")?;
        let body = self.block_ops(&mut fb)?;
        fb.func.body = body;
        skip_loc(&mut self.c)?;
        Ok(fb.func)
    }

    fn func_result(&mut self, f: &mut Func, with_attrs: bool) -> Result<(), TextError> {
        let ty = tensor_type(&mut self.c)?;
        let (sharding, attrs) = if with_attrs {
            self.arg_attrs(&ty)?
        } else {
            (None, Vec::new())
        };
        f.result_types.push(ty);
        f.result_shardings.push(sharding);
        f.result_attrs.push(attrs);
        Ok(())
    }

    /// `{sdy.sharding = ..., other = ...}` after an argument or result type.
    fn arg_attrs(
        &mut self,
        _ty: &TensorType,
    ) -> Result<(Option<TensorSharding>, Vec<RawAttr>), TextError> {
        let mut sharding = None;
        let mut raw = Vec::new();
        if self.c.peek() != Some('{') {
            return Ok((None, raw));
        }
        self.c.expect("{")?;
        if self.c.eat("}") {
            return Ok((None, raw));
        }
        loop {
            let pos = self.here();
            let name = attr_name(&mut self.c)?;
            if name == "sdy.sharding" {
                self.c.expect("=")?;
                if sharding.is_some() {
                    return Err(self.c.error_with(pos, "one sdy.sharding", "a second one"));
                }
                sharding = Some(TensorSharding::parse_at(&mut self.c, Some(&self.meshes))?);
            } else {
                let value = if self.c.eat("=") {
                    raw_value(&mut self.c)?
                } else {
                    String::new()
                };
                raw.push(RawAttr { name, value });
            }
            if self.c.eat("}") {
                return Ok((sharding, raw));
            }
            if !self.c.eat(",") {
                return Err(self.c.error("',' or '}' in an attribute dictionary"));
            }
        }
    }

    fn define(
        &mut self,
        fb: &mut FuncBuilder<'a>,
        name: &'a str,
        id: ValueId,
        count: u32,
        pos: usize,
    ) -> Result<(), TextError> {
        if !fb.names.insert(name, (id, count)) {
            return Err(self.c.error_with(
                pos,
                "a fresh value name",
                format!("{name} defined twice"),
            ));
        }
        Ok(())
    }

    /// Ops up to and including the closing `}` of a block.
    fn block_ops(&mut self, fb: &mut FuncBuilder<'a>) -> Result<Vec<OpId>, TextError> {
        let mut ops = Vec::new();
        loop {
            if self.c.eat("}") {
                return Ok(ops);
            }
            if self.c.at_end() {
                return Err(self.c.error("an op or '}'"));
            }
            ops.push(self.op(fb)?);
        }
    }

    // ---------------------------------------------------------------- ops

    fn lookup(&mut self, fb: &FuncBuilder<'a>) -> Result<ValueId, TextError> {
        let pos = self.here();
        let (name, index) = value_use(&mut self.c)?;
        let shown = || match index {
            Some(k) => format!("{name}#{k}"),
            None => name.to_string(),
        };
        match (fb.names.get(name), index) {
            (Some((first, 1)), None) => Ok(first),
            (Some((first, n)), Some(k)) if k < u64::from(n) => Ok(ValueId(first.0 + k as u32)),
            (Some((_, n)), None) => Err(self.c.error_with(
                pos,
                format!("one of the {n} results, like {name}#0"),
                name.to_string(),
            )),
            (Some(_), Some(_)) => Err(self.c.error_with(pos, "a result number in range", shown())),
            (None, _) => Err(self.c.error_with(
                pos,
                "a value defined before this use",
                format!("undefined value {}", shown()),
            )),
        }
    }

    /// `%a, %b, ...` (stops before a `,` that is not followed by a value).
    fn operand_list(&mut self, fb: &FuncBuilder<'a>) -> Result<Vec<ValueId>, TextError> {
        let mut out = Vec::new();
        if self.c.peek() != Some('%') {
            return Ok(out);
        }
        loop {
            out.push(self.lookup(fb)?);
            let save = self.c.pos();
            if self.c.eat(",") && self.c.peek() == Some('%') {
                continue;
            }
            self.c.set_pos(save);
            return Ok(out);
        }
    }

    /// `(%a, %b)` with parentheses.
    fn paren_operands(&mut self, fb: &FuncBuilder<'a>) -> Result<Vec<ValueId>, TextError> {
        self.c.expect("(")?;
        if self.c.eat(")") {
            return Ok(Vec::new());
        }
        let ops = self.operand_list(fb)?;
        self.c.expect(")")?;
        Ok(ops)
    }

    fn op(&mut self, fb: &mut FuncBuilder<'a>) -> Result<OpId, TextError> {
        if self.depth >= MAX_REGION_DEPTH {
            return Err(self.c.error_with(
                self.c.pos(),
                format!("at most {MAX_REGION_DEPTH} levels of nested regions"),
                format!("an op nested {} deep", self.depth + 1),
            ));
        }
        self.depth += 1;
        let op = self.op_at_depth(fb);
        self.depth -= 1;
        op
    }

    fn op_at_depth(&mut self, fb: &mut FuncBuilder<'a>) -> Result<OpId, TextError> {
        let start = self.here();
        let loc = self.loc_at(start);
        // Results: `%0 =`, `%1:2 =`, `%a, %b =`.
        let mut result_groups: Vec<(&'a str, usize, usize)> = Vec::new();
        if self.c.peek() == Some('%') {
            loop {
                let pos = self.here();
                let name = value_name(&mut self.c)?;
                let mut count = 1usize;
                if self.c.peek_raw() == Some(':') {
                    self.c.eat(":");
                    let n = self.c.uint()?;
                    if n == 0 || n > 1_000_000 {
                        return Err(self.c.error_with(
                            pos,
                            "a result count between 1 and 1000000",
                            n.to_string(),
                        ));
                    }
                    count = n as usize;
                }
                result_groups.push((name, count, pos));
                if self.c.eat("=") {
                    break;
                }
                if !self.c.eat(",") {
                    return Err(self.c.error("'=' or ',' after a result name"));
                }
            }
        }
        let id = fb.func.add_op(Op {
            kind: OpKind::Return,
            operands: Vec::new(),
            results: Vec::new(),
            regions: Vec::new(),
            rule: None,
            attrs: Vec::new(),
            loc,
        });
        let name_pos = self.here();
        let (kind, operands, regions, mut attrs, result_types) = if self.c.peek() == Some('"') {
            self.generic_op(fb, id)?
        } else {
            let name = self.c.ident().map_err(|_| self.c.error("an op name"))?;
            self.pretty_op(fb, id, name, name_pos)?
        };
        skip_loc(&mut self.c)?;
        let nres: usize = result_groups.iter().map(|g| g.1).sum();
        if nres != result_types.len() {
            return Err(self.c.error_with(
                name_pos,
                format!(
                    "{} result type(s) for the {} result(s) named",
                    result_types.len(),
                    nres
                ),
                format!(
                    "{} op with {} result type(s)",
                    kind.name(),
                    result_types.len()
                ),
            ));
        }
        // Shardy: an op without results (a side-effecting host callback) may
        // carry one maximal sharding, which places it on one device, or one
        // fully replicated rank-0 sharding (`<@mesh, []>`, no replicated or
        // unreduced axes); it is kept verbatim and nothing propagates along it.
        if let Some((_, s)) = &attrs.sharding {
            let replicated = |t: &crate::sharding::TensorSharding| {
                t.dims.is_empty() && t.replicated.is_empty() && t.unreduced.is_empty()
            };
            if nres == 0
                && s.0.len() == 1
                && (s.0[0].is_maximal(&self.meshes) || replicated(&s.0[0]))
            {
                let (_, s) = attrs.sharding.take().expect("checked above");
                attrs.raw.push(RawAttr {
                    name: "sdy.sharding".into(),
                    value: s.to_string(),
                });
            }
        }
        if let Some((spos, s)) = &attrs.sharding {
            if s.0.len() != nres {
                let expected = match nres {
                    0 => "no sharding, or one maximal or fully replicated rank-0 sharding (`<@mesh, []>`), on an op without results".to_string(),
                    _ => format!("{nres} sharding(s), one per result"),
                };
                return Err(self.c.error_with(*spos, expected, format!("{}", s.0.len())));
            }
        }
        let mut results = Vec::with_capacity(nres);
        let mut types = result_types.into_iter();
        let mut shardings = attrs.sharding.map(|(_, s)| s.0.into_iter());
        let mut index = 0;
        for (gname, count, pos) in result_groups {
            let first = ValueId(fb.func.values.len() as u32);
            for k in 0..count {
                let vname = if count == 1 {
                    gname.to_string()
                } else {
                    format!("{gname}#{k}")
                };
                let ty = types
                    .next()
                    .unwrap_or_else(|| TensorType::new(vec![], crate::base::DType::F32));
                let mut sharding = shardings.as_mut().and_then(|it| it.next());
                // A reshard's result has the reshard's sharding (Shardy prints
                // no `sdy.sharding` beside it).
                if let (None, OpKind::Reshard { sharding: own }) = (&sharding, &kind) {
                    sharding = Some(own.clone());
                }
                // So has an sdy collective's: its out_sharding.
                if let (None, Some(own)) = (&sharding, kind.out_sharding()) {
                    sharding = Some(own.clone());
                }
                let vid = fb.func.add_value(Value {
                    name: vname,
                    ty,
                    sharding,
                    def: ValueDef::Result { op: id, index },
                });
                results.push(vid);
                index += 1;
            }
            self.define(fb, gname, first, count as u32, pos)?;
        }
        let op = fb.func.op_mut(id);
        op.kind = kind;
        op.operands = operands;
        op.results = results;
        op.regions = regions;
        op.rule = attrs.rule;
        op.attrs = attrs.raw;
        Ok(id)
    }

    /// An op's `{...}` dictionary (optional).
    fn op_attrs(&mut self) -> Result<OpAttrs, TextError> {
        let mut out = OpAttrs::default();
        if self.c.peek() != Some('{') {
            return Ok(out);
        }
        self.c.expect("{")?;
        if self.c.eat("}") {
            return Ok(out);
        }
        loop {
            let pos = self.here();
            let name = attr_name(&mut self.c)?;
            match name.as_str() {
                "sdy.sharding" => {
                    self.c.expect("=")?;
                    let vpos = self.here();
                    if out.sharding.is_some() {
                        return Err(self.c.error_with(pos, "one sdy.sharding", "a second one"));
                    }
                    let s = ShardingPerValue::parse_at(&mut self.c, Some(&self.meshes))?;
                    out.sharding = Some((vpos, s));
                }
                "sdy.sharding_rule" => {
                    self.c.expect("=")?;
                    if out.rule.is_some() {
                        return Err(self.c.error_with(
                            pos,
                            "one sdy.sharding_rule",
                            "a second one",
                        ));
                    }
                    out.rule = Some(OpShardingRule::parse_at(&mut self.c)?);
                }
                _ => {
                    let value = if self.c.eat("=") {
                        raw_value(&mut self.c)?
                    } else {
                        String::new()
                    };
                    out.raw.push(RawAttr { name, value });
                }
            }
            if self.c.eat("}") {
                return Ok(out);
            }
            if !self.c.eat(",") {
                return Err(self.c.error("',' or '}' in an attribute dictionary"));
            }
        }
    }

    /// `: ...` signature.
    fn sig(&mut self) -> Result<Sig, TextError> {
        self.c.expect(":")?;
        if self.c.peek() == Some('(') {
            let ins = paren_types(&mut self.c)?;
            self.c.expect("->")?;
            let outs = if self.c.peek() == Some('(') {
                paren_types(&mut self.c)?
            } else {
                vec![tensor_type(&mut self.c)?]
            };
            return Ok(Sig::Functional(ins, outs));
        }
        let mut list = vec![tensor_type(&mut self.c)?];
        while self.c.eat(",") {
            list.push(tensor_type(&mut self.c)?);
        }
        if self.c.eat("->") {
            let outs = if self.c.peek() == Some('(') {
                paren_types(&mut self.c)?
            } else {
                vec![tensor_type(&mut self.c)?]
            };
            return Ok(Sig::Functional(list, outs));
        }
        Ok(Sig::Bare(list))
    }

    /// Check a functional signature's operand types against the operands; return the result types.
    fn results_of(
        &mut self,
        fb: &FuncBuilder<'a>,
        sig: Sig,
        operands: &[ValueId],
        sig_pos: usize,
        kind: &OpKind,
    ) -> Result<Vec<TensorType>, TextError> {
        let check = |p: &mut Self, tys: &[TensorType]| -> Result<(), TextError> {
            if tys.len() != operands.len() {
                return Err(p.c.error_with(
                    sig_pos,
                    format!("{} operand type(s)", operands.len()),
                    format!("{}", tys.len()),
                ));
            }
            for (i, (t, &v)) in tys.iter().zip(operands).enumerate() {
                let actual = &fb.func.value(v).ty;
                if t != actual {
                    return Err(p.c.error_with(
                        sig_pos,
                        format!("operand #{i} of type {actual}"),
                        format!("{t}"),
                    ));
                }
            }
            Ok(())
        };
        match sig {
            Sig::None => Ok(Vec::new()),
            Sig::Functional(ins, outs) => {
                check(self, &ins)?;
                Ok(outs)
            }
            Sig::Bare(list) => match kind {
                k if k.is_terminator() => {
                    check(self, &list)?;
                    Ok(Vec::new())
                }
                OpKind::ShardingGroup { .. } => {
                    check(self, &list)?;
                    Ok(Vec::new())
                }
                OpKind::Select if list.len() == 2 => Ok(vec![list[1].clone()]),
                OpKind::OptimizationBarrier => {
                    check(self, &list)?;
                    Ok(list)
                }
                _ if list.len() == 1 => Ok(list),
                _ => Err(self.c.error_with(
                    sig_pos,
                    "one result type or '(operand types) -> result types'",
                    format!("{} types", list.len()),
                )),
            },
        }
    }

    /// Parse the rest of a pretty-form op after its name.
    #[allow(clippy::type_complexity)]
    fn pretty_op(
        &mut self,
        fb: &mut FuncBuilder<'a>,
        id: OpId,
        name: &str,
        name_pos: usize,
    ) -> Result<(OpKind, Vec<ValueId>, Vec<Region>, OpAttrs, Vec<TensorType>), TextError> {
        let name = name
            .strip_prefix("func.")
            .filter(|n| *n == "call" || *n == "return")
            .unwrap_or(name);
        let mut regions = Vec::new();
        let (kind, operands) = if let Some(u) = UnaryOp::ALL.iter().find(|u| u.name() == name) {
            (OpKind::Unary(*u), self.operand_list(fb)?)
        } else if let Some(b) = BinaryOp::ALL.iter().find(|b| b.name() == name) {
            (OpKind::Binary(*b), self.operand_list(fb)?)
        } else {
            match name {
                "stablehlo.select" => (OpKind::Select, self.operand_list(fb)?),
                "stablehlo.clamp" => (OpKind::Clamp, self.operand_list(fb)?),
                "stablehlo.convert" => (OpKind::Convert, self.operand_list(fb)?),
                "stablehlo.reshape" => (OpKind::Reshape, self.operand_list(fb)?),
                "stablehlo.dynamic_update_slice" => {
                    (OpKind::DynamicUpdateSlice, self.operand_list(fb)?)
                }
                "stablehlo.compare" => {
                    let dpos = self.here();
                    let d = self.c.ident()?;
                    let dir = CompareDir::ALL
                        .into_iter()
                        .find(|x| x.name() == d)
                        .ok_or_else(|| {
                            self.c.error_with(
                                dpos,
                                "a comparison direction (EQ, NE, LT, LE, GT, GE)",
                                format!("'{d}'"),
                            )
                        })?;
                    self.c.expect(",")?;
                    let ops = self.operand_list(fb)?;
                    let mut cmp_type = None;
                    if self.c.eat(",") {
                        let tpos = self.here();
                        let t = self.c.ident()?;
                        cmp_type = Some(
                            CompareType::ALL
                                .into_iter()
                                .find(|x| x.name() == t)
                                .ok_or_else(|| {
                                    self.c.error_with(
                                        tpos,
                                        "a comparison type (FLOAT, TOTALORDER, SIGNED, UNSIGNED)",
                                        format!("'{t}'"),
                                    )
                                })?,
                        );
                    }
                    (OpKind::Compare { dir, cmp_type }, ops)
                }
                "stablehlo.constant" | "sdy.constant" => {
                    let pre = self.op_attrs()?;
                    let raw = parse_dense(&mut self.c)?;
                    let mut attrs = self.op_attrs()?;
                    merge_attrs(&mut attrs, pre);
                    let sig_pos = self.here();
                    let sig = self.sig()?;
                    let kind0 = OpKind::Reshape;
                    let tys = self.results_of(fb, sig, &[], sig_pos, &kind0)?;
                    let value = raw.resolve(&self.c, &tys[0])?;
                    let kind = OpKind::Constant {
                        value,
                        sdy: name == "sdy.constant",
                    };
                    return Ok((kind, Vec::new(), regions, attrs, tys));
                }
                "stablehlo.iota" => {
                    keyword(&mut self.c, "dim")?;
                    self.c.expect("=")?;
                    (
                        OpKind::Iota {
                            dim: self.c.uint()?,
                        },
                        Vec::new(),
                    )
                }
                "stablehlo.broadcast_in_dim" | "stablehlo.transpose" | "stablehlo.reverse" => {
                    let ops = self.operand_list(fb)?;
                    self.c.expect(",")?;
                    keyword(&mut self.c, "dims")?;
                    self.c.expect("=")?;
                    let dims = dim_list(&mut self.c)?;
                    let kind = match name {
                        "stablehlo.broadcast_in_dim" => OpKind::BroadcastInDim { dims },
                        "stablehlo.transpose" => OpKind::Transpose { perm: dims },
                        _ => OpKind::Reverse { dims },
                    };
                    (kind, ops)
                }
                "stablehlo.concatenate" => {
                    let ops = self.operand_list(fb)?;
                    self.c.expect(",")?;
                    keyword(&mut self.c, "dim")?;
                    self.c.expect("=")?;
                    (
                        OpKind::Concatenate {
                            dim: self.c.uint()?,
                        },
                        ops,
                    )
                }
                "stablehlo.slice" => {
                    let ops = self.operand_list(fb)?;
                    self.c.expect("[")?;
                    let (mut start, mut limit, mut strides) = (Vec::new(), Vec::new(), Vec::new());
                    if !self.c.eat("]") {
                        loop {
                            start.push(self.c.int()?);
                            self.c.expect(":")?;
                            limit.push(self.c.int()?);
                            strides.push(if self.c.eat(":") { self.c.int()? } else { 1 });
                            if self.c.eat("]") {
                                break;
                            }
                            if !self.c.eat(",") {
                                return Err(self.c.error("',' or ']' in slice bounds"));
                            }
                        }
                    }
                    (
                        OpKind::Slice {
                            start,
                            limit,
                            strides,
                        },
                        ops,
                    )
                }
                "stablehlo.dynamic_slice" => {
                    let ops = self.operand_list(fb)?;
                    self.c.expect(",")?;
                    keyword(&mut self.c, "sizes")?;
                    self.c.expect("=")?;
                    (
                        OpKind::DynamicSlice {
                            sizes: dim_list(&mut self.c)?,
                        },
                        ops,
                    )
                }
                "stablehlo.pad" => {
                    let ops = self.operand_list(fb)?;
                    let mut lists = Vec::new();
                    for kw in ["low", "high", "interior"] {
                        self.c.expect(",")?;
                        keyword(&mut self.c, kw)?;
                        self.c.expect("=")?;
                        lists.push(int_list(&mut self.c)?);
                    }
                    let interior = lists.pop().unwrap_or_default();
                    let high = lists.pop().unwrap_or_default();
                    let low = lists.pop().unwrap_or_default();
                    (
                        OpKind::Pad {
                            low,
                            high,
                            interior,
                        },
                        ops,
                    )
                }
                "stablehlo.dot_general" | "stablehlo.dot" => {
                    let ops = self.operand_list(fb)?;
                    let mut dims = DotDims::default();
                    let mut precision = Vec::new();
                    let mut extra = Vec::new();
                    let general = name == "stablehlo.dot_general";
                    let mut saw_contracting = false;
                    while self.c.eat(",") {
                        let kpos = self.here();
                        let kw = self.c.ident()?;
                        self.c.expect("=")?;
                        match kw {
                            "batching_dims" if general => {
                                dims.lhs_batch = dim_list(&mut self.c)?;
                                keyword(&mut self.c, "x")?;
                                dims.rhs_batch = dim_list(&mut self.c)?;
                            }
                            "contracting_dims" if general => {
                                dims.lhs_contract = dim_list(&mut self.c)?;
                                keyword(&mut self.c, "x")?;
                                dims.rhs_contract = dim_list(&mut self.c)?;
                                saw_contracting = true;
                            }
                            "precision" => {
                                self.c.expect("[")?;
                                if !self.c.eat("]") {
                                    loop {
                                        precision.push(self.c.ident()?.to_string());
                                        if self.c.eat("]") {
                                            break;
                                        }
                                        self.c.expect(",")?;
                                    }
                                }
                            }
                            "algorithm" => {
                                let v = raw_value(&mut self.c)?;
                                extra.push(RawAttr {
                                    name: "algorithm".into(),
                                    value: v,
                                });
                            }
                            _ => {
                                return Err(self.c.error_with(
                                    kpos,
                                    "batching_dims, contracting_dims, precision or algorithm",
                                    format!("'{kw}'"),
                                ));
                            }
                        }
                    }
                    let _ = saw_contracting;
                    let kind = if general {
                        OpKind::DotGeneral { dims, precision }
                    } else {
                        OpKind::Dot { precision }
                    };
                    let mut attrs = self.op_attrs()?;
                    attrs.raw.extend(extra);
                    let sig_pos = self.here();
                    let sig = self.sig()?;
                    let tys = self.results_of(fb, sig, &ops, sig_pos, &kind)?;
                    return Ok((kind, ops, regions, attrs, tys));
                }
                "stablehlo.reduce" => return self.reduce(fb, id),
                "stablehlo.while" => return self.while_op(fb, id),
                "stablehlo.optimization_barrier" => {
                    (OpKind::OptimizationBarrier, self.operand_list(fb)?)
                }
                "stablehlo.bitcast_convert" => (OpKind::BitcastConvert, self.operand_list(fb)?),
                "stablehlo.after_all" => (OpKind::AfterAll, self.operand_list(fb)?),
                "stablehlo.fft" => {
                    // `stablehlo.fft %a, type = FFT, length = [32, 64]`
                    let ops = self.operand_list(fb)?;
                    self.c.expect(",")?;
                    keyword(&mut self.c, "type")?;
                    self.c.expect("=")?;
                    let tpos = self.here();
                    let t = self.c.ident()?;
                    let kind = fft_kind(t).ok_or_else(|| {
                        self.c.error_with(
                            tpos,
                            "an fft type (FFT, IFFT, RFFT, IRFFT)",
                            format!("'{t}'"),
                        )
                    })?;
                    self.c.expect(",")?;
                    keyword(&mut self.c, "length")?;
                    self.c.expect("=")?;
                    let length = dim_list(&mut self.c)?;
                    (OpKind::Fft { kind, length }, ops)
                }
                "stablehlo.cholesky" => {
                    // `stablehlo.cholesky %a, lower = true`
                    let ops = self.operand_list(fb)?;
                    let mut lower = false;
                    if self.c.eat(",") {
                        keyword(&mut self.c, "lower")?;
                        self.c.expect("=")?;
                        let lpos = self.here();
                        let v = self.c.ident()?;
                        lower =
                            structured::parse_bool(v).map_err(|e| self.c.error_with(lpos, e, v))?;
                    }
                    (OpKind::Cholesky { lower }, ops)
                }
                "chlo.top_k" | "mhlo.topk" => {
                    self.c.expect("(")?;
                    let ops = vec![self.lookup(fb)?];
                    self.c.expect(",")?;
                    keyword(&mut self.c, "k")?;
                    self.c.expect("=")?;
                    let k = self.c.uint()?;
                    self.c.expect(")")?;
                    let mhlo = name == "mhlo.topk";
                    (OpKind::TopK { k, mhlo }, ops)
                }
                "stablehlo.rng_bit_generator" => {
                    let ops = self.operand_list(fb)?;
                    self.c.expect(",")?;
                    keyword(&mut self.c, "algorithm")?;
                    self.c.expect("=")?;
                    let apos = self.here();
                    let a = self.c.ident()?;
                    let algorithm = RngAlgorithm::ALL
                        .into_iter()
                        .find(|x| x.name() == a)
                        .ok_or_else(|| {
                            self.c.error_with(
                                apos,
                                "an rng algorithm (DEFAULT, THREE_FRY, PHILOX)",
                                format!("'{a}'"),
                            )
                        })?;
                    (OpKind::RngBitGenerator { algorithm }, ops)
                }
                "stablehlo.convolution" => {
                    let ops = self.paren_operands(fb)?;
                    keyword(&mut self.c, "dim_numbers")?;
                    self.c.expect("=")?;
                    let dims = structured::parse_conv_dims(&mut self.c)?;
                    let mut window = ConvWindow::default();
                    if self.c.eat(",") {
                        keyword(&mut self.c, "window")?;
                        self.c.expect("=")?;
                        window = structured::parse_conv_window(&mut self.c)?;
                    }
                    let apos = self.here();
                    let mut attrs = self.op_attrs()?;
                    let mut count = |key: &str| -> Result<u64, TextError> {
                        match take_attr(&mut attrs.raw, key) {
                            None => Ok(1),
                            Some(v) => structured::parse_i64_attr(&v)
                                .map_err(|e| self.c.error_with(apos, format!("{key}: {e}"), v)),
                        }
                    };
                    let feature_group_count = count("feature_group_count")?;
                    let batch_group_count = count("batch_group_count")?;
                    let precision = take_precision(&mut attrs.raw);
                    let kind = OpKind::Convolution {
                        dims,
                        window,
                        feature_group_count,
                        batch_group_count,
                        precision,
                    };
                    let sig_pos = self.here();
                    let sig = self.sig()?;
                    let tys = self.results_of(fb, sig, &ops, sig_pos, &kind)?;
                    return Ok((kind, ops, regions, attrs, tys));
                }
                "stablehlo.custom_call" => {
                    self.c.expect("@")?;
                    let target = self.symbol_name()?;
                    let ops = self.paren_operands(fb)?;
                    (OpKind::CustomCall { target }, ops)
                }
                "sdy.sharding_constraint" | "sdy.reshard" => {
                    let ops = self.operand_list(fb)?;
                    let sharding = TensorSharding::parse_at(&mut self.c, Some(&self.meshes))?;
                    let kind = if name == "sdy.reshard" {
                        OpKind::Reshard { sharding }
                    } else {
                        OpKind::ShardingConstraint { sharding }
                    };
                    (kind, ops)
                }
                "sdy.sharding_group" => {
                    let ops = self.operand_list(fb)?;
                    keyword(&mut self.c, "group_id")?;
                    self.c.expect("=")?;
                    (
                        OpKind::ShardingGroup {
                            group_id: self.c.int()?,
                        },
                        ops,
                    )
                }
                "sdy.propagation_barrier" => {
                    let ops = self.operand_list(fb)?;
                    keyword(&mut self.c, "allowed_direction")?;
                    self.c.expect("=")?;
                    let dpos = self.here();
                    let d = self.c.ident()?;
                    let direction = PropagationDirection::ALL
                        .into_iter()
                        .find(|x| x.name() == d)
                        .ok_or_else(|| {
                            self.c.error_with(
                                dpos,
                                "NONE, FORWARD, BACKWARD or BOTH",
                                format!("'{d}'"),
                            )
                        })?;
                    (OpKind::PropagationBarrier { direction }, ops)
                }
                "sdy.data_flow_edge" => {
                    let ops = self.operand_list(fb)?;
                    let sharding = if self.c.eat_keyword("sharding") {
                        self.c.expect("=")?;
                        Some(TensorSharding::parse_at(&mut self.c, Some(&self.meshes))?)
                    } else {
                        None
                    };
                    (OpKind::DataFlowEdge { sharding }, ops)
                }
                "sdy.all_gather" | "sdy.all_slice" | "sdy.reduce_scatter" => {
                    let axes = self.per_dim_axes()?;
                    let ops = self.operand_list(fb)?;
                    let out_sharding = self.out_sharding()?;
                    let kind = match name {
                        "sdy.all_gather" => OpKind::AllGather {
                            gathering_axes: axes,
                            out_sharding,
                        },
                        "sdy.all_slice" => OpKind::AllSlice {
                            slicing_axes: axes,
                            out_sharding,
                        },
                        _ => OpKind::ReduceScatter {
                            scatter_axes: axes,
                            out_sharding,
                        },
                    };
                    (kind, ops)
                }
                "sdy.all_reduce" => {
                    let reduction_axes = self.axis_set()?;
                    let ops = self.operand_list(fb)?;
                    let out_sharding = self.out_sharding()?;
                    (
                        OpKind::AllReduce {
                            reduction_axes,
                            out_sharding,
                        },
                        ops,
                    )
                }
                "sdy.all_to_all" => {
                    self.c.expect("[")?;
                    let mut params = Vec::new();
                    if !self.c.eat("]") {
                        loop {
                            let axes = self.axis_set()?;
                            self.c.expect(":")?;
                            let src_dim = self.c.uint()?;
                            self.c.expect("->")?;
                            let tgt_dim = self.c.uint()?;
                            params.push(AllToAllParam {
                                axes,
                                src_dim,
                                tgt_dim,
                            });
                            if self.c.eat("]") {
                                break;
                            }
                            if !self.c.eat(",") {
                                return Err(self.c.error("',' or ']' in all_to_all parameters"));
                            }
                        }
                    }
                    let ops = self.operand_list(fb)?;
                    let out_sharding = self.out_sharding()?;
                    (
                        OpKind::AllToAll {
                            params,
                            out_sharding,
                        },
                        ops,
                    )
                }
                "sdy.collective_permute" => {
                    let ops = self.operand_list(fb)?;
                    let out_sharding = self.out_sharding()?;
                    (OpKind::CollectivePermute { out_sharding }, ops)
                }
                "sdy.named_computation" | "sdy.manual_computation" => {
                    let mut comp_name = String::new();
                    if name == "sdy.named_computation" {
                        self.c.expect("<")?;
                        comp_name = self.c.string()?;
                        self.c.expect(">")?;
                    }
                    let ops = self.paren_operands(fb)?;
                    let mut in_shardings = None;
                    let mut out_shardings = None;
                    let mut manual_axes = None;
                    loop {
                        if self.c.eat_keyword("in_shardings") {
                            self.c.expect("=")?;
                            in_shardings = Some(self.sharding_list()?);
                        } else if self.c.eat_keyword("out_shardings") {
                            self.c.expect("=")?;
                            out_shardings = Some(self.sharding_list()?);
                        } else if self.c.eat_keyword("manual_axes") {
                            self.c.expect("=")?;
                            self.c.expect("{")?;
                            let mut axes = Vec::new();
                            if !self.c.eat("}") {
                                loop {
                                    axes.push(self.c.string()?);
                                    if self.c.eat("}") {
                                        break;
                                    }
                                    self.c.expect(",")?;
                                }
                            }
                            manual_axes = Some(axes);
                        } else {
                            break;
                        }
                    }
                    regions.push(self.region_with_header(fb, id, 0)?);
                    let kind = if name == "sdy.named_computation" {
                        OpKind::NamedComputation {
                            name: comp_name,
                            in_shardings,
                            out_shardings,
                        }
                    } else {
                        OpKind::ManualComputation {
                            in_shardings: in_shardings.ok_or_else(|| {
                                self.c.error_with(name_pos, "in_shardings=[...]", "none")
                            })?,
                            out_shardings: out_shardings.ok_or_else(|| {
                                self.c.error_with(name_pos, "out_shardings=[...]", "none")
                            })?,
                            manual_axes: manual_axes.ok_or_else(|| {
                                self.c.error_with(name_pos, "manual_axes={...}", "none")
                            })?,
                        }
                    };
                    (kind, ops)
                }
                "call" => {
                    self.c.expect("@")?;
                    let callee = self.symbol_name()?;
                    let ops = self.paren_operands(fb)?;
                    (OpKind::Call { callee }, ops)
                }
                "return" | "stablehlo.return" | "sdy.return" => {
                    let kind = match name {
                        "return" => OpKind::Return,
                        "stablehlo.return" => OpKind::StablehloReturn,
                        _ => OpKind::SdyReturn,
                    };
                    let ops = self.operand_list(fb)?;
                    let attrs = self.op_attrs()?;
                    let sig = if ops.is_empty() && self.c.peek() != Some(':') {
                        Sig::None
                    } else {
                        let sig_pos = self.here();
                        let sig = self.sig()?;
                        self.results_of(fb, sig, &ops, sig_pos, &kind)?;
                        Sig::None
                    };
                    let _ = sig;
                    return Ok((kind, ops, regions, attrs, Vec::new()));
                }
                _ => {
                    return Err(self.c.error_with(
                        name_pos,
                        "a known op (stablehlo.*, chlo.square, sdy.*, func.call, return)",
                        format!("unknown op '{name}'"),
                    ))
                }
            }
        };
        let attrs = self.op_attrs()?;
        let sig_pos = self.here();
        let sig = self.sig()?;
        let tys = self.results_of(fb, sig, &operands, sig_pos, &kind)?;
        Ok((kind, operands, regions, attrs, tys))
    }

    /// `out_sharding=<...>`.
    fn out_sharding(&mut self) -> Result<TensorSharding, TextError> {
        keyword(&mut self.c, "out_sharding")?;
        self.c.expect("=")?;
        TensorSharding::parse_at(&mut self.c, Some(&self.meshes))
    }

    /// `[<...>, <...>]`.
    fn sharding_list(&mut self) -> Result<Vec<TensorSharding>, TextError> {
        self.c.expect("[")?;
        let mut out = Vec::new();
        if self.c.eat("]") {
            return Ok(out);
        }
        loop {
            out.push(TensorSharding::parse_at(&mut self.c, Some(&self.meshes))?);
            if self.c.eat("]") {
                return Ok(out);
            }
            if !self.c.eat(",") {
                return Err(self.c.error("',' or ']' after a sharding"));
            }
        }
    }

    /// `"x"` or `"x":(1)2`.
    fn axis_ref(&mut self) -> Result<AxisRef, TextError> {
        if self.c.peek() != Some('"') {
            return Err(self.c.error("an axis name in quotes, like \"x\""));
        }
        let name = self.c.string()?;
        if self.c.peek_raw() == Some(':') {
            self.c.eat(":");
            self.c.expect("(")?;
            let pre_size = self.c.uint()?;
            self.c.expect(")")?;
            let size = self.c.uint()?;
            return Ok(AxisRef {
                name,
                sub: Some(SubAxis { pre_size, size }),
            });
        }
        Ok(AxisRef { name, sub: None })
    }

    /// `{"x", "y"}`.
    fn axis_set(&mut self) -> Result<Vec<AxisRef>, TextError> {
        self.c.expect("{")?;
        let mut out = Vec::new();
        if self.c.eat("}") {
            return Ok(out);
        }
        loop {
            out.push(self.axis_ref()?);
            if self.c.eat("}") {
                return Ok(out);
            }
            if !self.c.eat(",") {
                return Err(self.c.error("',' or '}' after an axis"));
            }
        }
    }

    /// `[{"x"}, {}]`.
    fn per_dim_axes(&mut self) -> Result<Vec<Vec<AxisRef>>, TextError> {
        self.c.expect("[")?;
        let mut out = Vec::new();
        if self.c.eat("]") {
            return Ok(out);
        }
        loop {
            out.push(self.axis_set()?);
            if self.c.eat("]") {
                return Ok(out);
            }
            if !self.c.eat(",") {
                return Err(self.c.error("',' or ']' after a dimension's axes"));
            }
        }
    }

    /// Block arguments `(%a: T, %b: T)` defined in the current scope.
    fn block_args(
        &mut self,
        fb: &mut FuncBuilder<'a>,
        op: OpId,
        region: usize,
        first_index: usize,
        step: usize,
    ) -> Result<Vec<ValueId>, TextError> {
        self.c.expect("(")?;
        let mut out = Vec::new();
        if self.c.eat(")") {
            return Ok(out);
        }
        loop {
            let pos = self.here();
            let name = value_name(&mut self.c)?;
            self.c.expect(":")?;
            let ty = tensor_type(&mut self.c)?;
            skip_loc(&mut self.c)?;
            let index = first_index + out.len() * step;
            let vid = fb.func.add_value(Value {
                name: name.to_string(),
                ty,
                sharding: None,
                def: ValueDef::BlockArg { op, region, index },
            });
            self.define(fb, name, vid, 1, pos)?;
            out.push(vid);
            if self.c.eat(")") {
                return Ok(out);
            }
            if !self.c.eat(",") {
                return Err(self.c.error("',' or ')' after a block argument"));
            }
        }
    }

    /// `(%arg1: T, ...) { ops }` as used by named/manual computations.
    fn region_with_header(
        &mut self,
        fb: &mut FuncBuilder<'a>,
        op: OpId,
        region: usize,
    ) -> Result<Region, TextError> {
        let args = self.block_args(fb, op, region, 0, 1)?;
        self.c.expect("{")?;
        let ops = self.block_ops(fb)?;
        self.end_scope(fb, &args, &ops);
        Ok(Region { args, ops })
    }

    /// Names defined inside a region go out of scope at its end.
    fn end_scope(&mut self, fb: &mut FuncBuilder<'a>, args: &[ValueId], ops: &[OpId]) {
        let func = &fb.func;
        let names = &mut fb.names;
        let mut forget = |v: ValueId| {
            let n = func.value(v).name.as_str();
            names.remove(n.split_once('#').map_or(n, |(g, _)| g));
        };
        for &a in args {
            forget(a);
        }
        for &o in ops {
            for &r in &func.op(o).results {
                forget(r);
            }
        }
    }

    /// `stablehlo.reduce(%a init: %b), ... [applies OP] across dimensions = [..] {attrs} : sig [reducer(...) (...) { body }]`.
    #[allow(clippy::type_complexity)]
    fn reduce(
        &mut self,
        fb: &mut FuncBuilder<'a>,
        id: OpId,
    ) -> Result<(OpKind, Vec<ValueId>, Vec<Region>, OpAttrs, Vec<TensorType>), TextError> {
        let mut inputs = Vec::new();
        let mut inits = Vec::new();
        loop {
            self.c.expect("(")?;
            inputs.push(self.lookup(fb)?);
            keyword(&mut self.c, "init")?;
            self.c.expect(":")?;
            inits.push(self.lookup(fb)?);
            self.c.expect(")")?;
            if !self.c.eat(",") {
                break;
            }
        }
        let n = inputs.len();
        let mut applies = None;
        if self.c.eat_keyword("applies") {
            let pos = self.here();
            let name = self.c.ident()?;
            let b = BinaryOp::ALL
                .into_iter()
                .find(|b| b.name() == name)
                .ok_or_else(|| {
                    self.c.error_with(
                        pos,
                        "a binary op to apply (stablehlo.add, stablehlo.maximum, ...)",
                        format!("'{name}'"),
                    )
                })?;
            applies = Some((b, pos));
        }
        keyword(&mut self.c, "across")?;
        keyword(&mut self.c, "dimensions")?;
        self.c.expect("=")?;
        let dims = dim_list(&mut self.c)?;
        let attrs = self.op_attrs()?;
        let sig_pos = self.here();
        let sig = self.sig()?;
        let mut operands = inputs;
        operands.extend(inits.iter().copied());
        let kind = OpKind::Reduce { dims };
        let tys = self.results_of(fb, sig, &operands, sig_pos, &kind)?;
        let region = if let Some((b, pos)) = applies {
            // Build the body the compact form stands for: one `b` per input pair.
            let loc = self.loc_at(pos);
            let mut args = Vec::with_capacity(2 * n);
            for index in 0..2 * n {
                let ty = fb.func.value(inits[index % n]).ty.clone();
                args.push(fb.func.add_value(Value {
                    name: format!("%reduce_arg{index}"),
                    ty,
                    sharding: None,
                    def: ValueDef::BlockArg {
                        op: id,
                        region: 0,
                        index,
                    },
                }));
            }
            let mut ops = Vec::new();
            let mut rets = Vec::new();
            for i in 0..n {
                let oid = fb.func.add_op(Op {
                    kind: OpKind::Binary(b),
                    operands: vec![args[i], args[n + i]],
                    results: Vec::new(),
                    regions: Vec::new(),
                    rule: None,
                    attrs: Vec::new(),
                    loc,
                });
                let ty = fb.func.value(args[i]).ty.clone();
                let r = fb.func.add_value(Value {
                    name: format!("%reduce_res{i}"),
                    ty,
                    sharding: None,
                    def: ValueDef::Result { op: oid, index: 0 },
                });
                fb.func.op_mut(oid).results.push(r);
                ops.push(oid);
                rets.push(r);
            }
            let ret = fb.func.add_op(Op {
                kind: OpKind::StablehloReturn,
                operands: rets,
                results: Vec::new(),
                regions: Vec::new(),
                rule: None,
                attrs: Vec::new(),
                loc,
            });
            ops.push(ret);
            Region { args, ops }
        } else {
            keyword(&mut self.c, "reducer")?;
            let mut args = vec![ValueId(0); 2 * n];
            let mut defined = Vec::new();
            for i in 0..n {
                let pair = self.block_args(fb, id, 0, i, n)?;
                if pair.len() != 2 {
                    return Err(self
                        .c
                        .error(format!("two reducer arguments for input #{i}")));
                }
                args[i] = pair[0];
                args[n + i] = pair[1];
                defined.extend(pair);
            }
            self.c.expect("{")?;
            let ops = self.block_ops(fb)?;
            self.end_scope(fb, &defined, &ops);
            Region { args, ops }
        };
        Ok((kind, operands, vec![region], attrs, tys))
    }

    /// `stablehlo.while(%iterArg = %init, ...) : T, ... [attributes {..}] cond { .. } do { .. }`:
    /// the iteration arguments are block arguments of both regions.
    #[allow(clippy::type_complexity)]
    fn while_op(
        &mut self,
        fb: &mut FuncBuilder<'a>,
        id: OpId,
    ) -> Result<(OpKind, Vec<ValueId>, Vec<Region>, OpAttrs, Vec<TensorType>), TextError> {
        self.c.expect("(")?;
        let mut names = Vec::new();
        let mut operands = Vec::new();
        if !self.c.eat(")") {
            loop {
                let pos = self.here();
                names.push((value_name(&mut self.c)?, pos));
                self.c.expect("=")?;
                operands.push(self.lookup(fb)?);
                if self.c.eat(")") {
                    break;
                }
                if !self.c.eat(",") {
                    return Err(self.c.error("',' or ')' after a loop-carried value"));
                }
            }
        }
        let mut tys = Vec::new();
        if !operands.is_empty() {
            self.c.expect(":")?;
            let sig_pos = self.here();
            tys.push(tensor_type(&mut self.c)?);
            while self.c.eat(",") {
                tys.push(tensor_type(&mut self.c)?);
            }
            if tys.len() != operands.len() {
                return Err(self.c.error_with(
                    sig_pos,
                    format!("{} loop-carried type(s)", operands.len()),
                    format!("{}", tys.len()),
                ));
            }
            for (i, (t, &v)) in tys.iter().zip(&operands).enumerate() {
                let actual = &fb.func.value(v).ty;
                if t != actual {
                    return Err(self.c.error_with(
                        sig_pos,
                        format!("loop-carried value #{i} of type {actual}"),
                        format!("{t}"),
                    ));
                }
            }
        }
        let attrs = if self.c.eat_keyword("attributes") {
            self.op_attrs()?
        } else {
            OpAttrs::default()
        };
        let mut regions = Vec::with_capacity(2);
        for (index, kw) in ["cond", "do"].into_iter().enumerate() {
            keyword(&mut self.c, kw)?;
            self.c.expect("{")?;
            let mut args = Vec::with_capacity(names.len());
            for (k, &(name, pos)) in names.iter().enumerate() {
                let vid = fb.func.add_value(Value {
                    name: name.to_string(),
                    ty: tys[k].clone(),
                    sharding: None,
                    def: ValueDef::BlockArg {
                        op: id,
                        region: index,
                        index: k,
                    },
                });
                self.define(fb, name, vid, 1, pos)?;
                args.push(vid);
            }
            let ops = self.block_ops(fb)?;
            self.end_scope(fb, &args, &ops);
            regions.push(Region { args, ops });
        }
        Ok((OpKind::While, operands, regions, attrs, tys))
    }

    /// The generic form `"dialect.op"(%a, %b) <{props}> ({regions}) {attrs} : (T, T) -> T`.
    #[allow(clippy::type_complexity)]
    fn generic_op(
        &mut self,
        fb: &mut FuncBuilder<'a>,
        id: OpId,
    ) -> Result<(OpKind, Vec<ValueId>, Vec<Region>, OpAttrs, Vec<TensorType>), TextError> {
        let name_pos = self.here();
        let name = self.c.string()?;
        let operands = self.paren_operands(fb)?;
        let mut props = Vec::new();
        if self.c.eat("<") {
            props = raw_dict(&mut self.c)?;
            self.c.expect(">")?;
        }
        let mut regions = Vec::new();
        if self.c.peek() == Some('(') {
            self.c.expect("(")?;
            loop {
                self.c.expect("{")?;
                let index = regions.len();
                let mut args = Vec::new();
                if self.c.peek() == Some('^') {
                    self.c.eat("^");
                    self.c.ident()?;
                    if self.c.peek() == Some('(') {
                        args = self.block_args(fb, id, index, 0, 1)?;
                    }
                    self.c.expect(":")?;
                }
                let ops = self.block_ops(fb)?;
                self.end_scope(fb, &args, &ops);
                regions.push(Region { args, ops });
                if self.c.eat(")") {
                    break;
                }
                self.c.expect(",")?;
            }
        }
        let mut attrs = self.op_attrs()?;
        attrs.raw.extend(props);
        let sig_pos = self.here();
        let sig = self.sig()?;
        let kind = self.generic_kind(&name, name_pos, &mut attrs.raw)?;
        let tys = self.results_of(fb, sig, &operands, sig_pos, &kind)?;
        if let OpKind::Constant { .. } = kind {
            // The value was taken from the `value` attribute against the result type.
            let text = take_attr(&mut attrs.raw, "value").unwrap_or_default();
            let mut sub = Cursor::new(&text);
            let raw = parse_dense(&mut sub).map_err(|_| {
                self.c
                    .error_with(name_pos, "a dense<...> value attribute", text.clone())
            })?;
            let value = raw
                .resolve(
                    &sub,
                    tys.first()
                        .ok_or_else(|| self.c.error_with(name_pos, "a result type", "none"))?,
                )
                .map_err(|e| {
                    self.c
                        .error_with(name_pos, "a valid constant value", e.to_string())
                })?;
            return Ok((
                OpKind::Constant {
                    value,
                    sdy: name == "sdy.constant",
                },
                operands,
                regions,
                attrs,
                tys,
            ));
        }
        Ok((kind, operands, regions, attrs, tys))
    }

    /// The op kind of a generic-form op, taking its typed attributes out of `raw`.
    fn generic_kind(
        &self,
        name: &str,
        pos: usize,
        raw: &mut Vec<RawAttr>,
    ) -> Result<OpKind, TextError> {
        let name = name
            .strip_prefix("func.")
            .filter(|n| *n == "call" || *n == "return")
            .unwrap_or(name);
        if let Some(u) = UnaryOp::ALL.iter().find(|u| u.name() == name) {
            return Ok(OpKind::Unary(*u));
        }
        if let Some(b) = BinaryOp::ALL.iter().find(|b| b.name() == name) {
            return Ok(OpKind::Binary(*b));
        }
        let ints = |raw: &mut Vec<RawAttr>, key: &str| -> Result<Vec<i64>, TextError> {
            let v = take_attr(raw, key)
                .ok_or_else(|| self.c.error_with(pos, format!("attribute '{key}'"), "none"))?;
            parse_int_array(&v).ok_or_else(|| {
                self.c
                    .error_with(pos, format!("a list of integers for '{key}'"), v)
            })
        };
        let dims = |raw: &mut Vec<RawAttr>, key: &str| -> Result<Vec<u64>, TextError> {
            ints(raw, key)?
                .into_iter()
                .map(|x| {
                    u64::try_from(x).map_err(|_| {
                        self.c.error_with(
                            pos,
                            format!("non-negative values in '{key}'"),
                            x.to_string(),
                        )
                    })
                })
                .collect()
        };
        let one = |raw: &mut Vec<RawAttr>, key: &str| -> Result<u64, TextError> {
            let v = dims(raw, key)?;
            v.first().copied().filter(|_| v.len() == 1).ok_or_else(|| {
                self.c
                    .error_with(pos, format!("one integer for '{key}'"), format!("{v:?}"))
            })
        };
        let flag = |raw: &mut Vec<RawAttr>, key: &str| -> Result<bool, TextError> {
            match take_attr(raw, key) {
                None => Ok(false),
                Some(v) => {
                    structured::parse_bool(&v).map_err(|e| self.c.error_with(pos, e, v.clone()))
                }
            }
        };
        let text = |raw: &mut Vec<RawAttr>, key: &str| -> Result<String, TextError> {
            let v = take_attr(raw, key)
                .ok_or_else(|| self.c.error_with(pos, format!("attribute '{key}'"), "none"))?;
            Ok(v.trim().trim_matches('"').to_string())
        };
        Ok(match name {
            "shardsim.device_copy" => OpKind::DeviceCopy {
                src: text(raw, "src")?,
                dst: text(raw, "dst")?,
            },
            "stablehlo.gather" => {
                let dn = text(raw, "dimension_numbers")?;
                OpKind::Gather {
                    dims: structured::parse_gather_dims(&dn)
                        .map_err(|e| self.c.error_with(pos, e, dn.clone()))?,
                    slice_sizes: dims(raw, "slice_sizes")?,
                    indices_are_sorted: flag(raw, "indices_are_sorted")?,
                }
            }
            "stablehlo.scatter" => {
                let dn = text(raw, "scatter_dimension_numbers")?;
                OpKind::Scatter {
                    dims: structured::parse_scatter_dims(&dn)
                        .map_err(|e| self.c.error_with(pos, e, dn.clone()))?,
                    indices_are_sorted: flag(raw, "indices_are_sorted")?,
                    unique_indices: flag(raw, "unique_indices")?,
                }
            }
            "stablehlo.sort" => OpKind::Sort {
                dimension: match take_attr(raw, "dimension") {
                    None => u64::MAX,
                    Some(v) => structured::parse_i64_attr(&v)
                        .map_err(|e| self.c.error_with(pos, e, v.clone()))?,
                },
                is_stable: flag(raw, "is_stable")?,
            },
            "stablehlo.reduce_window" => {
                let opt =
                    |raw: &mut Vec<RawAttr>, key: &str| -> Result<Option<Vec<u64>>, TextError> {
                        if raw.iter().any(|a| a.name == key) {
                            dims(raw, key).map(Some)
                        } else {
                            Ok(None)
                        }
                    };
                let padding = match take_attr(raw, "padding") {
                    None => None,
                    Some(v) => Some(
                        structured::parse_padding(&v)
                            .map_err(|e| self.c.error_with(pos, e, v.clone()))?,
                    ),
                };
                OpKind::ReduceWindow {
                    window: WindowAttrs {
                        dimensions: dims(raw, "window_dimensions")?,
                        strides: opt(raw, "window_strides")?,
                        base_dilations: opt(raw, "base_dilations")?,
                        window_dilations: opt(raw, "window_dilations")?,
                        padding,
                    },
                }
            }
            "stablehlo.cholesky" => OpKind::Cholesky {
                lower: flag(raw, "lower")?,
            },
            "stablehlo.after_all" => OpKind::AfterAll,
            "stablehlo.send" | "stablehlo.recv" => {
                let t = text(raw, "channel_handle")?;
                let channel = crate::ir::Channel::parse(&t).ok_or_else(|| {
                    self.c.error_with(
                        pos,
                        "#stablehlo.channel_handle<handle = N, type = T>",
                        t.clone(),
                    )
                })?;
                let is_host_transfer = flag(raw, "is_host_transfer")?;
                if name == "stablehlo.send" {
                    OpKind::Send {
                        channel,
                        is_host_transfer,
                    }
                } else {
                    OpKind::Recv {
                        channel,
                        is_host_transfer,
                    }
                }
            }
            "stablehlo.fft" => {
                // `fft_type = #stablehlo<fft_type RFFT>, fft_length = array<i64: 64>`
                let t = text(raw, "fft_type")?;
                let kind = t
                    .strip_prefix("#stablehlo<fft_type ")
                    .and_then(|x| x.strip_suffix('>'))
                    .and_then(|x| fft_kind(x.trim()))
                    .ok_or_else(|| {
                        self.c.error_with(
                            pos,
                            "#stablehlo<fft_type FFT|IFFT|RFFT|IRFFT>",
                            t.clone(),
                        )
                    })?;
                OpKind::Fft {
                    kind,
                    length: dims(raw, "fft_length")?,
                }
            }
            "stablehlo.select_and_scatter" => {
                let padding = match take_attr(raw, "padding") {
                    None => None,
                    Some(v) => Some(
                        structured::parse_padding(&v)
                            .map_err(|e| self.c.error_with(pos, e, v.clone()))?,
                    ),
                };
                let strides = if raw.iter().any(|a| a.name == "window_strides") {
                    Some(dims(raw, "window_strides")?)
                } else {
                    None
                };
                OpKind::SelectAndScatter {
                    window: WindowAttrs {
                        dimensions: dims(raw, "window_dimensions")?,
                        strides,
                        base_dilations: None,
                        window_dilations: None,
                        padding,
                    },
                }
            }
            "stablehlo.triangular_solve" => {
                let t = text(raw, "transpose_a")?;
                let transpose_a = t
                    .strip_prefix("#stablehlo<transpose ")
                    .and_then(|x| x.strip_suffix('>'))
                    .and_then(|x| TransposeA::ALL.into_iter().find(|a| a.name() == x.trim()))
                    .ok_or_else(|| {
                        self.c.error_with(
                            pos,
                            "#stablehlo<transpose NO_TRANSPOSE|TRANSPOSE|ADJOINT>",
                            t.clone(),
                        )
                    })?;
                OpKind::TriangularSolve {
                    left_side: flag(raw, "left_side")?,
                    lower: flag(raw, "lower")?,
                    unit_diagonal: flag(raw, "unit_diagonal")?,
                    transpose_a,
                }
            }
            "stablehlo.batch_norm_inference" => {
                let epsilon = take_attr(raw, "epsilon")
                    .ok_or_else(|| self.c.error_with(pos, "attribute 'epsilon'", "none"))?
                    .trim()
                    .to_string();
                OpKind::BatchNormInference {
                    epsilon,
                    feature_index: one(raw, "feature_index")?,
                }
            }
            "stablehlo.case" => OpKind::Case,
            "stablehlo.if" => OpKind::If,
            "stablehlo.while" => OpKind::While,
            "stablehlo.optimization_barrier" => OpKind::OptimizationBarrier,
            "stablehlo.bitcast_convert" => OpKind::BitcastConvert,
            "stablehlo.custom_call" => OpKind::CustomCall {
                target: text(raw, "call_target_name")?,
            },
            "stablehlo.select" => OpKind::Select,
            "stablehlo.clamp" => OpKind::Clamp,
            "stablehlo.convert" => OpKind::Convert,
            "stablehlo.reshape" => OpKind::Reshape,
            "stablehlo.dynamic_update_slice" => OpKind::DynamicUpdateSlice,
            "stablehlo.constant" | "sdy.constant" => OpKind::Constant {
                value: crate::ir::ops::DenseValue::Elements(Vec::new()),
                sdy: false,
            },
            "stablehlo.iota" => OpKind::Iota {
                dim: one(raw, "iota_dimension")?,
            },
            "stablehlo.broadcast_in_dim" => OpKind::BroadcastInDim {
                dims: dims(raw, "broadcast_dimensions")?,
            },
            "stablehlo.transpose" => OpKind::Transpose {
                perm: dims(raw, "permutation")?,
            },
            "stablehlo.reverse" => OpKind::Reverse {
                dims: dims(raw, "dimensions")?,
            },
            "stablehlo.reduce" => OpKind::Reduce {
                dims: dims(raw, "dimensions")?,
            },
            "stablehlo.concatenate" => OpKind::Concatenate {
                dim: one(raw, "dimension")?,
            },
            "stablehlo.dynamic_slice" => OpKind::DynamicSlice {
                sizes: dims(raw, "slice_sizes")?,
            },
            "stablehlo.slice" => OpKind::Slice {
                start: ints(raw, "start_indices")?,
                limit: ints(raw, "limit_indices")?,
                strides: ints(raw, "strides")?,
            },
            "stablehlo.pad" => OpKind::Pad {
                low: ints(raw, "edge_padding_low")?,
                high: ints(raw, "edge_padding_high")?,
                interior: ints(raw, "interior_padding")?,
            },
            "stablehlo.compare" => {
                let d = take_attr(raw, "comparison_direction").ok_or_else(|| {
                    self.c
                        .error_with(pos, "attribute 'comparison_direction'", "none")
                })?;
                let dir = CompareDir::ALL
                    .into_iter()
                    .find(|x| last_word(&d) == x.name())
                    .ok_or_else(|| self.c.error_with(pos, "a comparison direction", d.clone()))?;
                let cmp_type = match take_attr(raw, "compare_type") {
                    Some(t) => Some(
                        CompareType::ALL
                            .into_iter()
                            .find(|x| last_word(&t) == x.name())
                            .ok_or_else(|| {
                                self.c.error_with(pos, "a comparison type", t.clone())
                            })?,
                    ),
                    None => None,
                };
                OpKind::Compare { dir, cmp_type }
            }
            "stablehlo.dot_general" => {
                let text = take_attr(raw, "dot_dimension_numbers").ok_or_else(|| {
                    self.c
                        .error_with(pos, "attribute 'dot_dimension_numbers'", "none")
                })?;
                let field = |key: &str| -> Result<Vec<u64>, TextError> {
                    match text.find(key) {
                        None => Ok(Vec::new()),
                        Some(i) => {
                            let rest = &text[i + key.len()..];
                            let list = rest
                                .split_once('[')
                                .and_then(|(_, r)| r.split_once(']'))
                                .map(|(l, _)| l)
                                .unwrap_or("");
                            list.split(',')
                                .filter(|t| !t.trim().is_empty())
                                .map(|t| {
                                    t.trim().parse::<u64>().map_err(|_| {
                                        self.c.error_with(
                                            pos,
                                            format!("integers in {key}"),
                                            t.to_string(),
                                        )
                                    })
                                })
                                .collect()
                        }
                    }
                };
                let dims = DotDims {
                    lhs_batch: field("lhs_batching_dimensions")?,
                    rhs_batch: field("rhs_batching_dimensions")?,
                    lhs_contract: field("lhs_contracting_dimensions")?,
                    rhs_contract: field("rhs_contracting_dimensions")?,
                };
                OpKind::DotGeneral {
                    dims,
                    precision: take_precision(raw),
                }
            }
            "stablehlo.dot" => OpKind::Dot {
                precision: take_precision(raw),
            },
            "stablehlo.all_reduce"
            | "stablehlo.all_gather"
            | "stablehlo.reduce_scatter"
            | "stablehlo.all_to_all"
            | "stablehlo.collective_permute" => {
                let matrix = |raw: &mut Vec<RawAttr>,
                              key: &str|
                 -> Result<Vec<Vec<u64>>, TextError> {
                    let v = take_attr(raw, key).ok_or_else(|| {
                        self.c.error_with(pos, format!("attribute '{key}'"), "none")
                    })?;
                    parse_int_matrix(&v).ok_or_else(|| {
                        self.c.error_with(
                            pos,
                            format!("a dense<[[...]]> : tensor<NxMxi64> of non-negative integers for '{key}'"),
                            v,
                        )
                    })
                };
                let op = match name {
                    "stablehlo.all_reduce" => DeviceCollective::AllReduce,
                    "stablehlo.all_gather" => DeviceCollective::AllGather {
                        dim: one(raw, "all_gather_dim")?,
                    },
                    "stablehlo.reduce_scatter" => DeviceCollective::ReduceScatter {
                        dim: one(raw, "scatter_dimension")?,
                    },
                    "stablehlo.all_to_all" => DeviceCollective::AllToAll {
                        split_dim: one(raw, "split_dimension")?,
                        concat_dim: one(raw, "concat_dimension")?,
                        split_count: one(raw, "split_count")?,
                    },
                    _ => {
                        let pairs = matrix(raw, "source_target_pairs")?;
                        if pairs.iter().any(|p| p.len() != 2) {
                            return Err(self.c.error_with(
                                pos,
                                "pairs [source, target] in 'source_target_pairs'",
                                format!("{pairs:?}"),
                            ));
                        }
                        DeviceCollective::CollectivePermute {
                            pairs: pairs.iter().map(|p| (p[0], p[1])).collect(),
                        }
                    }
                };
                let groups = match op {
                    DeviceCollective::CollectivePermute { .. } => Vec::new(),
                    _ => matrix(raw, "replica_groups")?,
                };
                OpKind::DeviceCollective { op, groups }
            }
            "call" => {
                let callee = take_attr(raw, "callee")
                    .ok_or_else(|| self.c.error_with(pos, "attribute 'callee'", "none"))?;
                OpKind::Call {
                    callee: callee.trim_start_matches('@').to_string(),
                }
            }
            "return" => OpKind::Return,
            "stablehlo.return" => OpKind::StablehloReturn,
            "sdy.return" => OpKind::SdyReturn,
            _ => {
                return Err(self.c.error_with(
                    pos,
                    "a known op in generic form (stablehlo.*, func.call, return)",
                    format!("unknown op \"{name}\""),
                ))
            }
        })
    }
}

fn merge_attrs(into: &mut OpAttrs, other: OpAttrs) {
    if into.sharding.is_none() {
        into.sharding = other.sharding;
    }
    if into.rule.is_none() {
        into.rule = other.rule;
    }
    into.raw.extend(other.raw);
}

fn take_attr(raw: &mut Vec<RawAttr>, key: &str) -> Option<String> {
    let i = raw.iter().position(|a| a.name == key)?;
    Some(raw.remove(i).value)
}

fn last_word(s: &str) -> &str {
    s.trim_end_matches('>')
        .rsplit([' ', '<'])
        .next()
        .unwrap_or("")
}

fn take_precision(raw: &mut Vec<RawAttr>) -> Vec<String> {
    match take_attr(raw, "precision_config") {
        None => Vec::new(),
        Some(t) => t
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(last_word)
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect(),
    }
}

/// The rows of `dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>` (a splat
/// `dense<0>` fills the type's shape).
fn parse_int_matrix(text: &str) -> Option<Vec<Vec<u64>>> {
    let body = text.trim().strip_prefix("dense<")?;
    let (values, ty) = body.split_once('>')?;
    let shape = ty
        .trim()
        .strip_prefix(':')?
        .trim()
        .strip_prefix("tensor<")?;
    let dims: Vec<usize> = shape
        .strip_suffix('>')?
        .split('x')
        .take_while(|t| t.chars().all(|c| c.is_ascii_digit()))
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let [rows, cols] = dims[..] else {
        return None;
    };
    let flat: Vec<u64> = values
        .split(['[', ']', ','])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let flat = match flat.len() {
        1 if rows * cols != 1 => vec![flat[0]; rows * cols],
        n if n == rows * cols => flat,
        _ => return None,
    };
    Some(flat.chunks(cols.max(1)).map(<[u64]>::to_vec).collect())
}

/// Integers of `array<i64: 1, 2>`, `dense<[1, 2]> : tensor<2xi64>` or `3 : i64`.
fn parse_int_array(text: &str) -> Option<Vec<i64>> {
    let body = if let Some(r) = text.strip_prefix("array<") {
        let r = r.strip_suffix('>')?;
        match r.split_once(':') {
            Some((_, list)) => list,
            None => "",
        }
    } else if let Some(r) = text.strip_prefix("dense<") {
        r.split_once('>')?
            .0
            .trim_start_matches('[')
            .trim_end_matches(']')
    } else {
        text.split(':').next()?
    };
    body.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().ok())
        .collect()
}

/// The count of `mhlo.num_partitions = N : i32` (None: not a positive integer).
fn num_partitions_of(a: &RawAttr) -> Option<u64> {
    let v = a.value.trim();
    let n = v.split(':').next()?.trim().parse::<u64>().ok()?;
    (n > 0).then_some(n)
}

/// The fft type named `t` (`FFT`, `IFFT`, `RFFT`, `IRFFT`).
fn fft_kind(t: &str) -> Option<crate::tensor::FftKind> {
    crate::tensor::FftKind::ALL
        .into_iter()
        .find(|k| k.name() == t)
}
