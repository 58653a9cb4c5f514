//! The event log: one record per observable event, in the order the simulation
//! processed them, written as CSV. The text depends only on the records, so the
//! same inputs and seed give byte-identical files.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use super::time::Time;

/// One logged event. `subject` is the flow, task or device it concerns; `detail`
/// is free text without commas or newlines (fields are written unquoted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub time: Time,
    pub kind: &'static str,
    pub subject: u64,
    pub detail: String,
}

/// An append-only event log; a disabled log records nothing (for benchmarks).
#[derive(Debug, Clone, Default)]
pub struct EventLog {
    enabled: bool,
    records: Vec<LogRecord>,
}

impl EventLog {
    pub fn enabled() -> Self {
        EventLog {
            enabled: true,
            records: Vec::new(),
        }
    }

    pub fn disabled() -> Self {
        EventLog {
            enabled: false,
            records: Vec::new(),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Append a record; `detail` is only built when the log is enabled.
    pub fn record(
        &mut self,
        time: Time,
        kind: &'static str,
        subject: u64,
        detail: impl FnOnce() -> String,
    ) {
        if self.enabled {
            let detail = detail().replace([',', '\n', '\r'], ";");
            self.records.push(LogRecord {
                time,
                kind,
                subject,
                detail,
            });
        }
    }

    pub fn records(&self) -> &[LogRecord] {
        &self.records
    }

    /// The log as CSV text: header `time_ps,kind,subject,detail`.
    pub fn to_csv(&self) -> String {
        let mut s = String::with_capacity(32 * (self.records.len() + 1));
        s.push_str("time_ps,kind,subject,detail\n");
        for r in &self.records {
            let _ = writeln!(s, "{},{},{},{}", r.time.0, r.kind, r.subject, r.detail);
        }
        s
    }

    /// Write the CSV to `path` via a temporary file and a rename.
    pub fn write_csv(&self, path: &Path) -> io::Result<()> {
        write_atomically(path, self.to_csv().as_bytes())
    }
}

/// Write `bytes` to `path` without destroying what it replaces: through a
/// temporary file in the same folder and a rename (readers never see a
/// half-written file), through symlinks, directly into FIFOs and devices; see
/// [`crate::base::files::write_file`].
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use crate::base::files::FileError;
    crate::base::files::write_file(path, bytes).map_err(|e| match e {
        FileError::Io { kind, message, .. } => io::Error::new(kind, message),
        other => io::Error::other(other.to_string()),
    })
}
