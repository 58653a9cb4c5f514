//! StableHLO `rng_bit_generator` with the THREE_FRY and PHILOX algorithms, laid out
//! as XLA's CPU backend expands them (`RngBitGeneratorExpander` over the
//! generators of `xla/client/lib/prng`), so the bits equal JAX's on the CPU.
//!
//! The state is ui64: element 0 is the key, the rest the counter. THREE_FRY
//! (state of 2) runs Threefry-2x32 (20 rounds) on counters `state[1] + i`:
//! 32-bit outputs pair the two output words of a counter along one split dim
//! (see `three_fry_32`); 64-bit outputs join the two words (low, high); 8-bit
//! outputs truncate 32-bit ones. PHILOX (state of 2 or 3) runs Philox-4x32 (10
//! rounds) on a 128-bit counter plus `i`, its four words interleaved (two 64-bit
//! words for 64-bit outputs). The new state is the old one with the counter
//! advanced by the number of counters used.

use crate::base::DType;

use super::data::Data;
use super::index::element_count;
use super::{Tensor, TensorError};

/// The bit generator algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RngAlgorithm {
    /// The backend's choice: PHILOX, as XLA's CPU backend expands it.
    Default,
    ThreeFry,
    Philox,
}

const OP: &str = "rng_bit_generator";

/// Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy
/// as 1, 2, 3", SC 2011), as JAX and XLA use it.
fn threefry2x32(key: [u32; 2], x: [u32; 2]) -> [u32; 2] {
    const ROT: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
    let ks = [key[0], key[1], key[0] ^ key[1] ^ 0x1BD1_1BDA];
    let mut x = [x[0].wrapping_add(ks[0]), x[1].wrapping_add(ks[1])];
    for block in 0..5 {
        for &r in &ROT[block % 2] {
            x[0] = x[0].wrapping_add(x[1]);
            x[1] = x[1].rotate_left(r) ^ x[0];
        }
        let i = block + 1;
        x[0] = x[0].wrapping_add(ks[i % 3]);
        x[1] = x[1].wrapping_add(ks[(i + 1) % 3]).wrapping_add(i as u32);
    }
    x
}

/// Philox-4x32 with 10 rounds (same paper).
fn philox4x32(key: [u32; 2], x: [u32; 4]) -> [u32; 4] {
    const M: [u64; 2] = [0xD251_1F53, 0xCD9E_8D57];
    const W: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];
    let (mut k, mut x) = (key, x);
    for _ in 0..10 {
        let p0 = M[0] * x[0] as u64;
        let p1 = M[1] * x[2] as u64;
        x = [
            (p1 >> 32) as u32 ^ x[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ x[3] ^ k[1],
            p0 as u32,
        ];
        k = [k[0].wrapping_add(W[0]), k[1].wrapping_add(W[1])];
    }
    x
}

fn split(v: u64) -> [u32; 2] {
    [v as u32, (v >> 32) as u32]
}

/// THREE_FRY with 64-bit outputs: one word per element, counters `counter + i`.
fn three_fry_64(key: u64, counter: u64, n: usize) -> (Vec<u64>, u64) {
    let k = split(key);
    let v = (0..n)
        .map(|i| {
            let [lo, hi] = threefry2x32(k, split(counter.wrapping_add(i as u64)));
            lo as u64 | (hi as u64) << 32
        })
        .collect();
    (v, n as u64)
}

/// THREE_FRY with 32-bit outputs of `shape`: XLA splits one dim `d` (the first
/// of even size, else the first largest) into `(ceil(d / 2), 2)`, runs one
/// counter per element of the half shape (row-major) and puts the two output
/// words of a counter side by side on the new dim of 2, dropping the padding
/// row of an odd `d`.
fn three_fry_32(key: u64, counter: u64, shape: &[usize]) -> (Vec<u64>, u64) {
    let k = split(key);
    let shape = if shape.is_empty() { &[1][..] } else { shape };
    let d = shape.iter().position(|&s| s % 2 == 0).unwrap_or_else(|| {
        // First of the largest.
        let max = shape.iter().copied().max().unwrap_or(1);
        shape.iter().position(|&s| s == max).unwrap_or(0)
    });
    let outer: usize = shape[..d].iter().product();
    let inner: usize = shape[d + 1..].iter().product();
    let half = shape[d].div_ceil(2);
    let mut v = Vec::with_capacity(outer * shape[d] * inner);
    for o in 0..outer {
        for h in 0..half {
            let pairs: Vec<[u32; 2]> = (0..inner)
                .map(|i| {
                    let c = (o * half + h) * inner + i;
                    threefry2x32(k, split(counter.wrapping_add(c as u64)))
                })
                .collect();
            for word in 0..2 {
                if 2 * h + word < shape[d] {
                    v.extend(pairs.iter().map(|p| p[word] as u64));
                }
            }
        }
    }
    (v, (outer * half * inner) as u64)
}

/// PHILOX: `n` words as above, counter is the 128-bit (low, high) pair.
fn philox(key: u64, counter: (u64, u64), n: usize, wide: bool) -> (Vec<u64>, u64) {
    let k = split(key);
    let per = if wide { 2 } else { 4 };
    let blocks = n.div_ceil(per);
    let mut v = Vec::with_capacity(blocks * per);
    for i in 0..blocks {
        let (lo, carry) = counter.0.overflowing_add(i as u64);
        let hi = counter.1.wrapping_add(carry as u64);
        let [a, b] = split(lo);
        let [c, d] = split(hi);
        let out = philox4x32(k, [a, b, c, d]);
        if wide {
            v.push(out[0] as u64 | (out[1] as u64) << 32);
            v.push(out[2] as u64 | (out[3] as u64) << 32);
        } else {
            v.extend(out.iter().map(|&w| w as u64));
        }
    }
    v.truncate(n);
    (v, blocks as u64)
}

/// `rng_bit_generator(state)`: the new state and a tensor of `shape` random bits of
/// element type `dtype` (ui8, ui32 or ui64, or the signed types of those widths).
pub fn rng_bit_generator(
    state: &Tensor,
    algorithm: RngAlgorithm,
    shape: &[u64],
    dtype: DType,
) -> Result<(Tensor, Tensor), TensorError> {
    let Data::UI64(s) = state.data() else {
        return Err(TensorError::dtype(OP, state.dtype(), "ui64 for the state"));
    };
    let n = element_count(OP, shape)?;
    let wide = match dtype {
        DType::UI64 | DType::I64 => true,
        DType::UI32 | DType::I32 | DType::UI8 | DType::I8 => false,
        other => {
            return Err(TensorError::dtype(
                OP,
                other,
                "an 8, 32 or 64-bit integer type",
            ))
        }
    };
    let mut new_state = s.clone();
    let words = match (algorithm, s.len()) {
        (RngAlgorithm::ThreeFry, 2) => {
            let (v, used) = if wide {
                three_fry_64(s[0], s[1], n)
            } else {
                let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
                three_fry_32(s[0], s[1], &dims)
            };
            new_state[1] = s[1].wrapping_add(used);
            v
        }
        (RngAlgorithm::Philox | RngAlgorithm::Default, 2) => {
            // XLA reads a state of 2 reversed as the 128-bit counter (low = state[1],
            // high = the key) and writes back only the low half.
            let (v, used) = philox(s[0], (s[1], s[0]), n, wide);
            new_state[1] = s[1].wrapping_add(used);
            v
        }
        (RngAlgorithm::Philox | RngAlgorithm::Default, 3) => {
            let (v, used) = philox(s[0], (s[1], s[2]), n, wide);
            let (lo, carry) = s[1].overflowing_add(used);
            new_state[1] = lo;
            new_state[2] = s[2].wrapping_add(carry as u64);
            v
        }
        (a, len) => {
            return Err(TensorError::invalid(
                OP,
                format!("a state of {len} ui64 does not fit the {a:?} algorithm (THREE_FRY: 2, PHILOX: 2 or 3)"),
            ))
        }
    };
    let ints: Vec<i128> = words.into_iter().map(|w| w as i128).collect();
    Ok((
        Tensor::new(state.shape().to_vec(), Data::UI64(new_state))?,
        Tensor::new(shape.to_vec(), Data::from_i128s(dtype, &ints))?,
    ))
}
