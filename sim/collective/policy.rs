//! What a run lets NCCL's tuner choose, as data: the allowed algorithms and
//! protocols (`NCCL_ALGO`, `NCCL_PROTO`) and a tuner plugin's table, read
//! from the topology's `[collective]` settings (`topology::settings`).
//!
//! The lists follow NCCL's `parseList` (src/graph/tuning.cc): entries split
//! by `;`, the first optionally without a function prefix (it applies to
//! every function), the others `function:list`; a list starting with `^`
//! enables everything but its names, otherwise only its names; names in any
//! case. The table follows NCCL's example tuner plugin (plugins/tuner/
//! example): CSV rows `collective,min_bytes,max_bytes,algorithm,protocol,
//! channels,nNodes,nRanks[,numPipeOps[,regBuff]]` with -1 for "any"; the
//! first row that matches the call and names an enabled pair wins (a row
//! naming a disabled pair is passed over, as the plugin passes over an
//! ignored cost-table entry).

use crate::topology::{Origin, Setting, Topology};

use super::kinds::{Algorithm, CollectiveOp, Protocol};
use super::CollectiveError;

/// The most rows a tuner table may have.
pub const MAX_TUNER_ROWS: usize = 1024;

/// NCCL's functions, as NCCL_ALGO's prefixes name them (ncclFuncStr).
const FUNCS: [&str; 5] = [
    "Broadcast",
    "Reduce",
    "AllGather",
    "ReduceScatter",
    "AllReduce",
];

/// NCCL's algorithms (ncclAlgoStr), the tuner file's spelling, and ours
/// where the simulator runs it.
const ALGOS: [(&str, &str, Option<Algorithm>); 7] = [
    ("Tree", "tree", Some(Algorithm::Tree)),
    ("Ring", "ring", Some(Algorithm::Ring)),
    ("CollNetDirect", "collnet_direct", Some(Algorithm::CollNet)),
    ("CollNetChain", "collnet_chain", None),
    ("NVLS", "nvls", Some(Algorithm::Nvls)),
    ("NVLSTree", "nvls_tree", Some(Algorithm::NvlsTree)),
    ("PAT", "pat", None),
];

const PROTOS: [(&str, Protocol); 3] = [
    ("LL", Protocol::Ll),
    ("LL128", Protocol::Ll128),
    ("Simple", Protocol::Simple),
];

/// The NCCL function of `op`; `None` for what NCCL runs point to point
/// (scatter, gather, all-to-all, send/recv), which the settings leave alone.
fn func_index(op: &CollectiveOp) -> Option<usize> {
    match op {
        CollectiveOp::Broadcast { .. } => Some(0),
        CollectiveOp::Reduce { .. } => Some(1),
        CollectiveOp::AllGather => Some(2),
        CollectiveOp::ReduceScatter => Some(3),
        CollectiveOp::AllReduce => Some(4),
        _ => None,
    }
}

fn algo_index(a: Algorithm) -> Option<usize> {
    ALGOS.iter().position(|x| x.2 == Some(a))
}

fn proto_index(p: Protocol) -> usize {
    PROTOS.iter().position(|x| x.1 == p).unwrap_or(0)
}

/// One row of a tuner table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunerRow {
    /// Index into NCCL's functions.
    func: usize,
    pub min_bytes: u64,
    /// Inclusive, as the example plugin compares.
    pub max_bytes: u64,
    /// Index into NCCL's algorithms (some of which the simulator lacks).
    algo: usize,
    pub proto: Protocol,
    /// NCCL channels to use (`None`: NCCL's own); parsed and checked, not
    /// modelled (the simulator's channels come from the topology).
    pub channels: Option<u32>,
    pub nodes: Option<u32>,
    pub ranks: Option<u32>,
    pub pipe_ops: Option<u32>,
    pub reg_buff: Option<bool>,
    pub origin: Origin,
}

impl TunerRow {
    /// The simulator's algorithm, if it runs the row's.
    pub fn algorithm(&self) -> Option<Algorithm> {
        ALGOS[self.algo].2
    }
    pub fn function(&self) -> &'static str {
        FUNCS[self.func]
    }
}

/// A tuner row that matched a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuned {
    pub algo: Algorithm,
    pub proto: Protocol,
    /// The row's place in the table (0-based).
    pub row: usize,
}

/// The run's restrictions and tuner table (empty: NCCL's defaults, all
/// enabled, no plugin).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Policy {
    /// Per function, per NCCL algorithm: enabled (None: all).
    algos: Option<[[bool; 7]; 5]>,
    protos: Option<[[bool; 3]; 5]>,
    algo_setting: Option<Setting>,
    proto_setting: Option<Setting>,
    pub rows: Vec<TunerRow>,
}

fn setting_error(origin: &Origin, key: &str, message: String) -> CollectiveError {
    CollectiveError::Setting(format!("{origin}: collective.{key}: {message}"))
}

impl Policy {
    /// The policy `topo`'s settings state; every error names where.
    pub fn of(topo: &Topology) -> Result<Policy, CollectiveError> {
        let s = topo.collective_settings();
        if s.is_empty() {
            return Ok(Policy::default());
        }
        let mut p = Policy::default();
        if let Some(a) = &s.algorithms {
            let names: Vec<&str> = ALGOS.iter().map(|x| x.0).collect();
            p.algos = Some(parse_list::<7>(a, "algorithms", "algorithm", &names)?);
            p.algo_setting = Some(a.clone());
        }
        if let Some(pr) = &s.protocols {
            let names: Vec<&str> = PROTOS.iter().map(|x| x.0).collect();
            p.protos = Some(parse_list::<3>(pr, "protocols", "protocol", &names)?);
            p.proto_setting = Some(pr.clone());
        }
        for (i, r) in s.tuner.iter().enumerate() {
            // A spreadsheet's column headers (the plugin's README suggests
            // them) on the first row.
            if i == 0 && r.text.trim_start().starts_with("collective_type") {
                continue;
            }
            if p.rows.len() == MAX_TUNER_ROWS {
                return Err(setting_error(
                    &r.origin,
                    "tuner",
                    format!("more than {MAX_TUNER_ROWS} rows (the most a tuner table may have)"),
                ));
            }
            p.rows.push(parse_row(r)?);
        }
        Ok(p)
    }

    /// Does the run enable `algo` for `op`? Algorithms NCCL lacks (our
    /// what-ifs) and operations NCCL runs point to point are not named by
    /// its settings, so always.
    pub fn algo_allowed(&self, op: &CollectiveOp, algo: Algorithm) -> bool {
        match (&self.algos, func_index(op), algo_index(algo)) {
            (Some(t), Some(f), Some(a)) => t[f][a],
            _ => true,
        }
    }

    pub fn proto_allowed(&self, op: &CollectiveOp, proto: Protocol) -> bool {
        match (&self.protos, func_index(op)) {
            (Some(t), Some(f)) => t[f][proto_index(proto)],
            _ => true,
        }
    }

    pub fn allowed(&self, op: &CollectiveOp, algo: Algorithm, proto: Protocol) -> bool {
        self.algo_allowed(op, algo) && self.proto_allowed(op, proto)
    }

    /// Is anything restricted for `op`?
    pub fn restricts(&self, op: &CollectiveOp) -> bool {
        func_index(op).is_some() && (self.algos.is_some() || self.protos.is_some())
    }

    /// The error for an explicit `--algo`/`--proto` the settings disable.
    pub fn check_explicit(
        &self,
        op: &CollectiveOp,
        algo: Option<Algorithm>,
        proto: Option<Protocol>,
    ) -> Result<(), CollectiveError> {
        let Some(f) = func_index(op) else {
            return Ok(());
        };
        if let (Some(a), Some(s), Some(t)) = (algo, &self.algo_setting, &self.algos) {
            if !self.algo_allowed(op, a) {
                let on: Vec<&str> = (0..7).filter(|&i| t[f][i]).map(|i| ALGOS[i].0).collect();
                return Err(CollectiveError::Setting(format!(
                    "{}: {a} is not allowed by collective.algorithms = \"{}\" ({}); allowed for {}: {}",
                    op.name(),
                    s.text,
                    s.origin,
                    FUNCS[f],
                    list_or_none(&on)
                )));
            }
        }
        if let (Some(p), Some(s), Some(t)) = (proto, &self.proto_setting, &self.protos) {
            if !self.proto_allowed(op, p) {
                let on: Vec<&str> = (0..3).filter(|&i| t[f][i]).map(|i| PROTOS[i].0).collect();
                return Err(CollectiveError::Setting(format!(
                    "{}: {p} is not allowed by collective.protocols = \"{}\" ({}); allowed for {}: {}",
                    op.name(),
                    s.text,
                    s.origin,
                    FUNCS[f],
                    list_or_none(&on)
                )));
            }
        }
        Ok(())
    }

    /// The error where the settings leave `op` nothing the simulator runs.
    pub fn nothing_left(&self, op: &CollectiveOp, why: &str) -> CollectiveError {
        let mut said = Vec::new();
        if let Some(s) = &self.algo_setting {
            said.push(format!(
                "collective.algorithms = \"{}\" ({})",
                s.text, s.origin
            ));
        }
        if let Some(s) = &self.proto_setting {
            said.push(format!(
                "collective.protocols = \"{}\" ({})",
                s.text, s.origin
            ));
        }
        CollectiveError::Setting(format!(
            "{}: {} leave no algorithm and protocol the simulator runs here ({why})",
            op.name(),
            said.join(" and ")
        ))
    }

    /// The first row matching a call of `op` on `bytes` over `ranks` ranks
    /// on `nodes` nodes whose pair is enabled and `runs` (the simulator can
    /// run it here).
    pub fn tuned(
        &self,
        op: &CollectiveOp,
        bytes: u64,
        nodes: usize,
        ranks: usize,
        mut runs: impl FnMut(Algorithm, Protocol) -> bool,
    ) -> Option<Tuned> {
        let f = func_index(op)?;
        let any = |want: Option<u32>, got: usize| want.map_or(true, |w| w as usize == got);
        self.rows.iter().enumerate().find_map(|(i, r)| {
            let hit = r.func == f
                && (r.min_bytes..=r.max_bytes).contains(&bytes)
                && any(r.nodes, nodes)
                && any(r.ranks, ranks)
                // One collective per call, from buffers NCCL did not register.
                && any(r.pipe_ops, 1)
                && r.reg_buff.map_or(true, |b| !b);
            let a = r.algorithm()?;
            (hit && self.allowed(op, a, r.proto) && runs(a, r.proto)).then_some(Tuned {
                algo: a,
                proto: r.proto,
                row: i,
            })
        })
    }
}

fn list_or_none(v: &[&str]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Split `text` by `sep`, with each piece's byte offset; empty pieces
/// dropped (as `strtok` drops them).
fn pieces(text: &str, sep: char, base: usize) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    for p in text.split(sep) {
        if !p.trim().is_empty() {
            let lead = p.len() - p.trim_start().len();
            out.push((base + at + lead, p.trim()));
        }
        at += p.len() + sep.len_utf8();
    }
    out
}

/// NCCL's `parseList` over `names` (see the module doc).
fn parse_list<const N: usize>(
    s: &Setting,
    key: &str,
    what: &str,
    names: &[&str],
) -> Result<[[bool; N]; 5], CollectiveError> {
    let mut on = [[true; N]; 5];
    for (k, (at, entry)) in pieces(&s.text, ';', 0).into_iter().enumerate() {
        let (prefix, list, list_at) = match entry.split_once(':') {
            Some((f, l)) => {
                let lead = l.len() - l.trim_start().len();
                (Some(f.trim()), l.trim(), at + f.len() + 1 + lead)
            }
            None => (None, entry, at),
        };
        if prefix.is_none() && k > 0 {
            return Err(setting_error(
                &s.origin.at(at),
                key,
                format!(
                    "\"{entry}\": every entry but the first needs a function prefix (e.g. allreduce:{entry})"
                ),
            ));
        }
        if list.contains(':') {
            return Err(setting_error(
                &s.origin.at(at),
                key,
                format!("\"{entry}\": one function prefix per entry (entries are split by ';')"),
            ));
        }
        let funcs: Vec<usize> = match prefix {
            None => (0..5).collect(),
            Some(f) => match FUNCS.iter().position(|n| n.eq_ignore_ascii_case(f)) {
                Some(i) => vec![i],
                None => {
                    return Err(setting_error(
                        &s.origin.at(at),
                        key,
                        format!(
                            "unknown function \"{f}\" (NCCL's names, any case: {})",
                            FUNCS.join(", ")
                        ),
                    ))
                }
            },
        };
        let (exclude, list, list_at) = match list.strip_prefix('^') {
            Some(rest) => (true, rest, list_at + 1),
            None => (false, list, list_at),
        };
        let mut row = [exclude; N];
        for (e_at, name) in pieces(list, ',', list_at) {
            let i = names
                .iter()
                .position(|n| n.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    setting_error(
                        &s.origin.at(e_at),
                        key,
                        format!(
                            "unknown {what} \"{name}\" (NCCL's names, any case: {})",
                            names.join(", ")
                        ),
                    )
                })?;
            row[i] = !exclude;
        }
        for f in funcs {
            on[f] = row;
        }
    }
    Ok(on)
}

/// One CSV row of the example plugin's format.
fn parse_row(s: &Setting) -> Result<TunerRow, CollectiveError> {
    let fields = pieces_keep(&s.text);
    let err = |at: usize, m: String| setting_error(&s.origin.at(at), "tuner", m);
    if !(8..=10).contains(&fields.len()) {
        return Err(err(
            0,
            format!(
                "{} fields; expected 8 to 10: collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]",
                fields.len()
            ),
        ));
    }
    let field = |i: usize| fields[i];
    let bytes = |i: usize, name: &str| -> Result<u64, CollectiveError> {
        field(i).1.parse::<u64>().map_err(|_| {
            err(
                field(i).0,
                format!(
                    "{name} \"{}\": expected a byte count (0 or more)",
                    field(i).1
                ),
            )
        })
    };
    // -1 for any, else a positive count.
    let any = |i: usize, name: &str| -> Result<Option<u32>, CollectiveError> {
        let (at, t) = field(i);
        match t.parse::<i64>() {
            Ok(-1) => Ok(None),
            Ok(v) if v > 0 && v <= u32::MAX as i64 => Ok(Some(v as u32)),
            _ => Err(err(
                at,
                format!("{name} \"{t}\": expected -1 (any) or a positive count"),
            )),
        }
    };
    let (f_at, f) = field(0);
    let func = FUNCS
        .iter()
        .position(|n| n.eq_ignore_ascii_case(f))
        .ok_or_else(|| {
            err(
                f_at,
                format!(
                    "collective_type \"{f}\": expected broadcast, reduce, allgather, reducescatter or allreduce"
                ),
            )
        })?;
    let min_bytes = bytes(1, "min_bytes")?;
    let max_bytes = bytes(2, "max_bytes")?;
    if min_bytes > max_bytes {
        return Err(err(
            field(2).0,
            format!("max_bytes {max_bytes} is below min_bytes {min_bytes}"),
        ));
    }
    let (a_at, a) = field(3);
    let algo = ALGOS
        .iter()
        .position(|x| x.1.eq_ignore_ascii_case(a))
        .ok_or_else(|| {
            let names: Vec<&str> = ALGOS.iter().map(|x| x.1).collect();
            err(
                a_at,
                format!("algorithm \"{a}\": expected one of {}", names.join(", ")),
            )
        })?;
    let (p_at, p) = field(4);
    let proto = PROTOS
        .iter()
        .find(|x| x.0.eq_ignore_ascii_case(p))
        .map(|x| x.1)
        .ok_or_else(|| {
            err(
                p_at,
                format!("protocol \"{p}\": expected ll, ll128 or simple"),
            )
        })?;
    let reg_buff = match fields.get(9) {
        None => None,
        Some((at, t)) => match *t {
            "-1" => None,
            "0" => Some(false),
            "1" => Some(true),
            _ => {
                return Err(err(
                    *at,
                    format!("regBuff \"{t}\": expected -1 (any), 0 or 1"),
                ))
            }
        },
    };
    Ok(TunerRow {
        func,
        min_bytes,
        max_bytes,
        algo,
        proto,
        channels: any(5, "channels")?,
        nodes: any(6, "nNodes")?,
        ranks: any(7, "nRanks")?,
        pipe_ops: if fields.len() > 8 {
            any(8, "numPipeOps")?
        } else {
            None
        },
        reg_buff,
        origin: s.origin.clone(),
    })
}

/// A CSV row's fields, trimmed, with their byte offsets (empty ones kept:
/// a missing field is an error at its place).
fn pieces_keep(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    for p in text.split(',') {
        let lead = p.len() - p.trim_start().len();
        out.push((at + lead, p.trim()));
        at += p.len() + 1;
    }
    out
}
