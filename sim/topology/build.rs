//! Layout generators: a [`TopologyFile`] becomes a [`Topology`]. Checks that
//! need more than one field (a torus without `ici`, `nodes > 1` without NICs,
//! a link to a component that does not exist) fail with the field to blame.

use std::collections::BTreeMap;
use std::ops::Range;

use super::graph::{
    Builder, ComponentId, ComponentKind, LinkClass, LinkId, LinkParams, MemoryScope, RoutingPolicy,
    Topology,
};
use super::spec::{ComponentKindSpec, DeviceKind, FabricSpec, Layout, LinkClassSpec, TopologyFile};
use super::units::Bandwidth;

/// A rule broken by a file whose fields each parsed: the field (dotted path,
/// e.g. `ici` or `link.to`) and, where known, the byte span in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemanticError {
    pub field: String,
    pub span: Option<Range<usize>>,
    pub message: String,
}

fn fail<T>(field: &str, message: impl Into<String>) -> Result<T, SemanticError> {
    Err(SemanticError {
        field: field.to_string(),
        span: None,
        message: message.into(),
    })
}

/// Build the topology a file describes.
pub fn build(f: &TopologyFile) -> Result<Topology, SemanticError> {
    if f.format != super::spec::FORMAT_VERSION {
        return fail(
            "format",
            format!(
                "format version {} is not supported (this build reads 1)",
                f.format
            ),
        );
    }
    if f.nodes == 0 {
        return fail("nodes", "nodes must be at least 1");
    }
    check_figures(f)?;
    check_chooser(f)?;
    check_nccl_version(f)?;
    check_collnet(f)?;
    let mut b = Builder::default();
    let routing = match f.layout {
        Layout::NvswitchNode | Layout::PcieNode => build_nodes(f, &mut b)?,
        Layout::Ring | Layout::Switch | Layout::Mesh2d | Layout::Torus => build_direct(f, &mut b)?,
        Layout::Explicit => build_explicit(f, &mut b)?,
    };
    if b.num_devices() == 0 {
        return fail("layout", "the topology has no devices");
    }
    let mut topo = b.finish(
        f.name.clone(),
        f.description.clone(),
        f.sources.clone(),
        routing,
    );
    topo.file = Some(std::sync::Arc::new(f.clone()));
    Ok(topo)
}

/// `[collective] chooser`, if given, is one of [`super::spec::CHOOSERS`].
fn check_chooser(f: &TopologyFile) -> Result<(), SemanticError> {
    use super::spec::{CHOOSERS, CHOOSER_KEY};
    let Some(v) = f.collective.as_ref().and_then(|t| t.get(CHOOSER_KEY)) else {
        return Ok(());
    };
    match v.as_str() {
        Some(s) if CHOOSERS.contains(&s) => Ok(()),
        _ => fail(
            &format!("collective.{CHOOSER_KEY}"),
            format!(
                "expected \"model\", \"nccl\" or \"nccl-algo\", got {}",
                v.to_string().trim()
            ),
        ),
    }
}

/// `[collective] nccl_version`, if given, names a release of
/// [`super::spec::NCCL_VERSIONS`].
fn check_nccl_version(f: &TopologyFile) -> Result<(), SemanticError> {
    use super::spec::{nccl_release, NCCL_VERSION_KEY};
    let Some(v) = f.collective.as_ref().and_then(|t| t.get(NCCL_VERSION_KEY)) else {
        return Ok(());
    };
    match nccl_release(v) {
        Some(_) => Ok(()),
        None => fail(
            &format!("collective.{NCCL_VERSION_KEY}"),
            format!(
                "expected the NCCL release \"2.19\", \"2.21\" or \"2.23\" (the releases whose \
                 tables the simulator has; a patch release such as \"2.19.3\" too), got {}",
                v.to_string().trim()
            ),
        ),
    }
}

/// `[collective] collnet`, if given, is a boolean, and true only over a
/// network whose switches reduce.
fn check_collnet(f: &TopologyFile) -> Result<(), SemanticError> {
    use super::spec::COLLNET_KEY;
    let Some(v) = f.collective.as_ref().and_then(|t| t.get(COLLNET_KEY)) else {
        return Ok(());
    };
    let field = format!("collective.{COLLNET_KEY}");
    match v.as_bool() {
        None => fail(
            &field,
            format!("expected true or false (NCCL_COLLNET_ENABLE), got {}", v.to_string().trim()),
        ),
        Some(true) if !f.network.as_ref().is_some_and(|n| n.in_switch_reduction) => fail(
            &field,
            "CollNet needs a network whose switches reduce (network.in_switch_reduction = true, SHARP)",
        ),
        Some(_) => Ok(()),
    }
}

/// Zero bandwidths and lane counts are as wrong as negative ones.
fn check_figures(f: &TopologyFile) -> Result<(), SemanticError> {
    let nonzero = |field: &str, bw: Bandwidth| {
        if bw.0 == 0 {
            fail(field, "bandwidth must be positive")
        } else {
            Ok(())
        }
    };
    for (name, fab) in [("nvlink", &f.nvlink), ("ici", &f.ici)] {
        if let Some(fab) = fab {
            nonzero(&format!("{name}.bandwidth"), fab.bandwidth)?;
            if fab.lanes == 0 {
                return fail(&format!("{name}.lanes"), "lanes must be at least 1");
            }
        }
    }
    if let Some(p) = &f.pcie {
        nonzero("pcie.bandwidth", p.bandwidth)?;
        if p.lanes == 0 {
            return fail("pcie.lanes", "lanes must be at least 1");
        }
        if p.devices_per_switch == 0 {
            return fail(
                "pcie.devices_per_switch",
                "devices_per_switch must be at least 1",
            );
        }
    }
    if let Some(n) = &f.nic {
        nonzero("nic.bandwidth", n.bandwidth)?;
    }
    for m in &f.device.memory {
        nonzero("device.memory.bandwidth", m.bandwidth)?;
        if m.capacity.0 == 0 {
            return fail("device.memory.capacity", "capacity must be positive");
        }
    }
    // A zero compute rate would make compute free (or divide by zero).
    for (dtype, rate) in &f.device.flops {
        if rate.0 == 0 {
            return fail(
                &format!("device.flops.{dtype}"),
                "compute rate must be positive",
            );
        }
    }
    if let Some(h) = &f.host {
        nonzero("host.memory_bandwidth", h.memory_bandwidth)?;
        if h.memory.0 == 0 {
            return fail("host.memory", "capacity must be positive");
        }
        for (dtype, rate) in &h.flops {
            if rate.0 == 0 {
                return fail(
                    &format!("host.flops.{dtype}"),
                    "compute rate must be positive",
                );
            }
        }
    }
    // A zero latency is as unphysical as a zero bandwidth.
    let latencies = [
        ("nvlink.latency", f.nvlink.as_ref().map(|x| x.latency)),
        ("ici.latency", f.ici.as_ref().map(|x| x.latency)),
        ("pcie.latency", f.pcie.as_ref().map(|x| x.latency)),
        ("nic.latency", f.nic.as_ref().map(|x| x.latency)),
        ("network.latency", f.network.as_ref().map(|x| x.latency)),
    ];
    for (field, lat) in latencies {
        if lat.is_some_and(|l| l.0 == 0) {
            return fail(field, "latency must be positive");
        }
    }
    for l in &f.links {
        nonzero("link.bandwidth", l.bandwidth)?;
        if l.latency.0 == 0 {
            return fail("link.latency", "latency must be positive");
        }
        if l.lanes == 0 {
            return fail("link.lanes", "lanes must be at least 1");
        }
    }
    Ok(())
}

fn device_prefix(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Gpu => "gpu",
        DeviceKind::Tpu => "tpu",
        DeviceKind::Cpu => "cpu",
    }
}

/// Add one accelerator with the file's figures; `host` gives it a `host` scope.
fn add_device(
    f: &TopologyFile,
    b: &mut Builder,
    name: String,
    node: Option<u32>,
    forwards: bool,
) -> ComponentId {
    let index = b.num_devices();
    let id = b.add(
        name,
        ComponentKind::Device {
            kind: f.device.kind,
            index,
        },
        &f.device.model,
        node,
        forwards,
    );
    let c = b.component_mut(id);
    c.flops = f.device.flops.clone();
    c.memory = f
        .device
        .memory
        .iter()
        .map(|m| MemoryScope {
            scope: m.scope.clone(),
            capacity: m.capacity,
            bandwidth: m.bandwidth,
            location: id,
        })
        .collect();
    id
}

/// A host forwards PCIe peer-to-peer traffic through its root complex (routing
/// charges that extra, see `route.rs`).
fn add_host(
    f: &TopologyFile,
    b: &mut Builder,
    name: String,
    node: Option<u32>,
) -> Option<ComponentId> {
    let h = f.host.as_ref()?;
    let id = b.add(name, ComponentKind::Host, &h.model, node, true);
    let c = b.component_mut(id);
    c.flops = h.flops.clone();
    c.memory = vec![MemoryScope {
        scope: "global".into(),
        capacity: h.memory,
        bandwidth: h.memory_bandwidth,
        location: id,
    }];
    Some(id)
}

/// Give `device` a `host` scope: the host's DRAM, reached at PCIe speed.
fn add_host_scope(f: &TopologyFile, b: &mut Builder, device: ComponentId, host: ComponentId) {
    if let (Some(h), Some(p)) = (&f.host, &f.pcie) {
        b.component_mut(device).memory.push(MemoryScope {
            scope: "host".into(),
            capacity: h.memory,
            bandwidth: Bandwidth(p.bandwidth.0.min(h.memory_bandwidth.0)),
            location: host,
        });
    }
}

fn fabric_params(class: LinkClass, fab: &FabricSpec) -> LinkParams {
    LinkParams {
        class,
        bandwidth: fab.bandwidth,
        lanes: fab.lanes,
        latency: fab.latency,
        full_duplex: true,
    }
}

/// The device fabric of a direct or NVSwitch layout: exactly one of `nvlink`, `ici`.
fn fabric(f: &TopologyFile) -> Result<(LinkClass, &FabricSpec), SemanticError> {
    match (&f.nvlink, &f.ici) {
        (Some(n), None) => Ok((LinkClass::Nvlink, n)),
        (None, Some(i)) => Ok((LinkClass::Ici, i)),
        (Some(_), Some(_)) => fail("ici", "give either [nvlink] or [ici], not both"),
        (None, None) => fail(
            "layout",
            "this layout needs an [nvlink] or [ici] section for its device links",
        ),
    }
}

fn dims_exact(f: &TopologyFile, rank: usize, what: &str) -> Result<(), SemanticError> {
    if f.dims.len() != rank {
        return fail(
            "dims",
            format!(
                "layout {what} takes dims with {rank} entries, found {}",
                f.dims.len()
            ),
        );
    }
    if f.dims.contains(&0) {
        return fail("dims", "every entry of dims must be at least 1");
    }
    Ok(())
}

/// NVSwitch or PCIe nodes, joined by a rail-optimized fat tree when `nodes > 1`.
fn build_nodes(f: &TopologyFile, b: &mut Builder) -> Result<RoutingPolicy, SemanticError> {
    dims_exact(f, 1, "nvswitch-node / pcie-node (GPUs per node)")?;
    let gpus = f.dims[0];
    if u64::from(gpus) * u64::from(f.nodes) > 1 << 16 {
        return fail(
            "nodes",
            "too many devices (at most 65536 = nodes x GPUs per node)",
        );
    }
    let nvswitch = match f.layout {
        Layout::NvswitchNode => {
            let n = f.nvlink.as_ref().ok_or_else(|| SemanticError {
                field: "layout".into(),
                span: None,
                message: "layout nvswitch-node needs an [nvlink] section".into(),
            })?;
            if f.ici.is_some() {
                return fail("ici", "layout nvswitch-node takes [nvlink], not [ici]");
            }
            Some(n)
        }
        _ => {
            if f.nvlink.is_some() || f.ici.is_some() {
                return fail(
                    "layout",
                    "layout pcie-node has no NVLink: remove [nvlink]/[ici]",
                );
            }
            if f.pcie.is_none() {
                return fail("layout", "layout pcie-node needs a [pcie] section");
            }
            None
        }
    };
    if f.nodes > 1 && (f.nic.is_none() || f.network.is_none()) {
        return fail(
            "nodes",
            "nodes > 1 needs [nic] and [network] sections to join the nodes",
        );
    }
    if f.nic.is_some() && f.pcie.is_none() {
        return fail("nic", "NICs hang off PCIe switches: add a [pcie] section");
    }
    if f.pcie.is_some() && f.host.is_none() {
        return fail(
            "pcie",
            "PCIe switches connect to a host: add a [host] section",
        );
    }
    let nic_gpus = match &f.nic {
        Some(nic) => nic_layout(nic, gpus)?,
        None => Vec::new(),
    };
    // A NIC sits on one PCIe switch: GPUs of another switch would reach it
    // only through the host, at the same cost as any other NIC, so routes
    // could not honour which NIC is theirs.
    if let (Some(nic), Some(p)) = (&f.nic, &f.pcie) {
        let switch = |g: u32| g / p.devices_per_switch;
        if let Some((r, served)) = nic_gpus
            .iter()
            .enumerate()
            .find(|(_, s)| s.iter().any(|&g| switch(g) != switch(s[0])))
        {
            return fail(
                if nic.gpus.is_empty() { "nic.count" } else { "nic.gpus" },
                format!(
                    "NIC {r} would serve GPUs {served:?}, on different PCIe switches (pcie.devices_per_switch = {}): a NIC serves GPUs of its own switch",
                    p.devices_per_switch
                ),
            );
        }
    }
    let mut nics: Vec<Vec<ComponentId>> = Vec::new();
    for n in 0..f.nodes {
        let gpu_ids: Vec<ComponentId> = (0..gpus)
            .map(|i| {
                let id = add_device(
                    f,
                    b,
                    format!("n{n}.{}{i}", device_prefix(f.device.kind)),
                    Some(n),
                    false,
                );
                // On the rail of its first NIC (its own index without NICs).
                let rails: Vec<u32> = (0..nic_gpus.len() as u32)
                    .filter(|&r| nic_gpus[r as usize].contains(&i))
                    .collect();
                let c = b.component_mut(id);
                c.rail = Some(rails.first().copied().unwrap_or(i));
                c.nic_rails = rails;
                id
            })
            .collect();
        if let Some(fab) = nvswitch {
            let sw = b.add(
                format!("n{n}.nvswitch"),
                ComponentKind::NvSwitch {
                    in_switch_reduction: fab.in_switch_reduction,
                },
                "NVSwitch",
                Some(n),
                true,
            );
            for &g in &gpu_ids {
                b.connect(g, sw, fabric_params(LinkClass::Nvlink, fab));
            }
        }
        let mut node_nics = Vec::new();
        if let Some(p) = &f.pcie {
            let host =
                add_host(f, b, format!("n{n}.host"), Some(n)).expect("checked: pcie needs host");
            let pcie = LinkParams {
                class: LinkClass::Pcie,
                bandwidth: p.bandwidth,
                lanes: p.lanes,
                latency: p.latency,
                full_duplex: true,
            };
            let switches = gpus.div_ceil(p.devices_per_switch);
            let sw_ids: Vec<ComponentId> = (0..switches)
                .map(|s| {
                    b.add(
                        format!("n{n}.pcie{s}"),
                        ComponentKind::PcieSwitch,
                        "PCIe switch",
                        Some(n),
                        true,
                    )
                })
                .collect();
            for &s in &sw_ids {
                b.connect(s, host, pcie);
            }
            for (i, &g) in gpu_ids.iter().enumerate() {
                b.connect(g, sw_ids[i / p.devices_per_switch as usize], pcie);
                add_host_scope(f, b, g, host);
            }
            if let Some(nic) = &f.nic {
                // NIC `r` on rail `r`, on the PCIe switch of its (first) GPU.
                for (r, served) in nic_gpus.iter().enumerate() {
                    let id = b.add(
                        format!("n{n}.nic{r}"),
                        ComponentKind::Nic,
                        &nic.model,
                        Some(n),
                        true,
                    );
                    b.component_mut(id).rail = Some(r as u32);
                    b.connect(
                        id,
                        sw_ids[(served[0] / p.devices_per_switch) as usize],
                        pcie,
                    );
                    node_nics.push(id);
                }
            }
        }
        nics.push(node_nics);
    }
    if f.nodes > 1 {
        build_fat_tree(f, b, &nics)?;
    }
    Ok(RoutingPolicy::ShortestPath {
        ecmp: f.nodes > 1,
        spines: f.network.as_ref().map(|n| n.routing).unwrap_or_default(),
    })
}

/// Most NICs one node may have.
const MAX_NICS_PER_NODE: u32 = 256;

/// Which local GPUs each of a node's NICs serves (NIC order = rail order):
/// `gpus` as written, else `count` NICs spread evenly (one per GPU when
/// neither is given). Every GPU gets as many NICs as every other and every
/// NIC as many GPUs, so channels spread alike over the rails.
fn nic_layout(nic: &super::spec::NicSpec, gpus: u32) -> Result<Vec<Vec<u32>>, SemanticError> {
    if nic.count == Some(0) {
        return fail(
            "nic.count",
            "a node needs at least one NIC (remove [nic] for a node without network)",
        );
    }
    if nic.count.is_some_and(|c| c > MAX_NICS_PER_NODE) {
        return fail(
            "nic.count",
            format!("at most {MAX_NICS_PER_NODE} NICs per node"),
        );
    }
    let layout: Vec<Vec<u32>> = if nic.gpus.is_empty() {
        let count = nic.count.unwrap_or(gpus);
        if count >= gpus && count % gpus == 0 {
            let per = count / gpus;
            (0..count).map(|r| vec![r / per]).collect()
        } else if count < gpus && gpus % count == 0 {
            let shared = gpus / count;
            (0..count)
                .map(|r| (r * shared..(r + 1) * shared).collect())
                .collect()
        } else {
            return fail(
                "nic.count",
                format!(
                    "{count} NICs do not spread evenly over {gpus} GPUs: give a multiple or a divisor of the GPUs per node, or list each NIC's GPU in nic.gpus"
                ),
            );
        }
    } else {
        let at = |v: &toml::Spanned<toml::Value>, message: String| SemanticError {
            field: "nic.gpus".into(),
            span: Some(v.span()),
            message,
        };
        if nic.gpus.len() as u32 > MAX_NICS_PER_NODE {
            return fail(
                "nic.gpus",
                format!("at most {MAX_NICS_PER_NODE} NICs per node"),
            );
        }
        if let Some(c) = nic.count {
            if c as usize != nic.gpus.len() {
                return fail(
                    "nic.count",
                    format!("count = {c} but nic.gpus lists {} NICs", nic.gpus.len()),
                );
            }
        }
        let mut out = Vec::new();
        for (r, v) in nic.gpus.iter().enumerate() {
            let items: Vec<&toml::Value> = match v.get_ref() {
                toml::Value::Array(a) => a.iter().collect(),
                one => vec![one],
            };
            let mut served = Vec::new();
            for item in &items {
                let g = item.as_integer().ok_or_else(|| {
                    at(
                        v,
                        format!(
                            "NIC {r}: expected a GPU index or a list of GPU indices, got {item}"
                        ),
                    )
                })?;
                if g < 0 || g >= i64::from(gpus) {
                    return Err(at(
                        v,
                        format!(
                            "NIC {r} names GPU {g}, but a node has GPUs 0..{} (dims = [{gpus}])",
                            gpus - 1
                        ),
                    ));
                }
                if served.contains(&(g as u32)) {
                    return Err(at(v, format!("NIC {r} names GPU {g} twice")));
                }
                served.push(g as u32);
            }
            if served.is_empty() {
                return Err(at(v, format!("NIC {r} serves no GPU")));
            }
            out.push(served);
        }
        out
    };
    let per_gpu = |g: u32| layout.iter().filter(|s| s.contains(&g)).count();
    let first = per_gpu(0);
    if let Some(g) = (0..gpus).find(|&g| per_gpu(g) == 0) {
        return fail("nic.gpus", format!("GPU {g} has no NIC"));
    }
    if let Some(g) = (0..gpus).find(|&g| per_gpu(g) != first) {
        return fail(
            "nic.gpus",
            format!(
                "GPU 0 has {first} NIC(s) but GPU {g} has {}: every GPU needs as many NICs",
                per_gpu(g)
            ),
        );
    }
    if layout.iter().any(|s| s.len() != layout[0].len()) {
        return fail(
            "nic.gpus",
            "every NIC must serve as many GPUs as every other",
        );
    }
    Ok(layout)
}

/// Rail-optimized fat tree: NIC `r` of every node goes to a leaf of rail `r`
/// (half of a leaf's ports down, half up), all links at the NIC speed, so
/// the tree is non-blocking. Two levels while one spine's ports reach every
/// leaf (every leaf connects once to every spine: 256 DGX nodes at radix
/// 64); beyond, three, as clusters of thousands of GPUs are built: pods of
/// `radix / 2` leaves (every rail's share) under `radix / 2` spines each,
/// spine `s` of every pod joined to core switches `(s, 0..radix / 2)`, one
/// port per pod (at radix 64: pods of 128 DGX nodes, up to 64 pods), core
/// `(s, j)` in rail plane `j mod rails`.
fn build_fat_tree(
    f: &TopologyFile,
    b: &mut Builder,
    nics: &[Vec<ComponentId>],
) -> Result<(), SemanticError> {
    let nic = f.nic.as_ref().expect("checked");
    let net = f.network.as_ref().expect("checked");
    let nodes = nics.len() as u32;
    let rails = nics[0].len() as u32;
    let shape = FatTree::new(
        nodes,
        rails,
        net.switch_radix,
        net.oversubscription,
        net.core_oversubscription,
    )?;
    let down = net.switch_radix / 2;
    let leaves_per_rail = shape.leaves_per_rail;
    let total_leaves = rails * leaves_per_rail;
    let switch = |level| ComponentKind::NetworkSwitch {
        level,
        in_switch_reduction: net.in_switch_reduction,
    };
    let mut leaves = BTreeMap::new();
    for r in 0..rails {
        for k in 0..leaves_per_rail {
            let leaf = b.add(
                format!("leaf.r{r}.{k}"),
                switch(0),
                "leaf switch",
                None,
                true,
            );
            b.component_mut(leaf).rail = Some(r);
            leaves.insert((r, k), leaf);
        }
    }
    let edge = LinkParams {
        class: LinkClass::Network,
        bandwidth: nic.bandwidth,
        lanes: 1,
        latency: nic.latency,
        full_duplex: true,
    };
    for (n, node_nics) in nics.iter().enumerate() {
        for (r, &id) in node_nics.iter().enumerate() {
            b.connect(id, leaves[&(r as u32, n as u32 / down)], edge);
        }
    }
    if total_leaves <= 1 {
        return Ok(());
    }
    // Adaptive routing spreads every switch's traffic over all its
    // uplinks: one switch stands for a layer (a pod's spines, the cores),
    // its link to each switch below as wide as that switch's uplinks.
    let adaptive = net.routing == super::spec::NetworkRouting::Adaptive;
    let wide = |width: u32| LinkParams {
        latency: net.latency,
        bandwidth: Bandwidth(edge.bandwidth.0.saturating_mul(u64::from(width))),
        lanes: width,
        ..edge
    };
    // A leaf's link to a spine (layer), both ways; adaptive and untapered,
    // as wide as the leaf's NIC links that every flow on it enters or
    // leaves by, so it never binds.
    let leaf_up = |b: &mut Builder, leaf: ComponentId, spine: ComponentId, up: LinkParams| {
        let l = b.connect(leaf, spine, up);
        if adaptive && shape.oversubscription == 1.0 {
            b.mark_never_binding(l);
            b.mark_never_binding(LinkId(l.0 + 1));
        }
    };
    let Some(Pods { per_rail, count }) = shape.pods else {
        let spines = shape.spines;
        let spine_ids: Vec<ComponentId> = if adaptive {
            vec![b.add(
                "spine".to_string(),
                switch(1),
                &format!("spine layer ({spines} switches, adaptive routing)"),
                None,
                true,
            )]
        } else {
            (0..spines)
                .map(|s| b.add(format!("spine{s}"), switch(1), "spine switch", None, true))
                .collect()
        };
        let up = wide(if adaptive { spines } else { 1 });
        for &leaf in leaves.values() {
            for &s in &spine_ids {
                leaf_up(b, leaf, s, up);
            }
        }
        return Ok(());
    };
    // Three levels: a leaf's uplinks' worth of spines per pod, each with
    // `core_uplinks` core uplinks (`down`, less a core taper).
    let per_pod = shape.spines;
    let core_uplinks = shape.core_uplinks;
    let pod_spines: Vec<Vec<ComponentId>> = (0..count)
        .map(|p| {
            if adaptive {
                vec![b.add(
                    format!("pod{p}.spine"),
                    switch(1),
                    &format!("spine layer of pod {p} ({per_pod} switches, adaptive routing)"),
                    None,
                    true,
                )]
            } else {
                (0..per_pod)
                    .map(|s| {
                        b.add(
                            format!("pod{p}.spine{s}"),
                            switch(1),
                            "spine switch",
                            None,
                            true,
                        )
                    })
                    .collect()
            }
        })
        .collect();
    let up = wide(if adaptive { per_pod } else { 1 });
    for (&(_, k), &leaf) in &leaves {
        for &s in &pod_spines[(k / per_rail) as usize] {
            leaf_up(b, leaf, s, up);
        }
    }
    // The core layer in rail planes where the rails split a spine's
    // uplinks evenly: a flow climbs to a core of its rail's plane (routes
    // prefer their rail), so each rail's traffic between pods keeps to its
    // own cores, as rail-optimized clusters keep it to its own leaves.
    let planes = shape.planes;
    if adaptive {
        let pod_up = wide(per_pod.saturating_mul(core_uplinks) / planes);
        for r in 0..planes {
            let cores = per_pod * core_uplinks / planes;
            let (name, model) = if planes > 1 {
                (
                    format!("core.r{r}"),
                    format!("core layer, rail plane {r} ({cores} switches, adaptive routing)"),
                )
            } else {
                (
                    "core".to_string(),
                    format!("core layer ({cores} switches, adaptive routing)"),
                )
            };
            let core = b.add(name, switch(2), &model, None, true);
            if planes > 1 {
                b.component_mut(core).rail = Some(r);
            }
            for spines in &pod_spines {
                // Up into the rail's plane: only the pod's leaves of that
                // rail feed it, their uplinks no wider than it unless the
                // cores are tapered. (Down from the core can bind: traffic
                // of every pod may come down it.)
                let l = b.connect(spines[0], core, pod_up);
                if planes > 1 && shape.core_oversubscription == 1.0 {
                    b.mark_never_binding(l);
                }
            }
        }
    } else {
        for s in 0..per_pod as usize {
            for j in 0..core_uplinks {
                let core = b.add(format!("core{s}.{j}"), switch(2), "core switch", None, true);
                if planes > 1 {
                    b.component_mut(core).rail = Some(j % planes);
                }
                for spines in &pod_spines {
                    b.connect(spines[s], core, up);
                }
            }
        }
    }
    Ok(())
}

/// A rail-optimized fat tree's shape, as [`build_fat_tree`] builds it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FatTree {
    /// Ports per switch.
    pub radix: u32,
    pub rails: u32,
    pub leaves_per_rail: u32,
    /// Spines: all of them on two levels, per pod on three.
    pub spines: u32,
    /// Three levels: the pods (else `None`).
    pub pods: Option<Pods>,
    /// A three-level tree's core switches, all planes together.
    pub cores: u32,
    /// Rail planes of the cores (1: one core layer for every rail).
    pub planes: u32,
    /// A leaf's downlinks per uplink.
    pub oversubscription: f64,
    /// A three-level tree's pod spine: leaf downlinks per core uplink.
    pub core_oversubscription: f64,
    /// A three-level tree's pod spine's core uplinks (0 on two levels).
    pub core_uplinks: u32,
}

/// A three-level fat tree's pods: leaves of each rail per pod and pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Pods {
    pub per_rail: u32,
    pub count: u32,
}

impl FatTree {
    /// The tree joining `nodes` nodes of `rails` NICs on `radix`-port
    /// switches with leaves tapered `oversubscription`:1 and pods
    /// `core_oversubscription`:1, or why not.
    pub fn new(
        nodes: u32,
        rails: u32,
        radix: u32,
        oversubscription: f64,
        core_oversubscription: f64,
    ) -> Result<FatTree, SemanticError> {
        if radix < 2 || radix % 2 != 0 {
            return fail(
                "network.switch_radix",
                "switch_radix must be an even number of at least 2",
            );
        }
        for (field, ratio) in [
            ("oversubscription", oversubscription),
            ("core_oversubscription", core_oversubscription),
        ] {
            if !(ratio.is_finite() && ratio >= 1.0) {
                return fail(
                    &format!("network.{field}"),
                    format!(
                        "{field} must be a number of at least 1 (downlinks per uplink: 2 for 2:1), not {ratio}"
                    ),
                );
            }
        }
        let down = radix / 2;
        // Uplinks for `n` downlinks under a taper.
        let tapered = |n: u32, ratio: f64| ((f64::from(n) / ratio).floor() as u32).max(1);
        let leaves_per_rail = nodes.div_ceil(down);
        let pods = (rails * leaves_per_rail > radix)
            .then(|| pod_shape(nodes, rails, radix))
            .transpose()?;
        if pods.is_none() && core_oversubscription != 1.0 {
            return fail(
                "network.core_oversubscription",
                format!(
                    "core_oversubscription {core_oversubscription} tapers the links above a three-level tree's pods, but {nodes} nodes of {rails} rails fit two levels of radix-{radix} switches (a spine reaches all {} leaves)",
                    rails * leaves_per_rail
                ),
            );
        }
        let core_uplinks = if pods.is_some() {
            tapered(down, core_oversubscription)
        } else {
            0
        };
        let planes = if pods.is_some() && core_uplinks % rails == 0 {
            rails
        } else {
            1
        };
        let spines = if pods.is_some() {
            tapered(down, oversubscription)
        } else {
            tapered(nodes.min(down), oversubscription)
        };
        Ok(FatTree {
            radix,
            rails,
            leaves_per_rail,
            spines,
            pods,
            cores: spines * core_uplinks,
            planes,
            oversubscription,
            core_oversubscription,
            core_uplinks,
        })
    }
}

/// The pods of a three-level tree of `radix`-port switches for `nodes`
/// nodes of `rails` rails, or why it cannot be built.
fn pod_shape(nodes: u32, rails: u32, radix: u32) -> Result<Pods, SemanticError> {
    let down = radix / 2;
    if rails > down {
        return fail(
            "nodes",
            format!(
                "{nodes} nodes need a three-level fat tree, whose pods of {down} leaves cannot hold the {rails} rails: use fewer nodes or a larger switch_radix"
            ),
        );
    }
    let per_rail = down / rails;
    let pod_nodes = per_rail * down;
    let count = nodes.div_ceil(pod_nodes);
    if count > radix {
        return fail(
            "nodes",
            format!(
                "{nodes} nodes need {count} pods of {pod_nodes} nodes but a core switch of radix {radix} reaches at most {radix}: use fewer nodes or a larger switch_radix"
            ),
        );
    }
    Ok(Pods { per_rail, count })
}

/// Ring, switch, 2-D mesh and torus layouts of devices.
fn build_direct(f: &TopologyFile, b: &mut Builder) -> Result<RoutingPolicy, SemanticError> {
    match f.layout {
        Layout::Ring | Layout::Switch => dims_exact(f, 1, "ring / switch")?,
        Layout::Mesh2d => dims_exact(f, 2, "mesh2d")?,
        _ => {
            if f.dims.is_empty() || f.dims.contains(&0) {
                return fail(
                    "dims",
                    "a torus needs dims like [4, 4, 4], every entry at least 1",
                );
            }
        }
    }
    if f.nodes != 1 {
        return fail(
            "nodes",
            "nodes applies to nvswitch-node and pcie-node layouts only",
        );
    }
    let (class, fab) = fabric(f)?;
    let params = fabric_params(class, fab);
    let total: u32 = f
        .dims
        .iter()
        .try_fold(1u32, |a, &d| a.checked_mul(d))
        .filter(|&t| t <= 1 << 16)
        .ok_or_else(|| SemanticError {
            field: "dims".into(),
            span: None,
            message: "too many devices (at most 65536)".into(),
        })?;
    let forwards = f.layout != Layout::Switch;
    let prefix = device_prefix(f.device.kind);
    let devs: Vec<ComponentId> = (0..total)
        .map(|i| add_device(f, b, format!("{prefix}{i}"), None, forwards))
        .collect();
    let routing = if f.layout == Layout::Switch {
        let sw = b.add(
            "switch".into(),
            ComponentKind::NvSwitch {
                in_switch_reduction: fab.in_switch_reduction,
            },
            "switch",
            None,
            true,
        );
        for &d in &devs {
            b.connect(d, sw, params);
        }
        RoutingPolicy::ShortestPath {
            ecmp: false,
            spines: Default::default(),
        }
    } else {
        let wrap = f.layout != Layout::Mesh2d;
        let strides = strides(&f.dims);
        for i in 0..total {
            for (d, (&size, &stride)) in f.dims.iter().zip(&strides).enumerate() {
                let c = (i / stride) % size;
                let next = if c + 1 < size {
                    Some(c + 1)
                } else if wrap && size > 2 {
                    Some(0)
                } else {
                    None
                };
                if let Some(n) = next {
                    let _ = d;
                    let j = i - c * stride + n * stride;
                    b.connect(devs[i as usize], devs[j as usize], params);
                }
            }
        }
        RoutingPolicy::DimensionOrder {
            dims: f.dims.clone(),
            wrap,
        }
    };
    if let Some(p) = &f.pcie {
        if f.host.is_none() {
            return fail("pcie", "PCIe links go to a host: add a [host] section");
        }
        let pcie = LinkParams {
            class: LinkClass::Pcie,
            bandwidth: p.bandwidth,
            lanes: p.lanes,
            latency: p.latency,
            full_duplex: true,
        };
        let hosts = total.div_ceil(p.devices_per_switch);
        for h in 0..hosts {
            let host = add_host(f, b, format!("host{h}"), Some(h)).expect("checked");
            for i in h * p.devices_per_switch..((h + 1) * p.devices_per_switch).min(total) {
                b.connect(devs[i as usize], host, pcie);
                add_host_scope(f, b, devs[i as usize], host);
                b.component_mut(devs[i as usize]).node = Some(h);
            }
        }
    }
    Ok(routing)
}

/// Row-major strides of `dims`.
pub(crate) fn strides(dims: &[u32]) -> Vec<u32> {
    let mut s = vec![1u32; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Components and links as listed in the file.
fn build_explicit(f: &TopologyFile, b: &mut Builder) -> Result<RoutingPolicy, SemanticError> {
    if f.components.is_empty() {
        return fail("component", "layout explicit needs [[component]] entries");
    }
    let mut ids: BTreeMap<&str, ComponentId> = BTreeMap::new();
    for c in &f.components {
        if ids.contains_key(c.name.as_str()) {
            return fail(
                "component.name",
                format!("duplicate component name \"{}\"", c.name),
            );
        }
        let id = match c.kind {
            ComponentKindSpec::Device => add_device(f, b, c.name.clone(), c.node, false),
            ComponentKindSpec::Host => match add_host(f, b, c.name.clone(), c.node) {
                Some(id) => id,
                None => return fail("component.kind", "a host component needs a [host] section"),
            },
            ComponentKindSpec::Nvswitch => b.add(
                c.name.clone(),
                ComponentKind::NvSwitch {
                    in_switch_reduction: c.in_switch_reduction,
                },
                "NVSwitch",
                c.node,
                true,
            ),
            ComponentKindSpec::PcieSwitch => b.add(
                c.name.clone(),
                ComponentKind::PcieSwitch,
                "PCIe switch",
                c.node,
                true,
            ),
            ComponentKindSpec::Nic => {
                let model = f.nic.as_ref().map(|n| n.model.as_str()).unwrap_or("NIC");
                b.add(c.name.clone(), ComponentKind::Nic, model, c.node, true)
            }
            ComponentKindSpec::NetworkSwitch => b.add(
                c.name.clone(),
                ComponentKind::NetworkSwitch {
                    level: 0,
                    in_switch_reduction: c.in_switch_reduction,
                },
                "switch",
                c.node,
                true,
            ),
        };
        if let Some(fw) = c.forwards {
            b.component_mut(id).forwards = fw;
        }
        ids.insert(&c.name, id);
    }
    for l in &f.links {
        let end = |s: &toml::Spanned<String>, field: &str| {
            ids.get(s.get_ref().as_str())
                .copied()
                .ok_or_else(|| SemanticError {
                    field: field.into(),
                    span: Some(s.span()),
                    message: format!("dangling link: no component named \"{}\"", s.get_ref()),
                })
        };
        let from = end(&l.from, "link.from")?;
        let to = end(&l.to, "link.to")?;
        if from == to {
            return Err(SemanticError {
                field: "link.to".into(),
                span: Some(l.to.span()),
                message: "a link must join two different components".into(),
            });
        }
        let class = match l.class {
            LinkClassSpec::Nvlink => LinkClass::Nvlink,
            LinkClassSpec::Ici => LinkClass::Ici,
            LinkClassSpec::Pcie => LinkClass::Pcie,
            LinkClassSpec::Network => LinkClass::Network,
        };
        b.connect(
            from,
            to,
            LinkParams {
                class,
                bandwidth: l.bandwidth,
                lanes: l.lanes,
                latency: l.latency,
                full_duplex: l.full_duplex,
            },
        );
    }
    Ok(RoutingPolicy::ShortestPath {
        ecmp: false,
        spines: Default::default(),
    })
}
