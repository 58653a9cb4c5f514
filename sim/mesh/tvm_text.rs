//! TVM's printed device mesh, `R.device_mesh((2, 4), I.Range(0, 8))` or with an
//! id list `R.device_mesh((2,), [4, 6])`, and reading it back (with
//! `I.Range(start, stop, step)` accepted too).

use crate::base::{Cursor, TextError};

use super::{DeviceIds, Mesh};

impl Mesh {
    /// TVM's printed form: a Range when the ids are consecutive, else the id list.
    pub fn to_tvm_text(&self) -> String {
        let shape: Vec<String> = self.shape().iter().map(u64::to_string).collect();
        let shape = if shape.len() == 1 {
            format!("({},)", shape[0])
        } else {
            format!("({})", shape.join(", "))
        };
        let ids = self.device_ids();
        let start = ids.first().copied().unwrap_or(0);
        let consecutive = ids.iter().enumerate().all(|(i, &d)| d == start + i as u64);
        if consecutive {
            format!(
                "R.device_mesh({shape}, I.Range({start}, {}))",
                start + ids.len() as u64
            )
        } else {
            let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
            format!("R.device_mesh({shape}, [{}])", ids.join(", "))
        }
    }

    /// Read TVM's `R.device_mesh(shape, ids)` back; axes are named `d0`, `d1`, ...
    pub fn from_tvm_text(text: &str) -> Result<Mesh, TextError> {
        let mut c = Cursor::new(text);
        c.ws();
        if !c.eat("R.device_mesh") {
            c.eat("device_mesh");
        }
        c.expect("(")?;
        c.expect("(")?;
        let mut shape = Vec::new();
        while !c.eat(")") {
            if !shape.is_empty() {
                c.expect(",")?;
                if c.eat(")") {
                    break;
                }
            }
            c.ws();
            shape.push(c.uint()?);
        }
        c.expect(",")?;
        c.ws();
        let ids_at = c.pos();
        let ids = if c.eat("I.Range") || c.eat("Range") {
            c.expect("(")?;
            c.ws();
            let start = c.uint()?;
            c.expect(",")?;
            c.ws();
            let stop = c.uint()?;
            let step = if c.eat(",") {
                c.ws();
                c.uint()?
            } else {
                1
            };
            c.expect(")")?;
            DeviceIds::Range { start, stop, step }
        } else {
            c.expect("[")?;
            let mut ids = Vec::new();
            while !c.eat("]") {
                if !ids.is_empty() {
                    c.expect(",")?;
                }
                c.ws();
                ids.push(c.uint()?);
            }
            DeviceIds::List(ids)
        };
        c.expect(")")?;
        if !c.at_end() {
            return Err(c.error("end of device mesh"));
        }
        Mesh::tvm(&shape, ids, &[])
            .map_err(|e| c.error_with(ids_at, "device ids that fit the shape", e.to_string()))
    }
}
