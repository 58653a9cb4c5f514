//! Sharding: Shardy text round trips, validation errors, placement and geometry.

use shardsim::sharding::TensorSharding;

#[test]
fn shardy_text_round_trips_byte_for_byte() {
    let text = r#"#sdy.sharding<@mesh, [{"x", ?}, {"y":(1)2}p1], replicated={"z"}>"#;
    assert_eq!(TensorSharding::parse(text).unwrap().to_string(), text);
}
