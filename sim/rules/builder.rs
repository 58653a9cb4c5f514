//! Incremental construction of an op sharding rule, one factor at a time.

use crate::ir::OpShardingRule;

/// The kind of a factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactorKind {
    Default,
    Reduction,
    NeedReplication,
    Permutation,
}

/// Builds a rule for an op with the given operand and result ranks.
#[derive(Debug, Clone)]
pub struct RuleBuilder {
    rule: OpShardingRule,
}

impl RuleBuilder {
    /// A rule with no factors yet for tensors of these ranks.
    pub fn new(operand_ranks: &[usize], result_ranks: &[usize]) -> Self {
        RuleBuilder {
            rule: OpShardingRule {
                operand_mappings: operand_ranks.iter().map(|&r| vec![Vec::new(); r]).collect(),
                result_mappings: result_ranks.iter().map(|&r| vec![Vec::new(); r]).collect(),
                ..OpShardingRule::default()
            },
        }
    }

    /// Add a factor of `size` mapped to `operand_dims[i]` of operand i and
    /// `result_dims[j]` of result j (None: not mapped).
    pub fn factor(
        &mut self,
        operand_dims: &[Option<usize>],
        result_dims: &[Option<usize>],
        size: u64,
        kind: FactorKind,
    ) -> usize {
        let f = self.rule.factor_sizes.len();
        self.rule.factor_sizes.push(size);
        // As Shardy's builder: a size-1 factor is not added to a dim that
        // already has factors.
        let map = |dims: &mut Vec<Vec<usize>>, d: usize| {
            if size != 1 || dims[d].is_empty() {
                dims[d].push(f);
            }
        };
        for (t, d) in operand_dims.iter().enumerate() {
            if let Some(d) = d {
                map(&mut self.rule.operand_mappings[t], *d);
            }
        }
        for (t, d) in result_dims.iter().enumerate() {
            if let Some(d) = d {
                map(&mut self.rule.result_mappings[t], *d);
            }
        }
        match kind {
            FactorKind::Default => {}
            FactorKind::Reduction => self.rule.reduction_factors.push(f),
            FactorKind::NeedReplication => self.rule.need_replication_factors.push(f),
            FactorKind::Permutation => self.rule.permutation_factors.push(f),
        }
        f
    }

    /// The number of factors so far (the index the next factor gets).
    pub fn rule_len(&self) -> usize {
        self.rule.factor_sizes.len()
    }

    /// Mark factor `f` as blocked for propagation too.
    pub fn block(&mut self, f: usize) {
        self.rule.blocked_propagation_factors.push(f);
    }

    /// Mark every factor of `kind` so far as blocked for propagation too.
    pub fn block_kind(&mut self, kind: FactorKind) {
        let factors = match kind {
            FactorKind::Default => return,
            FactorKind::Reduction => &self.rule.reduction_factors,
            FactorKind::NeedReplication => &self.rule.need_replication_factors,
            FactorKind::Permutation => &self.rule.permutation_factors,
        };
        self.rule
            .blocked_propagation_factors
            .extend(factors.clone());
    }

    /// Mark factor `f` as also needing replication.
    pub fn need_replication(&mut self, f: usize) {
        self.rule.need_replication_factors.push(f);
    }

    /// One factor per dim of `shape`, mapped to that dim of every tensor of the
    /// same rank (tensors of another rank, such as scalar operands, are unmapped);
    /// `kind(dim)` gives each factor's kind.
    pub fn pointwise(
        &mut self,
        shape: &[u64],
        operand_ranks: &[usize],
        result_ranks: &[usize],
        kind: &dyn Fn(usize) -> FactorKind,
    ) -> &mut Self {
        for (d, &size) in shape.iter().enumerate() {
            let ops: Vec<Option<usize>> = operand_ranks
                .iter()
                .map(|&r| (r == shape.len()).then_some(d))
                .collect();
            let res: Vec<Option<usize>> = result_ranks
                .iter()
                .map(|&r| (r == shape.len()).then_some(d))
                .collect();
            self.factor(&ops, &res, size, kind(d));
        }
        self
    }

    /// The finished rule (kind lists sorted). As Shardy's builder, a dim no
    /// factor maps gets a size-1 factor of its own (operands first, then
    /// results, in order).
    pub fn build(mut self) -> OpShardingRule {
        let sizes = &mut self.rule.factor_sizes;
        for dims in self
            .rule
            .operand_mappings
            .iter_mut()
            .chain(self.rule.result_mappings.iter_mut())
        {
            for dim in dims.iter_mut().filter(|d| d.is_empty()) {
                dim.push(sizes.len());
                sizes.push(1);
            }
        }
        for v in [
            &mut self.rule.reduction_factors,
            &mut self.rule.need_replication_factors,
            &mut self.rule.permutation_factors,
            &mut self.rule.blocked_propagation_factors,
        ] {
            v.sort_unstable();
            v.dedup();
        }
        self.rule
    }
}
