//! TVM's printed device mesh, `R.device_mesh((2, 4), I.Range(0, 8))` or with an
//! id list, and reading it back.

use super::Mesh;

impl Mesh {
    /// TVM's printed form: `R.device_mesh((2, 4), I.Range(0, 8))`, or with an id list.
    pub fn to_tvm_text(&self) -> String {
        let shape: Vec<String> = self.shape().iter().map(u64::to_string).collect();
        let shape = if shape.len() == 1 {
            format!("({},)", shape[0])
        } else {
            format!("({})", shape.join(", "))
        };
        match self.explicit_device_ids() {
            None => format!("R.device_mesh({shape}, I.Range(0, {}))", self.num_devices()),
            Some(ids) => {
                let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
                format!("R.device_mesh({shape}, [{}])", ids.join(", "))
            }
        }
    }
}
