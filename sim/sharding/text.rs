//! Shardy's text form of shardings, printed byte-for-byte as Shardy prints them:
//! `#sdy.sharding<@mesh, [{"x", ?}, {"y":(1)2}p1], replicated={"z"}>` and
//! `#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>`.

use std::collections::BTreeMap;
use std::fmt;

use crate::base::{Cursor, TextError};
use crate::mesh::{AxisRef, Mesh, SubAxis};

use super::{DimSharding, MeshRef, Reduction, Site, TensorSharding};

/// Finds meshes by symbol name (a module's `sdy.mesh` table).
pub trait MeshLookup {
    fn lookup(&self, name: &str) -> Option<&Mesh>;
}

impl MeshLookup for BTreeMap<String, Mesh> {
    fn lookup(&self, name: &str) -> Option<&Mesh> {
        self.get(name)
    }
}

impl MeshLookup for [(String, Mesh)] {
    fn lookup(&self, name: &str) -> Option<&Mesh> {
        self.iter().find(|(n, _)| n == name).map(|(_, m)| m)
    }
}

impl MeshLookup for Vec<(String, Mesh)> {
    fn lookup(&self, name: &str) -> Option<&Mesh> {
        self.as_slice().lookup(name)
    }
}

/// One sharding per result (or operand) of an op.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardingPerValue(pub Vec<TensorSharding>);

/// Byte offsets of the parts of a parsed sharding, for errors found after parsing.
struct Sites {
    start: usize,
    mesh: usize,
    dims: Vec<usize>,
    dim_axes: Vec<Vec<usize>>,
    replicated: Vec<usize>,
    unreduced: Vec<usize>,
}

impl Sites {
    fn pos(&self, site: &Site) -> usize {
        match *site {
            Site::Whole => self.start,
            Site::Mesh => self.mesh,
            Site::Dim(d) => self.dims.get(d).copied().unwrap_or(self.start),
            Site::DimAxis(d, i) => self
                .dim_axes
                .get(d)
                .and_then(|v| v.get(i))
                .copied()
                .unwrap_or(self.start),
            Site::Replicated(i) => self.replicated.get(i).copied().unwrap_or(self.start),
            Site::Unreduced(i) => self.unreduced.get(i).copied().unwrap_or(self.start),
        }
    }
}

impl TensorSharding {
    /// Parse a whole text (with or without the `#sdy.sharding` prefix), checking
    /// syntax only (and an inline mesh, if any).
    pub fn parse(text: &str) -> Result<TensorSharding, TextError> {
        TensorSharding::parse_with(text, None)
    }

    /// Parse a whole text and check it against the meshes of `meshes`; a mesh
    /// symbol they do not define is an error.
    pub fn parse_checked(text: &str, meshes: &dyn MeshLookup) -> Result<TensorSharding, TextError> {
        TensorSharding::parse_with(text, Some(meshes))
    }

    /// Parse a whole text and, where the mesh is known (given or inline), check
    /// it against the mesh: errors point at the offending axis.
    pub fn parse_with(
        text: &str,
        meshes: Option<&dyn MeshLookup>,
    ) -> Result<TensorSharding, TextError> {
        let mut c = Cursor::new(text);
        let s = TensorSharding::parse_at(&mut c, meshes)?;
        if !c.at_end() {
            return Err(c.error("end of sharding"));
        }
        Ok(s)
    }

    /// Parse a sharding at the cursor: `#sdy.sharding<...>` or the bare `<...>`.
    pub fn parse_at(
        c: &mut Cursor<'_>,
        meshes: Option<&dyn MeshLookup>,
    ) -> Result<TensorSharding, TextError> {
        c.eat("#sdy.sharding");
        c.ws();
        let start = c.pos();
        c.expect("<")?;
        c.ws();
        let mesh_pos = c.pos();
        let mesh = if c.eat("@") {
            let name = c.ident().map_err(|_| c.error("a mesh name after '@'"))?;
            MeshRef::Symbol(name.to_string())
        } else if c.eat_keyword("mesh") {
            MeshRef::Inline(Mesh::parse_at(c)?)
        } else {
            return Err(c.error("a mesh reference like @mesh or an inline mesh<[...]>"));
        };
        c.expect(",")?;
        let mut sites = Sites {
            start,
            mesh: mesh_pos,
            dims: Vec::new(),
            dim_axes: Vec::new(),
            replicated: Vec::new(),
            unreduced: Vec::new(),
        };
        c.expect("[")?;
        let mut dims = Vec::new();
        if !c.eat("]") {
            loop {
                c.ws();
                sites.dims.push(c.pos());
                let (dim, positions) = parse_dim(c)?;
                dims.push(dim);
                sites.dim_axes.push(positions);
                if c.eat("]") {
                    break;
                }
                if !c.eat(",") {
                    return Err(c.error("',' or ']' after a dimension sharding"));
                }
            }
        }
        let mut replicated = Vec::new();
        let mut unreduced = Vec::new();
        let mut reduction = Reduction::Sum;
        while c.eat(",") {
            c.ws();
            let kw_pos = c.pos();
            if c.eat_keyword("replicated") {
                if !replicated.is_empty() {
                    return Err(c.error_with(
                        kw_pos,
                        "at most one replicated={...}",
                        "a second one",
                    ));
                }
                c.expect("=")?;
                (replicated, sites.replicated) = parse_axis_set(c)?;
            } else if c.eat_keyword("unreduced") {
                if !unreduced.is_empty() {
                    return Err(c.error_with(
                        kw_pos,
                        "at most one unreduced={...}",
                        "a second one",
                    ));
                }
                c.expect("=")?;
                c.ws();
                if c.eat_keyword("max") {
                    reduction = Reduction::Max;
                } else if c.eat_keyword("min") {
                    reduction = Reduction::Min;
                }
                (unreduced, sites.unreduced) = parse_axis_set(c)?;
            } else {
                return Err(c.error("'replicated' or 'unreduced'"));
            }
        }
        c.expect(">")?;
        let sharding = TensorSharding {
            mesh,
            dims,
            replicated,
            unreduced,
            reduction,
        };
        let mesh = match (meshes, &sharding.mesh) {
            (_, MeshRef::Inline(m)) => Some(m),
            (Some(table), MeshRef::Symbol(name)) => match table.lookup(name) {
                Some(m) => Some(m),
                None => {
                    return Err(c.error_with(
                        sites.mesh,
                        "a mesh defined by sdy.mesh",
                        format!("unknown mesh @{name}"),
                    ))
                }
            },
            (None, MeshRef::Symbol(_)) => None,
        };
        if let Some(m) = mesh {
            if let Err(e) = sharding.validate_axes(m) {
                return Err(c.error_with(sites.pos(&e.site), "a valid sharding", e.to_string()));
            }
        }
        Ok(sharding)
    }
}

/// `{"x", "y":(1)2, ?}p1` → the dim and the byte offset of each axis.
fn parse_dim(c: &mut Cursor<'_>) -> Result<(DimSharding, Vec<usize>), TextError> {
    c.expect("{")?;
    let mut axes = Vec::new();
    let mut positions = Vec::new();
    let mut is_closed = true;
    if !c.eat("}") {
        loop {
            if c.eat("?") {
                is_closed = false;
                c.expect("}")
                    .map_err(|_| c.error("'}' after '?' (the open marker comes last)"))?;
                break;
            }
            c.ws();
            positions.push(c.pos());
            axes.push(parse_axis_ref(c)?);
            if c.eat("}") {
                break;
            }
            if !c.eat(",") {
                return Err(c.error("',' or '}' after an axis"));
            }
        }
    }
    let mut priority = None;
    if c.peek_raw() == Some('p') {
        c.eat("p");
        let p = c.int()?;
        priority = Some(p);
    }
    Ok((
        DimSharding {
            axes,
            is_closed,
            priority,
        },
        positions,
    ))
}

/// `{"x", "y":(2)2}` → axes and their offsets.
fn parse_axis_set(c: &mut Cursor<'_>) -> Result<(Vec<AxisRef>, Vec<usize>), TextError> {
    c.expect("{")?;
    let mut axes = Vec::new();
    let mut positions = Vec::new();
    if !c.eat("}") {
        loop {
            c.ws();
            positions.push(c.pos());
            axes.push(parse_axis_ref(c)?);
            if c.eat("}") {
                break;
            }
            if !c.eat(",") {
                return Err(c.error("',' or '}' after an axis"));
            }
        }
    }
    Ok((axes, positions))
}

/// `"x"` or `"x":(pre)size`.
pub fn parse_axis_ref(c: &mut Cursor<'_>) -> Result<AxisRef, TextError> {
    if c.peek() != Some('"') {
        return Err(c.error("an axis name in quotes, like \"x\""));
    }
    let name = c.string()?;
    if c.peek_raw() == Some(':') {
        c.eat(":");
        c.expect("(")?;
        let pre_size = c.uint()?;
        c.expect(")")?;
        c.ws();
        let size = c.uint()?;
        return Ok(AxisRef {
            name,
            sub: Some(SubAxis { pre_size, size }),
        });
    }
    Ok(AxisRef { name, sub: None })
}

fn write_axes(f: &mut fmt::Formatter<'_>, axes: &[AxisRef]) -> fmt::Result {
    for (i, a) in axes.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{a}")?;
    }
    Ok(())
}

impl fmt::Display for DimSharding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        write_axes(f, &self.axes)?;
        if !self.is_closed {
            f.write_str(if self.axes.is_empty() { "?" } else { ", ?" })?;
        }
        f.write_str("}")?;
        if let Some(p) = self.priority {
            write!(f, "p{p}")?;
        }
        Ok(())
    }
}

impl TensorSharding {
    /// The bare form used inside per-value lists: `<@mesh, [{"x"}, {}]>`.
    pub fn to_bare(&self) -> String {
        let mut s = String::from("<");
        match &self.mesh {
            MeshRef::Symbol(n) => {
                s.push('@');
                s.push_str(n);
            }
            MeshRef::Inline(m) => {
                s.push_str("mesh");
                s.push_str(&m.to_string());
            }
        }
        s.push_str(", [");
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&d.to_string());
        }
        s.push(']');
        for (kw, axes) in [
            ("replicated", &self.replicated),
            ("unreduced", &self.unreduced),
        ] {
            if !axes.is_empty() {
                s.push_str(", ");
                s.push_str(kw);
                s.push('=');
                if kw == "unreduced" {
                    s.push_str(self.reduction.keyword());
                }
                s.push('{');
                let names: Vec<String> = axes.iter().map(|a| a.to_string()).collect();
                s.push_str(&names.join(", "));
                s.push('}');
            }
        }
        s.push('>');
        s
    }
}

/// `#sdy.sharding<...>`.
impl fmt::Display for TensorSharding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#sdy.sharding{}", self.to_bare())
    }
}

impl ShardingPerValue {
    /// Parse `#sdy.sharding_per_value<[<...>, ...]>` (the prefix is optional).
    pub fn parse_at(
        c: &mut Cursor<'_>,
        meshes: Option<&dyn MeshLookup>,
    ) -> Result<ShardingPerValue, TextError> {
        c.eat("#sdy.sharding_per_value");
        c.expect("<")?;
        let list = parse_bare_list(c, meshes)?;
        c.expect(">")?;
        Ok(ShardingPerValue(list))
    }

    /// Parse a whole text.
    pub fn parse(text: &str) -> Result<ShardingPerValue, TextError> {
        let mut c = Cursor::new(text);
        let v = ShardingPerValue::parse_at(&mut c, None)?;
        if !c.at_end() {
            return Err(c.error("end of sharding list"));
        }
        Ok(v)
    }
}

/// `[<@mesh, [...]>, <...>]`: the list form used by per-value shardings and by
/// `in_shardings=`/`out_shardings=` of manual and named computations.
pub fn parse_bare_list(
    c: &mut Cursor<'_>,
    meshes: Option<&dyn MeshLookup>,
) -> Result<Vec<TensorSharding>, TextError> {
    c.expect("[")?;
    let mut list = Vec::new();
    if !c.eat("]") {
        loop {
            list.push(TensorSharding::parse_at(c, meshes)?);
            if c.eat("]") {
                break;
            }
            if !c.eat(",") {
                return Err(c.error("',' or ']' after a sharding"));
            }
        }
    }
    Ok(list)
}

/// Print a list in the bare form `[<...>, <...>]`.
pub fn print_bare_list(list: &[TensorSharding]) -> String {
    let items: Vec<String> = list.iter().map(TensorSharding::to_bare).collect();
    format!("[{}]", items.join(", "))
}

impl fmt::Display for ShardingPerValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#sdy.sharding_per_value<{}>", print_bare_list(&self.0))
    }
}
