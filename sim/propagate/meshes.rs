//! Shardy's import pass `sdy-lift-inlined-meshes`: a sharding written with an
//! inline mesh (`#sdy.sharding<mesh<["a"=2]>, ...>`) refers instead to the
//! module's mesh with the same axes and device ids, or to a new module mesh
//! (`@mesh`, `@maximal_mesh_<id>` for a one-device mesh, `@empty_mesh`; `_0`, `_1`, ...
//! appended where the name is taken), so propagation sees one mesh by name.

use crate::ir::{Module, OpKind};
use crate::mesh::Mesh;
use crate::sharding::{MeshRef, TensorSharding};

/// Replace every inline mesh in `module` by a mesh symbol.
pub(super) fn lift_inlined_meshes(module: &mut Module) {
    let mut meshes = std::mem::take(&mut module.meshes);
    let mut lift = |s: &mut TensorSharding| {
        let MeshRef::Inline(mesh) = &s.mesh else {
            return;
        };
        let name = match meshes.iter().find(|(_, m)| m == mesh) {
            Some((name, _)) => name.clone(),
            None => {
                let name = fresh_name(&meshes, mesh);
                meshes.push((name.clone(), mesh.clone()));
                name
            }
        };
        s.mesh = MeshRef::Symbol(name);
    };
    for f in &mut module.funcs {
        for v in &mut f.values {
            if let Some(s) = v.sharding.as_mut() {
                lift(s);
            }
        }
        for s in f.result_shardings.iter_mut().flatten() {
            lift(s);
        }
        for op in &mut f.ops {
            match &mut op.kind {
                OpKind::ShardingConstraint { sharding } | OpKind::Reshard { sharding } => {
                    lift(sharding)
                }
                OpKind::DataFlowEdge { sharding: Some(s) } => lift(s),
                OpKind::NamedComputation {
                    in_shardings,
                    out_shardings,
                    ..
                } => {
                    for s in in_shardings.iter_mut().chain(out_shardings).flatten() {
                        lift(s);
                    }
                }
                OpKind::ManualComputation {
                    in_shardings,
                    out_shardings,
                    ..
                } => {
                    for s in in_shardings.iter_mut().chain(out_shardings) {
                        lift(s);
                    }
                }
                OpKind::AllGather { out_sharding, .. }
                | OpKind::AllSlice { out_sharding, .. }
                | OpKind::AllReduce { out_sharding, .. }
                | OpKind::ReduceScatter { out_sharding, .. }
                | OpKind::AllToAll { out_sharding, .. }
                | OpKind::CollectivePermute { out_sharding } => lift(out_sharding),
                _ => {}
            }
        }
    }
    module.meshes = meshes;
}

/// Shardy's name for a lifted mesh, made unique among `meshes`.
fn fresh_name(meshes: &[(String, Mesh)], mesh: &Mesh) -> String {
    let base = if mesh.is_maximal() {
        format!("maximal_mesh_{}", mesh.device_ids()[0])
    } else if mesh.axes().is_empty() {
        "empty_mesh".to_string()
    } else {
        "mesh".to_string()
    };
    let taken = |n: &str| meshes.iter().any(|(m, _)| m == n);
    if !taken(&base) {
        return base;
    }
    (0..)
        .map(|i| format!("{base}_{i}"))
        .find(|n| !taken(n))
        .expect("some suffix is free")
}
