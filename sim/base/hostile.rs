//! Byte strings that broke parsers before (huge numbers, deep nesting, bad
//! UTF-8, the largest priority): what the fuzz targets and `shardsim bench
//! fuzz` insert into real inputs.

/// Tokens inserted by input mutations.
pub const HOSTILE_TOKENS: &[&[u8]] = &[
    b"4294967296",
    b"9223372036854775807",
    b"18446744073709551616",
    b"-1",
    b"0",
    b"nan",
    b"inf",
    b"((((((((",
    b"[[[[[[[[",
    b"{{{{{{{{",
    b"\xff\xfe",
    b"\"",
    b"\n",
    b"p4294967295",
    b"x99999999999x",
];

/// Numbers that replace a number of a real input: sizes just past the
/// limits (65,536 devices, 32 bits), counts that would allocate without end,
/// and the edges of 64 bits.
pub const HOSTILE_NUMBERS: &[&[u8]] = &[
    b"0",
    b"1",
    b"65537",
    b"1000000",
    b"1000000000",
    b"4294967295",
    b"4294967296",
    b"9223372036854775807",
    b"18446744073709551615",
    b"99999999999999999999",
];
