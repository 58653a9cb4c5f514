//! `stablehlo.fft` and complex element types against closed forms: the DFT
//! of an impulse is flat, of a constant a single bin `n c`, of a tone
//! `e^{2 pi i m j / n}` a single bin `n` at `m` (and separably in 2-D); IFFT
//! of a single bin is the tone scaled by `1/n`; RFFT of a cosine puts `n/2`
//! at its frequency; IRFFT(RFFT(x)) and IFFT(FFT(x)) give `x` back (proptest).
//! `real`/`imag`/`complex` and complex arithmetic are their definitions;
//! `.npy` files of `<c8`/`<c16` round trip; the verifier's fft constraints
//! are located one-line errors (`fft_bad.mlir`); a batch-sharded fft
//! partitions and runs on 4 devices equal to the interpreter.

use num_complex::Complex64;
use proptest::prelude::*;
use shardsim::base::DType;
use shardsim::ir::interp::interpret;
use shardsim::ir::mlir::parse_and_verify;
use shardsim::propagate::{propagate_module, Strategy};
use shardsim::tensor::{Data, Tensor};

const TAU: f64 = std::f64::consts::TAU;

fn c(re: f64, im: f64) -> Complex64 {
    Complex64::new(re, im)
}

fn tc(shape: &[u64], v: Vec<Complex64>) -> Tensor {
    Tensor::new(shape.to_vec(), Data::C128(v)).unwrap()
}

/// A one-op fft program on `operand` giving `result`.
fn fft_program(kind: &str, length: &[u64], operand: &str, result: &str) -> String {
    let l = length
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "func.func @main(%a: {operand}) -> {result} {{\n  %f = stablehlo.fft %a, type = {kind}, length = [{l}] : ({operand}) -> {result}\n  return %f : {result}\n}}\n"
    )
}

fn run(text: &str, inputs: &[Tensor]) -> Tensor {
    let m = parse_and_verify(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    interpret(&m, inputs).unwrap().remove(0)
}

fn close(got: &[Complex64], want: &[Complex64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).norm() <= tol * (1.0 + w.norm()),
            "{what}: got {got:?}\n want {want:?}"
        );
    }
}

fn tone(n: usize, m: usize, scale: f64) -> Vec<Complex64> {
    (0..n)
        .map(|j| Complex64::from_polar(scale, TAU * (m * j) as f64 / n as f64))
        .collect()
}

#[test]
fn dft_of_an_impulse_a_constant_and_a_tone_are_their_closed_forms() {
    let n = 12;
    let ty = format!("tensor<{n}xcomplex<f64>>");
    let p = fft_program("FFT", &[n as u64], &ty, &ty);
    let shape = [n as u64];
    // Impulse at 0: every bin is 1.
    let mut impulse = vec![c(0.0, 0.0); n];
    impulse[0] = c(1.0, 0.0);
    let got = run(&p, &[tc(&shape, impulse)]).data().to_c128_vec();
    close(&got, &vec![c(1.0, 0.0); n], 1e-12, "impulse");
    // Constant 2 - i: bin 0 is n (2 - i), the rest 0.
    let got = run(&p, &[tc(&shape, vec![c(2.0, -1.0); n])])
        .data()
        .to_c128_vec();
    let mut want = vec![c(0.0, 0.0); n];
    want[0] = c(2.0 * n as f64, -(n as f64));
    close(&got, &want, 1e-12, "constant");
    // A tone of frequency 5: bin 5 is n.
    let got = run(&p, &[tc(&shape, tone(n, 5, 1.0))]).data().to_c128_vec();
    let mut want = vec![c(0.0, 0.0); n];
    want[5] = c(n as f64, 0.0);
    close(&got, &want, 1e-12, "tone");
    // IFFT of bin 5 is the tone divided by n.
    let ip = fft_program("IFFT", &[n as u64], &ty, &ty);
    let mut bin = vec![c(0.0, 0.0); n];
    bin[5] = c(1.0, 0.0);
    let got = run(&ip, &[tc(&shape, bin)]).data().to_c128_vec();
    close(
        &got,
        &tone(n, 5, 1.0 / n as f64),
        1e-12,
        "inverse of one bin",
    );
}

#[test]
fn two_dim_fft_of_a_separable_tone_is_one_bin_per_batch() {
    // Batch 2 x (6 x 8); batch b holds the tone (b + 1, 3 - b).
    let (n1, n2) = (6usize, 8usize);
    let ty = format!("tensor<2x{n1}x{n2}xcomplex<f64>>");
    let p = fft_program("FFT", &[n1 as u64, n2 as u64], &ty, &ty);
    let mut x = Vec::new();
    let mut want = vec![c(0.0, 0.0); 2 * n1 * n2];
    for b in 0..2 {
        let (m1, m2) = (b + 1, 3 - b);
        for j1 in 0..n1 {
            for j2 in 0..n2 {
                let ph = TAU * ((m1 * j1) as f64 / n1 as f64 + (m2 * j2) as f64 / n2 as f64);
                x.push(Complex64::from_polar(1.0, ph));
            }
        }
        want[b * n1 * n2 + m1 * n2 + m2] = c((n1 * n2) as f64, 0.0);
    }
    let got = run(&p, &[tc(&[2, n1 as u64, n2 as u64], x)])
        .data()
        .to_c128_vec();
    close(&got, &want, 1e-12, "2-D tone");
}

#[test]
fn rfft_of_a_cosine_keeps_the_non_negative_bins_and_irfft_inverts_it() {
    for n in [16usize, 15] {
        let half = n / 2 + 1;
        let m = 3;
        let x: Vec<f64> = (0..n)
            .map(|j| (TAU * (m * j) as f64 / n as f64).cos() + 0.25)
            .collect();
        let p = fft_program(
            "RFFT",
            &[n as u64],
            &format!("tensor<{n}xf64>"),
            &format!("tensor<{half}xcomplex<f64>>"),
        );
        let spectrum = run(
            &p,
            &[Tensor::new(vec![n as u64], Data::F64(x.clone())).unwrap()],
        );
        assert_eq!(spectrum.shape(), &[half as u64]);
        let mut want = vec![c(0.0, 0.0); half];
        want[0] = c(0.25 * n as f64, 0.0);
        want[m] = c(n as f64 / 2.0, 0.0);
        close(
            &spectrum.data().to_c128_vec(),
            &want,
            1e-12,
            &format!("rfft n={n}"),
        );
        let ip = fft_program(
            "IRFFT",
            &[n as u64],
            &format!("tensor<{half}xcomplex<f64>>"),
            &format!("tensor<{n}xf64>"),
        );
        let back = run(&ip, &[spectrum]).to_f64_vec();
        for (b, w) in back.iter().zip(&x) {
            assert!((b - w).abs() < 1e-12, "irfft n={n}: {back:?} vs {x:?}");
        }
    }
}

#[test]
fn complex_parts_and_arithmetic_are_their_definitions() {
    let text = "func.func @main(%re: tensor<3xf32>, %im: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xcomplex<f32>>) {
  %z = stablehlo.complex %re, %im : tensor<3xcomplex<f32>>
  %p = stablehlo.multiply %z, %z : tensor<3xcomplex<f32>>
  %q = stablehlo.divide %p, %z : tensor<3xcomplex<f32>>
  %s = stablehlo.subtract %q, %z : tensor<3xcomplex<f32>>
  %n = stablehlo.negate %p : tensor<3xcomplex<f32>>
  %a = stablehlo.add %n, %s : tensor<3xcomplex<f32>>
  %r = stablehlo.real %a : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
  %i = stablehlo.imag %a : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
  %w = stablehlo.convert %re : (tensor<3xf32>) -> tensor<3xcomplex<f32>>
  return %r, %i, %w : tensor<3xf32>, tensor<3xf32>, tensor<3xcomplex<f32>>
}
";
    let m = parse_and_verify(text).unwrap();
    let re = Tensor::new(vec![3], Data::F32(vec![1.0, -2.0, 0.5])).unwrap();
    let im = Tensor::new(vec![3], Data::F32(vec![2.0, 3.0, -4.0])).unwrap();
    let out = interpret(&m, &[re, im]).unwrap();
    // -(z^2) + (z^2 / z - z) = -(z^2): (a+bi)^2 = a^2 - b^2 + 2abi.
    let want: [(f64, f64); 3] = [(1.0, 2.0), (-2.0, 3.0), (0.5, -4.0)];
    for (k, (a, b)) in want.iter().enumerate() {
        assert_eq!(out[0].to_f64_vec()[k], -(a * a - b * b), "real {k}");
        assert_eq!(out[1].to_f64_vec()[k], -(2.0 * a * b), "imag {k}");
    }
    assert_eq!(out[2].dtype(), DType::C64);
    assert_eq!(
        out[2].data().to_c128_vec(),
        vec![c(1.0, 0.0), c(-2.0, 0.0), c(0.5, 0.0)]
    );
    // Printed back and parsed again, the program is the same text.
    let printed = shardsim::ir::mlir::print_module(&m);
    let again = shardsim::ir::mlir::print_module(&parse_and_verify(&printed).unwrap());
    assert_eq!(printed, again);
    assert!(printed.contains("tensor<3xcomplex<f32>>"), "{printed}");
}

#[test]
fn complex_npy_files_round_trip_with_numpys_descrs() {
    use shardsim::tensor::npy;
    let dir = std::env::temp_dir().join(format!("shardsim-fft-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (data, descr) in [
        (
            Data::C64(vec![
                num_complex::Complex32::new(1.5, -2.0),
                num_complex::Complex32::new(0.0, 3.25),
            ]),
            "<c8",
        ),
        (Data::C128(vec![c(-1.0, 1e-300), c(7.0, 0.5)]), "<c16"),
    ] {
        let t = Tensor::new(vec![2], data).unwrap();
        let path = dir.join(format!("{}.npy", &descr[1..]));
        npy::write_npy(&path, &t).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let header = String::from_utf8_lossy(&bytes[..bytes.len().min(128)]).to_string();
        assert!(header.contains(&format!("'descr': '{descr}'")), "{header}");
        // numpy's layout: each element's real part, then its imaginary part.
        let width = t.dtype().size_bytes() as usize / 2;
        let body = &bytes[bytes.len() - 2 * 2 * width..];
        assert_eq!(body, t.data().to_le_bytes().as_slice());
        assert_eq!(npy::read_npy(&path).unwrap(), t);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn fft_programs_with_bad_types_are_located_errors() {
    super::custom_calls::check_bad_programs("fft_bad.mlir", 9);
}

const SHARDED: &str = include_str!("../fixtures/shardy_lit/fft_batch_sharded.mlir");

/// Batch dims sharded over "x", dim 1 over "y": RFFT/IRFFT of the last dim
/// keep both (dim 1 is a batch dim for them); the 2-D FFT/IFFT need dim 1
/// replicated, so the partitioner gathers it over "y" before each and slices
/// it after. On 4 devices the program gives the interpreter's values.
#[test]
fn batch_sharded_fft_partitions_and_runs_on_four_devices_as_the_interpreter() {
    let m = parse_and_verify(SHARDED).unwrap();
    let x: Vec<f32> = (0..4 * 6 * 8)
        .map(|i| ((i * 37 % 101) as f32) / 50.0 - 1.0)
        .collect();
    let a = Tensor::new(vec![4, 6, 8], Data::F32(x.clone())).unwrap();
    let reference = interpret(&m, std::slice::from_ref(&a)).unwrap();
    // IRFFT(RFFT(a)) is a, in f32.
    for (g, w) in reference[0].to_f64_vec().iter().zip(&x) {
        assert!((g - *w as f64).abs() < 1e-5, "{g} vs {w}");
    }
    let mut pm = m.clone();
    propagate_module(&mut pm, Strategy::UserPriority).unwrap();
    let program = shardsim::partition::partition(&pm).unwrap();
    let text = shardsim::partition::text::to_mlir(&program);
    for line in text.lines().filter(|l| l.contains("stablehlo.fft")) {
        let want = if line.contains("RFFT") {
            r#"<@mesh, [{"x"}, {"y"}, {}]>"#
        } else {
            r#"<@mesh, [{"x"}, {}, {}]>"#
        };
        assert!(line.contains(want), "{line}");
    }
    let moving: Vec<(&str, u64)> = program
        .collectives()
        .filter(|c| c.kind.moves_data())
        .map(|c| (c.kind.name(), c.bytes))
        .collect();
    // One gather per 2-D transform, each bringing a device's 2x3x5 shard to
    // 2x6x5 complex<f32> (counted as the gathered 480 bytes).
    assert_eq!(
        moving,
        vec![("all_gather", 2 * 6 * 5 * 8), ("all_gather", 2 * 6 * 5 * 8)],
        "{text}"
    );
    let outs = shardsim::exec::execute(&program, std::slice::from_ref(&a)).unwrap();
    assert_eq!(outs, reference);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// IFFT(FFT(x)) == x within f64 rounding, over 1 to 3 transformed dims
    /// of any size (primes included) with a batch dim in front.
    #[test]
    fn inverse_fft_of_fft_is_the_identity(
        dims in prop::collection::vec(1u64..9, 1..4),
        batch in 1u64..4,
        seed in any::<u64>(),
    ) {
        let mut shape = vec![batch];
        shape.extend(&dims);
        let n: u64 = shape.iter().product();
        let mut s = seed | 1;
        let mut next = || {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            (s % 2001) as f64 / 1000.0 - 1.0
        };
        let x: Vec<Complex64> = (0..n).map(|_| c(next(), next())).collect();
        let ty = format!(
            "tensor<{}xcomplex<f64>>",
            shape.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
        );
        let text = format!(
            "func.func @main(%a: {ty}) -> {ty} {{\n  %f = stablehlo.fft %a, type = FFT, length = {dims:?} : ({ty}) -> {ty}\n  %g = stablehlo.fft %f, type = IFFT, length = {dims:?} : ({ty}) -> {ty}\n  return %g : {ty}\n}}\n"
        );
        let got = run(&text, &[tc(&shape, x.clone())]).data().to_c128_vec();
        for (g, w) in got.iter().zip(&x) {
            prop_assert!((g - w).norm() < 1e-12, "{g} vs {w}");
        }
    }

    /// IRFFT(RFFT(x)) == x for real x of any length, even or odd.
    #[test]
    fn irfft_of_rfft_is_the_identity(n in 1u64..33, seed in any::<u64>()) {
        let mut s = seed | 1;
        let x: Vec<f64> = (0..n).map(|_| { s ^= s << 13; s ^= s >> 7; s ^= s << 17; (s % 1000) as f64 / 100.0 }).collect();
        let half = n / 2 + 1;
        let text = format!(
            "func.func @main(%a: tensor<{n}xf64>) -> tensor<{n}xf64> {{\n  %f = stablehlo.fft %a, type = RFFT, length = [{n}] : (tensor<{n}xf64>) -> tensor<{half}xcomplex<f64>>\n  %g = stablehlo.fft %f, type = IRFFT, length = [{n}] : (tensor<{half}xcomplex<f64>>) -> tensor<{n}xf64>\n  return %g : tensor<{n}xf64>\n}}\n"
        );
        let got = run(&text, &[Tensor::new(vec![n], Data::F64(x.clone())).unwrap()]).to_f64_vec();
        for (g, w) in got.iter().zip(&x) {
            prop_assert!((g - w).abs() < 1e-11, "{g} vs {w}");
        }
    }
}
