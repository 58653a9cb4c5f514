//! `shardsim mesh`: print a mesh in every view and, optionally, a tensor's shards.
//! The mesh comes from `--shape` (and `--names`, `--device-ids`), from TVM's
//! printed `R.device_mesh(...)` (`--tvm`) or from TF DTensor's mesh string
//! (`--dtensor`, whose local ids and devices are reported too).

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use shardsim::base::TensorType;
use shardsim::mesh::{DTensorMesh, Mesh, MeshAxis};
use shardsim::sharding::{Placement, ShardLayout, TensorSharding};

use super::output::{parse_u64_list, Format};

#[derive(Debug, Args)]
pub struct MeshArgs {
    /// Mesh shape, e.g. 2,4.
    #[arg(long, required_unless_present_any = ["tvm", "dtensor"], conflicts_with_all = ["tvm", "dtensor"])]
    shape: Option<String>,
    /// The mesh as TVM prints it, e.g. 'R.device_mesh((2, 4), I.Range(0, 8))'.
    #[arg(long, conflicts_with_all = ["dtensor", "names", "device_ids"])]
    tvm: Option<String>,
    /// The mesh as TF DTensor's to_string writes it, e.g. 'm|x=2|0,1|0,1|/job:localhost/replica:0/task:0/device:GPU:0,...'.
    #[arg(long, conflicts_with_all = ["names", "device_ids"])]
    dtensor: Option<String>,
    /// Axis names, e.g. x,y (default d0,d1,...).
    #[arg(long)]
    names: Option<String>,
    /// Explicit device ids in mesh order: any distinct non-negative ids, one
    /// per device, e.g. 0,2,4,1,3,5 or 8,9,10,11 (TVM's DeviceMesh allows any).
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

/// What a TF DTensor mesh string says beyond the mesh itself.
#[derive(Serialize)]
struct DTensorReport {
    name: String,
    device_type: String,
    local_device_ids: Vec<u64>,
    local_devices: Vec<String>,
    is_remote: bool,
    min_global_device_id: u64,
}

#[derive(Serialize)]
struct Report {
    shardy: String,
    dtensor: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    dtensor_client: Option<DTensorReport>,
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

/// The mesh from `--shape`/`--names`/`--device-ids`.
fn mesh_from_shape(args: &MeshArgs, shape_text: &str) -> anyhow::Result<Mesh> {
    let shape = parse_u64_list(shape_text, "--shape")?;
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
    match &args.device_ids {
        Some(ids) => Mesh::with_any_device_ids(axes, parse_u64_list(ids, "--device-ids")?)
            .context("--device-ids"),
        None => Mesh::new(axes).context("invalid mesh"),
    }
}

pub fn run(args: MeshArgs) -> anyhow::Result<()> {
    let mut client = None;
    let mesh = match (&args.shape, &args.tvm, &args.dtensor) {
        (Some(shape), _, _) => mesh_from_shape(&args, shape)?,
        (_, Some(text), _) => {
            Mesh::from_tvm_text(text).map_err(|e| anyhow::anyhow!("--tvm: {e}"))?
        }
        (_, _, Some(text)) => {
            let d =
                DTensorMesh::from_string(text).map_err(|e| anyhow::anyhow!("--dtensor: {e}"))?;
            let mesh = d.mesh().clone();
            client = Some(d);
            mesh
        }
        _ => bail!("give the mesh with --shape, --tvm or --dtensor"),
    };

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
        shardy: shardy_text(&mesh),
        dtensor: client
            .as_ref()
            .map(|d| d.to_string())
            .unwrap_or_else(|| mesh.to_dtensor_string("mesh", "CPU")),
        dtensor_client: client.as_ref().map(|d| DTensorReport {
            name: d.name().to_string(),
            device_type: d.device_type().to_string(),
            local_device_ids: d.local_device_ids().to_vec(),
            local_devices: d.local_devices(),
            is_remote: d.is_remote(),
            min_global_device_id: d.min_global_device_id(),
        }),
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

/// Shardy's text, when Shardy can hold the mesh (its ids must be `0..n`).
fn shardy_text(mesh: &Mesh) -> String {
    let mut ids = mesh.device_ids();
    ids.sort_unstable();
    if ids.iter().enumerate().all(|(i, &d)| d == i as u64) {
        mesh.to_shardy()
    } else {
        format!(
            "(none: Shardy's device ids are a permutation of 0..{})",
            ids.len()
        )
    }
}

fn render_text(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "mesh (Shardy):     {}", r.shardy);
    let _ = writeln!(out, "mesh (TF DTensor): {}", r.dtensor);
    let _ = writeln!(out, "mesh (TVM):        {}", r.tvm);
    if let Some(d) = &r.dtensor_client {
        let _ = writeln!(
            out,
            "DTensor client:    mesh '{}' of {} devices, local ids {:?}{}",
            d.name,
            d.device_type,
            d.local_device_ids,
            if d.is_remote { " (remote)" } else { "" }
        );
    }
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
