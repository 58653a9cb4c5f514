//! Bad topology files: each fixture under tests/fixtures/topology/bad/ says in
//! its first line which line, field and message its error must give.

use shardsim::topology::{self, TopologyError};

use crate::common::fixture;

struct Expect {
    line: usize,
    field: String,
    message: String,
}

fn expectation(text: &str) -> Expect {
    let head = text
        .lines()
        .next()
        .unwrap()
        .strip_prefix("# expect: ")
        .expect("first line is # expect:");
    let (line, rest) = head.split_once(' ').unwrap();
    let (field, message) = rest.split_once(' ').unwrap();
    Expect {
        line: line.strip_prefix("line=").unwrap().parse().unwrap(),
        field: field.strip_prefix("field=").unwrap().to_string(),
        message: message.strip_prefix("message=").unwrap().to_string(),
    }
}

#[test]
fn bad_files_name_file_line_and_field() {
    let dir = fixture("topology/bad");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 8, "fixtures present");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let want = expectation(&text);
        let err = topology::load(path.to_str().unwrap(), &[]).expect_err(path.to_str().unwrap());
        let shown = err.to_string();
        match err {
            TopologyError::File {
                file,
                line,
                col,
                field,
                message,
            } => {
                assert_eq!(file, path.to_str().unwrap());
                assert_eq!(line, Some(want.line), "{shown}");
                assert!(col.is_some(), "{shown}");
                assert_eq!(field, want.field, "{shown}");
                assert!(message.contains(&want.message), "{shown}");
                assert!(
                    shown.starts_with(&format!("{}:{}:", path.display(), want.line)),
                    "{shown}"
                );
            }
            other => panic!("{}: expected a file error, got {other}", path.display()),
        }
    }
}

#[test]
fn every_preset_file_parses_and_is_version_1() {
    for (name, text) in topology::PRESETS {
        let f = topology::parse_file_text(text, name).unwrap();
        assert_eq!(f.format, topology::FORMAT_VERSION);
        assert_eq!(&f.name, name);
        assert!(!f.sources.is_empty(), "{name}: figures cite their sources");
    }
}

#[test]
fn a_copied_preset_loads_from_disk_like_the_preset() {
    let dir = std::env::temp_dir().join(format!("shardsim-topology-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("my-dgx.toml");
    std::fs::write(&path, topology::preset_text("dgx-h100").unwrap()).unwrap();
    let from_file = topology::load(path.to_str().unwrap(), &[]).unwrap();
    let preset = topology::load("dgx-h100", &[]).unwrap();
    assert_eq!(from_file.links(), preset.links());
    assert_eq!(from_file.components(), preset.components());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_overrides_name_the_key() {
    let cases = [
        ("nvlink.bandwith=900GB/s", "unknown field `bandwith`"),
        ("nvlink.bandwidth=900GBs", "unknown unit 'GBs'"),
        ("nvlink.bandwidth=-1GB/s", "must not be negative"),
        ("nodes=0", "nodes must be at least 1"),
        ("name.x=1", "not a section"),
        ("novalue", "expected key=value"),
    ];
    for (text, want) in cases {
        let err = topology::Override::parse(text)
            .and_then(|o| topology::load("dgx-h100", &[o]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--set "), "{err}");
        assert!(err.contains(want), "{text}: {err}");
    }
}

#[test]
fn explicit_layout_builds_what_it_lists() {
    let path = fixture("topology/good/two_boxes.toml");
    let t = topology::load(path.to_str().unwrap(), &[]).unwrap();
    assert_eq!(t.num_devices(), 4);
    assert_eq!(
        t.links().len(),
        10,
        "five physical links, two directions each"
    );
    let half: Vec<_> = t.links().iter().filter(|l| !l.full_duplex).collect();
    assert_eq!(half.len(), 2);
    assert_eq!(half[0].reverse, half[1].id);
    assert_eq!(half[0].bandwidth.0, 12_500_000_000);
    // a1 -> b1: PCIe to the switch, the network link, then through b0 (which forwards).
    let (a1, b1) = (t.by_name("a1").unwrap(), t.by_name("b1").unwrap());
    let names: Vec<&str> = t
        .route(a1, b1, 0)
        .unwrap()
        .iter()
        .map(|&l| t.component(t.link(l).to).name.as_str())
        .collect();
    assert_eq!(names, ["sa", "b0", "b1"]);
    // The way back is the same path reversed.
    let back: Vec<&str> = t
        .route(b1, a1, 0)
        .unwrap()
        .iter()
        .map(|&l| t.component(t.link(l).to).name.as_str())
        .collect();
    assert_eq!(back, ["b0", "sa", "a1"]);
}
