//! The collections on disk: `storage.data_dir/collections/<name>/`, each
//! with a manifest (`collection.json`: its settings and creation time)
//! beside its own snapshots and log. The `default` collection lives in
//! `data_dir` itself (where a single-index server kept its files) and has
//! no manifest: its settings are the server's configuration; only its
//! creation time is kept, in `data_dir/default.json` (written once, like
//! a manifest update: [`default_collection`], with the text recipe version
//! its data is written with).
//!
//! Every change is atomic and durable before it is acknowledged:
//! - **create**: the manifest is written and fsynced in a hidden
//!   `.creating-*` directory, which is then renamed to `<name>` and the
//!   parent fsynced: after a crash the collection exists whole or not at all;
//! - **update** (the manifest of an existing collection): temporary file,
//!   fsync, rename, directory fsync ([`fsops::commit_rename`]);
//! - **delete**: `<name>` is renamed to a hidden `.deleted-*` tombstone and
//!   the parent fsynced (from then on the collection is gone), then the
//!   tombstone is removed; a crash before that leaves a tombstone, which the
//!   next start removes.

use super::fsops::{self, io_err};
use super::PersistError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Subdirectory of `data_dir` holding the named collections.
pub const COLLECTIONS_DIR: &str = "collections";
/// A collection's manifest file.
pub const MANIFEST: &str = "collection.json";
const CREATING: &str = ".creating-";
const DELETED: &str = ".deleted-";

/// `data_dir/collections`.
pub fn root(data_dir: &Path) -> PathBuf {
    data_dir.join(COLLECTIONS_DIR)
}

/// The file in `data_dir` holding when the `default` collection was created.
pub const DEFAULT_CREATED: &str = "default.json";

/// `default.json`: the `default` collection's creation time, and the
/// version of the text recipe its data is written with (absent in files
/// of releases before recipes had versions: version 1, if there is data).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultCreated {
    created_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text_version: Option<u8>,
}

/// What `default.json` says of the `default` collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefaultCollection {
    /// When it was created.
    pub created_ms: u64,
    /// The text recipe version its data is written with; `None` for a
    /// data directory that has no data yet and names none.
    pub text_version: Option<u8>,
}

/// Whether `data_dir` holds the `default` collection's data: a snapshot
/// or a log segment.
fn has_default_data(data_dir: &Path) -> Result<bool, PersistError> {
    Ok(!super::snapshot::list_snapshots(data_dir)?.is_empty()
        || !super::wal::list_segments(data_dir)?.is_empty())
}

/// The `default` collection of `data_dir`: what its file says, or on the
/// first start (or the first since an upgrade) `now`. Data written before
/// the file named a text version is version 1. A damaged file is an
/// error.
pub fn default_collection(data_dir: &Path, now: u64) -> Result<DefaultCollection, PersistError> {
    let path = data_dir.join(DEFAULT_CREATED);
    let legacy = || -> Result<Option<u8>, PersistError> {
        Ok(has_default_data(data_dir)?.then_some(crate::text::LEGACY_TEXT_VERSION))
    };
    match fs::read(&path) {
        Ok(bytes) => {
            let d = serde_json::from_slice::<DefaultCreated>(&bytes).map_err(|e| {
                PersistError::Corrupt {
                    path,
                    offset: e.column() as u64,
                    reason: format!("unreadable record of the default collection: {e}"),
                }
            })?;
            let text_version = match d.text_version {
                Some(v) => Some(v),
                None => legacy()?,
            };
            Ok(DefaultCollection {
                created_ms: d.created_ms,
                text_version,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DefaultCollection {
            created_ms: now,
            text_version: legacy()?,
        }),
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// Write `default.json` (atomically and durably) if it does not say
/// `record` already.
pub fn record_default_collection(
    data_dir: &Path,
    record: DefaultCollection,
) -> Result<(), PersistError> {
    let path = data_dir.join(DEFAULT_CREATED);
    let bytes = serde_json::to_vec(&DefaultCreated {
        created_ms: record.created_ms,
        text_version: record.text_version,
    })
    .expect("a record serializes");
    if fs::read(&path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    let tmp = data_dir.join(format!("{DEFAULT_CREATED}.tmp"));
    if let Err(e) = write_file_synced(&tmp, &bytes) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fsops::commit_rename(&tmp, &path)
}

/// A name no other temporary directory of this process has.
fn unique(prefix: &str, name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Create `root` if missing and remove what a crash left: unfinished
/// creations and tombstones. Returns how many were removed.
pub fn clean_leftovers(root: &Path) -> Result<usize, PersistError> {
    fsops::ensure_dir(root)?;
    let mut removed = 0;
    for entry in fs::read_dir(root).map_err(io_err(root))? {
        let path = entry.map_err(io_err(root))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with(CREATING) || name.starts_with(DELETED) {
            fs::remove_dir_all(&path).map_err(io_err(&path))?;
            tracing::info!(path = %path.display(), "removed what an interrupted collection change left");
            removed += 1;
        }
    }
    if removed > 0 {
        fsops::sync_dir(root)?;
    }
    Ok(removed)
}

/// `(name, dir)` of every collection directory under `root`, by name.
pub fn list(root: &Path) -> Result<Vec<(String, PathBuf)>, PersistError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(root).map_err(io_err(root))? {
        let entry = entry.map_err(io_err(root))?;
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with('.') || !entry.file_type().map_err(io_err(&path))?.is_dir() {
            continue;
        }
        out.push((name.to_owned(), path));
    }
    out.sort();
    Ok(out)
}

/// Read and parse `dir`'s manifest; a missing or unreadable one is damage.
pub fn read_manifest<T: DeserializeOwned>(dir: &Path) -> Result<T, PersistError> {
    let path = dir.join(MANIFEST);
    let bytes = fs::read(&path).map_err(io_err(&path))?;
    serde_json::from_slice(&bytes).map_err(|e| PersistError::Corrupt {
        path,
        offset: e.column() as u64,
        reason: format!("unreadable collection manifest: {e}"),
    })
}

fn write_file_synced(path: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    use std::io::Write;
    let mut f = fs::File::create(path).map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))
}

/// Create collection `name` under `root` with `manifest`, atomically and
/// durably. `AlreadyExists` (as an I/O error) if the directory exists.
pub fn create<T: Serialize>(
    root: &Path,
    name: &str,
    manifest: &T,
) -> Result<PathBuf, PersistError> {
    let dir = root.join(name);
    let staging = root.join(unique(CREATING, name));
    let staged = (|| {
        fs::create_dir(&staging).map_err(io_err(&staging))?;
        let bytes = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
        write_file_synced(&staging.join(MANIFEST), &bytes)?;
        fsops::sync_dir(&staging)?;
        if dir.exists() {
            return Err(io_err(&dir)(std::io::ErrorKind::AlreadyExists.into()));
        }
        fs::rename(&staging, &dir).map_err(io_err(&dir))?;
        fsops::sync_dir(root)
    })();
    if staged.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    staged.map(|()| dir)
}

/// Replace `dir`'s manifest atomically and durably.
pub fn write_manifest<T: Serialize>(dir: &Path, manifest: &T) -> Result<(), PersistError> {
    let path = dir.join(MANIFEST);
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    let bytes = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
    if let Err(e) = write_file_synced(&tmp, &bytes) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fsops::commit_rename(&tmp, &path)
}

/// The file of a collection's registered templates, beside its manifest.
pub const TEMPLATES: &str = "templates.json";

/// The templates kept in `dir` (none without the file); a damaged file is
/// named, never read as empty.
pub fn read_templates(dir: &Path) -> Result<Vec<crate::engine::Template>, PersistError> {
    let path = dir.join(TEMPLATES);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&path)(e)),
    };
    serde_json::from_slice(&bytes).map_err(|e| PersistError::Corrupt {
        path,
        offset: e.column() as u64,
        reason: format!("unreadable templates file: {e}"),
    })
}

/// Replace the templates kept in `dir`, atomically and durably.
pub fn write_templates(
    dir: &Path,
    templates: &[crate::engine::Template],
) -> Result<(), PersistError> {
    let path = dir.join(TEMPLATES);
    let tmp = dir.join(format!("{TEMPLATES}.tmp"));
    let bytes = serde_json::to_vec(templates).expect("templates serialize");
    if let Err(e) = write_file_synced(&tmp, &bytes) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fsops::commit_rename(&tmp, &path)
}

/// Delete collection `name`: durable once this returns (the directory is a
/// tombstone); the files are removed on the way, or at the next start.
pub fn remove(root: &Path, name: &str) -> Result<(), PersistError> {
    let dir = root.join(name);
    let tombstone = root.join(unique(DELETED, name));
    fs::rename(&dir, &tombstone).map_err(io_err(&dir))?;
    fsops::sync_dir(root)?;
    if let Err(e) = fs::remove_dir_all(&tombstone) {
        tracing::warn!(path = %tombstone.display(), error = %e, "could not remove a deleted collection's files; the next start will");
    }
    Ok(())
}

/// Remove what reindexes left in a collection's `dir`: `index-*`
/// directories other than `current`, and, when the index lives in
/// `current`, the old index files beside the manifest.
pub fn clean_reindex_leftovers(dir: &Path, current: Option<&str>) -> Result<(), PersistError> {
    let mut removed = false;
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map_err(io_err(&path))?.is_dir();
        if is_dir && name.starts_with("index-") && Some(name.as_str()) != current {
            fs::remove_dir_all(&path).map_err(io_err(&path))?;
            tracing::info!(path = %path.display(), "removed an index directory a reindex left");
            removed = true;
        } else if !is_dir && current.is_some() && is_index_file(&name) {
            fs::remove_file(&path).map_err(io_err(&path))?;
            removed = true;
        }
    }
    if removed {
        fsops::sync_dir(dir)?;
    }
    Ok(())
}

/// A snapshot, log segment or text segment (or an unfinished one).
fn is_index_file(name: &str) -> bool {
    (name.starts_with("snapshot-") || name.starts_with("wal-") || name.starts_with("texts-"))
        && (name.ends_with(".bin")
            || name.ends_with(".log")
            || name.ends_with(".seg")
            || name.ends_with(".tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn create_list_update_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let root = root(dir.path());
        clean_leftovers(&root).unwrap();
        let made = create(&root, "bodies", &json!({"v": 1})).unwrap();
        assert!(create(&root, "bodies", &json!({"v": 2})).is_err());
        assert_eq!(read_manifest::<Value>(&made).unwrap(), json!({"v": 1}));
        write_manifest(&made, &json!({"v": 3})).unwrap();
        assert_eq!(read_manifest::<Value>(&made).unwrap(), json!({"v": 3}));
        create(&root, "titles", &json!({})).unwrap();
        let names: Vec<String> = list(&root).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["bodies", "titles"]);
        remove(&root, "bodies").unwrap();
        let names: Vec<String> = list(&root).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["titles"]);
        assert_eq!(fs::read_dir(&root).unwrap().count(), 1, "no leftovers");
    }

    #[test]
    fn leftovers_of_interrupted_changes_are_removed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let root = root(dir.path());
        fs::create_dir_all(root.join(".creating-x-1-0")).unwrap();
        fs::create_dir_all(root.join(".deleted-y-1-0/inner")).unwrap();
        fs::create_dir_all(root.join("kept")).unwrap();
        assert_eq!(clean_leftovers(&root).unwrap(), 2);
        let names: Vec<String> = list(&root).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["kept"]);
    }

    #[test]
    fn a_damaged_manifest_is_reported_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(MANIFEST), b"{not json").unwrap();
        let e = read_manifest::<Value>(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("collection.json") && e.contains("manifest"),
            "{e}"
        );
    }
}
