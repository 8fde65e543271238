//! File-system steps every persistent file goes through. Each I/O error
//! names its path.

use super::PersistError;
use std::fs::{self, File};
use std::path::Path;

pub fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> PersistError + '_ {
    move |source| PersistError::Io {
        path: path.to_owned(),
        source,
    }
}

/// fsync a directory, making renames and creations in it durable.
pub fn sync_dir(dir: &Path) -> Result<(), PersistError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Create `dir` (and parents) if missing.
pub fn ensure_dir(dir: &Path) -> Result<(), PersistError> {
    fs::create_dir_all(dir).map_err(io_err(dir))
}

/// Atomically move a fully written and fsynced `tmp` to `dst`, then fsync
/// the directory: after a crash at any instant, `dst` is the old file or
/// the new one, never a torn mix.
pub fn commit_rename(tmp: &Path, dst: &Path) -> Result<(), PersistError> {
    fs::rename(tmp, dst).map_err(io_err(dst))?;
    let dir = dst.parent().unwrap_or(Path::new("."));
    sync_dir(dir)
}
