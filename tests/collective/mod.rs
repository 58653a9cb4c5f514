//! Collectives: numerics of every algorithm against the single-device result,
//! alpha-beta lower bounds and the ring closed form on ideal links,
//! calibration against published NCCL measurements, the session API, the CLI.

mod bounds;
mod calibration;
mod channels;
mod chooser;
mod collnet;
mod groups;
mod multinode;
mod nics;
mod numerics;
mod nvls;
mod policy;
mod prune;
mod rings;
mod session;
mod streams;

/// A topology preset with `key=value` overrides (as `--set` gives them).
pub fn load(preset: &str, set: &[(&str, &str)]) -> shardsim::topology::Topology {
    let over: Vec<shardsim::topology::Override> = set
        .iter()
        .map(|&(k, v)| shardsim::topology::Override {
            key: k.into(),
            value: v.into(),
        })
        .collect();
    shardsim::topology::load(preset, &over).unwrap()
}
