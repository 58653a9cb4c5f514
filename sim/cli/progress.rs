//! Progress bars for commands that may run longer than a second: an
//! indicatif bar on stderr that appears only once a second has passed, and
//! never when stderr is not a terminal or `CI` is set (no bars in logs).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a run goes before its bar appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// Whether bars may be drawn: stderr is a terminal and `CI` is unset or false.
pub fn enabled() -> bool {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    !ci && std::io::stderr().is_terminal()
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
