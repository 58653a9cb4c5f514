//! Sharding: Shardy text round trips, validation errors with columns, TVM
//! placements, and shard geometry (local shards tile the global tensor).

use proptest::prelude::*;
use shardsim::mesh::Mesh;
use shardsim::sharding::{Placement, PlacementSpec, ShardLayout, ShardingPerValue, TensorSharding};

use crate::strategies::{arb_sharded, assert_errors_at};

fn meshes() -> Vec<(String, Mesh)> {
    vec![(
        "mesh".to_string(),
        Mesh::parse(r#"<["x"=2, "y"=4, "z"=2]>"#).unwrap(),
    )]
}

#[test]
fn shardy_texts_round_trip_byte_for_byte() {
    for text in [
        r#"#sdy.sharding<@mesh, [{"x", ?}, {"y":(1)2}p1], replicated={"z"}>"#,
        r#"#sdy.sharding<@mesh, [{}, {?}, {"x", "y"}p0]>"#,
        r#"#sdy.sharding<@mesh, [{"y":(2)2}, {"x"}], replicated={"y":(1)2}, unreduced={"z"}>"#,
        r#"#sdy.sharding<@mesh, []>"#,
        r#"#sdy.sharding<mesh<["a"=2]>, [{"a"}]>"#,
        r#"#sdy.sharding<mesh<[], device_ids=[0]>, []>"#,
    ] {
        let s = TensorSharding::parse_checked(text, &meshes()).unwrap();
        assert_eq!(s.to_string(), text);
    }
    let pv = r#"#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, <@mesh, [{?}]>]>"#;
    assert_eq!(ShardingPerValue::parse(pv).unwrap().to_string(), pv);
}

/// Malformed shardings on mesh @mesh = <["x"=2, "y"=4, "z"=2]>: (text, where
/// the error points, what it says).
const BAD_SHARDINGS: &[(&str, &str, &str)] = &[
    (r#"<@mesh, [{"x"}, {"w"}]>"#, r#""w""#, "unknown axis \"w\""),
    (r#"<@mesh, [{"x"}, {"y", "x"}]>"#, r#""x"}]"#, "used twice"),
    (r#"<@mesh, [{"y":(1)2}, {"y"}]>"#, r#""y"}]"#, "overlap"),
    (r#"<@mesh, [{"y":(1)3}, {}]>"#, r#""y""#, "does not divide"),
    (r#"<@mesh, [{"y":(2)1}, {}]>"#, r#""y""#, "greater than 1"),
    (r#"<@mesh, [{"y":(1)4}, {}]>"#, r#""y""#, "whole axis"),
    (
        r#"<@mesh, [{"y":(1)2, "y":(2)2}, {}]>"#,
        r#""y":(2)"#,
        "merged",
    ),
    (
        r#"<@mesh, [{}, {}], replicated={"z", "x"}>"#,
        r#""x""#,
        "not in mesh order",
    ),
    (r#"<@mesh, [{}p1, {}]>"#, "{}p1", "empty and closed"),
    (
        r#"<@mesh, [{"x"}p-1, {}]>"#,
        r#"{"x"}"#,
        "negative priority",
    ),
    (
        r#"<@mesh, [{"x"}], replicated={"x"}>"#,
        r#""x"}>"#,
        "used twice",
    ),
    (
        r#"<@mesh, [{"y":(1)2}], unreduced={"y"}>"#,
        r#""y"}>"#,
        "overlap",
    ),
    (r#"<@other, [{}]>"#, "@other", "unknown mesh @other"),
    (r#"<@mesh, [{"x"}]"#, "", "'>'"),
    (r#"<@mesh, [{x}]>"#, "x}", "axis name in quotes"),
    (r#"<@mesh, [{"x"} {"y"}]>"#, r#"{"y"}"#, "',' or ']'"),
    (r#"<@mesh, [{?, "x"}]>"#, r#", "x""#, "'}' after '?'"),
    (
        r#"<@mesh, [{}], replica={"x"}>"#,
        "replica=",
        "'replicated' or 'unreduced'",
    ),
    (r#"<[{}]>"#, "[{", "a mesh reference"),
    (r#"<@mesh, [{"y":1)2}]>"#, "1)2", "'('"),
    (r#"<@mesh, [{"x}]>"#, r#""x}"#, "closing '\"'"),
    (r#"<@mesh, [{}]> extra"#, "extra", "end of sharding"),
    (
        r#"<@mesh, [{"x"}], replicated={"y"}, replicated={"z"}>"#,
        "replicated={\"z",
        "at most one",
    ),
    (r#"<@mesh [{"x"}]>"#, "[{", "','"),
    (r#"<@mesh, [{"x":(1)}]>"#, "}]>", "non-negative integer"),
];

#[test]
fn malformed_shardings_name_problem_and_column() {
    let m = meshes();
    assert!(BAD_SHARDINGS.len() >= 20);
    assert_errors_at(BAD_SHARDINGS, |t| {
        TensorSharding::parse_checked(t, &m).map(|_| ())
    });
}

#[test]
fn validation_against_shapes() {
    let (_, mesh) = meshes().remove(0);
    let s = TensorSharding::parse(r#"<@mesh, [{"x"}, {"y"}]>"#).unwrap();
    assert!(s.validate(&mesh, &[4, 8], false).is_ok());
    let e = s.validate(&mesh, &[4, 6], false).unwrap_err();
    assert!(
        e.to_string()
            .contains("dim 1: dim of size 6 is not divisible by its 4 shards"),
        "{e}"
    );
    assert!(s.validate(&mesh, &[4, 6], true).is_ok());
    let e = s.validate(&mesh, &[4, 8, 2], false).unwrap_err();
    assert!(
        e.to_string().contains("rank 2 but the tensor has rank 3"),
        "{e}"
    );
}

#[test]
fn placement_text_forms() {
    let p = Placement::from_text("S[0]R").unwrap();
    assert_eq!(
        p.0,
        vec![PlacementSpec::Sharding(0), PlacementSpec::Replica]
    );
    assert_eq!(
        Placement::from_text("R, S[1]").unwrap().0,
        vec![PlacementSpec::Replica, PlacementSpec::Sharding(1)]
    );
    assert_eq!(
        Placement::from_text("S[1] S[0]").unwrap().to_text(),
        "S[1], S[0]"
    );
    for (bad, col) in [("S[0]Q", 5), ("S[a]", 3), ("", 1), ("S[0", 4), ("R,,R", 3)] {
        let e = Placement::from_text(bad).unwrap_err();
        assert_eq!(e.col, col, "{bad}: {e}");
    }
}

#[test]
fn placement_to_and_from_sharding() {
    let mesh = Mesh::parse(r#"<["x"=2, "y"=4]>"#).unwrap();
    let p = Placement::from_text("S[1], S[1]").unwrap();
    let s = p.to_sharding(&mesh, "mesh", 2).unwrap();
    assert_eq!(s.to_string(), r#"#sdy.sharding<@mesh, [{}, {"x", "y"}]>"#);
    assert_eq!(Placement::from_sharding(&s, &mesh).unwrap(), p);
    // Two mesh axes on one dim in non-mesh order: no placement.
    let rev = TensorSharding::parse(r#"<@mesh, [{}, {"y", "x"}]>"#).unwrap();
    let e = Placement::from_sharding(&rev, &mesh).unwrap_err();
    assert!(
        e.to_string().contains("order other than the mesh order"),
        "{e}"
    );
    let sub = TensorSharding::parse(r#"<@mesh, [{"y":(1)2}, {}]>"#).unwrap();
    assert!(Placement::from_sharding(&sub, &mesh)
        .unwrap_err()
        .to_string()
        .contains("sub-axis"));
    assert!(Placement::from_text("S[2]R")
        .unwrap()
        .to_sharding(&mesh, "mesh", 2)
        .is_err());
    assert!(Placement::from_text("R")
        .unwrap()
        .to_sharding(&mesh, "mesh", 2)
        .is_err());
}

#[test]
fn geometry_of_an_uneven_split() {
    let mesh = Mesh::parse(r#"<["x"=2, "y"=4]>"#).unwrap();
    let s = TensorSharding::parse(r#"<@mesh, [{"y"}, {}]>"#).unwrap();
    let l = ShardLayout::new(&mesh, &s, &[6, 3]).unwrap();
    assert_eq!(l.local_shape, vec![2, 3]);
    assert_eq!(l.padding, vec![2, 0]);
    let ranges: Vec<(u64, u64)> = (0..4).map(|d| l.shard_of(d).unwrap().ranges[0]).collect();
    assert_eq!(ranges, vec![(0, 2), (2, 4), (4, 6), (6, 6)]);
    assert_eq!(
        l.replica_groups(&mesh, &s),
        vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sharding_text_round_trips((mesh, _shape, s) in arb_sharded(false)) {
        let table = vec![("mesh".to_string(), mesh)];
        let text = s.to_string();
        let back = TensorSharding::parse_checked(&text, &table);
        prop_assert!(back.is_ok(), "{}: {:?}", text, back);
        prop_assert_eq!(back.unwrap(), s);
    }

    #[test]
    fn random_shardings_validate((mesh, shape, s) in arb_sharded(false)) {
        prop_assert!(s.validate(&mesh, &shape, false).is_ok());
    }

    #[test]
    fn placement_round_trips((mesh, _shape, s) in arb_sharded(false)) {
        // Where a placement exists, converting back gives the same dims (closed, no priority).
        if let Ok(p) = Placement::from_sharding(&s, &mesh) {
            prop_assert_eq!(Placement::from_text(&p.to_text()).unwrap(), p.clone());
            let back = p.to_sharding(&mesh, "mesh", s.rank()).unwrap();
            for (a, b) in back.dims.iter().zip(&s.dims) {
                prop_assert_eq!(&a.axes, &b.axes);
            }
        }
    }

    #[test]
    fn shards_tile_the_tensor_once_per_replica((mesh, shape, s) in arb_sharded(true)) {
        let layout = ShardLayout::new(&mesh, &s, &shape).unwrap();
        let groups = layout.replica_groups(&mesh, &s);
        let replicas = groups[0].len();
        prop_assert!(groups.iter().all(|g| g.len() == replicas));
        let total: u64 = shape.iter().product();
        // Take the r-th member of every replica group: their shards cover every element once.
        for r in 0..replicas {
            let mut count = vec![0u32; total as usize];
            for g in &groups {
                let shard = layout.shard_of(g[r]).unwrap();
                prop_assert_eq!(&shard.local_shape, &layout.local_shape);
                for (&(a, b), &l) in shard.ranges.iter().zip(&layout.local_shape) {
                    prop_assert!(b - a <= l);
                }
                let mut idx = vec![0u64; shape.len()];
                'outer: loop {
                    let inside = idx.iter().zip(&shard.ranges).all(|(i, (a, b))| i >= a && i < b);
                    if inside {
                        let flat = idx.iter().zip(&shape).fold(0u64, |acc, (i, n)| acc * n + i);
                        count[flat as usize] += 1;
                    }
                    for d in (0..shape.len()).rev() {
                        idx[d] += 1;
                        if idx[d] < shape[d] { continue 'outer; }
                        idx[d] = 0;
                    }
                    break;
                }
            }
            prop_assert!(count.iter().all(|&c| c == 1), "replica {} coverage {:?}", r, count);
        }
        // Padding is exactly what makes each dim divisible.
        for ((&n, &k), &p) in shape.iter().zip(&layout.shards).zip(&layout.padding) {
            prop_assert_eq!((n + p) % k, 0);
            prop_assert!(p < k);
        }
    }
}
