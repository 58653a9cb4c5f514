//! Shardy's verifier rules, one bad program each in
//! `tests/fixtures/shardy_verify/`: the first line names the rule, the second
//! the one-line error (`line:col: message`) the program must give.

use shardsim::ir::mlir::parse_and_verify;

#[test]
fn every_shardy_verifier_rule_gives_its_located_error() {
    let dir = crate::common::fixture("shardy_verify");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "mlir"))
        .collect();
    files.sort();
    assert!(files.len() >= 40, "only {} verifier fixtures", files.len());
    let mut wrong = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let mut lines = text.lines();
        let rule = lines
            .next()
            .and_then(|l| l.strip_prefix("// rule: "))
            .unwrap();
        let want = lines
            .next()
            .and_then(|l| l.strip_prefix("// error: "))
            .unwrap();
        let name = path.file_name().unwrap().to_string_lossy();
        match parse_and_verify(&text) {
            Ok(_) => wrong.push(format!("{name} ({rule}): accepted")),
            Err(e) if e.to_string() != want => {
                wrong.push(format!("{name} ({rule}):\n  want {want}\n  got  {e}"))
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A `*` in a sharding rule is a null mapping (a dim mapped to no factor):
/// it parses, prints back as `*`, and a size-1 dim may have it.
#[test]
fn null_factor_mapping_round_trips() {
    let text = "module @ok {\n  sdy.mesh @m = <[\"a\"=2]>\n  func.func @main(%x: tensor<8x1xf32>) -> tensor<8xf32> {\n    %0 = stablehlo.reshape %x {sdy.sharding_rule = #sdy.op_sharding_rule<([i, *])->([i]) {i=8}>} : (tensor<8x1xf32>) -> tensor<8xf32>\n    return %0 : tensor<8xf32>\n  }\n}\n";
    let m = parse_and_verify(text).unwrap();
    assert_eq!(shardsim::ir::mlir::print_module(&m), text);
    let bad = text.replace("[i, *]", "[*, *]");
    let e = parse_and_verify(&bad).unwrap_err().to_string();
    assert!(
        e.contains("factors multiply to 1, the dim has size 8"),
        "{e}"
    );
}

/// Shardy's documented rule (its `sdy.mesh` op description and the seed
/// document): all meshes of a module have one device count, meshes of a
/// single device aside. Shardy's C++ verifier does not check it, and its
/// propagation lit files declare 3- and 6-device (or 4- and 8-device) meshes
/// side by side; shardsim keeps the documented rule, and its own fixtures of
/// those lit cases use different meshes of one device count
/// (`tests/fixtures/shardy_lit/basic_propagation.mlir`, `@a8` next to `@xy`).
#[test]
fn meshes_share_one_device_count_single_device_ones_aside() {
    let module = |meshes: &[&str]| {
        let decls: String = meshes
            .iter()
            .enumerate()
            .map(|(i, m)| format!("  sdy.mesh @m{i} = {m}\n"))
            .collect();
        format!("module @m {{\n{decls}  func.func @main(%x: tensor<6xf32>) -> tensor<6xf32> {{\n    return %x : tensor<6xf32>\n  }}\n}}\n")
    };
    // One count (6) under different axes, with a maximal mesh, the empty mesh
    // and a mesh of size-1 axes: accepted.
    let ok = module(&[
        r#"<["a"=6]>"#,
        r#"<["b"=2, "c"=3]>"#,
        r#"<[], device_ids=[5]>"#,
        "<[]>",
        r#"<["p"=1]>"#,
        r#"<["d"=3, "e"=2], device_ids=[5, 4, 3, 2, 1, 0]>"#,
    ]);
    parse_and_verify(&ok).unwrap();
    // The lit files' 3 and 6 devices: refused at the second mesh, located.
    let bad = module(&[r#"<[], device_ids=[0]>"#, r#"<["a"=3]>"#, r#"<["a"=6]>"#]);
    let e = parse_and_verify(&bad).unwrap_err().to_string();
    assert_eq!(
        e,
        "4:13: expected 3 devices like @m1 (all meshes of a module have one device count), found @m2 with 6 devices"
    );
}
