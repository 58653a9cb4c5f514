//! The scenario's mesh: its shape resolved against the topology's device
//! count (one `-1` entry takes the devices left over), its placement (which
//! mesh axes vary fastest over device ids, i.e. lie inside a node) as a
//! Shardy device order, and the rewrite of a program's `sdy.mesh` to it.

use crate::ir::Module;
use crate::mesh::{Mesh, MeshAxis};

use super::spec::MeshSpec;
use super::ScenarioError;

/// Resolve `spec` for a machine of `devices` devices. A mesh that does not use
/// exactly the machine's devices is an error naming both counts.
pub fn build_mesh(spec: &MeshSpec, devices: u64) -> Result<Mesh, ScenarioError> {
    let bad = |m: String| ScenarioError::Mesh(m);
    if spec.shape.len() != spec.axes.len() {
        return Err(bad(format!(
            "shape {:?} has {} entries but axes {:?} has {}",
            spec.shape,
            spec.shape.len(),
            spec.axes,
            spec.axes.len()
        )));
    }
    let wild: Vec<usize> = (0..spec.shape.len())
        .filter(|&i| spec.shape[i] == -1)
        .collect();
    if wild.len() > 1 {
        return Err(bad("at most one mesh dimension may be -1".into()));
    }
    let mut known = 1u64;
    for (i, &s) in spec.shape.iter().enumerate() {
        if s == -1 {
            continue;
        }
        if s < 1 {
            return Err(bad(format!(
                "axis {} has size {s}: sizes are >= 1 (or -1 for the devices left over)",
                spec.axes[i]
            )));
        }
        known = known
            .checked_mul(s as u64)
            .ok_or_else(|| bad("the mesh size overflows".into()))?;
    }
    let mut sizes: Vec<u64> = spec.shape.iter().map(|&s| s.max(1) as u64).collect();
    if let Some(&w) = wild.first() {
        if devices % known != 0 {
            return Err(bad(format!(
                "the other axes take {known} devices, which does not divide the topology's {devices}"
            )));
        }
        sizes[w] = devices / known;
    } else if known != devices {
        return Err(bad(format!(
            "the mesh has {known} devices but the topology has {devices}: every device must be in the mesh"
        )));
    }
    let axes: Vec<MeshAxis> = spec
        .axes
        .iter()
        .zip(&sizes)
        .map(|(n, &size)| MeshAxis {
            name: n.clone(),
            size,
        })
        .collect();
    let order = placement_order(spec)?;
    let ids = device_order(&sizes, &order);
    Mesh::with_device_order(axes, ids).map_err(|e| bad(e.to_string()))
}

/// Mesh axis indices in topology order (outermost first).
fn placement_order(spec: &MeshSpec) -> Result<Vec<usize>, ScenarioError> {
    let Some(p) = &spec.placement else {
        return Ok((0..spec.axes.len()).collect());
    };
    let mut order = Vec::with_capacity(p.len());
    for name in p {
        let i = spec.axes.iter().position(|a| a == name).ok_or_else(|| {
            ScenarioError::Mesh(format!(
                "placement names axis '{name}', which is not one of {:?}",
                spec.axes
            ))
        })?;
        if order.contains(&i) {
            return Err(ScenarioError::Mesh(format!(
                "placement names axis '{name}' twice"
            )));
        }
        order.push(i);
    }
    if order.len() != spec.axes.len() {
        return Err(ScenarioError::Mesh(format!(
            "placement {p:?} must list every axis of {:?} once",
            spec.axes
        )));
    }
    Ok(order)
}

/// The device id of every mesh position when the axes are laid over device
/// ids in `order` (outermost first, the last varying fastest).
fn device_order(sizes: &[u64], order: &[usize]) -> Vec<u64> {
    let n: u64 = sizes.iter().product();
    let mut stride = vec![1u64; sizes.len()];
    let mut s = 1;
    for &a in order.iter().rev() {
        stride[a] = s;
        s *= sizes[a];
    }
    (0..n)
        .map(|pos| {
            // Mesh coordinates of `pos` (row-major over the mesh's own axes).
            let mut rest = pos;
            let mut id = 0;
            for a in (0..sizes.len()).rev() {
                id += (rest % sizes[a]) * stride[a];
                rest /= sizes[a];
            }
            id
        })
        .collect()
}

/// Replace the program's mesh by `mesh`. The program must have one mesh whose
/// axis names are the scenario's (sizes may differ).
pub fn rewrite_mesh(module: &mut Module, mesh: &Mesh) -> Result<(), ScenarioError> {
    let [(symbol, old)] = module.meshes.as_mut_slice() else {
        return Err(ScenarioError::Mesh(format!(
            "the program has {} meshes; a scenario rewrites a program with exactly one",
            module.meshes.len()
        )));
    };
    let mut have: Vec<&str> = old.dim_names();
    let mut want: Vec<&str> = mesh.dim_names();
    have.sort_unstable();
    want.sort_unstable();
    if have != want {
        return Err(ScenarioError::Mesh(format!(
            "the program's mesh @{symbol} has axes {:?} but the scenario's {:?}: the names must match",
            old.dim_names(),
            mesh.dim_names()
        )));
    }
    *old = mesh.clone();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(shape: &[i64], axes: &[&str], placement: Option<&[&str]>) -> MeshSpec {
        MeshSpec {
            shape: shape.to_vec(),
            axes: axes.iter().map(|s| s.to_string()).collect(),
            placement: placement.map(|p| p.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn placement_puts_the_last_axis_inside_a_node() {
        // data=2, model=4 with data innermost: model steps by 2 over device ids.
        let m = build_mesh(
            &spec(&[2, 4], &["data", "model"], Some(&["model", "data"])),
            8,
        )
        .unwrap();
        assert_eq!(m.device_ids(), vec![0, 2, 4, 6, 1, 3, 5, 7]);
        let m = build_mesh(&spec(&[-1, 4], &["data", "model"], None), 16).unwrap();
        assert_eq!(m.shape(), vec![4, 4]);
        assert_eq!(m.explicit_device_ids(), None);
    }

    #[test]
    fn a_mesh_that_does_not_use_every_device_is_an_error() {
        let e = build_mesh(&spec(&[2, 4], &["data", "model"], None), 32).unwrap_err();
        assert!(
            e.to_string().contains("8 devices but the topology has 32"),
            "{e}"
        );
        assert!(build_mesh(&spec(&[-1, 3], &["d", "m"], None), 8).is_err());
        assert!(build_mesh(&spec(&[-1, -1], &["d", "m"], None), 8).is_err());
        assert!(build_mesh(&spec(&[8], &["d", "m"], None), 8).is_err());
        assert!(build_mesh(&spec(&[2, 4], &["d", "m"], Some(&["d"])), 8).is_err());
    }
}
