//! [`ThreadedSession`]: N worker threads in this process, each with its own
//! registers, talking to the controller over channels (frames are passed, not
//! encoded). Collective chunks between workers go through the controller, as
//! in the process backend. A hung thread cannot be killed: shutdown waits a
//! moment for each thread and leaves a hung one detached (it holds no lock
//! and ends when its channel closes).

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::topology::Topology;

use super::protocol::{Frame, FromWorker, ToWorker};
use super::remote::{Event, Remote, Transport};
use super::worker::{Port, Worker};

/// Disco's `ThreadedSession`.
pub type ThreadedSession = Remote<ThreadTransport>;

/// Channels to worker threads.
pub struct ThreadTransport {
    inboxes: Vec<Option<Sender<Frame<ToWorker>>>>,
    events: Receiver<(usize, Event)>,
    handles: Vec<Option<JoinHandle<()>>>,
}

struct ThreadPort {
    me: usize,
    inbox: Receiver<Frame<ToWorker>>,
    out: Sender<(usize, Event)>,
}

impl Port for ThreadPort {
    fn recv(&mut self) -> Result<Frame<ToWorker>, String> {
        self.inbox
            .recv()
            .map_err(|_| "the controller is gone".to_string())
    }
    fn send(&mut self, f: Frame<FromWorker>) -> Result<(), String> {
        self.out
            .send((self.me, Event::Frame(f)))
            .map_err(|_| "the controller is gone".to_string())
    }
}

/// Tells the controller when the worker thread ends, however it ends (a panic too).
struct ClosedOnDrop(usize, Sender<(usize, Event)>);

impl Drop for ClosedOnDrop {
    fn drop(&mut self) {
        let why = if std::thread::panicking() {
            "the worker thread panicked"
        } else {
            "the worker thread ended"
        };
        let _ = self.1.send((self.0, Event::Closed(why.into())));
    }
}

impl Remote<ThreadTransport> {
    /// A session of `workers` threads; collectives take their plans from `topo`.
    pub fn start_threads(
        topo: Topology,
        workers: usize,
    ) -> Result<ThreadedSession, super::SessionError> {
        if workers == 0 {
            return Err(super::SessionError::Ccl(
                "a session needs at least one worker".into(),
            ));
        }
        let (ev_tx, events) = mpsc::channel();
        let mut inboxes = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for me in 0..workers {
            let (tx, inbox) = mpsc::channel();
            let out = ev_tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("shardsim-worker-{me}"))
                .spawn(move || {
                    let _closed = ClosedOnDrop(me, out.clone());
                    let mut port = ThreadPort { me, inbox, out };
                    Worker::new(me, workers).serve(&mut port);
                })
                .map_err(|e| super::SessionError::Spawn(e.to_string()))?;
            inboxes.push(Some(tx));
            handles.push(Some(h));
        }
        let t = ThreadTransport {
            inboxes,
            events,
            handles,
        };
        Ok(Remote::new(t, workers, topo))
    }
}

impl Transport for ThreadTransport {
    fn send(&mut self, worker: usize, f: Frame<ToWorker>) -> Result<(), String> {
        self.inboxes[worker]
            .as_ref()
            .ok_or_else(|| format!("worker {worker} was shut down"))?
            .send(f)
            .map_err(|_| format!("worker {worker}'s thread has ended"))
    }

    fn events(&self) -> &Receiver<(usize, Event)> {
        &self.events
    }

    fn why_closed(&mut self, w: usize) -> String {
        format!("worker thread {w} is gone")
    }

    fn shutdown(&mut self) {
        // Closing the inboxes ends every waiting worker.
        for i in &mut self.inboxes {
            i.take();
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        for h in &mut self.handles {
            while h.as_ref().is_some_and(|h| !h.is_finished()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if h.as_ref().is_some_and(|h| h.is_finished()) {
                let _ = h.take().expect("present").join();
            }
        }
    }
}
