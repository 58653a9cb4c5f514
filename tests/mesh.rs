//! Mesh: the seed documents' examples, text round trips and device groups.

use shardsim::mesh::{AxisRef, Mesh};

#[test]
fn dtensor_unravel_index_3x2_example() {
    // TF DTensor's documented example: a 3x2 mesh.
    let mesh = Mesh::from_pairs(&[("x", 3), ("y", 2)]).unwrap();
    let u = mesh.unravel_index();
    let expect = [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1), (4, 2, 0), (5, 2, 1)];
    for (dev, x, y) in expect {
        assert_eq!(u[&dev], vec![("x".to_string(), x), ("y".to_string(), y)]);
    }
}

#[test]
fn device_groups_along_y_and_x() {
    let mesh = Mesh::parse(r#"<["x"=2, "y"=4]>"#).unwrap();
    assert_eq!(
        mesh.device_groups(&[AxisRef::full("y")]).unwrap(),
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
    );
    assert_eq!(
        mesh.device_groups(&[AxisRef::full("x")]).unwrap(),
        vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
}
