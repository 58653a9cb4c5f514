//! Which memory-bound steps share a kernel, so that no fusion sits on a
//! cycle of the kernel graph.
//!
//! A fusion runs as one kernel, wholly before or wholly after every other
//! kernel. Joining `x` and `z = add(x, matmul(x, w))` is impossible: the
//! kernel would have to run before the matmul (it makes `x`) and after it
//! (`z` reads the matmul). XLA's fusion passes refuse such a fusion by
//! asking whether the producer reaches another operand of the consumer
//! (`MultiOutputFusionCreatesCycle`, `CanFuseOnAllPaths` in openxla/xla
//! `xla/service/instruction_fusion.cc`); here two fusions join along an
//! edge only when no path leaves the joined set and comes back through a
//! step or a fusion outside it (a path may enter a fusion at one step and
//! leave it at any other: it runs as one kernel).
//!
//! Steps are visited in program order, each joining its producers' fusions
//! in operand order. Every fusion then holds only steps already visited, so
//! a path back into the joined set never passes a later step (program order
//! is topological once loops are expanded): the search stays between the
//! joined fusions and the step visited, and a search that would visit more
//! than [`SEARCH_BUDGET`] steps refuses the join (a smaller fusion, never a
//! cycle), so long programs stay linear.

use crate::partition::{SpmdProgram, Step};

/// The values a step reads (a loop's and a case's carried values included).
pub(super) fn step_inputs(s: &Step) -> Vec<usize> {
    match s {
        Step::Local { operands, .. } => operands.clone(),
        Step::Collective(c) => std::iter::once(c.input)
            .chain(c.extra_inputs.iter().copied())
            .collect(),
        Step::Loop(l) => l
            .inits
            .iter()
            .chain(&l.yields)
            .copied()
            .chain([l.pred])
            .collect(),
        Step::Case(c) => std::iter::once(c.selector)
            .chain(c.yields.iter().flatten().copied())
            .collect(),
    }
}

/// The values a step writes.
fn step_outputs(s: &Step) -> &[usize] {
    match s {
        Step::Local { results, .. } => results,
        Step::Collective(c) => std::slice::from_ref(&c.output),
        Step::Loop(l) => &l.carried,
        Step::Case(c) => &c.results,
    }
}

/// Steps a join's cycle search may visit before it refuses the join.
pub const SEARCH_BUDGET: usize = 4096;

/// Per step, its fusion (the lowest step index of it; a step that joins
/// nothing names itself). `linkable`: fusible steps that join fusions (not
/// the constants copied into each fusion, which link nothing and read only
/// each other). Only edges from an earlier step to a later one count: a
/// timed run's program has its loops expanded, so program order is a
/// topological order.
pub(super) fn fusions(program: &SpmdProgram, linkable: &[bool], fusible: &[bool]) -> Vec<usize> {
    let n = program.steps.len();
    let mut producer: Vec<Option<usize>> = vec![None; program.values.len()];
    for (i, s) in program.steps.iter().enumerate() {
        for &r in step_outputs(s) {
            producer[r] = Some(i);
        }
    }
    // A copied constant is read from no kernel: no edge leaves it.
    let edge = |i: usize, o: usize| producer[o].filter(|&p| p < i && (linkable[p] || !fusible[p]));
    // Readers of each step (CSR).
    let inputs: Vec<Vec<usize>> = program.steps.iter().map(step_inputs).collect();
    let mut start = vec![0usize; n + 1];
    for (i, ins) in inputs.iter().enumerate() {
        for &o in ins {
            if let Some(p) = edge(i, o) {
                start[p + 1] += 1;
            }
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut readers = vec![0u32; start[n]];
    for (i, ins) in inputs.iter().enumerate() {
        for &o in ins {
            if let Some(p) = edge(i, o) {
                readers[fill[p]] = i as u32;
                fill[p] += 1;
            }
        }
    }
    let mut join = Joins {
        root: (0..n).collect(),
        members: (0..n).map(|i| vec![i]).collect(),
        inside: vec![0; n],
        seen: vec![0; n],
        seen_group: vec![0; n],
        stamp: 0,
    };
    for (c, s) in program.steps.iter().enumerate() {
        let Step::Local { operands, .. } = s else {
            continue;
        };
        if !linkable[c] {
            continue;
        }
        for (k, &o) in operands.iter().enumerate() {
            let Some(p) = producer[o].filter(|&p| p < c && linkable[p]) else {
                continue;
            };
            if operands[..k].contains(&o) {
                continue;
            }
            let (a, b) = (join.root[c], join.root[p]);
            if a != b && !join.cycle(a, b, c, &start, &readers) {
                join.merge(a, b);
            }
        }
    }
    let mut first = vec![usize::MAX; n];
    for i in 0..n {
        let r = join.root[i];
        first[r] = first[r].min(i);
    }
    (0..n).map(|i| first[join.root[i]]).collect()
}

/// Fusions being joined: each step's fusion (by a representative), the
/// members of each, and the marks of one search.
struct Joins {
    root: Vec<usize>,
    members: Vec<Vec<usize>>,
    inside: Vec<u32>,
    seen: Vec<u32>,
    seen_group: Vec<u32>,
    stamp: u32,
}

impl Joins {
    /// Whether joining fusions `a` and `b` while visiting step `at` would
    /// put the join on a cycle (or the search ran past its budget). Every
    /// fusion holds only steps before `at` (and `at`); later steps are
    /// alone and lead only further on, so the search stops at `at`.
    fn cycle(&mut self, a: usize, b: usize, at: usize, start: &[usize], readers: &[u32]) -> bool {
        let members = self.members[a].len() + self.members[b].len();
        if members > SEARCH_BUDGET {
            return true;
        }
        self.stamp += 1;
        let stamp = self.stamp;
        for &m in self.members[a].iter().chain(&self.members[b]) {
            self.inside[m] = stamp;
        }
        let mut budget = SEARCH_BUDGET - members;
        let mut stack: Vec<usize> = Vec::new();
        for g in [a, b] {
            for k in 0..self.members[g].len() {
                let m = self.members[g][k];
                for &r in &readers[start[m]..start[m + 1]] {
                    let r = r as usize;
                    if self.inside[r] != stamp && r < at && self.seen[r] != stamp {
                        self.seen[r] = stamp;
                        stack.push(r);
                    }
                }
            }
        }
        while let Some(x) = stack.pop() {
            if budget == 0 {
                return true;
            }
            budget -= 1;
            // A path may enter another fusion at one step and leave it at
            // any other.
            let g = self.root[x];
            if self.members[g].len() > 1 && self.seen_group[g] != stamp {
                self.seen_group[g] = stamp;
                for &y in &self.members[g] {
                    if self.seen[y] != stamp {
                        self.seen[y] = stamp;
                        stack.push(y);
                    }
                }
            }
            for &r in &readers[start[x]..start[x + 1]] {
                let r = r as usize;
                if self.inside[r] == stamp {
                    return true;
                }
                if r < at && self.seen[r] != stamp {
                    self.seen[r] = stamp;
                    stack.push(r);
                }
            }
        }
        false
    }

    /// Join fusions `a` and `b` (the smaller list moves).
    fn merge(&mut self, a: usize, b: usize) {
        let (keep, gone) = if self.members[a].len() >= self.members[b].len() {
            (a, b)
        } else {
            (b, a)
        };
        let moved = std::mem::take(&mut self.members[gone]);
        for &m in &moved {
            self.root[m] = keep;
        }
        self.members[keep].extend(moved);
    }
}
