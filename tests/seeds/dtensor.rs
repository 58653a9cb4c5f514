//! TF DTensor `Mesh` (seed 002): every method of the document, the rules on
//! global and local ids, and the protobuf form checked against bytes written
//! by Python's protobuf package (`tests/fixtures/mesh/dtensor_proto.py`).

use proptest::prelude::*;
use shardsim::mesh::{DTensorMesh, DeviceSpec, Mesh, MeshAxis, MeshError, MeshProto};

use crate::common::fixture;
use crate::strategies::arb_mesh;

/// (mesh string, MeshProto bytes) from the fixture.
fn proto_fixture() -> Vec<(String, Vec<u8>)> {
    let text = std::fs::read_to_string(fixture("mesh/dtensor_proto.tsv")).unwrap();
    text.lines()
        .map(|l| {
            let (s, hex) = l.split_once('\t').unwrap();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (s.to_string(), bytes)
        })
        .collect()
}

/// The fixture mesh whose string starts with `name|`.
fn mesh(name: &str) -> DTensorMesh {
    let (s, _) = proto_fixture()
        .into_iter()
        .find(|(s, _)| s.starts_with(&format!("{name}|")))
        .unwrap();
    DTensorMesh::from_string(&s).unwrap()
}

fn dev(job: &str, task: u64, ty: &str, id: u64) -> String {
    format!("/job:{job}/replica:0/task:{task}/device:{ty}:{id}")
}

fn axes(pairs: &[(&str, u64)]) -> Vec<MeshAxis> {
    pairs
        .iter()
        .map(|(n, s)| MeshAxis {
            name: n.to_string(),
            size: *s,
        })
        .collect()
}

fn specs(job: &str, task: u64, ty: &str, ids: &[u64]) -> Vec<DeviceSpec> {
    ids.iter()
        .map(|&i| DeviceSpec::new(job, task, ty, i))
        .collect()
}

#[test]
fn dtensor_local_device_ids() {
    assert_eq!(mesh("mesh").local_device_ids(), &[2, 3]);
    assert_eq!(mesh("m").local_device_ids(), &[0, 1, 2, 3, 4, 5, 6, 7]);
    assert!(mesh("remote").local_device_ids().is_empty());
}

#[test]
fn dtensor_local_devices() {
    assert_eq!(
        mesh("mesh").local_devices(),
        vec![dev("worker", 1, "TPU", 0), dev("worker", 1, "TPU", 1)]
    );
    // The device order of a permuted mesh is the order of its local devices.
    let cpu = mesh("cpu");
    assert_eq!(cpu.local_devices()[0], dev("localhost", 0, "CPU", 2));
    assert_eq!(cpu.mesh().device_ids(), vec![2, 0, 1]);
}

#[test]
fn dtensor_global_devices() {
    assert_eq!(mesh("m").global_devices(), None);
    let remote = mesh("remote");
    let expect: Vec<String> = (0..4).map(|i| dev("worker", 0, "GPU", i)).collect();
    assert_eq!(remote.global_devices(), Some(expect));
}

#[test]
fn dtensor_num_local_devices() {
    assert_eq!(mesh("m").num_local_devices(), 8);
    assert_eq!(mesh("mesh").num_local_devices(), 2);
    assert_eq!(mesh("remote").num_local_devices(), 0);
    assert_eq!(mesh("big").num_local_devices(), 1);
}

#[test]
fn dtensor_local_device_locations() {
    // Client 1 holds ids 2 and 3 of x=2,y=2: (x=1,y=0) and (x=1,y=1).
    let loc = |x, y| vec![("x".to_string(), x), ("y".to_string(), y)];
    assert_eq!(
        mesh("mesh").local_device_locations(),
        vec![loc(1, 0), loc(1, 1)]
    );
    // Ids counted from the mesh's first id: id 5 of `second` (4,5) is x=1.
    assert_eq!(
        mesh("second").local_device_locations(),
        vec![vec![("x".to_string(), 0)], vec![("x".to_string(), 1)]]
    );
    assert_eq!(
        mesh("big").local_device_locations(),
        vec![vec![("x".to_string(), 299)]]
    );
}

#[test]
fn dtensor_min_global_device_id() {
    assert_eq!(mesh("m").min_global_device_id(), 0);
    assert_eq!(mesh("second").min_global_device_id(), 4);
}

#[test]
fn dtensor_host_mesh() {
    let gpu = mesh("mesh");
    let host = gpu.host_mesh();
    assert_eq!(host.device_type(), "CPU");
    assert_eq!(host.local_device_ids(), gpu.local_device_ids());
    assert_eq!(host.global_device_ids(), gpu.global_device_ids());
    assert_eq!(
        host.local_devices(),
        vec![dev("worker", 1, "CPU", 0), dev("worker", 1, "CPU", 1)]
    );
    assert_eq!(host.mesh().axes(), gpu.mesh().axes());
    assert_eq!(host.name(), "", "TF's host mesh is built without a name");
    let remote = mesh("remote").host_mesh();
    assert_eq!(
        remote.global_devices().unwrap()[3],
        dev("worker", 0, "CPU", 3)
    );
    // A CPU mesh is its own host mesh.
    assert_eq!(mesh("cpu").host_mesh(), mesh("cpu"));
}

#[test]
fn dtensor_is_remote() {
    assert!(mesh("remote").is_remote());
    assert!(!mesh("mesh").is_remote());
    assert!(!mesh("m").is_remote());
}

#[test]
fn dtensor_device_type() {
    assert_eq!(mesh("m").device_type(), "GPU");
    assert_eq!(mesh("mesh").device_type(), "TPU");
    assert_eq!(
        mesh("remote").device_type(),
        "GPU",
        "from the global devices"
    );
    assert_eq!(mesh("cpu").device_type(), "CPU");
    let mixed = format!(
        "m|x=2|0,1|0,1|{},{}",
        dev("a", 0, "GPU", 0),
        dev("a", 0, "TPU", 1)
    );
    let err = DTensorMesh::from_string(&mixed).unwrap_err();
    assert!(err.to_string().contains("several types"), "{err}");
}

#[test]
fn dtensor_mesh_name() {
    assert_eq!(mesh("m").name(), "m");
    assert_eq!(mesh("second").name(), "second");
    let m = Mesh::from_pairs(&[("x", 2)]).unwrap();
    assert_eq!(DTensorMesh::from_mesh(&m, "", "CPU").unwrap().name(), "");
}

#[test]
fn dtensor_getitem_dimension_by_name() {
    let m = mesh("m");
    assert_eq!(
        m.dim("model").unwrap(),
        MeshAxis {
            name: "model".into(),
            size: 4
        }
    );
    assert_eq!(m.dim("batch").unwrap().size, 2);
    let err = m.dim("seq").unwrap_err();
    assert!(matches!(err, MeshError::UnknownAxis(..)), "{err}");
}

#[test]
fn dtensor_as_proto_matches_python_protobuf() {
    for (text, bytes) in proto_fixture() {
        let m = DTensorMesh::from_string(&text).unwrap();
        assert_eq!(m.to_proto_bytes(), bytes, "{text}");
    }
}

#[test]
fn dtensor_from_proto_decodes_python_protobuf() {
    for (text, bytes) in proto_fixture() {
        let m = DTensorMesh::from_proto_bytes(&bytes).unwrap();
        assert_eq!(m.to_string(), text);
        assert_eq!(m, DTensorMesh::from_string(&text).unwrap());
    }
}

#[test]
fn dtensor_from_proto_rejects_bad_messages() {
    // Not protobuf at all, a truncated message, and a valid message breaking a rule.
    assert!(DTensorMesh::from_proto_bytes(&[0xff, 0xff, 0xff]).is_err());
    let (_, bytes) = &proto_fixture()[0];
    assert!(DTensorMesh::from_proto_bytes(&bytes[..bytes.len() - 3]).is_err());
    let mut p: MeshProto = mesh("mesh").as_proto();
    p.global_device_ids[2] = -1;
    let err = DTensorMesh::from_proto(&p).unwrap_err();
    assert!(err.to_string().contains("negative"), "{err}");
    p.global_device_ids[2] = 7;
    let err = DTensorMesh::from_proto(&p).unwrap_err();
    assert!(err.to_string().contains("sequentially"), "{err}");
}

#[test]
fn dtensor_from_string_keeps_local_ids_and_devices() {
    for (text, _) in proto_fixture() {
        let m = DTensorMesh::from_string(&text).unwrap();
        assert_eq!(m.to_string(), text, "to_string(from_string(s)) == s");
    }
    let m = mesh("mesh");
    assert_eq!(m.local_device_ids(), &[2, 3]);
    assert_eq!(m.local_devices()[1], dev("worker", 1, "TPU", 1));
    // TF's test form `name|dims|*TYPE`: every device local to task 0.
    let t = DTensorMesh::from_string("t|x=2,y=2|*TPU").unwrap();
    assert_eq!(t.local_device_ids(), &[0, 1, 2, 3]);
    assert_eq!(
        t.local_devices()[3],
        "/job:localhost/replica:0/task:0/device:TPU:3"
    );
}

#[test]
fn dtensor_global_ids_sequential_from_zero() {
    let d = |ids: &[u64]| specs("localhost", 0, "GPU", ids);
    let new = |global: Vec<u64>, local: Vec<u64>, devs, globals| {
        DTensorMesh::new("m", axes(&[("x", 4)]), global, local, devs, globals, false)
    };
    let err = new(vec![0, 2, 1, 3], vec![0], d(&[0]), vec![]).unwrap_err();
    assert!(err.to_string().contains("sequentially"), "{err}");
    let err = new(vec![4, 5, 6, 7], vec![4], d(&[0]), vec![]).unwrap_err();
    assert!(err.to_string().contains("from 0"), "{err}");
    // From another first id only as one of several meshes (global devices named).
    assert!(new(vec![4, 5, 6, 7], vec![4], d(&[0]), d(&[0, 1, 2, 3])).is_ok());
    let err = new(vec![0, 1, 2], vec![0], d(&[0]), vec![]).unwrap_err();
    assert!(
        matches!(
            err,
            MeshError::DeviceCount {
                expected: 4,
                found: 3
            }
        ),
        "{err}"
    );
    let err = new(vec![], vec![], d(&[]), vec![]).unwrap_err();
    assert!(err.to_string().contains("device"), "{err}");
}

#[test]
fn dtensor_local_ids_subset_distinct_one_per_device() {
    let d = |ids: &[u64]| specs("localhost", 0, "GPU", ids);
    let new = |local: Vec<u64>, devs| {
        DTensorMesh::new(
            "m",
            axes(&[("x", 4)]),
            vec![0, 1, 2, 3],
            local,
            devs,
            vec![],
            false,
        )
    };
    let err = new(vec![4], d(&[0])).unwrap_err();
    assert!(err.to_string().contains("not a global device id"), "{err}");
    let err = new(vec![1, 1], d(&[0, 1])).unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
    let err = new(vec![0, 1], d(&[0])).unwrap_err();
    assert!(err.to_string().contains("1:1"), "{err}");
    let err = new(vec![0, 1], d(&[3, 3])).unwrap_err();
    assert!(err.to_string().contains("listed twice"), "{err}");
    // One host CPU may stand for every local device (TF allows it).
    let cpu = specs("localhost", 0, "CPU", &[0, 0]);
    assert!(new(vec![0, 1], cpu).is_ok());
    for bad in [
        "/job:a/device:GPU:0",
        "job:a/task:0/device:GPU:0",
        "/job:a/task:0/device:GPU",
        "/job:a/task:x/device:GPU:0",
    ] {
        assert!(DeviceSpec::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn dtensor_clients_disjoint_and_covering() {
    let client = |task: u64, local: &[u64]| {
        DTensorMesh::new(
            "m",
            axes(&[("x", 2), ("y", 2)]),
            vec![0, 1, 2, 3],
            local.to_vec(),
            specs(
                "worker",
                task,
                "TPU",
                &(0..local.len() as u64).collect::<Vec<_>>(),
            ),
            vec![],
            false,
        )
        .unwrap()
    };
    assert!(DTensorMesh::check_clients(&[client(0, &[0, 1]), client(1, &[2, 3])]).is_ok());
    let err = DTensorMesh::check_clients(&[client(0, &[0, 1]), client(1, &[1, 2, 3])]).unwrap_err();
    assert!(
        err.to_string().contains("held by client 0 and client 1"),
        "{err}"
    );
    let err = DTensorMesh::check_clients(&[client(0, &[0, 1]), client(1, &[3])]).unwrap_err();
    assert!(
        err.to_string()
            .contains("global device id 2 is local to no client"),
        "{err}"
    );
    let other = DTensorMesh::new(
        "m",
        axes(&[("x", 4)]),
        vec![0, 1, 2, 3],
        vec![2, 3],
        specs("worker", 1, "TPU", &[0, 1]),
        vec![],
        false,
    )
    .unwrap();
    let err = DTensorMesh::check_clients(&[client(0, &[0, 1]), other]).unwrap_err();
    assert!(err.to_string().contains("another global mesh"), "{err}");
}

#[test]
fn dtensor_malformed_strings_are_errors() {
    for bad in [
        "m|x=2|0,1",
        "m|x=2|0,1|0,1",
        "m|x=two|0,1|0,1|/job:a/task:0/device:CPU:0,/job:a/task:0/device:CPU:1",
        "m|x=2|0,a|0|/job:a/task:0/device:CPU:0",
        "m|x=2|0,1|0|/job:a/task:0/device:CPU:0|/job:a/task:0/device:CPU:0,/job:a/task:0/device:CPU:1|xla",
        "m|x=2|*",
        "m|x=2|CPU",
        "m|x|0|0|/job:a/task:0/device:CPU:0",
    ] {
        assert!(DTensorMesh::from_string(bad).is_err(), "{bad}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any mesh split over clients by contiguous blocks: each client's string
    /// and proto round-trip, and the clients satisfy the covering rule.
    #[test]
    fn dtensor_client_split_round_trips(mesh in arb_mesh(), parts in 1usize..4) {
        let n = mesh.num_devices();
        let per = n.div_ceil(parts as u64).max(1);
        let mut clients = Vec::new();
        for (task, start) in (0..n).step_by(per as usize).enumerate() {
            let local: Vec<u64> = (start..(start + per).min(n)).collect();
            let devices = specs("worker", task as u64, "GPU", &(0..local.len() as u64).collect::<Vec<_>>());
            let c = DTensorMesh::new("m", mesh.axes().to_vec(), (0..n).collect(), local, devices, vec![], false).unwrap();
            prop_assert_eq!(&DTensorMesh::from_string(&c.to_string()).unwrap(), &c);
            prop_assert_eq!(&DTensorMesh::from_proto_bytes(&c.to_proto_bytes()).unwrap(), &c);
            clients.push(c);
        }
        prop_assert!(DTensorMesh::check_clients(&clients).is_ok());
        if clients.len() > 1 {
            prop_assert!(DTensorMesh::check_clients(&clients[1..]).is_err());
        }
    }
}

#[test]
fn dtensor_mesh_string_on_the_command_line() {
    let text = "mesh|x=2,y=2|0,1,2,3|2,3|/job:worker/replica:0/task:1/device:TPU:0,/job:worker/replica:0/task:1/device:TPU:1";
    let out = crate::common::shardsim(&["mesh", "--dtensor", text, "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["dtensor"], text, "the string is printed back as given");
    assert_eq!(
        v["dtensor_client"]["local_device_ids"],
        serde_json::json!([2, 3])
    );
    assert_eq!(v["dtensor_client"]["device_type"], "TPU");
    assert_eq!(v["dtensor_client"]["is_remote"], false);
    let out = crate::common::shardsim(&[
        "mesh",
        "--dtensor",
        "m|x=2|0,2|0|/job:a/task:0/device:CPU:0",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--dtensor: global_device_ids must increase sequentially"),
        "{err}"
    );
}
