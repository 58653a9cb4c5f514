//! The worker protocol's framing: frames round-trip exactly (every dtype,
//! bit patterns included), and bad streams are clear errors, not panics or
//! huge allocations.

use proptest::prelude::*;

use shardsim::base::DType;
use shardsim::runtime::protocol::{
    read_frame, write_frame, Frame, FromWorker, ProtocolError, ToWorker, VERSION,
};
use shardsim::runtime::{Arg, DRef};
use shardsim::tensor::Tensor;

fn roundtrip(f: &Frame<ToWorker>) -> Frame<ToWorker> {
    let mut buf = Vec::new();
    write_frame(&mut buf, f).unwrap();
    let mut r = buf.as_slice();
    let back = read_frame(&mut r).unwrap().unwrap();
    assert!(r.is_empty());
    back
}

proptest! {
    #[test]
    fn frames_round_trip(bits in proptest::collection::vec(any::<u32>(), 0..64), i in any::<i64>(), s in ".{0,20}") {
        let t = Tensor::from_le_bytes(vec![bits.len() as u64], DType::F32,
            &bits.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<_>>()).unwrap();
        let h = Tensor::from_le_bytes(vec![bits.len() as u64, 2], DType::BF16,
            &bits.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<_>>()).unwrap();
        let f = Frame::with(ToWorker::Call { reg: DRef(3), func: DRef(1), args: vec![Arg::Int(i), Arg::Str(s), Arg::Ref(DRef(2))] }, vec![t.clone(), h.clone()]);
        let back = roundtrip(&f);
        prop_assert_eq!(back.msg, f.msg);
        // Compare bits (NaN payloads included), not float equality.
        prop_assert_eq!(back.tensors[0].data().to_le_bytes(), t.data().to_le_bytes());
        prop_assert_eq!(back.tensors[1].data().to_le_bytes(), h.data().to_le_bytes());
    }
}

#[test]
fn bad_streams_are_errors() {
    let mut ok = Vec::new();
    write_frame(&mut ok, &Frame::new(FromWorker::Done { meta: None })).unwrap();
    // End of stream before a frame: a clean end.
    assert!(read_frame::<FromWorker>(&mut &[][..]).unwrap().is_none());
    // Cut short.
    let e = read_frame::<FromWorker>(&mut &ok[..ok.len() - 1]).unwrap_err();
    assert!(matches!(e, ProtocolError::Io(_)), "{e}");
    // Not our magic.
    let e = read_frame::<FromWorker>(&mut &b"HTTP/1.1 200"[..]).unwrap_err();
    assert!(matches!(e, ProtocolError::BadMagic(_)), "{e}");
    // Another version.
    let mut v = ok.clone();
    v[4..6].copy_from_slice(&(VERSION + 1).to_le_bytes());
    let e = read_frame::<FromWorker>(&mut v.as_slice()).unwrap_err();
    assert!(e.to_string().contains("version"), "{e}");
    // A header claiming 4 GiB is refused before allocating.
    let mut big = ok.clone();
    big[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = read_frame::<FromWorker>(&mut big.as_slice()).unwrap_err();
    assert!(matches!(e, ProtocolError::Malformed(_)), "{e}");
    // An array type too large to allocate is refused.
    let header = br#"{"msg":"Sync","tensors":[{"shape":[4294967296,4294967296],"dtype":"F32"}]}"#;
    let mut huge = b"SSRT".to_vec();
    huge.extend(VERSION.to_le_bytes());
    huge.extend((header.len() as u32).to_le_bytes());
    huge.extend(header);
    let e = read_frame::<ToWorker>(&mut huge.as_slice()).unwrap_err();
    assert!(
        e.to_string().contains("too large") || e.to_string().contains("malformed"),
        "{e}"
    );
}
