//! The `shardsim` binary: the README's command works, user errors exit 2 with one line.

use crate::common::shardsim;

#[test]
fn readme_mesh_command_runs() {
    let out = shardsim(&["mesh", "--shape", "2,4", "--names", "x,y"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(r#"mesh (Shardy):     <["x"=2, "y"=4]>"#),
        "{text}"
    );
    assert!(text.contains("device    5  pos    5  x=1 y=1"), "{text}");
}

#[test]
fn mesh_json_has_local_shapes() {
    let out = shardsim(&[
        "mesh",
        "--shape",
        "2,4",
        "--names",
        "x,y",
        "--sharding",
        r#"<@mesh, [{"x"}, {"y"}]>"#,
        "--tensor",
        "16x32",
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["devices"][5]["local_shape"], serde_json::json!([8, 8]));
    assert_eq!(
        v["devices"][5]["ranges"],
        serde_json::json!([[8, 16], [8, 16]])
    );
    assert_eq!(v["sharding"]["placement"], "S[0], S[1]");
}

#[test]
fn user_errors_exit_2_with_one_line() {
    for args in [
        vec!["mesh", "--shape", "2,x"],
        vec!["mesh", "--shape", "2,4", "--names", "x"],
        vec![
            "mesh",
            "--shape",
            "2,2",
            "--names",
            "x,y",
            "--device-ids",
            "0,0,1,2",
        ],
        vec![
            "mesh",
            "--shape",
            "2,4",
            "--names",
            "x,y",
            "--sharding",
            r#"<@mesh, [{"w"}]>"#,
            "--tensor",
            "8",
        ],
        vec![
            "mesh",
            "--shape",
            "2,4",
            "--names",
            "x,y",
            "--sharding",
            r#"<@mesh, [{"x"}]>"#,
            "--tensor",
            "8x8",
        ],
        vec!["mesh", "--bogus"],
    ] {
        let out = shardsim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        if args[1] != "--bogus" {
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            assert!(err.starts_with("error: "), "{err}");
        }
    }
}
