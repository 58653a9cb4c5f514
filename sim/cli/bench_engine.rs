//! `shardsim bench engine`: (a) raw event-queue throughput (a "hold" model:
//! pop the earliest event, push one a random delay later, at a fixed queue
//! size); (b) a ring allreduce over many devices on the flow model, timed, with
//! its simulated time against the closed form 2(n-1)(α + S/(nB)); (c) peak
//! memory (VmHWM) versus devices, each size measured in a fresh child process.

use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use rand::RngExt;
use serde::Serialize;

use shardsim::engine::{component_rng, EventQueue, Time};
use shardsim::net::patterns::{ring_allreduce_closed_form, ring_links, run_ring_allreduce};
use shardsim::net::NetSim;

use super::output::{parse_u64_list, Format};

#[derive(Debug, Args)]
pub struct EngineBenchArgs {
    /// Events pushed and popped in the queue-throughput part.
    #[arg(long, default_value_t = 20_000_000)]
    events: u64,
    /// Queue sizes held constant during the throughput part.
    #[arg(long, default_value = "1024,65536,1048576")]
    queue_sizes: String,
    /// Devices in the ring allreduce.
    #[arg(long, default_value_t = 4096)]
    devices: u64,
    /// Concurrent chunk flows per (rank, step) message.
    #[arg(long, default_value_t = 1)]
    chunks: u64,
    /// Allreduce size S in bytes (each rank sends S/n per step).
    #[arg(long, default_value_t = 1 << 30)]
    bytes: u64,
    /// Link bandwidth in GB/s (1e9 bytes/s) and latency in ns.
    #[arg(long, default_value_t = 50)]
    link_gbps: u64,
    #[arg(long, default_value_t = 1000)]
    latency_ns: u64,
    /// Device counts for the memory sweep (empty to skip).
    #[arg(long, default_value = "512,1024,2048,4096")]
    memory_devices: String,
    /// Only run the ring allreduce and print one JSON line (used by the sweep).
    #[arg(long, hide = true)]
    ring_only: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Debug, Serialize)]
struct QueueFigure {
    queue_size: u64,
    events: u64,
    seconds: f64,
    cpu_seconds: f64,
    events_per_sec: f64,
    events_per_cpu_sec: f64,
}

#[derive(Debug, Serialize, serde::Deserialize)]
struct RingFigure {
    devices: u64,
    chunks: u64,
    flows: u64,
    /// Flows the network simulated (chunks of a message aggregated).
    simulated_flows: u64,
    events: u64,
    wall_seconds: f64,
    cpu_seconds: f64,
    events_per_sec: f64,
    events_per_cpu_sec: f64,
    simulated_ps: u64,
    closed_form_ps: u64,
    vm_hwm_kib: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    queue: Vec<QueueFigure>,
    ring: RingFigure,
    memory: Vec<RingFigure>,
}

pub fn run(a: EngineBenchArgs) -> anyhow::Result<()> {
    if a.devices < 2 || a.chunks == 0 || a.link_gbps == 0 {
        bail!("--devices must be >= 2, --chunks and --link-gbps > 0");
    }
    if a.ring_only {
        let r = ring(&a, a.devices)?;
        outln!("{}", serde_json::to_string(&r)?)?;
        return Ok(());
    }
    let queue_sizes = parse_u64_list(&a.queue_sizes, "--queue-sizes")?;
    let memory_devices = if a.memory_devices.trim().is_empty() {
        Vec::new()
    } else {
        parse_u64_list(&a.memory_devices, "--memory-devices")?
    };
    let mut bar = super::progress::Progress::new(
        (queue_sizes.len() + 1 + memory_devices.len()) as u64,
        "bench engine",
    );
    let mut queue = Vec::new();
    for h in queue_sizes {
        bar.message(format!("bench engine: queue of {h}"));
        queue.push(queue_throughput(h, a.events));
        bar.inc();
    }
    bar.message(format!("bench engine: ring of {}", a.devices));
    let ring_fig = ring(&a, a.devices)?;
    bar.inc();
    let mut memory = Vec::new();
    for n in memory_devices {
        bar.message(format!("bench engine: memory at {n} devices"));
        memory.push(child_ring(&a, n)?);
        bar.inc();
    }
    drop(bar);
    let report = Report {
        queue,
        ring: ring_fig,
        memory,
    };
    match a.format {
        Format::Json => outln!("{}", serde_json::to_string_pretty(&report)?)?,
        Format::Text => print_text(&report)?,
    }
    Ok(())
}

/// Hold model: keep `size` events queued; pop one, push one a random delay later.
fn queue_throughput(size: u64, events: u64) -> QueueFigure {
    let mut rng = component_rng(1, "bench/queue");
    let mut q: EventQueue<u64> = EventQueue::with_capacity(size as usize);
    for i in 0..size {
        q.push(Time(rng.random_range(0..1_000_000)), i);
    }
    // Delays drawn up front so the timed loop measures the queue, not the generator.
    let delays: Vec<u64> = (0..1 << 16)
        .map(|_| rng.random_range(1..1_000_000))
        .collect();
    let start = Instant::now();
    let cpu0 = thread_cpu_seconds();
    let mut checksum = 0u64;
    for i in 0..events {
        let (t, _, p) = q.pop().expect("hold model keeps the queue non-empty");
        checksum = checksum.wrapping_add(p);
        q.push(Time(t.0 + delays[i as usize & 0xffff]), p);
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = thread_cpu_seconds() - cpu0;
    std::hint::black_box(checksum);
    QueueFigure {
        queue_size: size,
        events,
        seconds,
        cpu_seconds,
        events_per_sec: events as f64 / seconds,
        events_per_cpu_sec: events as f64 / cpu_seconds,
    }
}

fn ring(a: &EngineBenchArgs, n: u64) -> anyhow::Result<RingFigure> {
    let bw = a.link_gbps * 1_000_000_000;
    let latency = Time::from_ns(a.latency_ns)?;
    let per_rank = a.bytes / n;
    let chunk_bytes = per_rank / a.chunks;
    let mut sim: NetSim<()> = NetSim::new(&ring_links(n as usize, bw as f64, latency), 0)?;
    let start = Instant::now();
    let cpu0 = thread_cpu_seconds();
    let run = run_ring_allreduce(&mut sim, n as usize, a.chunks as usize, chunk_bytes)?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = thread_cpu_seconds() - cpu0;
    let events = sim.events_processed();
    let closed = ring_allreduce_closed_form(n, chunk_bytes * a.chunks, bw, latency)?;
    Ok(RingFigure {
        devices: n,
        chunks: a.chunks,
        flows: run.flows,
        simulated_flows: run.simulated_flows,
        events,
        wall_seconds: wall,
        cpu_seconds: cpu,
        events_per_sec: events as f64 / wall,
        events_per_cpu_sec: events as f64 / cpu,
        simulated_ps: run.time.0,
        closed_form_ps: closed.0,
        vm_hwm_kib: vm_hwm_kib().unwrap_or(0),
    })
}

/// Run one ring size in a fresh process so its peak RSS is its own.
fn child_ring(a: &EngineBenchArgs, n: u64) -> anyhow::Result<RingFigure> {
    let exe = std::env::current_exe().context("locating the shardsim binary")?;
    let out = std::process::Command::new(exe)
        .args(["bench", "engine", "--ring-only"])
        .args([
            "--devices",
            &n.to_string(),
            "--chunks",
            &a.chunks.to_string(),
        ])
        .args([
            "--bytes",
            &a.bytes.to_string(),
            "--link-gbps",
            &a.link_gbps.to_string(),
        ])
        .args(["--latency-ns", &a.latency_ns.to_string()])
        .output()
        .context("running the ring benchmark child")?;
    if !out.status.success() {
        bail!(
            "ring benchmark child for {n} devices failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("reading the child's figures")
}

/// CPU time of this thread in seconds (Linux schedstat: ns on CPU); the
/// machine may be shared, so wall time alone understates throughput.
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(f64::NAN, |ns| ns as f64 / 1e9)
}

/// Peak resident set size of this process (Linux), in KiB.
fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn print_text(r: &Report) -> anyhow::Result<()> {
    outln!("event queue (hold model, pop + push = 1 event):")?;
    for q in &r.queue {
        outln!(
            "  queue size {:>9}: {:>11} events in {:.3} s wall, {:.3} s CPU = {:.2} M events/s wall, {:.2} M events/CPU-s",
            q.queue_size,
            q.events,
            q.seconds,
            q.cpu_seconds,
            q.events_per_sec / 1e6,
            q.events_per_cpu_sec / 1e6
        )?;
    }
    let g = &r.ring;
    outln!("ring allreduce:")?;
    print_ring(g)?;
    if !r.memory.is_empty() {
        outln!("memory versus devices (fresh process each):")?;
        for m in &r.memory {
            print_ring(m)?;
        }
    }
    Ok(())
}

fn print_ring(g: &RingFigure) -> anyhow::Result<()> {
    let diff = g.simulated_ps as f64 / g.closed_form_ps.max(1) as f64 - 1.0;
    outln!(
        "  {} devices x {} chunks: {} chunk transfers as {} flows, {} events in {:.3} s wall, {:.3} s CPU ({:.2} M events/CPU-s); simulated {} ps vs closed form {} ps ({:+.2e}); peak RSS {} KiB",
        g.devices,
        g.chunks,
        g.flows,
        g.simulated_flows,
        g.events,
        g.wall_seconds,
        g.cpu_seconds,
        g.events_per_cpu_sec / 1e6,
        g.simulated_ps,
        g.closed_form_ps,
        diff,
        g.vm_hwm_kib
    )
}
