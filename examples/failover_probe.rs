//! The redis crate's cluster client under a primary's death, without
//! neardup: four tasks write 30 keys per round trip to a local 3 + 6
//! cluster (testkit), a primary is SIGKILLed after 2 s, and each half
//! second prints the round trips that succeeded and failed.
//!
//!   cargo run --example failover_probe -- set        # plain SETs
//!   cargo run --example failover_probe -- script     # EVALSHA (our Script)
//!   cargo run --example failover_probe -- scriptwait # and WAIT 1 after each
//!   cargo run --example failover_probe -- setreset   # a watch that makes a
//!                                                    # fresh connection after
//!                                                    # a failed PING
//!
//! Measured 2026-11-23 with redis 1.8.1: without the reset no round trip
//! succeeds for the 18 s after the kill (every one times out, even to the
//! healthy primaries); with it traffic resumes ~4 s after the kill, when the
//! replica has been promoted. This is why `Redis::check` reconnects after a
//! failed check.

use neardup::backend::redis::{Conn, Script};
use neardup::testkit::redis_cluster::RedisCluster;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

static S: LazyLock<Script> =
    LazyLock::new(|| Script::new("redis.call('SET', KEYS[1], ARGV[1]) return 1"));

#[tokio::main]
async fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let mut cluster = RedisCluster::start(3, 2).unwrap();
    let client = redis::cluster::ClusterClientBuilder::new(cluster.urls())
        .connection_timeout(Duration::from_millis(1000))
        .response_timeout(Duration::from_millis(1000))
        .retries(2)
        .min_retry_wait(50)
        .max_retry_wait(300)
        .build()
        .unwrap();
    let conn = Arc::new(tokio::sync::RwLock::new(Conn::Cluster(
        client.get_async_connection().await.unwrap(),
    )));
    let t0 = Instant::now();
    let oks = Arc::new(AtomicU64::new(0));
    let errs = Arc::new(AtomicU64::new(0));
    for w in 0..4u64 {
        let conn = conn.clone();
        let mode = mode.clone();
        let (oks, errs) = (oks.clone(), errs.clone());
        tokio::spawn(async move {
            let mut i = w;
            loop {
                let mut futs = Vec::new();
                let cur = conn.read().await.clone();
                for k in 0..30 {
                    let mut c = cur.clone();
                    let script = mode.contains("script");
                    futs.push(async move {
                        if script {
                            S.key(format!("k{k}.{i}"))
                                .arg(i)
                                .invoke_async::<()>(&mut c)
                                .await
                        } else {
                            redis::cmd("SET")
                                .arg(format!("k{k}.{i}"))
                                .arg(i)
                                .query_async::<()>(&mut c)
                                .await
                        }
                    });
                }
                let r = tokio::time::timeout(
                    Duration::from_secs(1),
                    futures_util::future::join_all(futs),
                )
                .await;
                let mut ok = matches!(&r, Ok(v) if v.iter().all(|x| x.is_ok()));
                if ok && mode.contains("wait") {
                    let mut c = cur.clone();
                    let w = tokio::time::timeout(
                        Duration::from_secs(1),
                        redis::cmd("WAIT")
                            .arg(1)
                            .arg(500)
                            .query_async::<i64>(&mut c),
                    )
                    .await;
                    ok = matches!(w, Ok(Ok(n)) if n >= 1);
                }
                if ok {
                    oks.fetch_add(1, Ordering::Relaxed);
                } else {
                    errs.fetch_add(1, Ordering::Relaxed);
                }
                i += 4;
                if !ok {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
    }
    if mode.contains("reset") {
        let conn = conn.clone();
        let urls = cluster.urls();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let mut c = conn.read().await.clone();
                let r = tokio::time::timeout(
                    Duration::from_secs(1),
                    redis::cmd("PING").query_async::<redis::Value>(&mut c),
                )
                .await;
                if !matches!(r, Ok(Ok(_))) {
                    let client = redis::cluster::ClusterClientBuilder::new(urls.clone())
                        .connection_timeout(Duration::from_millis(1000))
                        .response_timeout(Duration::from_millis(1000))
                        .retries(2)
                        .min_retry_wait(50)
                        .max_retry_wait(300)
                        .build()
                        .unwrap();
                    match tokio::time::timeout(
                        Duration::from_secs(2),
                        client.get_async_connection(),
                    )
                    .await
                    {
                        Ok(Ok(c)) => {
                            *conn.write().await = Conn::Cluster(c);
                            println!("reset");
                        }
                        other => println!("reset failed {:?}", other.map(|r| r.map(|_| ()))),
                    }
                }
            }
        });
    }
    let mut killed = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        println!(
            "{:6.2}s ok={} err={}",
            t0.elapsed().as_secs_f64(),
            oks.swap(0, Ordering::Relaxed),
            errs.swap(0, Ordering::Relaxed)
        );
        if !killed && t0.elapsed() > Duration::from_secs(2) {
            let v = cluster.primaries().unwrap()[0];
            cluster.kill(v);
            killed = true;
            println!("killed {v}");
        }
    }
}
