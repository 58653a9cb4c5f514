//! .npy I/O against files numpy wrote: values as numpy listed them in the manifest,
//! header bytes identical to numpy's when we write the same array, and clear errors
//! for what we do not support.

use std::path::PathBuf;

use serde_json::Value;
use shardsim::base::DType;
use shardsim::tensor::npy::{
    descr_of, parse_npy, read_npy, to_npy_bytes, to_npy_bytes_version, write_npy, NpyError,
};
use shardsim::tensor::{Data, Scalar, Tensor};

use crate::common::fixture;

fn manifest_npy() -> Vec<Value> {
    let text = std::fs::read_to_string(fixture("tensor/manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    manifest["npy"].as_array().unwrap().clone()
}

fn npy_path(entry: &Value) -> PathBuf {
    fixture(&format!("tensor/npy/{}", entry["file"].as_str().unwrap()))
}

/// Element `i` equals numpy's listed value (floats bit-exact through f64, NaN matches NaN;
/// a complex value listed as its `[real, imag]` parts).
fn same_value(got: Scalar, want: &Value) -> bool {
    let part = |g: f64, w: &Value| {
        let w: f64 = w.as_str().unwrap().parse().unwrap();
        (g.is_nan() && w.is_nan()) || g == w
    };
    if let Scalar::C64(c) = got {
        let w = want.as_array().unwrap();
        return part(c.re as f64, &w[0]) && part(c.im as f64, &w[1]);
    }
    match got.to_i128() {
        Some(i) if !got.dtype().is_float() => {
            want.as_i64()
                .map(i128::from)
                .or_else(|| want.as_u64().map(i128::from))
                == Some(i)
        }
        _ => {
            let w: f64 = want.as_str().unwrap().parse().unwrap();
            let g = got.to_f64();
            (g.is_nan() && w.is_nan()) || g == w
        }
    }
}

#[test]
fn reads_every_numpy_file_and_writes_identical_bytes() {
    let entries = manifest_npy();
    let mut checked = 0;
    for e in entries.iter().filter(|e| e.get("error").is_none()) {
        let path = npy_path(e);
        let t = read_npy(&path).unwrap_or_else(|err| panic!("{err}"));
        let name = e["file"].as_str().unwrap();
        assert_eq!(descr_of(t.dtype()), e["dtype"].as_str(), "{name}");
        let shape: Vec<u64> = e["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(t.shape(), &shape[..], "{name}");
        let values = e["values"].as_array().unwrap();
        assert_eq!(t.num_elements(), values.len(), "{name}");
        for (i, v) in values.iter().enumerate() {
            assert!(
                same_value(t.get_flat(i).unwrap(), v),
                "{name} element {i}: {:?} vs {v}",
                t.get_flat(i)
            );
        }
        let major = e["version"][0].as_u64().unwrap() as u8;
        let ours = to_npy_bytes_version(&t, major).unwrap();
        assert!(
            ours == std::fs::read(&path).unwrap(),
            "{name}: our bytes differ from numpy's"
        );
        if major == 1 {
            assert!(
                to_npy_bytes(&t).unwrap() == ours,
                "{name}: default version is not 1.0"
            );
        }
        checked += 1;
    }
    assert!(checked >= 18, "only {checked} numpy files checked");
}

#[test]
fn unsupported_numpy_files_give_clear_errors() {
    for e in manifest_npy().iter().filter(|e| e.get("error").is_some()) {
        let err = read_npy(&npy_path(e))
            .expect_err("must be rejected")
            .to_string();
        let want = e["error"].as_str().unwrap();
        assert!(err.contains(want), "{err:?} should mention {want:?}");
        assert!(
            err.contains(e["file"].as_str().unwrap()),
            "{err:?} should name the file"
        );
    }
}

#[test]
fn truncated_and_corrupted_files_are_errors() {
    let bytes = std::fs::read(fixture("tensor/npy/f4_2x3.npy")).unwrap();
    let header_end = bytes.len() - 24;
    for cut in 0..bytes.len() {
        let err = parse_npy(&bytes[..cut]).expect_err("a truncated file must be rejected");
        if cut > header_end {
            assert!(
                matches!(err, NpyError::Truncated { expected: 24, .. }),
                "cut {cut}: {err}"
            );
        }
    }
    let mut extra = bytes.clone();
    extra.push(0);
    assert!(matches!(
        parse_npy(&extra),
        Err(NpyError::TrailingBytes { extra: 1 })
    ));
    let mut version = bytes.clone();
    version[6] = 4;
    assert!(matches!(
        parse_npy(&version),
        Err(NpyError::UnsupportedVersion { major: 4, minor: 0 })
    ));
    let mut magic = bytes.clone();
    magic[1] = b'X';
    assert!(parse_npy(&magic).unwrap_err().to_string().contains("magic"));
}

/// A header text wrapped as a version 1.0 file with the given data bytes.
fn with_header(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn malformed_headers_say_what_was_expected() {
    let cases = [
        (
            "{'descr': '<f4', 'shape': (2,), }\n",
            "the key 'fortran_order'",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n",
            "a string, True, False or a tuple",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 'y'}\n",
            "the keys 'descr'",
        ),
        (
            "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}\n",
            "a string, True, False or a tuple",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,-1)}\n",
            "a non-negative dimension size",
        ),
        ("['descr']\n", "'{'"),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk\n",
            "only spaces and a newline",
        ),
        ("{'descr: '<f4'}\n", "':'"),
    ];
    for (header, want) in cases {
        let err = parse_npy(&with_header(header, &[0; 8]))
            .expect_err(header)
            .to_string();
        assert!(
            err.contains(want),
            "{header:?}: {err:?} should contain {want:?}"
        );
    }
    // Python-2 style long sizes and double quotes are accepted.
    let ok = parse_npy(&with_header(
        "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2L,)}\n",
        &[1, 0, 0, 0, 2, 0, 0, 0],
    ))
    .unwrap();
    assert_eq!(ok, Tensor::from_vec(vec![2], vec![1i32, 2]).unwrap());
    // Fortran order of a rank-1 array is the same layout as C order.
    let f1 = parse_npy(&with_header(
        "{'descr': '<f4', 'fortran_order': True, 'shape': (1,)}\n",
        &1.0f32.to_le_bytes(),
    ));
    assert_eq!(
        f1.unwrap(),
        Tensor::from_vec(vec![1], vec![1.0f32]).unwrap()
    );
}

#[test]
fn writes_atomically_and_rejects_bf16() {
    let dir = std::env::temp_dir().join(format!("shardsim-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.npy");
    let t = Tensor::from_vec(vec![2, 2], vec![1.5f64, -2.0, 0.0, 1e300]).unwrap();
    write_npy(&path, &t).unwrap();
    assert_eq!(read_npy(&path).unwrap(), t);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "temporary files left: {leftovers:?}");
    let bf16 = Tensor::new(vec![1], Data::BF16(vec![0x3F80])).unwrap();
    assert!(matches!(
        write_npy(&path, &bf16),
        Err(NpyError::NoNpyDType(DType::BF16))
    ));
    assert_eq!(
        read_npy(&path).unwrap(),
        t,
        "a failed write must leave the old file"
    );
    let missing = read_npy(&dir.join("missing.npy")).unwrap_err().to_string();
    assert!(missing.contains("missing.npy"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}
