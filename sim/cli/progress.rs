//! Progress bars for commands that may run longer than a second: an
//! indicatif bar on stderr that appears only once a second has passed, and
//! never when stdout or stderr is not a terminal or `CI` is set (no bars in
//! logs, nor over output piped to a file).

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use shardsim::exec::timed::{ProgressHook, RunProgress};

/// How long a run goes before its bar appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// Whether bars may be drawn: stdout and stderr are terminals and `CI` is
/// unset or false.
pub fn enabled() -> bool {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    !ci && std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// A bar of `len` units labelled `what`, hidden for its first second.
pub struct Progress {
    bar: ProgressBar,
    start: Instant,
    enabled: bool,
    shown: bool,
}

impl Progress {
    pub fn new(len: u64, what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        if let Ok(style) =
            ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} {elapsed} (eta {eta})")
        {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        Progress {
            bar,
            start: Instant::now(),
            enabled: enabled(),
            shown: false,
        }
    }

    /// One more unit done.
    pub fn inc(&mut self) {
        self.bar.inc(1);
        self.reveal();
    }

    /// Change the label (e.g. the item now running).
    pub fn message(&mut self, what: String) {
        self.bar.set_message(what);
        self.reveal();
    }

    /// Set the position and length (a timed run's steps).
    pub fn set(&mut self, done: u64, total: u64) {
        // Never show a position past the length, even for one draw.
        if self.bar.position() > total {
            self.bar.set_position(done);
            self.bar.set_length(total);
        } else {
            self.bar.set_length(total);
            self.bar.set_position(done);
        }
        self.reveal();
    }

    /// Run `f` (which prints) with the bar cleared, then redraw it.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    fn reveal(&mut self) {
        if self.enabled && !self.shown && self.start.elapsed() >= SHOW_AFTER {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// A bar following timed runs through the library's [`ProgressHook`]: the
/// current run's steps, and how many runs have finished (a training step
/// times many programs). The bar goes when this is dropped, even while a
/// hook handed out still exists.
pub struct TimedBar {
    progress: Arc<Mutex<Progress>>,
    /// The label, and runs finished under it.
    label: Arc<Mutex<(String, u64)>>,
}

impl TimedBar {
    pub fn new(what: &str) -> TimedBar {
        TimedBar {
            progress: Arc::new(Mutex::new(Progress::new(0, what))),
            label: Arc::new(Mutex::new((what.to_string(), 0))),
        }
    }

    /// The hook to put in the runs' `TimedOptions::progress`.
    pub fn hook(&self) -> ProgressHook {
        let progress = Arc::clone(&self.progress);
        let label = Arc::clone(&self.label);
        ProgressHook(Arc::new(move |r: RunProgress| {
            let Ok(mut p) = progress.lock() else {
                return;
            };
            p.set(r.done, r.total);
            if r.finished {
                if let Ok(mut l) = label.lock() {
                    l.1 += 1;
                    p.message(format!("{} ({} timed runs done)", l.0, l.1));
                }
            }
        }))
    }

    /// Change the label (e.g. the size now running).
    pub fn message(&self, what: String) {
        if let Ok(mut l) = self.label.lock() {
            *l = (what.clone(), 0);
        }
        if let Ok(mut p) = self.progress.lock() {
            p.message(what);
        }
    }

    /// Run `f` (which prints) with the bar cleared, then redraw it.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match self.progress.lock() {
            Ok(p) => p.suspend(f),
            Err(_) => f(),
        }
    }
}

impl Drop for TimedBar {
    fn drop(&mut self) {
        if let Ok(p) = self.progress.lock() {
            p.bar.finish_and_clear();
        }
    }
}
