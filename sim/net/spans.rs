//! Many short lists of `u32` in one arena: each list owns a span (start,
//! length, reserved capacity) of a shared vector instead of an allocation of
//! its own. The network keeps its flows' routes and its links' flow lists here:
//! at tens of thousands of links and flows, a separate allocation per list
//! costs a cache miss per access and a malloc per growth.
//!
//! A list that outgrows its span moves to the arena's end (the old span
//! becomes garbage); once garbage outweighs the live spans the owner compacts
//! the arena, which keeps every list's contents and order.

use super::NetError;

/// A list's place in an [`Arena`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    at: u32,
    len: u32,
    cap: u32,
}

impl Span {
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forget the contents, keeping the reserved capacity.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// The shared storage of spans.
#[derive(Debug, Clone, Default)]
pub(crate) struct Arena {
    items: Vec<u32>,
    /// Reserved items no span owns any more.
    garbage: usize,
}

/// Compaction waits for at least this much garbage (small arenas never pay).
const MIN_GARBAGE: usize = if cfg!(test) { 64 } else { 1 << 16 };

impl Arena {
    /// An arena with room for `n` items (reserved, not touched: pages
    /// are only faulted in as spans fill them).
    pub fn with_capacity(n: usize) -> Arena {
        Arena {
            items: Vec::with_capacity(n),
            garbage: 0,
        }
    }

    pub fn get(&self, s: Span) -> &[u32] {
        &self.items[s.at as usize..][..s.len as usize]
    }

    /// Item `k` of `s` (`k < s.len()`).
    pub fn at(&self, s: Span, k: usize) -> u32 {
        self.items[s.at as usize + k]
    }

    /// Reserve `cap` fresh items at the end for `s`, copying its contents.
    fn relocate(&mut self, s: &mut Span, cap: usize) -> Result<(), NetError> {
        let at = self.items.len();
        let end = at
            .checked_add(cap)
            .filter(|&e| e <= u32::MAX as usize)
            .ok_or(NetError::Overflow("the network's list arena (2^32 items)"))?;
        self.items
            .extend_from_within(s.at as usize..(s.at + s.len) as usize);
        self.items.resize(end, 0);
        self.garbage += s.cap as usize;
        s.at = at as u32;
        s.cap = cap as u32;
        Ok(())
    }

    /// Replace the contents of `s` with `values`.
    pub fn set(
        &mut self,
        s: &mut Span,
        values: impl ExactSizeIterator<Item = u32>,
    ) -> Result<(), NetError> {
        let n = values.len();
        if n > s.cap as usize {
            s.len = 0;
            self.relocate(s, n)?;
        }
        for (slot, v) in self.items[s.at as usize..][..n].iter_mut().zip(values) {
            *slot = v;
        }
        s.len = n as u32;
        Ok(())
    }

    /// Append `v` to `s` (its span doubles when full).
    pub fn push(&mut self, s: &mut Span, v: u32) -> Result<(), NetError> {
        if s.len == s.cap {
            self.relocate(s, (s.cap as usize * 2).max(4))?;
        }
        self.items[(s.at + s.len) as usize] = v;
        s.len += 1;
        Ok(())
    }

    /// Remove the first `v` from `s`, keeping the order of the rest; false
    /// when `s` does not hold it.
    pub fn remove(&mut self, s: &mut Span, v: u32) -> bool {
        let list = &mut self.items[s.at as usize..][..s.len as usize];
        match list.iter().position(|&x| x == v) {
            Some(pos) => {
                list.copy_within(pos + 1.., pos);
                s.len -= 1;
                true
            }
            None => false,
        }
    }

    /// Whether the owner should call `compact` (garbage outweighs the rest).
    pub fn wants_compaction(&self) -> bool {
        self.garbage >= MIN_GARBAGE && self.garbage * 2 > self.items.len()
    }

    /// Rebuild the arena from the owner's spans (every span it holds, in any
    /// fixed order): contents, order and capacities are kept.
    pub fn compact<'a>(&mut self, spans: impl Iterator<Item = &'a mut Span>) {
        let mut items = Vec::with_capacity(self.items.len() - self.garbage);
        for s in spans {
            let at = items.len();
            items.extend_from_slice(&self.items[s.at as usize..][..s.len as usize]);
            items.resize(at + s.cap as usize, 0);
            s.at = at as u32;
        }
        self.items = items;
        self.garbage = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_their_contents_through_growth_removal_and_compaction() {
        let mut a = Arena::default();
        let mut spans = vec![Span::default(); 1000];
        let mut want: Vec<Vec<u32>> = vec![Vec::new(); 1000];
        let mut compactions = 0;
        for i in 0..300_000u32 {
            let k = (i as usize * 7919) % 1000;
            a.push(&mut spans[k], i).unwrap();
            want[k].push(i);
            if i % 5 == 0 {
                let pos = want[k].len() / 2;
                let v = want[k][pos];
                assert!(a.remove(&mut spans[k], v));
                let first = want[k].iter().position(|&x| x == v).unwrap();
                want[k].remove(first);
            }
            if i % 7 == 0 {
                // Shrink, or grow past the span's capacity.
                let keep = if i % 2 == 0 {
                    want[k].len() / 2
                } else {
                    want[k].len()
                };
                want[k].truncate(keep);
                want[k].extend(i..i + (i % 3));
                a.set(&mut spans[k], want[k].iter().copied()).unwrap();
            }
            if i % 97 == 0 {
                // Outgrow the span, then come back: the old span is garbage.
                let twice: Vec<u32> = want[k].iter().chain(&want[k]).copied().collect();
                a.set(&mut spans[k], twice.iter().copied()).unwrap();
                assert_eq!(a.get(spans[k]), twice.as_slice());
                a.set(&mut spans[k], want[k].iter().copied()).unwrap();
            }
            if a.wants_compaction() {
                a.compact(spans.iter_mut());
                assert_eq!(a.garbage, 0);
                compactions += 1;
            }
        }
        assert!(compactions > 0);
        for k in 0..1000 {
            assert_eq!(a.get(spans[k]), want[k].as_slice());
        }
        assert!(!a.remove(&mut spans[0], u32::MAX));
        let mut s = Span::default();
        a.set(&mut s, [7, 8, 9].into_iter()).unwrap();
        s.clear();
        a.set(&mut s, [1].into_iter()).unwrap();
        assert_eq!(a.get(s), &[1]);
        assert_eq!(s.cap, 3, "a shorter list reuses its span");
    }
}
