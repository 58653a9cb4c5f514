//! Mutated fixture texts (truncations, byte flips, deleted tokens) never panic
//! the parser or the verifier: they parse, or fail with a located error.

use proptest::prelude::*;

use shardsim::ir::mlir::{parse_and_verify, print_module};

fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = super::fixtures::fixture_files()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    // Complex types with fft, and the token ops (after_all, send, recv).
    for name in ["fft_batch_sharded.mlir", "send_after_all.mlir"] {
        let path = crate::common::fixture("shardy_lit").join(name);
        texts.push(std::fs::read_to_string(path).unwrap());
    }
    texts
}

/// Parse; on success print and parse again; on failure the error has a real location.
fn check(text: &str) {
    match parse_and_verify(text) {
        Ok(m) => {
            let printed = print_module(&m);
            parse_and_verify(&printed)
                .unwrap_or_else(|e| panic!("printed text does not parse: {e}\n{printed}"));
        }
        Err(e) => {
            let (line, col) = e.line_col();
            let lines = text.split('\n').count();
            assert!(
                line >= 1 && line <= lines,
                "error line {line} outside 1..={lines}: {e}"
            );
            assert!(col >= 1, "error column 0: {e}");
            assert!(e.to_string().starts_with(&format!("{line}:{col}: ")), "{e}");
        }
    }
}

/// Token boundaries: positions where a run of identifier characters or a single symbol starts.
fn token_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'%' {
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'.')) {
                i += 1;
            }
        } else {
            i += 1;
        }
        spans.push((start, i));
    }
    spans
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn truncated_fixtures_never_panic(file in any::<prop::sample::Index>(), cut in any::<prop::sample::Index>()) {
        let texts = corpus();
        let t = &texts[file.index(texts.len())];
        let mut at = cut.index(t.len() + 1);
        while !t.is_char_boundary(at) { at -= 1; }
        check(&t[..at]);
    }

    #[test]
    fn byte_flips_never_panic(file in any::<prop::sample::Index>(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let texts = corpus();
        let mut bytes = texts[file.index(texts.len())].clone().into_bytes();
        for (at, b) in flips {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn deleted_tokens_never_panic(file in any::<prop::sample::Index>(), picks in prop::collection::vec(any::<prop::sample::Index>(), 1..3)) {
        let texts = corpus();
        let t = &texts[file.index(texts.len())];
        let spans = token_spans(t);
        let mut drop: Vec<(usize, usize)> = picks.iter().map(|p| spans[p.index(spans.len())]).collect();
        drop.sort();
        drop.dedup();
        let mut out = String::new();
        let mut pos = 0;
        for (s, e) in drop {
            if s < pos { continue; }
            out.push_str(&t[pos..s]);
            pos = e;
        }
        out.push_str(&t[pos..]);
        check(&out);
    }

    #[test]
    fn swapped_digits_never_panic(file in any::<prop::sample::Index>(), pick in any::<prop::sample::Index>(), digits in "[0-9]{1,22}") {
        // Replace one number by another (huge dims, overflowing factors, bad indices).
        let texts = corpus();
        let t = &texts[file.index(texts.len())];
        let nums: Vec<(usize, usize)> = token_spans(t).into_iter().filter(|&(s, _)| t.as_bytes()[s].is_ascii_digit()).collect();
        if nums.is_empty() { return Ok(()); }
        let (s, e) = nums[pick.index(nums.len())];
        check(&format!("{}{}{}", &t[..s], digits, &t[e..]));
    }
}
