//! The error function, its complement and its inverse for the elementwise
//! kernels (`chlo.erf`, `chlo.erfc`, `chlo.erf_inv`), which Rust's standard
//! library lacks.
//!
//! `erf` is computed in f64 for both widths (f32 rounds the f64 value once):
//! below |x| = 3 by the series `erf(x) = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) /
//! (1*3*...*(2n+1))` (all terms positive, so no cancellation), above it as
//! `1 - erfc(x)` with erfc from its continued fraction (Lentz's method).
//!
//! `erf_inv` in f32 is the single-precision approximation of M. Giles,
//! "Approximating the erfinv function" (GPU Computing Gems, 2011), evaluated in
//! f32 as XLA does; in f64 it is that approximation refined by Newton steps on
//! the f64 `erf` above.

use std::f64::consts::PI;

/// `erf` and `erf_inv` on one float width.
pub(crate) trait Special: Copy {
    fn error_function(self) -> Self;
    fn complementary_error_function(self) -> Self;
    fn inverse_error_function(self) -> Self;
}

fn erf64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 3.0 {
        let x2 = a * a;
        let (mut term, mut sum, mut n) = (a, a, 0.0);
        while term > sum * 1e-18 {
            n += 1.0;
            term *= 2.0 * x2 / (2.0 * n + 1.0);
            sum += term;
        }
        2.0 / PI.sqrt() * (-x2).exp() * sum
    } else if a < 6.0 {
        1.0 - erfc_continued_fraction(a)
    } else {
        1.0
    };
    r.copysign(x)
}

/// erfc(x) = 1 - erf(x), without the cancellation of that difference for large x:
/// the continued fraction from |x| = 0.5 on (it converges for every x > 0, slower
/// near 0), `2 - erfc(-x)` for negative x.
fn erfc64(x: f64) -> f64 {
    if x.is_nan() {
        x
    } else if x < 0.0 {
        2.0 - erfc64(-x)
    } else if x < 0.5 {
        1.0 - erf64(x)
    } else if x < 27.0 {
        erfc_continued_fraction(x)
    } else {
        0.0
    }
}

/// erfc(a) for a >= 0.5 from `erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + ...))))`.
fn erfc_continued_fraction(a: f64) -> f64 {
    // Modified Lentz for b0 + a1/(b1 + a2/(b2 + ...)) with b_k = a, a_k = k/2.
    let tiny = 1e-300;
    let mut f = a;
    let (mut c, mut d) = (f, 0.0);
    for k in 1..5000 {
        let ak = k as f64 / 2.0;
        d = a + ak * d;
        d = if d == 0.0 { tiny } else { d };
        c = a + ak / c;
        c = if c == 0.0 { tiny } else { c };
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-17 {
            break;
        }
    }
    (-a * a).exp() / PI.sqrt() / f
}

/// Giles' single-precision erfinv, evaluated in f32.
fn erf_inv32(x: f32) -> f32 {
    const LOW: [f32; 9] = [
        2.810_226_4e-8,
        3.432_739_4e-7,
        -3.523_387_7e-6,
        -4.391_506_5e-6,
        2.185_808_7e-4,
        -1.253_725e-3,
        -4.177_681_6e-3,
        2.466_407_3e-1,
        1.501_409_4,
    ];
    const HIGH: [f32; 9] = [
        -2.002_142_6e-4,
        1.009_505_6e-4,
        1.349_343_2e-3,
        -3.673_428_4e-3,
        5.739_507_7e-3,
        -7.622_461_3e-3,
        9.438_870_5e-3,
        1.001_674,
        2.832_976_8,
    ];
    if x.abs() == 1.0 {
        return x * f32::INFINITY;
    }
    let w = -(-x * x).ln_1p();
    let (coeffs, w) = if w < 5.0 {
        (&LOW, w - 2.5)
    } else {
        (&HIGH, w.sqrt() - 3.0)
    };
    let p = coeffs[1..].iter().fold(coeffs[0], |p, &c| c + p * w);
    p * x
}

impl Special for f64 {
    fn error_function(self) -> f64 {
        erf64(self)
    }

    fn complementary_error_function(self) -> f64 {
        erfc64(self)
    }

    fn inverse_error_function(self) -> f64 {
        if self.is_nan() || self.abs() > 1.0 {
            return f64::NAN;
        }
        if self.abs() == 1.0 {
            return self * f64::INFINITY;
        }
        let mut x = erf_inv32(self as f32) as f64;
        for _ in 0..4 {
            let slope = 2.0 / PI.sqrt() * (-x * x).exp();
            if slope == 0.0 || !x.is_finite() {
                break;
            }
            x -= (erf64(x) - self) / slope;
        }
        x
    }
}

impl Special for f32 {
    fn error_function(self) -> f32 {
        erf64(self as f64) as f32
    }

    fn complementary_error_function(self) -> f32 {
        erfc64(self as f64) as f32
    }

    fn inverse_error_function(self) -> f32 {
        erf_inv32(self)
    }
}

#[cfg(test)]
mod tests {
    use super::Special;

    #[test]
    fn erf_closed_forms() {
        // erf(0) = 0, odd, erf(inf) = 1, and a value from Abramowitz & Stegun table 7.1.
        assert_eq!(0.0f64.error_function(), 0.0);
        assert_eq!(f64::INFINITY.error_function(), 1.0);
        assert_eq!((-2.5f64).error_function(), -(2.5f64.error_function()));
        assert!((1.0f64.error_function() - 0.842_700_792_949_714_9).abs() < 1e-15);
        assert!((3.5f64.error_function() - 0.999_999_256_901_627_7).abs() < 1e-15);
        for x in [-2.0f64, -0.4, 0.0, 0.3, 0.5, 1.0, 2.5, 3.5] {
            assert!((x.complementary_error_function() + x.error_function() - 1.0).abs() < 1e-15);
        }
        // erfc(5) from A&S table 7.1 (relative accuracy where 1 - erf has none).
        assert!(
            (5.0f64.complementary_error_function() / 1.537_459_794_428_035e-12 - 1.0).abs() < 1e-13
        );
        for x in [-0.9, -0.3, 0.0, 0.1, 0.5, 0.99] {
            assert!(
                (f64::inverse_error_function(x).error_function() - x).abs() < 1e-14,
                "{x}"
            );
        }
    }
}
