//! Collectives: numerics of every algorithm against the single-device result,
//! alpha-beta lower bounds and the ring closed form on ideal links,
//! calibration against published NCCL measurements, the session API, the CLI.

mod bounds;
mod calibration;
mod channels;
mod groups;
mod multinode;
mod numerics;
mod nvls;
mod rings;
mod session;
