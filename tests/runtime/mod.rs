//! The Disco sessions on every backend: simulated, threads, processes.

mod backends;
mod processes;
mod programs;
mod protocol;
