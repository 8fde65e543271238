//! `storage.huge_pages_interval_secs` against the real binary, in a
//! process of its own (in this test binary every in-process server runs
//! passes over the same memory, so only a child process shows what one
//! server did): after documents arrive, its resident memory goes into
//! huge pages, and `/metrics` and the log say so. Skipped where the kernel
//! cannot collapse (THP `never`, no `MADV_COLLAPSE`), as the server then
//! keeps 4 KiB pages and says that instead.

use crate::crash::{start, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// `AnonHugePages` of process `pid`, in bytes.
fn anon_huge_bytes(pid: u32) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    neardup::hugepages::anon_huge_pages(&rollup).unwrap_or(0)
}

/// The machine's transparent huge page setting ("always [madvise] never"
/// marks the mode in force); empty where there is none.
fn thp_mode() -> String {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default()
}

/// Store 6,000 documents of 120 words in batches (~10 MB resident: the
/// records, their shingles and the tables).
async fn fill(server: &Server) {
    for batch in 0..6 {
        let docs: Vec<Value> = (0..1000)
            .map(|i| {
                let n = batch * 1000 + i;
                let text: Vec<String> = (0..120)
                    .map(|w| format!("w{}", (n * 131 + w * 7919) % 50_000))
                    .collect();
                json!({"id": format!("d{n}"), "text": text.join(" ")})
            })
            .collect();
        let resp = server
            .client
            .post(format!("{}/documents/batch", server.base))
            .json(&json!({ "documents": docs }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
}

async fn gauge(server: &Server) -> f64 {
    let text = server
        .client
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    crate::helpers::metric_value(&text, "neardup_memory_huge_page_bytes", &[]).expect("the gauge")
}

#[tokio::test]
async fn a_server_collapses_its_resident_memory_and_says_so() {
    let thp = thp_mode();
    if thp.is_empty() || thp.contains("[never]") {
        eprintln!("transparent huge pages are off here ({thp:?}): skipped");
        return;
    }
    if let Err(why) = neardup::hugepages::collapse_resident() {
        eprintln!("the kernel does not collapse here ({why}): skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[("NEARDUP_STORAGE__HUGE_PAGES_INTERVAL_SECS", "1")],
    )
    .await;
    let pid = server.child.id();
    fill(&server).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while anon_huge_bytes(pid) < 2 << 20 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let huge = anon_huge_bytes(pid);
    assert!(huge >= 2 << 20, "{huge} bytes of the server in huge pages");
    assert!(gauge(&server).await >= (2 << 20) as f64);
    let logs = server.logs.lock().unwrap().join("\n");
    assert!(logs.contains("memory in huge pages"), "{logs}");
    // It still answers, from the same documents.
    assert_eq!(server.stats().await["documents"], 6000);
    server.kill9();
}

/// With the interval at 0 the server leaves its pages alone.
#[tokio::test]
async fn with_the_interval_at_zero_nothing_is_collapsed() {
    // With THP `always` the kernel gives huge pages at fault time anyway.
    let thp = thp_mode();
    if !thp.contains("[madvise]") {
        eprintln!("transparent huge pages are not in madvise mode ({thp:?}): skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[("NEARDUP_STORAGE__HUGE_PAGES_INTERVAL_SECS", "0")],
    )
    .await;
    let pid = server.child.id();
    fill(&server).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(anon_huge_bytes(pid), 0);
    assert_eq!(gauge(&server).await, 0.0);
    server.kill9();
}
