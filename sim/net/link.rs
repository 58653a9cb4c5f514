//! Directed links: a capacity in bytes per second and a latency. A network is a
//! list of them; a link is named by its index (`LinkId`) in that list.

use crate::engine::Time;

use super::spans::Span;

/// Index of a link in the network's link list.
pub type LinkId = usize;

/// A directed link as given by the caller (the topology layer builds these).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Bandwidth in bytes per second (finite, > 0).
    pub capacity: f64,
    /// Propagation plus fixed per-hop latency.
    pub latency: Time,
}

impl Link {
    pub fn new(capacity_bytes_per_sec: f64, latency: Time) -> Link {
        Link {
            capacity: capacity_bytes_per_sec,
            latency,
        }
    }
}

/// What the model keeps of a link besides its running state (read when a
/// flow starts or a link fails).
#[derive(Debug, Clone)]
pub(crate) struct LinkInfo {
    pub nominal: f64,
    pub latency: Time,
    pub failed: bool,
}

/// Per-link running state, the fields rate recomputation reads, packed in
/// one record (it reaches links in no particular order).
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkState {
    pub capacity: f64,
    /// Sum of the current rates of its flows, kept up to date as rates change
    /// (an estimate for the slack test; near capacity it is summed exactly).
    pub load: f64,
    /// Scratch for the slack test of links outside the recomputed set.
    pub delta: f64,
    /// Active flows (slots) crossing this link, in insertion order, in the
    /// network's list arena.
    pub flows: Span,
    /// Scratch for component search and water-filling (epoch marks, local index).
    pub mark: u32,
    pub local: u32,
    pub pmark: u32,
    /// A bottleneck in the last recomputation that covered it: it froze at
    /// least one flow. A link that is not tight has slack, so no flow's rate
    /// depends on it, and recomputation does not spread through it.
    pub tight: bool,
}

impl LinkState {
    pub fn new(l: &Link) -> (LinkState, LinkInfo) {
        let state = LinkState {
            capacity: l.capacity,
            ..LinkState::default()
        };
        let info = LinkInfo {
            nominal: l.capacity,
            latency: l.latency,
            failed: false,
        };
        (state, info)
    }
}
