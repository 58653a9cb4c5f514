//! TVM (seeds 000 and 003): `DeviceMesh` over any device ids and `Range`s,
//! `R.device_mesh(...)` read back, `DTensorStructInfo` from a `Placement`,
//! VirtualDevice targets with attributes and DLPack's device types, the
//! result-device rule and PlanDevices across functions.

use shardsim::base::{DType, TensorType};
use shardsim::ir::mlir::parse_and_verify;
use shardsim::ir::OpKind;
use shardsim::mesh::{DeviceIds, Mesh};
use shardsim::plan::{plan_func, plan_module, DeviceType, PlanError, Target, VirtualDevice};
use shardsim::sharding::{DTensor, Placement, PlacementError};

use crate::common::fixture;

fn vd(text: &str) -> VirtualDevice {
    text.parse().unwrap()
}

#[test]
fn tvm_device_mesh_with_any_device_ids() {
    // The second half of a 16-device machine, in a custom order.
    let ids = vec![8, 10, 12, 14, 9, 11, 13, 15];
    let m = Mesh::tvm(&[2, 4], DeviceIds::List(ids.clone()), &[]).unwrap();
    assert_eq!(m.device_ids(), ids);
    assert_eq!(m.coords(13).unwrap(), vec![1, 2]);
    assert_eq!(m.position_of(9).unwrap(), 4);
    assert!(m.coords(0).is_err(), "device 0 is not in this mesh");
    assert_eq!(
        m.device_groups(&[shardsim::mesh::AxisRef::full("d0")])
            .unwrap(),
        vec![vec![8, 9], vec![10, 11], vec![12, 13], vec![14, 15]]
    );
    let err = Mesh::tvm(&[2], DeviceIds::List(vec![5, 5]), &[]).unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
    let err = Mesh::tvm(&[4], DeviceIds::List(vec![5, 6]), &[]).unwrap_err();
    assert!(err.to_string().contains("lists 2"), "{err}");
}

#[test]
fn tvm_device_mesh_range_start_stop_step() {
    let r = |start, stop, step| DeviceIds::Range { start, stop, step };
    let m = Mesh::tvm(&[2, 2], r(4, 12, 2), &[]).unwrap();
    assert_eq!(m.device_ids(), vec![4, 6, 8, 10]);
    let m = Mesh::tvm(&[4], r(4, 8, 1), &[]).unwrap();
    assert_eq!(m.device_ids(), vec![4, 5, 6, 7]);
    // 0..8 step 3 has 3 ids: not a 4-device mesh; empty and zero-step ranges.
    assert!(Mesh::tvm(&[4], r(0, 8, 3), &[]).is_err());
    assert!(Mesh::tvm(&[1], r(3, 3, 1), &[]).is_err());
    assert!(Mesh::tvm(&[1], r(0, 3, 0), &[]).is_err());
}

#[test]
fn tvm_device_mesh_text_read_back() {
    let cases = [
        "R.device_mesh((2, 4), I.Range(0, 8))",
        "R.device_mesh((4,), I.Range(4, 8))",
        "R.device_mesh((2,), [1, 0])",
        "R.device_mesh((2, 2), [8, 12, 10, 14])",
    ];
    for text in cases {
        let m = Mesh::from_tvm_text(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(m.to_tvm_text(), text);
    }
    // A stepped Range reads back as its ids (TVM prints no step).
    let m = Mesh::from_tvm_text("R.device_mesh((2, 2), I.Range(4, 12, 2))").unwrap();
    assert_eq!(m.to_tvm_text(), "R.device_mesh((2, 2), [4, 6, 8, 10])");
    for (bad, col) in [
        ("R.device_mesh((2, 4), I.Range(0, 4))", 23),
        ("R.device_mesh((2, 4) I.Range(0, 8))", 22),
        ("R.device_mesh((2,), [1, 1])", 21),
        ("R.device_mesh((2,), [0, 1]) x", 29),
    ] {
        let err = Mesh::from_tvm_text(bad).unwrap_err();
        assert_eq!((err.line, err.col), (1, col), "{bad}: {err}");
    }
}

#[test]
fn tvm_dtensor_struct_info_from_placement() {
    // DTensorStructInfo(Tensor((16, 32), "float32"), mesh (2, 4), "S[1]S[0]").
    let mesh = Mesh::tvm(&[2, 4], DeviceIds::List(vec![7, 6, 5, 4, 3, 2, 1, 0]), &[]).unwrap();
    let ty = TensorType::new(vec![16, 32], DType::F32);
    let p = Placement::from_text("S[1]S[0]").unwrap();
    let d = DTensor::from_placement(ty.clone(), mesh.clone(), &p).unwrap();
    assert_eq!(d.placement().unwrap(), p);
    let layout = d.layout();
    assert_eq!(layout.shards, vec![4, 2]);
    assert_eq!(layout.local_shape, vec![4, 16]);
    // Device 2 sits at position 5 = (d0=1, d1=1): rows 4..8, columns 16..32.
    let shard = layout.device_shard(mesh.position_of(2).unwrap());
    assert_eq!(shard.device, 2);
    assert_eq!(shard.ranges, vec![(4, 8), (16, 32)]);
    // Replicated along one mesh dim.
    let r = DTensor::from_placement(
        ty.clone(),
        mesh.clone(),
        &Placement::from_text("R, S[0]").unwrap(),
    )
    .unwrap();
    assert_eq!(r.layout().shards, vec![4, 1]);
    // Wrong placements are errors.
    let err = DTensor::from_placement(
        ty.clone(),
        mesh.clone(),
        &Placement::from_text("S[2]R").unwrap(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            shardsim::sharding::DTensorError::Placement(PlacementError::DimOutOfRange {
                dim: 2,
                rank: 2
            })
        ),
        "{err}"
    );
    assert!(DTensor::from_placement(ty, mesh, &Placement::from_text("R").unwrap()).is_err());
}

#[test]
fn tvm_virtual_device_target_with_attributes() {
    let t = Target::new("cuda -arch=sm_80 -max_threads_per_block=1024").unwrap();
    assert_eq!(t.device_type, DeviceType::Cuda);
    assert_eq!(t.attr("arch"), Some("sm_80"));
    assert_eq!(
        t.to_string(),
        "cuda -arch=sm_80 -max_threads_per_block=1024"
    );
    let a = vd("(?, 0, cuda -arch=sm_80, global)");
    assert_eq!(
        a.device_type(),
        Some(DeviceType::Cuda),
        "the target gives the type"
    );
    assert_eq!(a.to_string(), "(cuda, 0, cuda -arch=sm_80, global)");
    assert_eq!(a.to_string().parse::<VirtualDevice>().unwrap(), a);
    // Targets differing in an attribute do not join; the same target does.
    let sm90 = vd("(cuda, ?, cuda -arch=sm_90, ?)");
    assert_eq!(VirtualDevice::join(&a, &sm90), None);
    let same = vd("(?, ?, cuda -arch=sm_80, ?)");
    assert_eq!(VirtualDevice::join(&a, &same), Some(a.clone()));
    for bad in [
        "cuda arch=sm_80",
        "cuda -arch=a -arch=b",
        "cuda -=x",
        "fpga",
    ] {
        assert!(Target::new(bad).is_err(), "{bad}");
    }
    let err = "(cpu, 0, cuda -arch=sm_80, global)"
        .parse::<VirtualDevice>()
        .unwrap_err();
    assert!(matches!(err, PlanError::TargetMismatch { .. }), "{err}");
}

#[test]
fn tvm_virtual_device_types_beyond_four() {
    // DLPack's numbering, and a target kind for each type it has.
    let codes: Vec<(&str, Option<u32>)> = DeviceType::ALL
        .iter()
        .map(|t| (t.name(), t.dlpack_code()))
        .collect();
    for (name, code) in [
        ("cpu", 1),
        ("cuda", 2),
        ("cuda_host", 3),
        ("opencl", 4),
        ("vulkan", 7),
        ("metal", 8),
        ("vpi", 9),
        ("rocm", 10),
        ("rocm_host", 11),
        ("ext_dev", 12),
        ("cuda_managed", 13),
        ("oneapi", 14),
        ("webgpu", 15),
        ("hexagon", 16),
        ("maia", 17),
    ] {
        assert!(codes.contains(&(name, Some(code))), "{name}");
        let v = vd(&format!("({name}, 1, ?, global)"));
        assert_eq!(v.device_type().unwrap().name(), name);
    }
    for (kind, ty) in [
        ("opencl", "opencl"),
        ("vulkan", "vulkan"),
        ("metal", "metal"),
        ("webgpu", "webgpu"),
        ("hexagon", "hexagon"),
        ("nvptx", "cuda"),
        ("llvm -mcpu=skylake", "cpu"),
    ] {
        assert_eq!(Target::new(kind).unwrap().device_type.name(), ty, "{kind}");
    }
    assert!("(npu, 0, ?, ?)".parse::<VirtualDevice>().is_err());
}

fn calls_module() -> shardsim::ir::Module {
    let text = std::fs::read_to_string(fixture("plan/calls.mlir")).unwrap();
    parse_and_verify(&text).unwrap()
}

#[test]
fn tvm_result_device_rule_body_runs_on_the_result_device() {
    // "if a function returns its result on a particular (virtual) device then
    // the function body is also executed on that device": @main returns on
    // (cuda, 0, cuda -arch=sm_80, global) although the default is vulkan, so
    // its add runs there and only the cpu-pinned %b is copied.
    let module = calls_module();
    let default = vd("(vulkan, 0, vulkan, global)");
    let sm80 = vd("(cuda, 0, cuda -arch=sm_80, global)");
    let planned = plan_func(module.func("main").unwrap(), &default).unwrap();
    let copies: Vec<String> = planned
        .copies
        .iter()
        .map(|(v, from, to)| format!("{v} {from} -> {to}"))
        .collect();
    assert_eq!(copies, vec![format!("%b (cpu, 0, llvm, global) -> {sm80}")]);
    let f = &planned.func;
    let add = f
        .body
        .iter()
        .map(|&o| f.op(o))
        .find(|o| o.kind.name() == "stablehlo.add")
        .unwrap();
    let add_at = f.values.iter().position(|v| v.name == "%1").unwrap();
    assert_eq!(planned.value_devices[add_at], Some(sm80.clone()));
    assert_eq!(f.value(add.operands[1]).name, "%b_global");
    // A memory kind on a result is storage instead: computed where the body runs, then copied.
    let text = std::fs::read_to_string(fixture("plan/offload.mlir")).unwrap();
    let off = parse_and_verify(&text).unwrap();
    let p = plan_func(off.entry().unwrap(), &vd("(cuda, 0, cuda, global)")).unwrap();
    assert!(p
        .copies
        .iter()
        .any(|(v, _, to)| v == "%2" && to.memory_scope() == Some("host")));
}

#[test]
fn tvm_plan_devices_across_functions() {
    let module = calls_module();
    let default = vd("(vulkan, 0, vulkan, global)");
    let sm80 = vd("(cuda, 0, cuda -arch=sm_80, global)");
    let planned = plan_module(&module, &default).unwrap();
    // @scale is called where @main's body runs: its parameter, multiply and
    // result are on sm_80 (not the vulkan default), with no copies.
    let scale = &planned[module.funcs.iter().position(|f| f.name == "scale").unwrap()];
    assert!(scale.copies.is_empty(), "{:?}", scale.copies);
    // (The return op itself reads its pinned operand and computes nothing.)
    let (ret, body) = scale.plan.op_devices.split_last().unwrap();
    assert!(
        body.iter().all(|d| *d == sm80),
        "{:?}",
        scale.plan.op_devices
    );
    assert_eq!(ret, &default);
    let x = module.func("scale").unwrap().args[0].0 as usize;
    assert_eq!(scale.value_devices[x], Some(sm80.clone()));
    // Planned alone, @scale would take the default.
    let alone = plan_func(module.func("scale").unwrap(), &default).unwrap();
    assert!(alone.plan.op_devices.iter().all(|d| *d == default));
    let main = &planned[0];
    assert_eq!(main.copies.len(), 1);
    assert!(main
        .func
        .ops
        .iter()
        .any(|o| matches!(o.kind, OpKind::Call { .. })));
}

#[test]
fn tvm_plan_devices_call_sites_that_disagree_are_a_conflict() {
    let text = r#"module {
  func.func @main(%a: tensor<4xf32> {shardsim.virtual_device = "(cuda, 0, cuda, global)"}, %b: tensor<4xf32> {shardsim.virtual_device = "(cpu, 0, llvm, global)"}) -> (tensor<4xf32>, tensor<4xf32>) {
    %0 = func.call @scale(%a) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = func.call @scale(%b) : (tensor<4xf32>) -> tensor<4xf32>
    return %0, %1 : tensor<4xf32>, tensor<4xf32>
  }
  func.func private @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.multiply %x, %x : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"#;
    let module = parse_and_verify(text).unwrap();
    let err = plan_module(&module, &vd("(cuda, 0, cuda, global)")).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, PlanError::Conflict { .. }), "{msg}");
    assert!(msg.contains("@scale value `%x`"), "{msg}");
    assert!(msg.contains("@main call of @scale operand 0"), "{msg}");
    assert!(
        msg.contains("(cpu, 0, llvm, global)") && msg.contains("(cuda, 0, cuda, global)"),
        "{msg}"
    );
}

#[test]
fn tvm_device_mesh_text_on_the_command_line() {
    let out =
        crate::common::shardsim(&["mesh", "--tvm", "R.device_mesh((2, 2), I.Range(4, 12, 2))"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("mesh (TVM):        R.device_mesh((2, 2), [4, 6, 8, 10])"),
        "{text}"
    );
    assert!(
        text.contains("(none: Shardy's device ids are a permutation of 0..4)"),
        "{text}"
    );
    assert!(text.contains("device   10  pos    3  d0=1 d1=1"), "{text}");
    let out = crate::common::shardsim(&["mesh", "--tvm", "R.device_mesh((2,), [1])"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: --tvm: 1:21: "), "{err}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any distinct ids, in any order, print and read back as the same mesh.
    #[test]
    fn tvm_device_mesh_text_round_trips(
        shape in proptest::collection::vec(1u64..4, 1..4),
        base in 0u64..1000,
        seed in proptest::prelude::any::<u64>(),
    ) {
        let n: u64 = shape.iter().product();
        // Distinct ids base, base+3, ... shuffled by a seeded rotation and reversal.
        let mut ids: Vec<u64> = (0..n).map(|i| base + 3 * i).collect();
        ids.rotate_left((seed % n) as usize);
        if seed % 2 == 1 {
            ids.reverse();
        }
        let m = Mesh::tvm(&shape, DeviceIds::List(ids.clone()), &[]).unwrap();
        let back = Mesh::from_tvm_text(&m.to_tvm_text()).unwrap();
        proptest::prop_assert_eq!(back.device_ids(), ids);
        proptest::prop_assert_eq!(back, m);
    }
}

#[test]
fn tvm_plan_devices_across_functions_on_the_command_line() {
    let path = fixture("plan/calls.mlir");
    let out = crate::common::shardsim(&[
        "plan",
        path.to_str().unwrap(),
        "--device",
        "(vulkan, 0, vulkan, global)",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("// ")).collect();
    assert_eq!(
        notes,
        vec!["// @main: device_copy %b (cpu, 0, llvm, global) -> (cuda, 0, cuda -arch=sm_80, global)"]
    );
    // The planned program parses back.
    parse_and_verify(text.split_once('\n').unwrap().1).unwrap();
}
