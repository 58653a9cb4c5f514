//! Options of a timed run: seed, jitter, stragglers, what an out-of-memory
//! report does, roofline and collective calibration.

use std::collections::BTreeMap;

use crate::collective::Calibration;
use crate::engine::{Jitter, LinkFault, Stragglers};

use super::cost::{parse_roofline, RooflineParams, ROOFLINE_TOML};

/// What to do when an allocation does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OomPolicy {
    /// Stop the run at the first report (the timeline ends there).
    #[default]
    Stop,
    /// Record every report and go on as if memory were unbounded.
    Continue,
}

/// How far a timed run has got: steps finished over all devices (a class's
/// step counts once per member), of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunProgress {
    pub done: u64,
    pub total: u64,
    /// The run's last call (it may have stopped short of `total`).
    pub finished: bool,
}

/// Called as timed runs advance, for progress displays: never changes a
/// result. Called at most once per [`PROGRESS_EVERY`] finished steps of the
/// simulation, and once when a run ends (`finished`).
#[derive(Clone)]
pub struct ProgressHook(pub std::sync::Arc<dyn Fn(RunProgress) + Send + Sync>);

/// Finished steps (over all devices) between two progress calls.
pub const PROGRESS_EVERY: u64 = 1 << 16;

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// Options of a timed run.
#[derive(Debug, Clone)]
pub struct TimedOptions {
    pub seed: u64,
    /// Random spread applied to every compute step and collective.
    pub jitter: Option<Jitter>,
    /// Devices whose compute is slowed by a factor.
    pub stragglers: Stragglers,
    pub on_oom: OomPolicy,
    /// Roofline parameters by device model.
    pub roofline: BTreeMap<String, RooflineParams>,
    /// Collective calibration; `None`: the table entry of the devices' model.
    pub calibration: Option<Calibration>,
    /// Link faults (topology link index, absolute time): collectives re-route
    /// around failed links or fail with the transfers they could not complete.
    pub faults: Vec<LinkFault>,
    /// Trip count assumed for while loops without static bounds (`--trip-count`).
    pub trip_count: Option<u64>,
    /// Record bytes in use per device and scope over time (`Timeline::memory`).
    pub record_memory: bool,
    /// Keep one link record per link (its bytes over the run, from the
    /// first collective on it to the end of the last) instead of one per
    /// collective step and link: the summary's link figures are the same,
    /// and memory no longer grows with collective steps x links crossed (a
    /// data-parallel all-reduce crosses every node's NICs); traces then show
    /// the totals.
    pub link_totals: bool,
    /// Fuse chains of memory-bound ops into single kernels (see
    /// [`super::fusion`]); off: every op is a kernel of its own.
    pub fusion: bool,
    /// With fusion: batched matmuls (attention's scores and context) fuse
    /// with their neighbours, as a flash-attention kernel runs them.
    pub fuse_attention: bool,
    /// Simulate every device on its own instead of one per class of devices
    /// with identical timelines (the results are the same; for checking that).
    pub per_device: bool,
    /// Fault-free collective times shared between runs (a training step's
    /// programs): only for runs on one topology with one calibration.
    pub comm_memo: Option<std::sync::Arc<super::comm::CommMemo>>,
    /// Told how far each run has got (progress bars).
    pub progress: Option<ProgressHook>,
    /// Positions (in the program's arguments) of donated arguments: their
    /// buffers belong to the program, which updates them in place (XLA's
    /// donated buffers; a training step's gradient accumulators): an
    /// elementwise step reading one for the last time writes its result of
    /// the same size into that buffer; otherwise it is freed after its last
    /// read.
    pub donated_args: Vec<usize>,
    /// Algorithm of the all-gathers and reduce-scatters whose groups each
    /// lie within one node, where it applies (`None`: NCCL's choice): a
    /// program that runs them with kernels of its own (Transformer Engine's
    /// userbuffers: one-shot reads and writes over NVLink, `direct`).
    pub node_local_algorithm: Option<crate::collective::Algorithm>,
    /// With `node_local_algorithm`: those collectives, and the collective
    /// permutes whose devices all lie within one node, pay no protocol
    /// latency (the calibration's launch and per-step figures; each step
    /// still pays its route's link latencies): the program's own kernels
    /// (Transformer Engine's userbuffers copy into a peer's buffer and set a
    /// flag there) are not NCCL kernels with their launch and handshakes.
    pub node_local_latency_free: bool,
}

impl Default for TimedOptions {
    fn default() -> Self {
        TimedOptions {
            seed: 0,
            jitter: None,
            stragglers: Stragglers::new(),
            on_oom: OomPolicy::Stop,
            roofline: parse_roofline(ROOFLINE_TOML).expect("the compiled-in table is valid"),
            calibration: None,
            faults: Vec::new(),
            trip_count: None,
            record_memory: false,
            link_totals: false,
            fusion: false,
            fuse_attention: false,
            per_device: false,
            comm_memo: None,
            progress: None,
            donated_args: Vec::new(),
            node_local_algorithm: None,
            node_local_latency_free: false,
        }
    }
}
