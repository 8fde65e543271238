//! A write that fails for lack of disk space: 503 with a body that says
//! nothing internal, reads go on, and writes succeed again once there is
//! room, without a restart. Runs on a small tmpfs the test mounts (as
//! root, which CI is); where mounting is not allowed it says so and skips.

use crate::helpers::{assert_problem, spawn_app_with, test_settings};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for the test's lifetime.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(bytes: usize) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .ok()?;
        status.success().then_some(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fill the file system holding `dir` until a write fails; returns the filler.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 4096];
    loop {
        if let Err(e) = f.write_all(&block) {
            assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
            break;
        }
    }
    // Sub-block remainders too.
    while f.write_all(&[0u8]).is_ok() {}
    path
}

fn doc(i: usize) -> Value {
    json!({"id": format!("d{i}"), "text": format!("document number {i} about the night and the moon")})
}

#[tokio::test]
async fn a_full_disk_answers_503_without_internals_and_writes_resume_once_there_is_room() {
    let Some(fs) = Tmpfs::mount(8 << 20) else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let mut settings = test_settings();
    settings.storage.data_dir = fs.path().join("data");
    settings.storage.snapshot_interval_secs = 0;
    let app = spawn_app_with(settings.clone()).await;
    let resp = app.post_json("/documents", &doc(0)).await;
    assert_eq!(resp.status(), 201);

    let filler = fill(fs.path());
    // The log's last page may still have room for a few records; then every
    // write fails: 503 storage-unavailable with a generic body.
    let data_dir = settings.storage.data_dir.display().to_string();
    let mut failed = Vec::new();
    let mut i = 1;
    while failed.len() < 3 {
        assert!(i < 1000, "writes kept succeeding on a full disk");
        let resp = app.post_json("/documents", &doc(i)).await;
        if resp.status() == 503 {
            assert_eq!(resp.headers()["retry-after"], "1");
            let problem = assert_problem(resp, 503).await;
            assert_eq!(problem["type"], "urn:neardup:problem:storage-unavailable");
            let text = problem.to_string();
            for internal in [data_dir.as_str(), "wal-", "os error", "space", "device"] {
                assert!(
                    !text.contains(internal),
                    "the body leaks {internal:?}: {text}"
                );
            }
            assert!(problem["request_id"]
                .as_str()
                .is_some_and(|id| !id.is_empty()));
            failed.push(i);
        } else {
            assert!(failed.is_empty(), "a write succeeded after one failed");
            assert_eq!(resp.status(), 201);
        }
        i += 1;
    }
    let batch = app
        .post_json(
            "/documents/batch",
            &json!({"documents": [doc(10), doc(11)]}),
        )
        .await;
    // While the log is stalled each item is refused alone, before anything is applied.
    assert_eq!(batch.status(), 200);
    let body: Value = batch.json().await.unwrap();
    assert_eq!(body["failed"], 2, "{body}");
    for item in body["results"].as_array().unwrap() {
        assert_eq!(item["status"], 503, "{body}");
        let detail = item["detail"].as_str().unwrap();
        assert!(
            !detail.contains(&data_dir) && !detail.contains("os error"),
            "{detail}"
        );
    }
    // Reads go on.
    assert_eq!(app.get_json("/documents/d0").await["id"], "d0");
    assert_eq!(app.get("/similar?id=d0").await.status(), 200);
    assert_eq!(app.get("/stats").await.status(), 200);
    assert_eq!(app.get("/readyz").await.status(), 200);

    // A snapshot cannot be written either: the same retryable 503, not a
    // 500 (the log still holds every acknowledged write).
    let resp = app.post_json("/admin/snapshot", &json!({})).await;
    assert_eq!(resp.headers()["retry-after"], "1");
    let problem = assert_problem(resp, 503).await;
    assert_eq!(problem["type"], "urn:neardup:problem:storage-unavailable");
    let text = problem.to_string();
    for internal in [data_dir.as_str(), "snapshot-", "os error", "device"] {
        assert!(
            !text.contains(internal),
            "the body leaks {internal:?}: {text}"
        );
    }

    // Room again: the next write succeeds, no restart needed.
    std::fs::remove_file(&filler).unwrap();
    let resp = app.post_json("/documents", &doc(20)).await;
    assert_eq!(resp.status(), 201);
    let resp = app
        .put_json(
            "/documents/d21",
            &json!({"text": "and one more after the disk had room"}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    // And a snapshot again.
    assert_eq!(
        app.post_json("/admin/snapshot", &json!({})).await.status(),
        200
    );

    // What the server holds now is what the disk holds: a "crash" (the
    // server task dropped, no final snapshot) and a restart from the log.
    let mut ids: Vec<String> = ["d0", "d20", "d21", "d10", "d11"]
        .map(String::from)
        .to_vec();
    ids.extend(failed.iter().map(|i| format!("d{i}")));
    let mut before = Vec::new();
    for id in &ids {
        before.push(app.get(&format!("/documents/{id}")).await.status().as_u16());
    }
    assert_eq!(&before[..5], [200, 200, 200, 404, 404]);
    // Only the first failed write can have been caught in the log's buffer
    // (it may take effect); the ones after it were refused before anything
    // was applied.
    assert!(before[5..].iter().skip(1).all(|&s| s == 404), "{before:?}");
    app.server.abort();
    let _ = app.server.await;
    let app = spawn_app_with(settings).await;
    let mut after = Vec::new();
    for id in &ids {
        after.push(app.get(&format!("/documents/{id}")).await.status().as_u16());
    }
    assert_eq!(after, before, "{ids:?}");
}
