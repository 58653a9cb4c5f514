//! Invariants over generated values: sharding rules and float literals print
//! and parse back to themselves.

use proptest::prelude::*;

use shardsim::base::DType;
use shardsim::ir::mlir::format_float;
use shardsim::ir::OpShardingRule;

fn rule_strategy() -> impl Strategy<Value = OpShardingRule> {
    (1usize..24).prop_flat_map(|nf| {
        let factor = 0..nf;
        let dim = prop::collection::vec(factor.clone(), 1..3);
        let tensor = prop::collection::vec(dim, 0..4);
        (
            prop::collection::vec(1u64..64, nf),
            prop::collection::vec(tensor.clone(), 0..4),
            prop::collection::vec(tensor, 0..3),
            prop::collection::btree_set(factor.clone(), 0..3),
            prop::collection::btree_set(factor.clone(), 0..3),
            prop::collection::btree_set(factor.clone(), 0..3),
            prop::collection::btree_set(factor, 0..3),
            any::<bool>(),
        )
            .prop_map(|(sizes, ops, res, red, need, perm, blocked, custom)| {
                OpShardingRule {
                    factor_sizes: sizes,
                    operand_mappings: ops,
                    result_mappings: res,
                    reduction_factors: red.into_iter().collect(),
                    need_replication_factors: need.into_iter().collect(),
                    permutation_factors: perm.into_iter().collect(),
                    blocked_propagation_factors: blocked.into_iter().collect(),
                    is_custom: custom,
                }
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sharding_rules_round_trip(rule in rule_strategy()) {
        // Factors with a size but used by no mapping are still printed in {..}.
        let text = rule.to_string();
        let back = OpShardingRule::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(back, rule);
    }

    #[test]
    fn f32_literals_round_trip(bits in any::<u32>()) {
        let v = f32::from_bits(bits);
        prop_assume!(v.is_finite());
        let text = format_float(f64::from(v), DType::F32);
        let back: f32 = if let Some(hex) = text.strip_prefix("0x") {
            f32::from_bits(u32::from_str_radix(hex, 16).unwrap())
        } else {
            text.parse::<f32>().unwrap()
        };
        prop_assert_eq!(back.to_bits(), bits, "{}", text);
    }

    #[test]
    fn f64_literals_round_trip(v in any::<f64>()) {
        prop_assume!(v.is_finite());
        let text = format_float(v, DType::F64);
        let back: f64 = if let Some(hex) = text.strip_prefix("0x") {
            f64::from_bits(u64::from_str_radix(hex, 16).unwrap())
        } else {
            text.parse::<f64>().unwrap()
        };
        prop_assert_eq!(back.to_bits(), v.to_bits(), "{}", text);
    }
}

/// Rules as Shardy's own registry tests print them (all suffixes, `custom`, no factors).
#[test]
fn shardy_printed_rules_round_trip() {
    let rules = [
        "#sdy.op_sharding_rule<([i, j, k], [])->([i, j, k]) {i=28, j=28, k=16} permutation={i, j} blocked_propagation={i, j}>",
        "#sdy.op_sharding_rule<([i, j, k, l])->([i, k, l]) {i=2, j=3, k=5, l=7} reduction={j} need_replication={i, l} permutation={k} blocked_propagation={l}>",
        "#sdy.op_sharding_rule<([i, j, k])->([i, j, k]) {i=8, j=8, k=8} need_replication={j, k} blocked_propagation={i, k}, custom>",
        "#sdy.op_sharding_rule<([])->([]), custom>",
        "#sdy.op_sharding_rule<([ij, k])->([i, j, k]) {i=2, j=4, k=8}>",
    ];
    for r in rules {
        let parsed = OpShardingRule::parse(r).unwrap_or_else(|e| panic!("{r}: {e}"));
        assert_eq!(parsed.to_string(), r);
    }
    let r = OpShardingRule::parse(rules[4]).unwrap();
    assert_eq!(r.operand_mappings, vec![vec![vec![0, 1], vec![2]]]);
}
