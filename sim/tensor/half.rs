//! Conversions between f32/f64 and the 16-bit float formats (bf16, IEEE f16),
//! stored as raw `u16` bits. Rounding is round-to-nearest-even, NaNs stay quiet
//! NaNs with their sign, overflow goes to infinity and f16 subnormals are exact.

/// bf16 bits to f32 (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 to bf16 bits, round to nearest even.
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        // Keep sign and top payload bits, force the quiet bit so it stays a NaN.
        return ((b >> 16) as u16) | 0x0040;
    }
    // Adding 0x7FFF plus the lowest kept bit rounds ties to even; finite values cannot overflow u32.
    let round = 0x7FFF + ((b >> 16) & 1);
    ((b + round) >> 16) as u16
}

/// IEEE half bits to f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let man = (h & 0x3FF) as u32;
    let bits = match exp {
        0 => {
            if man == 0 {
                sign
            } else {
                // Subnormal: man * 2^-24 is exact in f32.
                sign | (man as f32 * f32::powi(2.0, -24)).to_bits()
            }
        }
        0x1F => sign | 0x7F80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// f32 to IEEE half bits, round to nearest even (subnormals included).
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xFF) as i32;
    let man = b & 0x7F_FFFF;
    if exp == 0xFF {
        let nan_bits = if man != 0 {
            0x200 | (man >> 13) as u16
        } else {
            0
        };
        return sign | 0x7C00 | nan_bits;
    }
    let e = exp - 127 + 15;
    if e >= 0x1F {
        return sign | 0x7C00;
    }
    if e <= 0 {
        if e < -10 {
            // Below half of the smallest subnormal (2^-25): rounds to zero.
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1u32 << shift) - 1);
        let mut q = m >> shift;
        if rem > half || (rem == half && q & 1 == 1) {
            q += 1; // may carry into the smallest normal, whose encoding follows naturally
        }
        return sign | q as u16;
    }
    let mut h = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1FFF;
    if rem > 0x1000 || (rem == 0x1000 && h & 1 == 1) {
        h += 1; // a carry into the exponent is right, up to infinity (0x7C00)
    }
    sign | h as u16
}

/// f64 to f32 with round-to-odd: the result keeps a sticky bit, so a second
/// round-to-nearest-even into a narrower format (bf16, f16) is correctly rounded.
pub fn f64_to_f32_odd(x: f64) -> f32 {
    let r = x as f32;
    if !r.is_finite() || r as f64 == x {
        return r;
    }
    if r.to_bits() & 1 == 1 {
        return r;
    }
    // RNE picked the even neighbour; round-to-odd wants the other one, on the far side of x.
    let bits = r.to_bits();
    let toward_zero = (r as f64).abs() > x.abs();
    let next = if toward_zero { bits - 1 } else { bits + 1 };
    f32::from_bits(next)
}

/// f64 to bf16 bits, correctly rounded (no double rounding).
pub fn f64_to_bf16(x: f64) -> u16 {
    f32_to_bf16(f64_to_f32_odd(x))
}

/// f64 to IEEE half bits, correctly rounded (no double rounding).
pub fn f64_to_f16(x: f64) -> u16 {
    f32_to_f16(f64_to_f32_odd(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_known_values() {
        assert_eq!(f32_to_bf16(1.0), 0x3F80);
        // 1 + 2^-8 is a tie between 1.0 (even) and 1 + 2^-7: goes to 1.0.
        assert_eq!(f32_to_bf16(1.0 + f32::powi(2.0, -8)), 0x3F80);
        // 1 + 3*2^-8 is a tie between 1+2^-7 (odd) and 1+2^-6 (even).
        assert_eq!(f32_to_bf16(1.0 + 3.0 * f32::powi(2.0, -8)), 0x3F82);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7F80);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
    }

    #[test]
    fn f16_known_values() {
        assert_eq!(f32_to_f16(1.0), 0x3C00);
        assert_eq!(f32_to_f16(65504.0), 0x7BFF);
        assert_eq!(f32_to_f16(65520.0), 0x7C00);
        assert_eq!(f32_to_f16(f32::powi(2.0, -24)), 0x0001);
        assert_eq!(f32_to_f16(f32::powi(2.0, -25)), 0x0000);
        assert_eq!(f32_to_f16(1.5 * f32::powi(2.0, -25)), 0x0001);
        assert_eq!(f16_to_f32(0x0001), f32::powi(2.0, -24));
        assert_eq!(f16_to_f32(0xC000), -2.0);
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if !f.is_nan() {
                assert_eq!(f32_to_f16(f), h);
            }
        }
    }

    #[test]
    fn f64_rounds_once() {
        // Just above the bf16 tie 1 + 2^-8: must round up, though via f32 RNE it would tie to 1.0.
        let x = 1.0 + f64::powi(2.0, -8) + f64::powi(2.0, -40);
        assert_eq!(f64_to_bf16(x), 0x3F81);
        assert_eq!(f64_to_bf16(1.0 + f64::powi(2.0, -8)), 0x3F80);
    }
}
