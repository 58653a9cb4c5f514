//! Directed links: a capacity in bytes per second and a latency. A network is a
//! list of them; a link is named by its index (`LinkId`) in that list.

use crate::engine::Time;

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

/// Per-link state the model keeps while running.
#[derive(Debug, Clone)]
pub(crate) struct LinkState {
    pub nominal: f64,
    pub capacity: f64,
    pub latency: Time,
    pub failed: bool,
    /// Active flows (slots) crossing this link, in insertion order.
    pub flows: Vec<u32>,
    /// Sum of the current rates of `flows`, kept up to date as rates change
    /// (an estimate for the slack test; near capacity it is summed exactly).
    pub load: f64,
    /// A bottleneck in the last recomputation that covered it: it froze at
    /// least one flow. A link that is not tight has slack, so no flow's rate
    /// depends on it, and recomputation does not spread through it.
    pub tight: bool,
    /// Scratch for component search and water-filling (epoch marks, local index).
    pub mark: u32,
    pub local: u32,
    /// Scratch for the slack test of links outside the recomputed set.
    pub pmark: u32,
    pub delta: f64,
}

impl LinkState {
    pub fn new(l: &Link) -> LinkState {
        LinkState {
            nominal: l.capacity,
            capacity: l.capacity,
            latency: l.latency,
            failed: false,
            flows: Vec::new(),
            load: 0.0,
            tight: false,
            mark: 0,
            local: 0,
            pmark: 0,
            delta: 0.0,
        }
    }
}
