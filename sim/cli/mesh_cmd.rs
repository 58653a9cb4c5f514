//! `shardsim mesh`: print a mesh in every view and, optionally, a tensor's shards.

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use shardsim::base::TensorType;
use shardsim::mesh::{Mesh, MeshAxis};
use shardsim::sharding::{Placement, ShardLayout, TensorSharding};

use super::output::{parse_u64_list, Format};

#[derive(Debug, Args)]
pub struct MeshArgs {
    /// Mesh shape, e.g. 2,4.
    #[arg(long)]
    shape: String,
    /// Axis names, e.g. x,y (default d0,d1,...).
    #[arg(long)]
    names: Option<String>,
    /// Explicit device order, e.g. 0,2,4,1,3,5.
    #[arg(long)]
    device_ids: Option<String>,
    /// A sharding of a tensor on this mesh (the mesh is called @mesh), e.g. '<@mesh, [{"x"}, {"y"}]>'.
    #[arg(long, requires = "tensor")]
    sharding: Option<String>,
    /// The tensor's global shape, e.g. 16x32.
    #[arg(long, requires = "sharding")]
    tensor: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Serialize)]
struct DeviceRow {
    device: u64,
    position: u64,
    coords: Vec<(String, u64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    local_shape: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ranges: Option<Vec<(u64, u64)>>,
}

#[derive(Serialize)]
struct Report {
    shardy: String,
    dtensor: String,
    tvm: String,
    num_devices: u64,
    strides: Vec<u64>,
    devices: Vec<DeviceRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sharding: Option<ShardingReport>,
}

#[derive(Serialize)]
struct ShardingReport {
    sharding: String,
    tensor: String,
    placement: Option<String>,
    shards_per_dim: Vec<u64>,
    local_shape: Vec<u64>,
    padding: Vec<u64>,
    replica_groups: Vec<Vec<u64>>,
}

pub fn run(args: MeshArgs) -> anyhow::Result<()> {
    let shape = parse_u64_list(&args.shape, "--shape")?;
    let names: Vec<String> = match &args.names {
        Some(n) => n.split(',').map(|s| s.trim().to_string()).collect(),
        None => (0..shape.len()).map(|i| format!("d{i}")).collect(),
    };
    if names.len() != shape.len() {
        bail!(
            "--names gives {} names but --shape has {} dimensions",
            names.len(),
            shape.len()
        );
    }
    let axes: Vec<MeshAxis> = names
        .iter()
        .zip(&shape)
        .map(|(n, &size)| MeshAxis {
            name: n.clone(),
            size,
        })
        .collect();
    let mesh = match &args.device_ids {
        Some(ids) => Mesh::with_device_order(axes, parse_u64_list(ids, "--device-ids")?),
        None => Mesh::new(axes),
    }
    .context("invalid mesh")?;

    let sharding = match (&args.sharding, &args.tensor) {
        (Some(text), Some(tensor)) => {
            let table = vec![("mesh".to_string(), mesh.clone())];
            let s = TensorSharding::parse_checked(text, &table)
                .map_err(|e| anyhow::anyhow!("--sharding: {e}"))?;
            let dims =
                TensorType::parse_shape(tensor).map_err(|e| anyhow::anyhow!("--tensor: {e}"))?;
            let layout = ShardLayout::new(&mesh, &s, &dims)
                .map_err(|e| anyhow::anyhow!("--sharding: {e}"))?;
            Some((s, dims, layout))
        }
        _ => None,
    };

    let devices = (0..mesh.num_devices())
        .map(|pos| {
            let device = mesh.device_at(pos);
            let coords = mesh
                .axes()
                .iter()
                .zip(mesh.coords_of_position(pos))
                .map(|(a, c)| (a.name.clone(), c))
                .collect();
            let shard = sharding.as_ref().map(|(_, _, l)| l.device_shard(pos));
            DeviceRow {
                device,
                position: pos,
                coords,
                local_shape: shard.as_ref().map(|s| s.local_shape.clone()),
                ranges: shard.as_ref().map(|s| s.ranges.clone()),
            }
        })
        .collect();
    let report = Report {
        shardy: mesh.to_shardy(),
        dtensor: mesh.to_dtensor_string("mesh", "CPU"),
        tvm: mesh.to_tvm_text(),
        num_devices: mesh.num_devices(),
        strides: mesh.strides().to_vec(),
        devices,
        sharding: sharding.as_ref().map(|(s, dims, l)| ShardingReport {
            sharding: s.to_string(),
            tensor: dims
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("x"),
            placement: Placement::from_sharding(s, &mesh).ok().map(|p| p.to_text()),
            shards_per_dim: l.shards.clone(),
            local_shape: l.local_shape.clone(),
            padding: l.padding.clone(),
            replica_groups: l.replica_groups(&mesh, s),
        }),
    };
    let text = match args.format {
        Format::Json => serde_json::to_string_pretty(&report)? + "\n",
        Format::Text => render_text(&report),
    };
    super::output::write_output(None, &text)
}

fn render_text(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "mesh (Shardy):     {}", r.shardy);
    let _ = writeln!(out, "mesh (TF DTensor): {}", r.dtensor);
    let _ = writeln!(out, "mesh (TVM):        {}", r.tvm);
    let _ = writeln!(out, "devices: {}   strides: {:?}", r.num_devices, r.strides);
    if let Some(s) = &r.sharding {
        let _ = writeln!(out, "tensor {} sharded as {}", s.tensor, s.sharding);
        let _ = writeln!(
            out,
            "  placement: {}",
            s.placement
                .as_deref()
                .unwrap_or("(none: not expressible as a TVM Placement)")
        );
        let _ = writeln!(
            out,
            "  shards per dim: {:?}   local shape: {:?}   padding: {:?}",
            s.shards_per_dim, s.local_shape, s.padding
        );
        let groups: Vec<String> = s.replica_groups.iter().map(|g| format!("{g:?}")).collect();
        let _ = writeln!(out, "  replica groups: {}", groups.join(" "));
    }
    let _ = writeln!(out);
    for d in &r.devices {
        let coords: Vec<String> = d.coords.iter().map(|(n, c)| format!("{n}={c}")).collect();
        let mut line = format!(
            "device {:>4}  pos {:>4}  {}",
            d.device,
            d.position,
            coords.join(" ")
        );
        if let (Some(shape), Some(ranges)) = (&d.local_shape, &d.ranges) {
            let ranges: Vec<String> = ranges.iter().map(|(a, b)| format!("[{a}:{b})")).collect();
            line.push_str(&format!("  local {:?}  global {}", shape, ranges.join("")));
        }
        let _ = writeln!(out, "{line}");
    }
    out
}
