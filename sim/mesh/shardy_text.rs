//! Shardy's text form of a mesh: `<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>`,
//! also accepted with the `#sdy.mesh` prefix.

use std::fmt;

use crate::base::{Cursor, TextError};

use super::{Mesh, MeshAxis, MeshError};

impl Mesh {
    /// Parse a mesh in Shardy's syntax (the whole text).
    pub fn parse(text: &str) -> Result<Mesh, TextError> {
        let mut c = Cursor::new(text);
        let mesh = Mesh::parse_at(&mut c)?;
        if !c.at_end() {
            return Err(c.error("end of mesh"));
        }
        Ok(mesh)
    }

    /// Parse a mesh attribute at the cursor (`#sdy.mesh<...>` or `<...>`).
    pub fn parse_at(c: &mut Cursor<'_>) -> Result<Mesh, TextError> {
        c.eat("#sdy.mesh");
        let open = {
            c.ws();
            c.pos()
        };
        c.expect("<")?;
        c.expect("[")?;
        let mut axes: Vec<MeshAxis> = Vec::new();
        if !c.eat("]") {
            loop {
                c.ws();
                let name_pos = c.pos();
                let name = c
                    .string()
                    .map_err(|_| c.error("an axis name in quotes, like \"x\""))?;
                if axes.iter().any(|a| a.name == name) {
                    return Err(c.error_with(
                        name_pos,
                        "distinct axis names",
                        format!("duplicate axis \"{name}\""),
                    ));
                }
                c.expect("=")?;
                c.ws();
                let size_pos = c.pos();
                let size = c.uint()?;
                if size < 1 {
                    return Err(c.error_with(
                        size_pos,
                        "an axis size of at least 1",
                        format!("{size}"),
                    ));
                }
                axes.push(MeshAxis { name, size });
                if c.eat("]") {
                    break;
                }
                if !c.eat(",") {
                    return Err(c.error("',' or ']' after a mesh axis"));
                }
            }
        }
        let mut device_ids = None;
        let mut ids_pos = open;
        if c.eat(",") {
            c.ws();
            ids_pos = c.pos();
            if !c.eat_keyword("device_ids") {
                return Err(c.error("'device_ids'"));
            }
            c.expect("=")?;
            c.expect("[")?;
            let mut ids = Vec::new();
            if !c.eat("]") {
                loop {
                    ids.push(c.uint()?);
                    if c.eat("]") {
                        break;
                    }
                    if !c.eat(",") {
                        return Err(c.error("',' or ']' in device_ids"));
                    }
                }
            }
            device_ids = Some(ids);
        }
        c.expect(">")?;
        Mesh::with_device_ids(axes, device_ids)
            .map_err(|e: MeshError| c.error_with(ids_pos, "a valid mesh", e.to_string()))
    }

    /// Shardy's text form without the `#sdy.mesh` prefix.
    pub fn to_shardy(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<[")?;
        for (i, a) in self.axes().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "\"{}\"={}", a.name, a.size)?;
        }
        f.write_str("]")?;
        if let Some(ids) = self.explicit_device_ids() {
            f.write_str(", device_ids=[")?;
            for (i, d) in ids.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{d}")?;
            }
            f.write_str("]")?;
        }
        f.write_str(">")
    }
}
