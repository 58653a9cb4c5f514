//! Mesh: the seed documents' examples, text round trips, coordinates and device groups.

use proptest::prelude::*;
use shardsim::mesh::{AxisRef, DeviceIds, Mesh, MeshAxis};

use crate::strategies::{arb_mesh, assert_errors_at};

#[test]
fn seed_dtensor_unravel_index_3x2() {
    // TF DTensor's documented example: a 3x2 mesh.
    let mesh = Mesh::from_pairs(&[("x", 3), ("y", 2)]).unwrap();
    let u = mesh.unravel_index();
    let expect = [
        (0, 0, 0),
        (1, 0, 1),
        (2, 1, 0),
        (3, 1, 1),
        (4, 2, 0),
        (5, 2, 1),
    ];
    assert_eq!(u.len(), 6);
    for (dev, x, y) in expect {
        assert_eq!(u[&dev], vec![("x".to_string(), x), ("y".to_string(), y)]);
    }
}

#[test]
fn seed_dtensor_strides_abcd() {
    // "If the mesh shape is [a, b, c, d], the strides are [b*c*d, c*d, d, 1]".
    let mesh = Mesh::from_pairs(&[("a", 2), ("b", 3), ("c", 4), ("d", 5)]).unwrap();
    assert_eq!(mesh.strides(), &[60, 20, 5, 1]);
    assert_eq!(mesh.coords(59).unwrap(), vec![0, 2, 3, 4]);
    assert_eq!(mesh.coords(119).unwrap(), vec![1, 2, 3, 4]);
    assert!(mesh.contains_dim("c"));
    assert!(!mesh.contains_dim("e"));
    assert_eq!(mesh.dim_size("c").unwrap(), 4);
}

#[test]
fn seed_shardy_mesh_examples() {
    // The four examples of Shardy's MeshAttr documentation.
    let empty = Mesh::parse("<[]>").unwrap();
    assert_eq!(empty.num_devices(), 1);
    assert_eq!(empty.device_ids(), vec![0]);
    assert!(!empty.is_maximal());

    let maximal = Mesh::parse("<[], device_ids=[3]>").unwrap();
    assert!(maximal.is_maximal());
    assert_eq!(maximal.device_ids(), vec![3]);

    let ab = Mesh::parse(r#"<["a"=2, "b"=3]>"#).unwrap();
    assert_eq!(ab.device_ids(), (0..6).collect::<Vec<_>>());

    let ordered = Mesh::parse(r#"<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>"#).unwrap();
    assert_eq!(ordered.device_at(1), 2);
    assert_eq!(ordered.coords(2).unwrap(), vec![0, 1]);
    assert_eq!(ordered.coords(1).unwrap(), vec![1, 1]);
    for text in [
        "<[]>",
        "<[], device_ids=[3]>",
        r#"<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>"#,
    ] {
        assert_eq!(Mesh::parse(text).unwrap().to_string(), text);
    }
}

#[test]
fn seed_shardy_iota_device_ids_rejected() {
    let err = Mesh::parse(r#"<["a"=2, "b"=3], device_ids=[0, 1, 2, 3, 4, 5]>"#).unwrap_err();
    assert!(err.to_string().contains("must be omitted"), "{err}");
}

#[test]
fn seed_shardy_sub_axis_rule() {
    // A sub-axis (pre)size is valid when pre*size divides the axis size, size > 1,
    // and it is not the whole axis.
    let mesh = Mesh::from_pairs(&[("x", 8)]).unwrap();
    assert!(AxisRef::sub("x", 1, 2).validate(&mesh).is_ok());
    assert!(AxisRef::sub("x", 2, 4).validate(&mesh).is_ok());
    assert!(AxisRef::sub("x", 4, 2).validate(&mesh).is_ok());
    assert!(AxisRef::sub("x", 2, 3).validate(&mesh).is_err()); // 6 does not divide 8
    assert!(AxisRef::sub("x", 4, 4).validate(&mesh).is_err()); // 16 > 8
    assert!(AxisRef::sub("x", 1, 8).validate(&mesh).is_err()); // the whole axis
    assert!(AxisRef::sub("x", 2, 1).validate(&mesh).is_err()); // size 1
    assert!(AxisRef::sub("x", 1, 2).overlaps(&AxisRef::sub("x", 1, 4), &mesh));
    assert!(!AxisRef::sub("x", 1, 2).overlaps(&AxisRef::sub("x", 2, 4), &mesh));
}

#[test]
fn tvm_device_mesh_from_range_and_list() {
    let r = Mesh::tvm(
        &[2, 4],
        DeviceIds::Range {
            start: 0,
            stop: 8,
            step: 1,
        },
        &[],
    )
    .unwrap();
    assert_eq!(r.dim_names(), vec!["d0", "d1"]);
    assert_eq!(r.to_tvm_text(), "R.device_mesh((2, 4), I.Range(0, 8))");
    let l = Mesh::tvm(&[2], DeviceIds::List(vec![1, 0]), &["x".into()]).unwrap();
    assert_eq!(l.to_tvm_text(), "R.device_mesh((2,), [1, 0])");
    // A stepped Range is TVM's too (any ids, not only 0..n); a Range whose
    // length is not the mesh size is an error.
    let stepped = Mesh::tvm(
        &[4],
        DeviceIds::Range {
            start: 0,
            stop: 8,
            step: 2,
        },
        &[],
    )
    .unwrap();
    assert_eq!(stepped.device_ids(), vec![0, 2, 4, 6]);
    assert!(Mesh::tvm(
        &[4],
        DeviceIds::Range {
            start: 0,
            stop: 8,
            step: 3
        },
        &[]
    )
    .is_err());
}

#[test]
fn device_groups_along_axes_and_sub_axes() {
    let mesh = Mesh::parse(r#"<["x"=2, "y"=4]>"#).unwrap();
    assert_eq!(
        mesh.device_groups(&[AxisRef::full("y")]).unwrap(),
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
    );
    assert_eq!(
        mesh.device_groups(&[AxisRef::full("x")]).unwrap(),
        vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
    // "y":(1)2 is the major half of y: positions 0,1 vs 2,3 along y differ in it.
    assert_eq!(
        mesh.device_groups(&[AxisRef::sub("y", 1, 2)]).unwrap(),
        vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]
    );
    assert_eq!(
        mesh.device_groups(&[AxisRef::sub("y", 2, 2)]).unwrap(),
        vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
    );
    // The order of the axes decides the order within a group.
    assert_eq!(
        mesh.device_groups(&[AxisRef::full("y"), AxisRef::full("x")])
            .unwrap(),
        vec![vec![0, 4, 1, 5, 2, 6, 3, 7]]
    );
    assert_eq!(mesh.device_groups(&[]).unwrap().len(), 8);
    assert!(mesh
        .device_groups(&[AxisRef::full("y"), AxisRef::sub("y", 1, 2)])
        .is_err());
    // Explicit device order: groups hold device ids.
    let perm = Mesh::parse(r#"<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>"#).unwrap();
    assert_eq!(
        perm.device_groups(&[AxisRef::full("b")]).unwrap(),
        vec![vec![0, 2], vec![4, 1], vec![3, 5]]
    );
}

#[test]
fn dtensor_string_round_trip() {
    let mesh = Mesh::parse(r#"<["batch"=2, "model"=4]>"#).unwrap();
    let s = mesh.to_dtensor_string("m", "GPU");
    assert!(s.starts_with("m|batch=2,model=4|0,1,2,3,4,5,6,7|0,1,2,3,4,5,6,7|/job:localhost/replica:0/task:0/device:GPU:0,"));
    let back = Mesh::from_dtensor_string(&s).unwrap();
    assert_eq!(back.mesh(), &mesh);
    assert_eq!(back.name(), "m");
    assert_eq!(back.device_type(), "GPU");
    assert!(Mesh::from_dtensor_string("m|x=2|0,1").is_err());
    assert!(Mesh::from_dtensor_string("m|x=two|0,1|0,1|d").is_err());
}

/// Malformed mesh texts: (text, where the error points, what it says).
const BAD_MESHES: &[(&str, &str, &str)] = &[
    (r#"<["x"=2, "x"=4]>"#, r#""x"=4"#, "duplicate axis"),
    (r#"<["x"=0]>"#, "0]", "at least 1"),
    (
        r#"<["x"=2, "y"=2], device_ids=[0, 1, 2, 3]>"#,
        "device_ids",
        "must be omitted",
    ),
    (
        r#"<["x"=2], device_ids=[0, 0]>"#,
        "device_ids",
        "permutation",
    ),
    (
        r#"<["x"=2], device_ids=[0, 1, 2]>"#,
        "device_ids",
        "device_ids lists 3",
    ),
    (
        r#"<[], device_ids=[1, 2]>"#,
        "device_ids",
        "exactly one device id",
    ),
    (r#"<["x"=2]"#, "", "'>'"),
    (r#"<["x"]>"#, "]>", "'='"),
    (r#"<[x=2]>"#, "x=2", "axis name in quotes"),
    (r#"<["x"=2] devices=[1]>"#, "devices", "'>'"),
    (r#"<["x"=-2]>"#, "-2", "non-negative integer"),
];

#[test]
fn malformed_meshes_name_problem_and_column() {
    assert_errors_at(BAD_MESHES, |t| Mesh::parse(t).map(|_| ()));
}

#[test]
fn bad_mesh_construction_is_an_error() {
    let axes = vec![MeshAxis {
        name: "x".into(),
        size: 0,
    }];
    assert!(Mesh::new(axes).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn mesh_text_round_trips(mesh in arb_mesh()) {
        let text = mesh.to_string();
        prop_assert_eq!(Mesh::parse(&text).unwrap(), mesh.clone());
        let dt = Mesh::from_dtensor_string(&mesh.to_dtensor_string("m", "CPU")).unwrap();
        prop_assert_eq!(dt.mesh(), &mesh);
    }

    #[test]
    fn coords_agree_with_strides_formula(mesh in arb_mesh()) {
        // (position // strides) % shape, with the device at each position.
        let shape = mesh.shape();
        let unravel = mesh.unravel_index();
        for pos in 0..mesh.num_devices() {
            let device = mesh.device_at(pos);
            let expect: Vec<u64> = mesh.strides().iter().zip(&shape).map(|(s, n)| (pos / s) % n).collect();
            prop_assert_eq!(&mesh.coords(device).unwrap(), &expect);
            let named: Vec<u64> = unravel[&device].iter().map(|(_, c)| *c).collect();
            prop_assert_eq!(named, expect);
        }
    }

    #[test]
    fn device_groups_partition_the_mesh(mesh in arb_mesh(), pick in proptest::collection::vec(any::<bool>(), 4)) {
        let axes: Vec<AxisRef> = mesh.axes().iter().zip(&pick).filter(|(_, p)| **p).map(|(a, _)| AxisRef::full(a.name.clone())).collect();
        let groups = mesh.device_groups(&axes).unwrap();
        let group_size: u64 = axes.iter().map(|a| a.size(&mesh).unwrap()).product();
        let mut seen: Vec<u64> = groups.iter().flatten().copied().collect();
        seen.sort_unstable();
        let mut all = mesh.device_ids();
        all.sort_unstable();
        prop_assert_eq!(seen, all);
        for g in &groups {
            prop_assert_eq!(g.len() as u64, group_size);
            // Members differ only along the group's axes.
            let c0 = mesh.coords(g[0]).unwrap();
            for d in g {
                let c = mesh.coords(*d).unwrap();
                for (i, a) in mesh.axes().iter().enumerate() {
                    if !axes.iter().any(|r| r.name == a.name) {
                        prop_assert_eq!(c[i], c0[i]);
                    }
                }
                prop_assert_eq!(mesh.rank_in_group(*d, &axes).unwrap() as usize, g.iter().position(|x| x == d).unwrap());
            }
        }
    }
}
