//! [`ProcessSession`]: N worker processes, each the `shardsim` binary run as
//! `shardsim worker --index I --workers N` (a hidden subcommand), speaking the
//! framed protocol of [`super::protocol`] on its stdin and stdout. One thread
//! per worker reads its frames, one writes them, so the controller never
//! blocks on a pipe and sees a dead worker (end of stream) at once. Shutdown
//! closes every stdin, waits briefly, kills what is left and waits for every
//! child: no zombies.

use std::io::{BufReader, BufWriter};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::topology::Topology;

use super::protocol::{read_frame, write_frame, Frame, FromWorker, ToWorker};
use super::remote::{Event, Remote, Transport};
use super::worker::{Port, Worker};
use super::SessionError;

/// Disco's `ProcessSession`.
pub type ProcessSession = Remote<ProcessTransport>;

/// Pipes to worker processes.
pub struct ProcessTransport {
    children: Vec<Child>,
    writers: Vec<Option<Sender<Frame<ToWorker>>>>,
    events: Receiver<(usize, Event)>,
    threads: Vec<JoinHandle<()>>,
    reaped: bool,
}

impl Remote<ProcessTransport> {
    /// A session of `workers` processes running `entrypoint` (the `shardsim`
    /// binary; `std::env::current_exe()` from within it).
    pub fn start_processes(
        topo: Topology,
        workers: usize,
        entrypoint: &Path,
    ) -> Result<ProcessSession, SessionError> {
        if workers == 0 {
            return Err(SessionError::Ccl(
                "a session needs at least one worker".into(),
            ));
        }
        let (ev_tx, events) = mpsc::channel();
        let mut t = ProcessTransport {
            children: Vec::new(),
            writers: Vec::new(),
            events,
            threads: Vec::new(),
            reaped: false,
        };
        for w in 0..workers {
            // On failure `t` is dropped, which reaps the workers started so far.
            t.spawn(entrypoint, w, workers, ev_tx.clone())?;
        }
        Ok(Remote::new(t, workers, topo))
    }
}

impl ProcessTransport {
    fn spawn(
        &mut self,
        entrypoint: &Path,
        w: usize,
        workers: usize,
        ev_tx: Sender<(usize, Event)>,
    ) -> Result<(), SessionError> {
        let mut child = Command::new(entrypoint)
            .args([
                "worker",
                "--index",
                &w.to_string(),
                "--workers",
                &workers.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| SessionError::Spawn(format!("{}: {e}", entrypoint.display())))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        self.children.push(child);
        let (tx, rx) = mpsc::channel::<Frame<ToWorker>>();
        self.writers.push(Some(tx));
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|e| SessionError::Spawn(e.to_string()))
        };
        self.threads.push(spawn(
            format!("shardsim-w{w}-write"),
            Box::new(move || {
                let mut out = BufWriter::new(stdin);
                for f in rx {
                    if write_frame(&mut out, &f).is_err() {
                        break;
                    }
                }
                // Dropping stdin tells the worker to end.
            }),
        )?);
        self.threads.push(spawn(
            format!("shardsim-w{w}-read"),
            Box::new(move || {
                let mut inp = BufReader::new(stdout);
                loop {
                    let ev = match read_frame::<FromWorker>(&mut inp) {
                        Ok(Some(f)) => Event::Frame(f),
                        Ok(None) => Event::Closed("its output ended".into()),
                        Err(e) => Event::Closed(format!("its output broke: {e}")),
                    };
                    let last = matches!(ev, Event::Closed(_));
                    if ev_tx.send((w, ev)).is_err() || last {
                        break;
                    }
                }
            }),
        )?);
        Ok(())
    }

    /// The workers' process ids (for tests and diagnostics).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|c| c.id()).collect()
    }
}

impl Transport for ProcessTransport {
    fn send(&mut self, worker: usize, f: Frame<ToWorker>) -> Result<(), String> {
        self.writers[worker]
            .as_ref()
            .ok_or_else(|| format!("worker {worker} was shut down"))?
            .send(f)
            .map_err(|_| format!("worker {worker}'s pipe is closed"))
    }

    fn events(&self) -> &Receiver<(usize, Event)> {
        &self.events
    }

    fn why_closed(&mut self, w: usize) -> String {
        // The process may take a moment to be reapable after its pipe closes.
        let deadline = Instant::now() + Duration::from_millis(500);
        loop {
            match self.children[w].try_wait() {
                Ok(Some(status)) => return format!("worker process exited: {}", describe(status)),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Ok(None) => return "worker process closed its output but still runs".into(),
                Err(e) => return format!("worker process: {e}"),
            }
        }
    }

    fn shutdown(&mut self) {
        if self.reaped {
            return;
        }
        self.reaped = true;
        for w in &mut self.writers {
            w.take();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        for c in &mut self.children {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ProcessTransport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn describe(s: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = s.signal() {
            return format!("killed by signal {sig}");
        }
    }
    s.to_string()
}

/// Stdin/stdout of a worker process.
struct StdioPort {
    inp: BufReader<std::io::Stdin>,
    out: BufWriter<std::io::Stdout>,
}

impl Port for StdioPort {
    fn recv(&mut self) -> Result<Frame<ToWorker>, String> {
        match read_frame(&mut self.inp) {
            Ok(Some(f)) => Ok(f),
            Ok(None) => Err("the controller closed the pipe".into()),
            Err(e) => Err(e.to_string()),
        }
    }
    fn send(&mut self, f: Frame<FromWorker>) -> Result<(), String> {
        write_frame(&mut self.out, &f).map_err(|e| e.to_string())
    }
}

/// The worker process's main loop (`shardsim worker`): serve commands on
/// stdin/stdout until shutdown or until the controller closes the pipe.
pub fn serve_stdio(index: usize, workers: usize) {
    let mut port = StdioPort {
        inp: BufReader::new(std::io::stdin()),
        out: BufWriter::new(std::io::stdout()),
    };
    Worker::new(index, workers).serve(&mut port);
}
