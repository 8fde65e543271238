//! Start a local Redis Cluster from Debian's `redis-server` with the test
//! harness (`neardup::testkit::redis_cluster`) and keep it up until stdin
//! closes: for scripts/redis-bench.sh and for trying the redis backend by
//! hand.
//!
//! ```text
//! cargo run --release --example redis_cluster -- 3 0
//! nodes redis://127.0.0.1:P1 redis://127.0.0.1:P2 …     (first line, then ports)
//! ```

use neardup::testkit::redis_cluster::RedisCluster;
use std::io::Read;

fn main() {
    let mut args = std::env::args().skip(1);
    let primaries: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let replicas: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let cluster = RedisCluster::start(primaries, replicas).expect("the cluster starts");
    println!("nodes {}", cluster.urls().join(" "));
    println!("root {}", cluster.root().display());
    // Held until the caller closes our stdin (or exits).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(cluster);
}
