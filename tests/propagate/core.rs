//! Propagation core: projections and factor propagation on the examples that
//! Shardy's own documentation gives (sharding_projection.h,
//! aggressive_factor_propagation.h, basic_factor_propagation.cc).

use shardsim::mesh::{AxisRef, Mesh};
use shardsim::propagate::{
    compatible_major_axes, propagate_factors, Direction, FactorContext, FactorStrategy, Projection,
    TensorFactorShardings,
};
use shardsim::sharding::TensorSharding;

fn sharding(text: &str) -> TensorSharding {
    TensorSharding::parse(text).unwrap()
}

fn full(n: &str) -> AxisRef {
    AxisRef::full(n)
}

#[test]
fn projection_splits_axes_across_compound_factors() {
    // Rule ([ij])->([i, j]) {i=2, j=4} on mesh x=4, y=2; operand [{"x", "y"}].
    let mesh = Mesh::from_pairs(&[("x", 4), ("y", 2)]).unwrap();
    let sizes = [2, 4];
    let operand = TensorFactorShardings::project(
        Some(&sharding(r#"<@mesh, [{"x", "y"}]>"#)),
        &[vec![0, 1]],
        &sizes,
        &mesh,
        false,
    );
    assert_eq!(operand.factors[&0].axes, vec![AxisRef::sub("x", 1, 2)]);
    assert_eq!(
        operand.factors[&1].axes,
        vec![AxisRef::sub("x", 2, 2), full("y")]
    );
    // The result takes the same factor shardings and prints them per dim.
    let mut result = TensorFactorShardings::project(
        Some(&sharding(r#"<@mesh, [{?}, {?}]>"#)),
        &[vec![0], vec![1]],
        &sizes,
        &mesh,
        false,
    );
    result.factors.get_mut(&0).unwrap().axes = operand.factors[&0].axes.clone();
    result.factors.get_mut(&1).unwrap().axes = operand.factors[&1].axes.clone();
    assert_eq!(
        result
            .unproject(&[vec![0], vec![1]], &sizes, "mesh", &mesh)
            .to_bare(),
        r#"<@mesh, [{"x":(1)2, ?}, {"x":(2)2, "y", ?}]>"#
    );
    // And the operand projects back to what it was (sub-axes merge).
    assert_eq!(
        operand
            .unproject(&[vec![0, 1]], &sizes, "mesh", &mesh)
            .to_bare(),
        r#"<@mesh, [{"x", "y"}]>"#
    );
}

#[test]
fn projection_overflow_when_sizes_are_coprime() {
    // dim of factors [i=3, j=4] sharded on "x"=2: i is non-minor-most and gcd(3,2)=1,
    // so "x" overflows and j is closed.
    let mesh = Mesh::from_pairs(&[("x", 2)]).unwrap();
    let t = TensorFactorShardings::project(
        Some(&sharding(r#"<@mesh, [{"x"}]>"#)),
        &[vec![0, 1]],
        &[3, 4],
        &mesh,
        false,
    );
    assert!(t.factors[&0].axes.is_empty());
    assert_eq!(t.factors[&0].overflow, vec![full("x")]);
    assert!(t.factors[&1].is_closed);
    assert_eq!(
        t.unproject(&[vec![0, 1]], &[3, 4], "mesh", &mesh).to_bare(),
        r#"<@mesh, [{"x"}]>"#
    );
}

#[test]
fn compatible_major_axes_examples() {
    // The examples in Shardy's getCompatibleMajorAxesInternal comment.
    let mesh = Mesh::from_pairs(&[("a", 8), ("b", 2), ("c", 2)]).unwrap();
    let tensor = |axes: Vec<AxisRef>| {
        let mut t = TensorFactorShardings::default();
        t.factors.insert(
            0,
            shardsim::propagate::FactorSharding {
                axes,
                ..Default::default()
            },
        );
        t
    };
    let case = |old: Vec<AxisRef>, new: Vec<AxisRef>| {
        let p = Projection {
            operands: vec![tensor(old), tensor(new)],
            results: vec![],
        };
        compatible_major_axes(&p, 0, Direction::Both, &mesh)
    };
    assert_eq!(
        case(vec![full("a")], vec![full("a"), full("b")]),
        vec![full("a"), full("b")]
    );
    assert_eq!(
        case(vec![full("a"), full("b")], vec![full("a"), full("c")]),
        vec![full("a")]
    );
    assert_eq!(
        case(vec![AxisRef::sub("a", 1, 2)], vec![AxisRef::sub("a", 1, 4)]),
        vec![AxisRef::sub("a", 1, 4)]
    );
    assert_eq!(
        case(
            vec![AxisRef::sub("a", 1, 2), full("b")],
            vec![AxisRef::sub("a", 1, 4), full("b")]
        ),
        vec![AxisRef::sub("a", 1, 2)]
    );
    // Forward: the result may not extend what the operands agree on.
    let p = Projection {
        operands: vec![tensor(vec![full("a")])],
        results: vec![tensor(vec![full("a"), full("b")])],
    };
    assert_eq!(
        compatible_major_axes(&p, 0, Direction::Forward, &mesh),
        vec![full("a")]
    );
    assert_eq!(
        compatible_major_axes(&p, 0, Direction::Backward, &mesh),
        vec![full("a"), full("b")]
    );
}

/// A context propagating every factor both ways (not conservative).
fn both_ways<'a>(factor_sizes: &'a [u64], mesh: &'a Mesh, elementwise: bool) -> FactorContext<'a> {
    FactorContext {
        factor_sizes,
        mesh,
        direction: &|_| Direction::Both,
        elementwise,
        conservative: false,
    }
}

/// C = dot(A, B) with factors F0 (A's free dim), F1 (B's free dim), F2 (contracting).
fn dot_projection(mesh: &Mesh, a: &str, b: &str, c: &str) -> Projection {
    let sizes = [8, 16, 4];
    Projection {
        operands: vec![
            TensorFactorShardings::project(
                Some(&sharding(a)),
                &[vec![0], vec![2]],
                &sizes,
                mesh,
                false,
            ),
            TensorFactorShardings::project(
                Some(&sharding(b)),
                &[vec![2], vec![1]],
                &sizes,
                mesh,
                false,
            ),
        ],
        results: vec![TensorFactorShardings::project(
            Some(&sharding(c)),
            &[vec![0], vec![1]],
            &sizes,
            mesh,
            false,
        )],
    }
}

#[test]
fn aggressive_prefers_the_larger_source_tensor() {
    // Case 2 of Shardy's aggressive-propagation doc: A/F0 = "a", B/F1 = "a";
    // B (16x4 elements... here 4x16 = 64) is larger than A (8x4 = 32), so C gets "a" on F1.
    let mesh = Mesh::from_pairs(&[("a", 2)]).unwrap();
    let ctx = both_ways(&[8, 16, 4], &mesh, false);
    let mut p = dot_projection(
        &mesh,
        r#"<@mesh, [{"a", ?}, {?}]>"#,
        r#"<@mesh, [{?}, {"a", ?}]>"#,
        r#"<@mesh, [{?}, {?}]>"#,
    );
    let mut basic = p.clone();
    let up = propagate_factors(&mut p, &ctx, FactorStrategy::Aggressive);
    assert!(up.results[0]);
    assert_eq!(p.results[0].factors[&1].axes, vec![full("a")]);
    assert!(p.results[0].factors[&0].axes.is_empty());
    // Basic propagates nothing: "a" conflicts across factors.
    let up = propagate_factors(&mut basic, &ctx, FactorStrategy::Basic);
    assert!(!up.any());
}

#[test]
fn aggressive_single_choice_conflict() {
    // Case 1: A/F0 = "a", C/F1 = "a": aggressive gives B/F1 "a"; basic nothing.
    let mesh = Mesh::from_pairs(&[("a", 2)]).unwrap();
    let ctx = both_ways(&[8, 16, 4], &mesh, false);
    let mut p = dot_projection(
        &mesh,
        r#"<@mesh, [{"a", ?}, {?}]>"#,
        r#"<@mesh, [{?}, {?}]>"#,
        r#"<@mesh, [{?}, {"a", ?}]>"#,
    );
    let mut basic = p.clone();
    propagate_factors(&mut p, &ctx, FactorStrategy::Aggressive);
    assert_eq!(p.operands[1].factors[&1].axes, vec![full("a")]);
    assert!(!propagate_factors(&mut basic, &ctx, FactorStrategy::Basic).any());
}

#[test]
fn closed_and_replicated_block_propagation() {
    let mesh = Mesh::from_pairs(&[("x", 2), ("y", 4)]).unwrap();
    let ctx = both_ways(&[16, 16], &mesh, true);
    // add(a {x}, b closed {}) -> r open: r gets x, b (closed) does not.
    let m = [vec![0], vec![1]];
    let mut p = Projection {
        operands: vec![
            TensorFactorShardings::project(
                Some(&sharding(r#"<@mesh, [{"x"}, {}]>"#)),
                &m,
                &[16, 16],
                &mesh,
                false,
            ),
            TensorFactorShardings::project(
                Some(&sharding(r#"<@mesh, [{}, {"x"}]>"#)),
                &m,
                &[16, 16],
                &mesh,
                false,
            ),
        ],
        results: vec![TensorFactorShardings::project(
            None,
            &m,
            &[16, 16],
            &mesh,
            false,
        )],
    };
    propagate_factors(&mut p, &ctx, FactorStrategy::Aggressive);
    // This is JAX's answer for fixture conflict_add_transposed_specs.
    assert_eq!(
        p.results[0]
            .unproject(&m, &[16, 16], "mesh", &mesh)
            .to_bare(),
        r#"<@mesh, [{"x", ?}, {?}]>"#
    );
    // A replicated axis is never used.
    let mut q = Projection {
        operands: vec![TensorFactorShardings::project(
            Some(&sharding(r#"<@mesh, [{"x", ?}, {?}]>"#)),
            &m,
            &[16, 16],
            &mesh,
            false,
        )],
        results: vec![TensorFactorShardings::project(
            Some(&sharding(r#"<@mesh, [{?}, {?}], replicated={"x"}>"#)),
            &m,
            &[16, 16],
            &mesh,
            false,
        )],
    };
    assert!(!propagate_factors(&mut q, &ctx, FactorStrategy::Aggressive).results[0]);
}
