//! Quantities with units: table of parses, typo errors naming the unit
//! expected, and printing that parses back to the same value (proptest).

use proptest::prelude::*;

use shardsim::topology::{Bandwidth, ByteSize, Duration, FlopRate};

#[test]
fn parse_table() {
    let bw = [
        ("450GB/s", 450_000_000_000u64),
        ("400Gb/s", 50_000_000_000),
        ("200Gb/s", 25_000_000_000),
        ("31.5GB/s", 31_500_000_000),
        ("1TB/s", 1_000_000_000_000),
        ("614.4GB/s", 614_400_000_000),
        ("8b/s", 1),
    ];
    for (text, v) in bw {
        assert_eq!(Bandwidth::parse(text).unwrap().0, v, "{text}");
    }
    let times = [
        ("2us", 2_000_000u64),
        ("0.6us", 600_000),
        ("250ns", 250_000),
        ("1ps", 1),
        ("1.5s", 1_500_000_000_000),
    ];
    for (text, v) in times {
        assert_eq!(Duration::parse(text).unwrap().0, v, "{text}");
    }
    let sizes = [
        ("80GiB", 80u64 << 30),
        ("80GB", 80_000_000_000),
        ("2TiB", 2 << 40),
        ("141GB", 141_000_000_000),
    ];
    for (text, v) in sizes {
        assert_eq!(ByteSize::parse(text).unwrap().0, v, "{text}");
    }
    assert_eq!(
        FlopRate::parse("989TFLOP/s").unwrap().0,
        989_000_000_000_000
    );
    assert_eq!(
        FlopRate::parse("19.5TFLOP/s").unwrap().0,
        19_500_000_000_000
    );
}

#[test]
fn printing_uses_the_same_notation() {
    assert_eq!(Bandwidth::parse("450GB/s").unwrap().to_string(), "450GB/s");
    assert_eq!(Bandwidth::parse("400Gb/s").unwrap().to_string(), "50GB/s");
    assert_eq!(
        Bandwidth::parse("400Gb/s").unwrap().to_bits_string(),
        "400Gb/s"
    );
    assert_eq!(Duration::parse("2us").unwrap().to_string(), "2us");
    assert_eq!(Duration::parse("0.6us").unwrap().to_string(), "600ns");
    assert_eq!(ByteSize::parse("80GiB").unwrap().to_string(), "80GiB");
    assert_eq!(ByteSize::parse("80GB").unwrap().to_string(), "80GB");
    assert_eq!(
        FlopRate::parse("989TFLOP/s").unwrap().to_string(),
        "989TFLOP/s"
    );
}

#[test]
fn typos_name_the_unit_expected() {
    let cases = [
        (Bandwidth::parse("450GBps").unwrap_err().to_string(), "GB/s"),
        (Bandwidth::parse("450").unwrap_err().to_string(), "no unit"),
        (Duration::parse("2usec").unwrap_err().to_string(), "us"),
        (ByteSize::parse("80Gib").unwrap_err().to_string(), "GiB"),
        (
            FlopRate::parse("989TFLOPS").unwrap_err().to_string(),
            "TFLOP/s",
        ),
        (
            Bandwidth::parse("-1GB/s").unwrap_err().to_string(),
            "must not be negative",
        ),
        (
            Duration::parse("0.5ps").unwrap_err().to_string(),
            "whole number",
        ),
        (
            Bandwidth::parse("1b/s").unwrap_err().to_string(),
            "whole number",
        ),
    ];
    for (err, want) in cases {
        assert!(err.contains(want), "{err} should mention {want}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn printed_values_parse_back(v in any::<u64>(), small in 0u64..10_000_000) {
        for x in [v, small, small * 1_000_000_000] {
            prop_assert_eq!(Bandwidth::parse(&Bandwidth(x).to_string()).unwrap().0, x);
            prop_assert_eq!(Duration::parse(&Duration(x).to_string()).unwrap().0, x);
            prop_assert_eq!(ByteSize::parse(&ByteSize(x).to_string()).unwrap().0, x);
            prop_assert_eq!(FlopRate::parse(&FlopRate(x).to_string()).unwrap().0, x);
        }
    }
}
