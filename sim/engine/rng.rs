//! Seeded random streams, one per component. A component's stream is a ChaCha12
//! generator seeded with `splitmix64(scenario_seed ^ fnv1a64(component_id))`:
//! FNV-1a is a fixed, platform-independent hash (std's hasher is randomized per
//! process and must not be used), and SplitMix64 spreads nearby inputs over the
//! whole 64-bit range. The same (seed, id) always yields the same stream, and a
//! component's draws do not depend on how many other components exist.

use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

/// The generator every component uses.
pub type ComponentRng = ChaCha12Rng;

/// 64-bit FNV-1a over the bytes of `text` (stable across runs and platforms).
pub fn fnv1a64(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// One SplitMix64 output step for state `x`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The sub-seed of component `id` under scenario seed `seed`.
pub fn component_seed(seed: u64, id: &str) -> u64 {
    splitmix64(seed ^ fnv1a64(id))
}

/// The random stream of component `id` (e.g. `"link/3"`, `"device/17"`).
pub fn component_rng(seed: u64, id: &str) -> ComponentRng {
    ChaCha12Rng::seed_from_u64(component_seed(seed, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_reference_values() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64("a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64("foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn splitmix_reference_value() {
        // First output of the reference SplitMix64 seeded with 0 is 0xe220a8397b1dcdaf.
        assert_eq!(splitmix64(0), 0xe220a8397b1dcdaf);
    }
}
