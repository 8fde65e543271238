//! File-system steps every persistent file goes through. Each I/O error
//! names its path.

use super::PersistError;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

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

/// `(number, path)` of every file in `dir` named `<prefix><number><suffix>`,
/// in ascending order. Other files (temporaries, the lock) are ignored.
pub fn list_numbered(
    dir: &Path,
    prefix: &str,
    suffix: &str,
) -> Result<Vec<(u64, PathBuf)>, PersistError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let path = entry.map_err(io_err(dir))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(num) = name
            .strip_prefix(prefix)
            .and_then(|n| n.strip_suffix(suffix))
        {
            if let Ok(n) = num.parse() {
                out.push((n, path));
            }
        }
    }
    out.sort();
    Ok(out)
}
