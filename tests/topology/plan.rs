//! PlanDevices over hand-written dataflow: host-pinned optimizer state with
//! device compute gets exactly the expected device_copy ops; conflicts name
//! both sources.

use shardsim::plan::{plan_devices, Dataflow, OpId, PlanError, Port, VirtualDevice};

fn vd(text: &str) -> VirtualDevice {
    text.parse().unwrap()
}

fn gpu0() -> VirtualDevice {
    vd("(cuda, 0, cuda, global)")
}

fn host_scope() -> VirtualDevice {
    vd("(cuda, 0, cuda, host)")
}

#[test]
fn offloaded_optimizer_state_gets_copies_both_ways() {
    // forward/backward on the GPU; Adam state m, v lives in pinned host memory
    // (ZeRO-Offload style) and the updated state goes back there.
    let mut df = Dataflow::new();
    let x = df.value("x");
    let w = df.value("w");
    let m = df.value("m");
    let v = df.value("v");
    let y = df.value("y");
    let g = df.value("g");
    let m2 = df.value("m2");
    let v2 = df.value("v2");
    let w2 = df.value("w2");
    for (val, src) in [
        (m, "offload m"),
        (v, "offload v"),
        (m2, "offload m2"),
        (v2, "offload v2"),
    ] {
        df.constrain(val, VirtualDevice::scope("host"), src)
            .unwrap();
    }
    let fwd = df.op("forward", &[x, w], &[y]).unwrap();
    let bwd = df.op("backward", &[y, x, w], &[g]).unwrap();
    let adam = df.op("adam", &[m, v, g, w], &[m2, v2, w2]).unwrap();
    let plan = plan_devices(&df, &gpu0()).unwrap();

    for val in [x, w, y, g, w2] {
        assert_eq!(
            plan.value_devices[val.0 as usize],
            gpu0(),
            "{}",
            df.value_name(val)
        );
    }
    for val in [m, v, m2, v2] {
        assert_eq!(
            plan.value_devices[val.0 as usize],
            host_scope(),
            "{}",
            df.value_name(val)
        );
    }
    for op in [fwd, bwd, adam] {
        assert_eq!(plan.op_devices[op.0 as usize], gpu0());
    }
    type Copy = (String, VirtualDevice, VirtualDevice, Vec<(OpId, Port)>);
    let copies: Vec<Copy> = plan
        .copies
        .iter()
        .map(|c| {
            (
                c.value_name.clone(),
                c.from.clone(),
                c.to.clone(),
                c.at.clone(),
            )
        })
        .collect();
    assert_eq!(
        copies,
        vec![
            (
                "m".to_string(),
                host_scope(),
                gpu0(),
                vec![(adam, Port::Operand(0))]
            ),
            (
                "v".to_string(),
                host_scope(),
                gpu0(),
                vec![(adam, Port::Operand(1))]
            ),
            (
                "m2".to_string(),
                gpu0(),
                host_scope(),
                vec![(adam, Port::Result(0))]
            ),
            (
                "v2".to_string(),
                gpu0(),
                host_scope(),
                vec![(adam, Port::Result(1))]
            ),
        ]
    );
}

#[test]
fn unconstrained_chain_follows_its_pinned_op_and_copies_at_a_pinned_operand() {
    // A CPU op produces a value consumed on the GPU through an operand pin.
    let mut df = Dataflow::new();
    let a = df.value("tokens");
    let b = df.value("ids");
    let c = df.value("emb");
    let tok = df.op("tokenize", &[a], &[b]).unwrap();
    df.pin_op(
        tok,
        vd("(cpu, 0, llvm, global)"),
        "tokenize runs on the host",
    )
    .unwrap();
    let emb = df.op("embed", &[b], &[c]).unwrap();
    df.pin_operand(emb, 0, vd("(cuda, 0, ?, ?)"), "embed reads ids on gpu0")
        .unwrap();
    let plan = plan_devices(&df, &gpu0()).unwrap();
    // tokens and ids follow tokenize to the CPU; embed and emb default to the GPU.
    assert_eq!(
        plan.value_devices[a.0 as usize],
        vd("(cpu, 0, llvm, global)")
    );
    assert_eq!(
        plan.value_devices[b.0 as usize],
        vd("(cpu, 0, llvm, global)")
    );
    assert_eq!(plan.value_devices[c.0 as usize], gpu0());
    assert_eq!(plan.copies.len(), 1);
    assert_eq!(plan.copies[0].value_name, "ids");
    assert_eq!(plan.copies[0].from, vd("(cpu, 0, llvm, global)"));
    assert_eq!(plan.copies[0].to, gpu0());
}

#[test]
fn a_result_pin_writes_in_place_and_readers_on_the_same_device_share_one_copy() {
    let mut df = Dataflow::new();
    let x = df.value("x");
    let ckpt = df.value("ckpt");
    let y = df.value("y");
    let z = df.value("z");
    let save = df.op("save", &[x], &[ckpt]).unwrap();
    df.pin_result(save, 0, VirtualDevice::scope("host"), "activation offload")
        .unwrap();
    df.op("recompute_a", &[ckpt], &[y]).unwrap();
    df.op("recompute_b", &[ckpt], &[z]).unwrap();
    let plan = plan_devices(&df, &gpu0()).unwrap();
    assert_eq!(plan.value_devices[ckpt.0 as usize], host_scope());
    // No copy after `save` (it writes to the host), one copy for both readers.
    assert_eq!(plan.copies.len(), 1);
    assert_eq!(plan.copies[0].at.len(), 2);
    assert_eq!(plan.copies[0].from, host_scope());
}

#[test]
fn conflicting_constraints_name_both_sources() {
    // y is unconstrained, so its producer and its consumer must agree.
    let mut df = Dataflow::new();
    let x = df.value("x");
    let y = df.value("y");
    let z = df.value("z");
    let mm = df.op("matmul", &[x], &[y]).unwrap();
    let log = df.op("log", &[y], &[z]).unwrap();
    df.pin_op(mm, vd("(cuda, 0, cuda, ?)"), "user: matmul on gpu0")
        .unwrap();
    df.pin_op(log, vd("(cpu, ?, llvm, ?)"), "op log runs on the host")
        .unwrap();
    let err = plan_devices(&df, &gpu0()).unwrap_err();
    assert!(matches!(err, PlanError::Conflict { .. }));
    assert_eq!(
        err.to_string(),
        "conflicting device constraints on op `log`: (cuda, 0, cuda, ?) from user: matmul on gpu0 \
         and (cpu, ?, llvm, ?) from op log runs on the host"
    );

    // A user constraint against the producer's result pin.
    let mut df = Dataflow::new();
    let a = df.value("a");
    let b = df.value("b");
    let op = df.op("f", &[a], &[b]).unwrap();
    df.constrain(b, VirtualDevice::scope("global"), "user keeps b in HBM")
        .unwrap();
    df.pin_result(op, 0, VirtualDevice::scope("host"), "f writes to host")
        .unwrap();
    let msg = plan_devices(&df, &gpu0()).unwrap_err().to_string();
    assert!(
        msg.contains("user keeps b in HBM") && msg.contains("f writes to host"),
        "{msg}"
    );
}

#[test]
fn bad_dataflow_is_an_error() {
    let mut df = Dataflow::new();
    let a = df.value("a");
    df.op("f", &[], &[a]).unwrap();
    assert!(df
        .op("g", &[], &[a])
        .unwrap_err()
        .to_string()
        .contains("produced twice"));
    let o = df.op("h", &[a], &[]).unwrap();
    assert!(df.pin_operand(o, 3, gpu0(), "x").is_err());
}
