//! TVM VirtualDevice (seed 003): the document's join/default examples, fully
//! (un)constrained, and the algebra the document implies (proptest).
//!
//! The document's second Join example, `Join((kDLCPU, -1, "llvm", ""),
//! (kInvalidDeviceType, 3, null, "local")) => null`, contradicts its own
//! definition ("the most constrained VirtualDevice which agrees with both"):
//! the first argument leaves the memory scope unconstrained, so
//! `(kDLCPU, 3, "llvm", "local")` agrees with both. TVM's implementation
//! (src/target/virtual_device.cc) joins field by field and returns that. We
//! follow the definition and the implementation; the "null" case the example
//! means to show (two different scopes) is tested with both scopes given.

use proptest::prelude::*;

use shardsim::plan::{DeviceType, Target, VirtualDevice};

fn vd(text: &str) -> VirtualDevice {
    text.parse().unwrap()
}

#[test]
fn seed_join_examples() {
    // Join((kDLCPU, -1, "llvm", ""), (kInvalidDeviceType, 3, null, "global")) => (kDLCPU, 3, "llvm", "global")
    assert_eq!(
        VirtualDevice::join(&vd("(cpu, ?, llvm, ?)"), &vd("(?, 3, ?, global)")),
        Some(vd("(cpu, 3, llvm, global)"))
    );
    // Two different memory scopes: no join possible.
    assert_eq!(
        VirtualDevice::join(&vd("(cpu, ?, llvm, global)"), &vd("(?, 3, ?, local)")),
        None
    );
    // The document's literal second example (see the module comment).
    assert_eq!(
        VirtualDevice::join(&vd("(cpu, ?, llvm, ?)"), &vd("(?, 3, ?, local)")),
        Some(vd("(cpu, 3, llvm, local)"))
    );
    // Different device types, ids or targets: no join.
    assert_eq!(
        VirtualDevice::join(&vd("(cpu, ?, ?, ?)"), &vd("(cuda, ?, ?, ?)")),
        None
    );
    assert_eq!(
        VirtualDevice::join(&vd("(?, 0, ?, ?)"), &vd("(?, 1, ?, ?)")),
        None
    );
    assert_eq!(
        VirtualDevice::join(&vd("(?, ?, llvm, ?)"), &vd("(?, ?, cuda, ?)")),
        None
    );
    // A target fixes the device type: a cuda target never joins a CPU device.
    assert_eq!(
        VirtualDevice::join(&vd("(cpu, ?, ?, ?)"), &vd("(?, ?, cuda, ?)")),
        None
    );
}

#[test]
fn seed_default_example() {
    // Default((kDLCPU, -1, "llvm", "local"), (kDLCPU, 3, null, "global")) => (kDLCPU, 3, "llvm", "local")
    assert_eq!(
        VirtualDevice::default(&vd("(cpu, ?, llvm, local)"), &vd("(cpu, 3, ?, global)")),
        vd("(cpu, 3, llvm, local)")
    );
    // The rhs target is only taken when it runs on the lhs's device type.
    assert_eq!(
        VirtualDevice::default(&vd("(cuda, ?, ?, ?)"), &vd("(cpu, 0, llvm, global)")),
        vd("(cuda, 0, ?, global)")
    );
}

#[test]
fn constrained_predicates_and_text() {
    let u = VirtualDevice::unconstrained();
    assert!(u.is_fully_unconstrained() && !u.is_fully_constrained());
    assert_eq!(u.to_string(), "(?, ?, ?, ?)");
    let full = vd("(cuda, 0, cuda, global)");
    assert!(full.is_fully_constrained() && !full.is_fully_unconstrained());
    assert_eq!(full.to_device(), Some((DeviceType::Cuda, 0)));
    // "if a target is given then the device_type must equal target->GetTargetDeviceType()"
    assert!(VirtualDevice::new(
        Some(DeviceType::Cpu),
        None,
        Some(Target::new("cuda").unwrap()),
        None
    )
    .is_err());
    assert_eq!(vd("(?, ?, llvm, ?)").device_type(), Some(DeviceType::Cpu));
    // An empty memory scope is unconstrained.
    assert!(VirtualDevice::new(None, None, None, Some(""))
        .unwrap()
        .is_fully_unconstrained());
    assert!("(cpu, x, ?, ?)".parse::<VirtualDevice>().is_err());
    assert!("(gpu, 0, ?, ?)".parse::<VirtualDevice>().is_err());
}

fn arb_vd() -> impl Strategy<Value = VirtualDevice> {
    (
        prop::option::of(prop::sample::select(vec![
            DeviceType::Cpu,
            DeviceType::Cuda,
        ])),
        prop::option::of(0u32..2),
        prop::option::of(prop::sample::select(vec!["llvm", "cuda"])),
        prop::option::of(prop::sample::select(vec!["global", "host", "local"])),
    )
        .prop_filter_map("target matches device type", |(d, id, t, s)| {
            VirtualDevice::new(d, id, t.map(|t| Target::new(t).unwrap()), s).ok()
        })
}

/// Field-wise agreement, written independently of the library: a join exists
/// exactly when no field is constrained differently on the two sides.
fn compatible(a: &VirtualDevice, b: &VirtualDevice) -> bool {
    fn ok<T: PartialEq>(x: Option<T>, y: Option<T>) -> bool {
        x.is_none() || y.is_none() || x == y
    }
    ok(a.device_type(), b.device_type())
        && ok(a.virtual_device_id(), b.virtual_device_id())
        && ok(a.target(), b.target())
        && ok(a.memory_scope(), b.memory_scope())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn join_is_a_semilattice(a in arb_vd(), b in arb_vd(), c in arb_vd()) {
        let j = |x: &VirtualDevice, y: &VirtualDevice| VirtualDevice::join(x, y);
        prop_assert_eq!(j(&a, &b), j(&b, &a));
        prop_assert_eq!(j(&a, &a), Some(a.clone()));
        prop_assert_eq!(j(&a, &VirtualDevice::unconstrained()), Some(a.clone()));
        let left = j(&a, &b).and_then(|ab| j(&ab, &c));
        let right = j(&b, &c).and_then(|bc| j(&a, &bc));
        prop_assert_eq!(left, right);
        prop_assert_eq!(j(&a, &b).is_some(), compatible(&a, &b));
        if let Some(ab) = j(&a, &b) {
            // Agrees with both and is at least as constrained as each.
            prop_assert_eq!(j(&ab, &a), Some(ab.clone()));
            prop_assert_eq!(j(&ab, &b), Some(ab.clone()));
        }
    }

    #[test]
    fn default_only_fills_unconstrained_parts(a in arb_vd(), b in arb_vd()) {
        let d = VirtualDevice::default(&a, &b);
        prop_assert_eq!(VirtualDevice::default(&a, &VirtualDevice::unconstrained()), a.clone());
        prop_assert_eq!(VirtualDevice::default(&VirtualDevice::unconstrained(), &b), b.clone());
        prop_assert_eq!(VirtualDevice::default(&a, &a), a.clone());
        // Keeps every part of lhs.
        prop_assert_eq!(VirtualDevice::join(&d, &a), Some(d.clone()));
        prop_assert_eq!(d.virtual_device_id(), a.virtual_device_id().or(b.virtual_device_id()));
        prop_assert_eq!(d.memory_scope(), a.memory_scope().or(b.memory_scope()));
        prop_assert_eq!(d.device_type(), a.device_type().or(b.device_type()));
        if a.is_fully_constrained() {
            prop_assert_eq!(d, a);
        }
    }
}
