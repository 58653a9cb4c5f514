//! `shardsim calibrate --measured FILE.csv --topology T`: fit the collective
//! calibration of a measured machine to a user's own nccl-tests curves, print
//! measured vs predicted for every size (held-out ones marked) with the median
//! errors, and with `--out DIR` write DIR/topology.toml (the measured
//! topology with its fitted `[collective]` table, which `collective`, `exec`,
//! `run`, `train` and `infer` read through `--topology`) and DIR/fit.csv.

use anyhow::Context;

use shardsim::calibrate::{
    collective_table, fit_measured, measured::changes, read_curve, MeasuredCurve, MeasuredSetup,
};
use shardsim::collective::{Calibration, CollectiveOp, Group};

use super::calibrate_cmd::CalibrateArgs;
use super::collective_cmd::op_names;
use super::output::load_topology;

pub fn run(args: &CalibrateArgs) -> anyhow::Result<()> {
    let Some(topo_name) = args.topology.as_deref() else {
        anyhow::bail!(
            "--measured needs --topology: the machine the curves were measured on (e.g. dgx-a100)"
        );
    };
    let set = super::output::with_tuner(&args.set, args.tuner.as_deref())?;
    let topo = load_topology(topo_name, args.nodes, &set)?;
    let n = match &args.ranks {
        None => topo.num_devices(),
        Some(text) => {
            let n: u32 = text.trim().parse().map_err(|_| {
                anyhow::anyhow!("--ranks {text}: expected the number of ranks the curves ran on")
            })?;
            if n < 2 || n > topo.num_devices() {
                anyhow::bail!(
                    "--ranks {n}: expected 2 to {} (the devices of {topo_name})",
                    topo.num_devices()
                );
            }
            n
        }
    };
    let group = Group::first(&topo, n)?;
    let default_op = args.op.as_deref().unwrap_or("all_reduce");
    let mut curves: Vec<MeasuredCurve> = Vec::new();
    for given in &args.measured {
        // `OP=FILE` names the file's operation; a plain FILE is --op's.
        let text = given.to_string_lossy();
        let (op_text, path) = match text.split_once('=') {
            Some((op, file)) if op_names(op).is_ok() => (op, std::path::PathBuf::from(file)),
            _ => (default_op, given.clone()),
        };
        let (op_name, nccl_name) = op_names(op_text)?;
        let op = CollectiveOp::parse(nccl_name, n as usize)?;
        let file = path.display().to_string();
        let bytes = shardsim::base::files::read_bytes(&path)
            .map_err(|e| anyhow::anyhow!("{file}: cannot read the measured curve: {e}"))?;
        curves.push(read_curve(&bytes, &file, op_name, &op, n as usize)?);
    }
    let ops: std::collections::BTreeSet<&str> = curves.iter().map(|c| c.op_name.as_str()).collect();
    let op_name = ops.into_iter().collect::<Vec<_>>().join(", ");
    let model = group.device_model(&topo);
    let initial = Calibration::for_topology(&topo, &model)?;
    let setup = MeasuredSetup {
        topo: &topo,
        group: &group,
        elem_bytes: 4,
    };
    let fit = fit_measured(&setup, &curves, initial)?;

    outln!(
        "calibrate --measured: {} points from {} file(s), {op_name} over {n} ranks of {topo_name} ({model})",
        fit.points.len(),
        curves.len()
    )?;
    for (field, (before, after)) in changes(&fit) {
        outln!("fitted {field}: {before} -> {after}")?;
    }
    outln!(
        "{:>12} {:>12} {:>12} {:>7} {:>12} {:>9} {:>6} {:>5}",
        "size",
        "measured_us",
        "predicted_us",
        "error",
        "before_us",
        "algo",
        "proto",
        "set"
    )?;
    for p in &fit.points {
        outln!(
            "{:>12} {:>12.2} {:>12.2} {:>6.1}% {:>12.2} {:>9} {:>6} {:>5}",
            p.size_bytes,
            p.measured_us,
            p.predicted_us,
            p.error * 100.0,
            p.initial_us,
            p.algo,
            p.protocol,
            if p.held_out { "held" } else { "fit" }
        )?;
    }
    if let Some(e) = fit.median_error(true) {
        outln!("median held-out error: {:.1}%", e * 100.0)?;
    }
    if let Some(e) = fit.median_error(false) {
        outln!("median fitted error: {:.1}%", e * 100.0)?;
    }

    if let Some(dir) = &args.out {
        let Some(file) = topo.file() else {
            anyhow::bail!(
                "{topo_name}: the topology was not built from a file, so none can be written"
            );
        };
        let mut file = file.clone();
        file.name = args
            .name
            .clone()
            .unwrap_or_else(|| format!("{}-measured", file.name));
        // The fit replaces this model's entry; other models keep theirs.
        let mut table = file.collective.take().unwrap_or_default();
        table.extend(collective_table(&fit)?);
        // A tuner file is named relative to where it was read: the written
        // topology carries its rows instead, so it loads from anywhere.
        if table.remove("tuner_file").is_some() {
            let rows = topo.collective_settings().tuner.iter();
            let rows: Vec<toml::Value> =
                rows.map(|r| toml::Value::String(r.text.clone())).collect();
            if !rows.is_empty() {
                table.insert("tuner".into(), toml::Value::Array(rows));
            }
        }
        file.collective = Some(table);
        let measured: Vec<String> = curves.iter().map(|c| c.file.clone()).collect();
        file.sources.push(format!(
            "[collective] fitted by `shardsim calibrate --measured` to {} ({op_name}, {n} ranks); median held-out error {:.1}%",
            measured.join(", "),
            fit.median_error(true).unwrap_or(0.0) * 100.0
        ));
        let path = dir.join("topology.toml");
        let text = format!(
            "# Written by `shardsim calibrate --measured`; load it with --topology {}.\n{}",
            path.display(),
            toml::to_string(&file).context("writing the topology")?
        );
        // The file must be one the rest of the tool reads, with the fit in it.
        let back = shardsim::topology::load_text(&text, "topology.toml", &[])
            .map_err(|e| anyhow::anyhow!("the fitted topology does not load: {e}"))?;
        if Calibration::for_topology(&back, &model)? != fit.fitted {
            anyhow::bail!("the fitted topology does not read back the fitted calibration");
        }
        let mut csv = csv::Writer::from_writer(Vec::new());
        for p in &fit.points {
            csv.serialize(p)?;
        }
        let csv = csv.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
        crate::cli::output::create_out_dir(dir, "--out")?;
        let mut set = shardsim::base::files::OutputSet::new();
        set.write(&path, text.as_bytes())?;
        set.write(&dir.join("fit.csv"), &csv)?;
        set.commit()?;
        outln!(
            "wrote {} and {}",
            path.display(),
            dir.join("fit.csv").display()
        )?;
    }
    Ok(())
}
