//! What a timed run produces: spans per device stream, bytes per link and
//! collective step, memory peaks and out-of-memory reports.

use serde::Serialize;

use super::memory::{MemorySample, OomReport, ScopePeak};

/// Which stream of a device a span ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamKind {
    Compute,
    Comm,
}

/// One step on one device's stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Span {
    pub device: u64,
    pub stream: StreamKind,
    pub step: usize,
    pub start_ps: u64,
    pub end_ps: u64,
    /// Op name without dialect (`dot_general`) or collective kind (`all_reduce`).
    pub op: String,
    /// The value it produces (`%4`).
    pub value: String,
    pub flops: u64,
    /// Bytes read and written (compute) or the collective's per-device buffer.
    pub bytes: u64,
    /// Collectives: `algorithm/protocol`.
    pub detail: String,
}

/// Bytes a link carried during one collective step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkBusy {
    pub link: usize,
    pub step: usize,
    pub start_ps: u64,
    pub end_ps: u64,
    pub bytes: u64,
}

/// The result of a timed run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    /// End of the last step on any device (the step time).
    pub makespan_ps: u64,
    pub devices: Vec<u64>,
    pub spans: Vec<Span>,
    pub links: Vec<LinkBusy>,
    pub peaks: Vec<ScopePeak>,
    /// Bytes in use per device and scope over time (empty unless
    /// `TimedOptions::record_memory`).
    pub memory: Vec<MemorySample>,
    pub ooms: Vec<OomReport>,
    /// True when an out-of-memory report stopped the run.
    pub stopped: bool,
    /// Engine events processed.
    pub events: u64,
}
