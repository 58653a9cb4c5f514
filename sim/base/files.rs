//! Reading and writing user-named files without hurting the user.
//!
//! Reads are capped (a size limit, [`input_limit`], that a command line flag can
//! lift) so `/dev/urandom` or a huge file is an error, not unbounded memory.
//! Writes never destroy what they replace: a symlink is written through (its
//! target is replaced, never the link), a FIFO or device file is written
//! directly, a directory is refused, and a regular file is replaced through a
//! temporary file in the same folder and a rename; the temporary file is removed
//! on every error path.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Default cap on the size of one input file: 256 MiB (the largest program
/// in the repository is 3 MB).
pub const DEFAULT_INPUT_LIMIT: u64 = 256 << 20;

static INPUT_LIMIT: AtomicU64 = AtomicU64::new(DEFAULT_INPUT_LIMIT);

/// The current cap on input file sizes, in bytes.
pub fn input_limit() -> u64 {
    INPUT_LIMIT.load(Ordering::Relaxed)
}

/// Set the cap on input file sizes (the `--max-input-size` flag).
pub fn set_input_limit(bytes: u64) {
    INPUT_LIMIT.store(bytes, Ordering::Relaxed);
}

/// Why a file could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// The operating system refused.
    #[error("cannot {action} {path}: {message}")]
    Io {
        /// "read" or "write".
        action: &'static str,
        /// The file as the user named it.
        path: String,
        /// What kind of failure.
        kind: std::io::ErrorKind,
        /// The operating system's words.
        message: String,
    },
    /// The input is larger than the cap.
    #[error("{path}: larger than the input size limit of {limit} bytes (raise it with --max-input-size)")]
    TooLarge {
        /// The file.
        path: String,
        /// The cap in bytes.
        limit: u64,
    },
    /// A directory where a file was expected.
    #[error("{path}: is a directory, not a file")]
    IsDirectory {
        /// The path.
        path: String,
    },
    /// The text is not UTF-8.
    #[error("{path}:{line}:{col}: invalid UTF-8 (byte 0x{byte:02x})")]
    NotUtf8 {
        /// The file.
        path: String,
        /// 1-based line of the first bad byte.
        line: usize,
        /// 1-based column (in characters) of the first bad byte.
        col: usize,
        /// The bad byte.
        byte: u8,
    },
}

fn io_err(action: &'static str, path: &Path, source: std::io::Error) -> FileError {
    FileError::Io {
        action,
        path: path.display().to_string(),
        kind: source.kind(),
        message: source.to_string(),
    }
}

/// Read at most `limit` bytes of `path` (an error if there are more).
pub fn read_capped(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    if path.is_dir() {
        return Err(FileError::IsDirectory {
            path: path.display().to_string(),
        });
    }
    let file = std::fs::File::open(path).map_err(|e| io_err("read", path, e))?;
    // A regular file's size is known: refuse it before reading anything.
    if let Ok(m) = file.metadata() {
        if m.is_file() && m.len() > limit {
            return Err(FileError::TooLarge {
                path: path.display().to_string(),
                limit,
            });
        }
    }
    read_from_capped(file, path, limit)
}

/// Read at most `limit` bytes from `reader`; `path` names it in errors.
pub fn read_from_capped(reader: impl Read, path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| io_err("read", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.display().to_string(),
            limit,
        });
    }
    Ok(bytes)
}

/// Read a file (under [`input_limit`]).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, FileError> {
    read_capped(path, input_limit())
}

/// Read a UTF-8 text file (under [`input_limit`]); invalid UTF-8 is an error
/// at the line and column of the first bad byte.
pub fn read_text(path: &Path) -> Result<String, FileError> {
    let bytes = read_bytes(path)?;
    text_from_bytes(bytes, path)
}

/// `bytes` as UTF-8 text, or an error at the first bad byte's line and column.
pub fn text_from_bytes(bytes: Vec<u8>, path: &Path) -> Result<String, FileError> {
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        let before = std::str::from_utf8(&bytes[..good]).unwrap_or_default();
        let (line, col) = super::cursor::line_col(before, good);
        FileError::NotUtf8 {
            path: path.display().to_string(),
            line,
            col,
            byte: bytes[good],
        }
    })
}

/// Where a write to `path` really goes: the final target of a symlink chain
/// (relative links resolved against the link's folder), else `path` itself.
fn resolve_links(path: &Path) -> Result<PathBuf, FileError> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p).map_err(|e| io_err("write", path, e))?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(io_err(
        "write",
        path,
        std::io::Error::other("too many levels of symbolic links"),
    ))
}

/// Write `bytes` to `path` without ever destroying what it replaces (see the
/// module doc): through symlinks, directly into FIFOs and device files, via a
/// temporary file and a rename for regular files.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let mut set = OutputSet::new();
    set.write(path, bytes)?;
    set.commit()
}

/// A file written to its temporary name, waiting for its rename.
#[derive(Debug)]
struct Staged {
    tmp: PathBuf,
    target: PathBuf,
    user_path: PathBuf,
}

/// Writes several files as a unit: each goes to a temporary file next to its
/// target, and only [`OutputSet::commit`] renames them into place, so a run
/// that fails half way keeps no part of its outputs and replaces nothing.
/// Temporary files are removed on every error path (and on drop).
#[derive(Debug, Default)]
pub struct OutputSet {
    staged: Vec<Staged>,
}

impl OutputSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stage one file of the set (FIFOs and device files are written at once:
    /// they cannot be staged). On error every staged file is removed.
    pub fn write(&mut self, path: &Path, bytes: &[u8]) -> Result<(), FileError> {
        let staged = stage(path, bytes);
        match staged {
            Ok(Some(s)) => {
                self.staged.push(s);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                self.discard();
                Err(e)
            }
        }
    }

    /// Rename every staged file into place.
    pub fn commit(mut self) -> Result<(), FileError> {
        let staged = std::mem::take(&mut self.staged);
        let mut result = Ok(());
        for s in staged {
            if result.is_err() {
                let _ = std::fs::remove_file(&s.tmp);
                continue;
            }
            if let Err(e) = std::fs::rename(&s.tmp, &s.target) {
                let _ = std::fs::remove_file(&s.tmp);
                result = Err(io_err("write", &s.user_path, e));
            }
        }
        result
    }

    fn discard(&mut self) {
        for s in self.staged.drain(..) {
            let _ = std::fs::remove_file(&s.tmp);
        }
    }
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        self.discard();
    }
}

/// Write a special file directly, or a regular file to a temporary name.
fn stage(path: &Path, bytes: &[u8]) -> Result<Option<Staged>, FileError> {
    let target = resolve_links(path)?;
    match std::fs::metadata(&target) {
        Ok(m) if m.is_dir() => {
            return Err(FileError::IsDirectory {
                path: path.display().to_string(),
            })
        }
        Ok(m) if !m.is_file() => {
            // A FIFO, a character or block device, a socket: write into it.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&target)
                .map_err(|e| io_err("write", path, e))?;
            f.write_all(bytes)
                .and_then(|()| f.flush())
                .map_err(|e| io_err("write", path, e))?;
            return Ok(None);
        }
        _ => {}
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.flush()
    })();
    match written {
        Ok(()) => Ok(Some(Staged {
            tmp,
            target,
            user_path: path.to_path_buf(),
        })),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(io_err("write", path, e))
        }
    }
}
