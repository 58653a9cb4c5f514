//! Symmetry of a timed run: devices whose timelines are provably identical
//! share one class, and the run simulates one representative per class.
//!
//! Two devices have the same timeline when they start alike (same roofline,
//! straggler factor and memory capacities, no per-device jitter) and, at every
//! collective, wait for the same classes: the group start is the latest
//! arrival among its members, so equal sets of member classes give equal
//! starts, and a collective's duration is the same for all its groups. The
//! classes are the coarsest partition with that property: start from the
//! per-device keys, then split by the set of classes in each device's group,
//! for every distinct grouping, until nothing changes.
//!
//! A link fault makes a collective's time differ between its groups: the
//! groups it may reach are marked in the keys of their devices (see
//! `run.rs`), so each such group is a class group of its own and every other
//! class group still stands for groups that all take the fault-free time.

use std::collections::BTreeMap;

/// Devices (mesh positions) grouped into classes with identical timelines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classes {
    /// Per class, its member positions in increasing order (the first is the representative).
    pub members: Vec<Vec<usize>>,
    /// Class of each position.
    pub class_of: Vec<usize>,
}

/// Number classes by the first position holding each key.
fn renumber<K: Ord>(keys: impl Iterator<Item = K>) -> Vec<usize> {
    let mut ids: BTreeMap<K, usize> = BTreeMap::new();
    keys.map(|k| {
        let next = ids.len();
        *ids.entry(k).or_insert(next)
    })
    .collect()
}

/// The group (index into `groups`, or `groups.len() + position` for a device
/// in no group) of every position.
fn group_index(groups: &[Vec<usize>], n: usize) -> Vec<usize> {
    let mut of: Vec<usize> = (0..n).map(|p| groups.len() + p).collect();
    for (g, members) in groups.iter().enumerate() {
        for &p in members {
            of[p] = g;
        }
    }
    of
}

/// The sorted set of classes in each group.
fn signatures(groups: &[Vec<usize>], class_of: &[usize]) -> Vec<Vec<usize>> {
    groups
        .iter()
        .map(|g| {
            let mut s: Vec<usize> = g.iter().map(|&p| class_of[p]).collect();
            s.sort_unstable();
            s.dedup();
            s
        })
        .collect()
}

impl Classes {
    /// The coarsest stable partition refining `keys` (one per position) under
    /// `groupings` (each a list of groups of positions).
    pub fn refine<K: Ord>(keys: Vec<K>, groupings: &[&[Vec<usize>]]) -> Classes {
        let n = keys.len();
        let mut class_of = renumber(keys.into_iter());
        let indices: Vec<Vec<usize>> = groupings.iter().map(|g| group_index(g, n)).collect();
        loop {
            let before = class_of.iter().max().map_or(0, |m| m + 1);
            for (groups, of) in groupings.iter().zip(&indices) {
                let sigs = signatures(groups, &class_of);
                let sig_ids = renumber(sigs.iter());
                class_of = renumber((0..n).map(|p| {
                    let sig = sig_ids.get(of[p]).copied().unwrap_or(usize::MAX);
                    (class_of[p], sig)
                }));
            }
            let after = class_of.iter().max().map_or(0, |m| m + 1);
            if after == before {
                break;
            }
        }
        let count = class_of.iter().max().map_or(0, |m| m + 1);
        let mut members = vec![Vec::new(); count];
        for (p, &c) in class_of.iter().enumerate() {
            members[c].push(p);
        }
        Classes { members, class_of }
    }

    /// Every position its own class.
    pub fn singletons(n: usize) -> Classes {
        Classes {
            members: (0..n).map(|p| vec![p]).collect(),
            class_of: (0..n).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// One grouping (a collective's device groups) seen from the classes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassGroups {
    /// The class group of every class.
    pub group_of: Vec<usize>,
    /// Per class group, its classes in the order they first appear in its
    /// first device group (so the first is that group's first device's).
    pub members: Vec<Vec<usize>>,
    /// Per class group, how many device groups it stands for.
    pub count: Vec<u64>,
    /// Per class group, the first device group it stands for (an index into
    /// the groups; `groups.len() + position` for a device in no group).
    pub first: Vec<usize>,
}

impl ClassGroups {
    /// Class groups of `groups` (positions; a device in no group is alone);
    /// `classes` must be stable under `groups` (see [`Classes::refine`]).
    pub fn new(groups: &[Vec<usize>], classes: &Classes) -> ClassGroups {
        let n = classes.class_of.len();
        let mut group_of = vec![usize::MAX; classes.len()];
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut count: Vec<u64> = Vec::new();
        let mut first: Vec<usize> = Vec::new();
        let mut by_sig: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
        let mut seen = vec![false; n];
        let mut add = |g: &[usize], index: usize, group_of: &mut Vec<usize>| {
            let mut ordered: Vec<usize> = Vec::new();
            for &p in g {
                let c = classes.class_of[p];
                if !ordered.contains(&c) {
                    ordered.push(c);
                }
            }
            let mut sig = ordered.clone();
            sig.sort_unstable();
            let next = by_sig.len();
            let id = *by_sig.entry(sig).or_insert(next);
            if id == members.len() {
                members.push(ordered.clone());
                count.push(0);
                first.push(index);
            }
            count[id] += 1;
            for c in ordered {
                group_of[c] = id;
            }
        };
        for (i, g) in groups.iter().enumerate() {
            for &p in g {
                seen[p] = true;
            }
            add(g, i, &mut group_of);
        }
        for (p, _) in seen.iter().enumerate().filter(|(_, &s)| !s) {
            add(&[p], groups.len() + p, &mut group_of);
        }
        ClassGroups {
            group_of,
            members,
            count,
            first,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_straggler_splits_its_group_and_the_groups_it_reaches() {
        // 2 x 4 mesh: rows are "model" groups, columns "data" groups.
        let rows: Vec<Vec<usize>> = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        let cols: Vec<Vec<usize>> = (0..4).map(|c| vec![c, c + 4]).collect();
        let mut keys = vec![0; 8];
        keys[1] = 1; // device 1 is slower
        let c = Classes::refine(keys, &[&rows, &cols]);
        // {1}, its row {0,2,3}, its column {5}, the rest {4,6,7}.
        assert_eq!(
            c.members,
            vec![vec![0, 2, 3], vec![1], vec![4, 6, 7], vec![5]]
        );
        let g = ClassGroups::new(&cols, &c);
        assert_eq!(g.members, vec![vec![0, 2], vec![1, 3]]);
        assert_eq!(g.count, vec![3, 1]);
        assert_eq!(g.first, vec![0, 1]);
    }

    #[test]
    fn identical_devices_form_one_class() {
        let rows: Vec<Vec<usize>> = vec![vec![0, 1], vec![2, 3]];
        let c = Classes::refine(vec![7; 4], &[&rows]);
        assert_eq!(c.members, vec![vec![0, 1, 2, 3]]);
        let g = ClassGroups::new(&rows, &c);
        assert_eq!((g.members, g.count), (vec![vec![0]], vec![2]));
    }
}
