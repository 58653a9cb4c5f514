//! proptest strategies shared by the test modules: random meshes, shapes and shardings.

use proptest::prelude::*;
use shardsim::mesh::{AxisRef, Mesh, MeshAxis};
use shardsim::sharding::{DimSharding, MeshRef, TensorSharding};

/// Check malformed one-line texts: each `(text, where the error points, what
/// it says)` must fail at line 1 and that column (end of text when `at` is empty)
/// with a message containing `says`.
pub fn assert_errors_at(
    cases: &[(&str, &str, &str)],
    parse: impl Fn(&str) -> Result<(), shardsim::base::TextError>,
) {
    for (text, at, says) in cases {
        let err = parse(text).expect_err(text);
        let col = if at.is_empty() {
            text.chars().count() + 1
        } else {
            col_of(text, at)
        };
        assert_eq!((err.line, err.col), (1, col), "{text}: {err}");
        assert!(
            err.to_string().contains(says),
            "{text}: {err} (wanted '{says}')"
        );
    }
}

/// 1-based column of the first occurrence of `needle` in `text`.
pub fn col_of(text: &str, needle: &str) -> usize {
    let i = text
        .find(needle)
        .unwrap_or_else(|| panic!("'{needle}' not in '{text}'"));
    text[..i].chars().count() + 1
}

const NAMES: [&str; 4] = ["x", "y", "z", "w"];

/// A mesh of 1..=4 axes of sizes 1..=4 (some powers of two, so sub-axes exist),
/// with iota or a shuffled device order.
pub fn arb_mesh() -> impl Strategy<Value = Mesh> {
    proptest::collection::vec(
        prop_oneof![Just(1u64), Just(2), Just(3), Just(4), Just(8)],
        1..=3,
    )
    .prop_flat_map(|sizes| {
        let n: u64 = sizes.iter().product();
        let ids = Just((0..n).collect::<Vec<u64>>()).prop_shuffle();
        (Just(sizes), ids, any::<bool>())
    })
    .prop_map(|(sizes, ids, explicit)| {
        let axes: Vec<MeshAxis> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| MeshAxis {
                name: NAMES[i].to_string(),
                size,
            })
            .collect();
        let is_iota = ids.iter().enumerate().all(|(i, &d)| d == i as u64);
        if explicit && !is_iota {
            Mesh::with_device_ids(axes, Some(ids)).unwrap()
        } else {
            Mesh::new(axes).unwrap()
        }
    })
}

/// The pieces an axis can be split into for sharding: the full axis, or for
/// power-of-two sizes >= 4, two halves as sub-axes.
fn axis_pieces(mesh: &Mesh, split: &[bool]) -> Vec<AxisRef> {
    let mut out = Vec::new();
    for (i, a) in mesh.axes().iter().enumerate() {
        if a.size >= 4 && a.size.is_power_of_two() && split.get(i).copied().unwrap_or(false) {
            out.push(AxisRef::sub(a.name.clone(), 1, 2));
            out.push(AxisRef::sub(a.name.clone(), 2, a.size / 2));
        } else {
            out.push(AxisRef::full(a.name.clone()));
        }
    }
    out
}

/// A mesh, a tensor shape, and a valid sharding of it on `@mesh`; dims are
/// multiples of their shard count unless `uneven` (then padding is needed).
pub fn arb_sharded(uneven: bool) -> impl Strategy<Value = (Mesh, Vec<u64>, TensorSharding)> {
    (arb_mesh(), 1usize..=3).prop_flat_map(move |(mesh, rank)| {
        let npieces = mesh.axes().len() * 2;
        (
            Just(mesh),
            Just(rank),
            proptest::collection::vec(any::<bool>(), 3),
            // For each piece: which dim it goes to (rank = unused, rank+1 = replicated).
            proptest::collection::vec(0..rank + 2, npieces),
            proptest::collection::vec(1u64..=3, rank),
            proptest::collection::vec(0u64..=2, rank),
            proptest::collection::vec(any::<bool>(), rank),
            proptest::collection::vec(proptest::option::of(0i64..3), rank),
        )
            .prop_map(
                move |(mesh, rank, split, target, mult, extra, open, prio)| {
                    let pieces = axis_pieces(&mesh, &split);
                    let mut dims: Vec<DimSharding> =
                        (0..rank).map(|_| DimSharding::closed(Vec::new())).collect();
                    let mut replicated = Vec::new();
                    for (piece, &t) in pieces.iter().zip(&target) {
                        if mesh.axis_size(&piece.name).unwrap() == 1 {
                            continue;
                        }
                        if t < rank {
                            // Keep sub-axes of one axis out of one dim (they would be mergeable).
                            if dims[t]
                                .axes
                                .last()
                                .is_some_and(|l: &AxisRef| l.can_merge(piece))
                            {
                                continue;
                            }
                            dims[t].axes.push(piece.clone());
                        } else if t == rank + 1 {
                            if replicated
                                .last()
                                .is_some_and(|l: &AxisRef| l.can_merge(piece))
                            {
                                continue;
                            }
                            replicated.push(piece.clone());
                        }
                    }
                    let mut shape = Vec::new();
                    for (d, dim) in dims.iter_mut().enumerate() {
                        dim.is_closed = !open[d];
                        if !(dim.is_closed && dim.axes.is_empty()) {
                            dim.priority = prio[d];
                        }
                        let shards = dim.shard_count(&mesh).unwrap();
                        let base = shards * mult[d];
                        shape.push(if uneven {
                            (base + extra[d]).max(1)
                        } else {
                            base
                        });
                    }
                    replicated.sort_by(|a, b| a.mesh_cmp(b, &mesh));
                    let sharding = TensorSharding {
                        mesh: MeshRef::Symbol("mesh".into()),
                        dims,
                        replicated,
                        unreduced: Vec::new(),
                        reduction: shardsim::sharding::Reduction::Sum,
                    };
                    (mesh, shape, sharding)
                },
            )
    })
}
