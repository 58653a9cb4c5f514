//! Integer element arithmetic with XLA's semantics for every integer width:
//! wrapping add/sub/mul/neg, division by zero gives -1 (all bits set),
//! `MIN / -1` gives `MIN`, `x % 0` gives `x`, negative exponents in `pow`.

/// One integer element type.
pub(crate) trait IntElem: Copy + Ord + Eq + std::fmt::Debug {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn div(self, o: Self) -> Self;
    fn rem(self, o: Self) -> Self;
    fn pow(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn not(self) -> Self;
    fn sign(self) -> Self;
}

macro_rules! int_elem {
    ($t:ty, $signed:expr) => {
        impl IntElem for $t {
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            #[allow(unused_comparisons)]
            fn abs(self) -> Self {
                if self < 0 {
                    self.wrapping_neg()
                } else {
                    self
                }
            }
            fn div(self, o: Self) -> Self {
                if o == 0 {
                    !0 // all bits set: -1 signed, MAX unsigned
                } else {
                    self.wrapping_div(o)
                }
            }
            fn rem(self, o: Self) -> Self {
                if o == 0 {
                    self
                } else {
                    self.wrapping_rem(o)
                }
            }
            #[allow(unused_comparisons)]
            fn pow(self, o: Self) -> Self {
                if o < 0 {
                    // Only |base| == 1 survives a negative exponent in integers.
                    return if self == 1 {
                        1
                    } else if $signed && self == (0 as $t).wrapping_sub(1) {
                        if o & 1 == 1 {
                            self
                        } else {
                            1
                        }
                    } else {
                        0
                    };
                }
                let (mut base, mut e, mut acc) = (self, o, 1 as $t);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
            fn and(self, o: Self) -> Self {
                self & o
            }
            fn or(self, o: Self) -> Self {
                self | o
            }
            fn xor(self, o: Self) -> Self {
                self ^ o
            }
            fn not(self) -> Self {
                !self
            }
            #[allow(unused_comparisons)]
            fn sign(self) -> Self {
                if self > 0 {
                    1
                } else if self < 0 {
                    (0 as $t).wrapping_sub(1)
                } else {
                    0
                }
            }
        }
    };
}

int_elem!(i8, true);
int_elem!(i32, true);
int_elem!(i64, true);
int_elem!(u8, false);
int_elem!(u32, false);
int_elem!(u64, false);

#[cfg(test)]
mod tests {
    use super::IntElem;

    #[test]
    fn xla_integer_edge_cases() {
        assert_eq!(IntElem::div(7i32, 0), -1);
        assert_eq!(IntElem::div(7u32, 0), u32::MAX);
        assert_eq!(IntElem::div(i32::MIN, -1), i32::MIN);
        assert_eq!(IntElem::rem(7i32, 0), 7);
        assert_eq!(IntElem::rem(i32::MIN, -1), 0);
        assert_eq!(IntElem::rem(-7i32, 2), -1);
        assert_eq!(IntElem::div(-7i32, 2), -3);
        assert_eq!(IntElem::pow(-1i32, -3), -1);
        assert_eq!(IntElem::pow(2i32, -1), 0);
        assert_eq!(IntElem::pow(3i64, 4), 81);
        assert_eq!(IntElem::abs(i8::MIN), i8::MIN);
    }
}
