//! A real Redis Cluster for tests: `primaries` primaries with `replicas`
//! replicas each, from Debian's `redis-server` (7.0), on free loopback
//! ports, in fresh directories, stopped by pid when dropped.
//!
//! ```text
//!   pick ports P (P and P + 10000, the cluster bus, both free) ─▶ redis-server per node
//!   ─▶ redis-cli --cluster create … --cluster-replicas R ─▶ poll until every node says cluster_state:ok
//! ```
//!
//! Each node runs in the foreground (no `--daemonize`) under a small shell
//! watchdog that also ends it if the test process dies first (a cluster
//! kept in a `static` for a whole test binary is never dropped), and
//! writes its pid to `D/redis.pid`: it is stopped by that pid, `SIGTERM`,
//! or `SIGKILL` for [`RedisCluster::kill`] (the failover tests). Each node
//! runs with the settings the redis backend requires
//! (`hash-max-listpack-value 256`, `maxmemory-policy noeviction`) and an
//! append-only file (`everysec`), as in production.
//!
//! [`RedisCluster::available`] is false when `redis-server` or `redis-cli`
//! is not installed: the tests that need a cluster then ask
//! [`RedisCluster::available_or_skip`], which says so in one line on
//! stderr (how to run them) and lets them return, or with `CI` set fails
//! (`.ci/run` installs it, so CI always runs them and never skips quietly).

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// One `redis-server` process.
#[derive(Debug)]
pub struct Node {
    pub port: u16,
    pub dir: PathBuf,
    child: Option<Child>,
}

impl Node {
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The redis-server's process id (from its pidfile), while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref()?;
        std::fs::read_to_string(self.dir.join("redis.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Send `signal` to the redis-server by its pid, then reap its watchdog.
    fn stop(&mut self, signal: &str, grace: Duration) {
        let Some(mut watchdog) = self.child.take() else {
            return;
        };
        let pid = std::fs::read_to_string(self.dir.join("redis.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok());
        if let Some(pid) = pid {
            let _ = Command::new("kill")
                .args([signal, &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = watchdog.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(pid) = pid {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        let _ = watchdog.kill();
        let _ = watchdog.wait();
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

/// A running cluster (or one non-cluster node); stopped and removed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    pub nodes: Vec<Node>,
    /// False for a single non-cluster Redis ([`RedisCluster::start_single`]).
    pub cluster: bool,
    root: PathBuf,
}

/// Why a cluster could not be started.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HarnessError(String);

fn fail(what: impl Into<String>) -> HarnessError {
    HarnessError(what.into())
}

static STARTED: AtomicU32 = AtomicU32::new(0);

/// A port `p` in 20000..45000 such that `p` and `p + 10000` are free now.
fn free_port_pair(taken: &[u16]) -> Result<u16, HarnessError> {
    for _ in 0..500 {
        // Let the OS pick an ephemeral port for the low one's randomness.
        let probe = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| fail(format!("cannot bind a probe port: {e}")))?;
        let seed = probe.local_addr().map(|a| a.port()).unwrap_or(1) as u32;
        drop(probe);
        let p = 20000 + (seed.wrapping_mul(2654435761) % 25000) as u16;
        if taken.contains(&p) || taken.contains(&(p + 10000)) {
            continue;
        }
        let a = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, p));
        let b = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, p + 10000));
        if a.is_ok() && b.is_ok() {
            return Ok(p);
        }
    }
    Err(fail("no free loopback port pair (P, P + 10000) found"))
}

fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `redis-cli -p port args…`, its stdout.
pub fn cli(port: u16, args: &[&str]) -> Result<String, HarnessError> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| fail(format!("redis-cli: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "redis-cli -p {port} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl RedisCluster {
    /// True when `redis-server` and `redis-cli` are installed.
    pub fn available() -> bool {
        installed("redis-server") && installed("redis-cli")
    }

    /// Whether the tests that need Redis can run here ([`Self::available`]).
    /// When they cannot: with the environment variable `CI` set (to
    /// anything but empty, `0` or `false`) a panic, so CI never skips them
    /// silently; without it one line on stderr, once per process, saying
    /// why they are skipped and how to run them, and false.
    pub fn available_or_skip(what: &str) -> bool {
        if Self::available() {
            return true;
        }
        let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"));
        assert!(
            !ci,
            "{what} need redis-server and redis-cli on PATH, and CI is set: \
             install Debian's redis-server (apt-get install redis-server)"
        );
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            use std::io::Write;
            // Straight to stderr: the test harness does not capture it.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {what}: redis-server is not on PATH; to run them, install \
                 Debian's redis-server (apt-get install redis-server) and run cargo test again"
            );
        });
        false
    }

    /// `primaries` × (1 + `replicas`) nodes formed into a cluster, ready
    /// (every node reports `cluster_state:ok`).
    pub fn start(primaries: usize, replicas: usize) -> Result<Self, HarnessError> {
        // Ports can be taken between the probe and the start by another
        // process: try again with new ones.
        let mut last = None;
        for _ in 0..3 {
            match Self::try_start(primaries, replicas, true) {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| fail("cluster did not start")))
    }

    /// One Redis, not in cluster mode.
    pub fn start_single() -> Result<Self, HarnessError> {
        let mut last = None;
        for _ in 0..3 {
            match Self::try_start(1, 0, false) {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| fail("redis did not start")))
    }

    fn try_start(primaries: usize, replicas: usize, cluster: bool) -> Result<Self, HarnessError> {
        sweep_dead_runs();
        let n = primaries * (1 + replicas);
        let root = std::env::temp_dir().join(format!(
            "neardup-redis-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).map_err(|e| fail(format!("{}: {e}", root.display())))?;
        let mut this = Self {
            nodes: Vec::with_capacity(n),
            cluster,
            root,
        };
        let mut ports = Vec::new();
        for i in 0..n {
            let port = free_port_pair(&ports)?;
            ports.push(port);
            ports.push(port + 10000);
            let dir = this.root.join(format!("node{i}"));
            std::fs::create_dir_all(&dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
            let child = spawn_node(port, &dir, cluster)?;
            this.nodes.push(Node {
                port,
                dir,
                child: Some(child),
            });
        }
        for node in &this.nodes {
            wait_until(Duration::from_secs(10), || {
                cli(node.port, &["PING"]).is_ok_and(|s| s.trim() == "PONG")
            })
            .map_err(|_| fail(format!("redis on port {} never answered PING", node.port)))?;
        }
        if cluster {
            let mut args = vec!["--cluster".to_owned(), "create".to_owned()];
            args.extend(this.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
            args.extend([
                "--cluster-replicas".to_owned(),
                replicas.to_string(),
                "--cluster-yes".to_owned(),
            ]);
            let out = Command::new("redis-cli")
                .args(&args)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| fail(format!("redis-cli --cluster create: {e}")))?;
            let text = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() || !text.contains("All 16384 slots covered") {
                return Err(fail(format!(
                    "redis-cli --cluster create failed: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            this.wait_healthy(Duration::from_secs(20))?;
            // Every replica attached: exactly `primaries` nodes serve slots.
            wait_until(Duration::from_secs(20), || {
                this.primaries().is_ok_and(|p| p.len() == primaries)
            })
            .map_err(|_| fail("the replicas never attached to their primaries"))?;
            // ... and replicating (their first sync done).
            wait_until(Duration::from_secs(20), || {
                this.nodes.iter().all(|n| {
                    cli(n.port, &["INFO", "replication"]).is_ok_and(|s| {
                        s.contains("role:master") || s.contains("master_link_status:up")
                    })
                })
            })
            .map_err(|_| fail("the replicas never finished their first sync"))?;
        }
        Ok(this)
    }

    /// Poll until every running node reports `cluster_state:ok` and sees
    /// every slot served.
    pub fn wait_healthy(&self, within: Duration) -> Result<(), HarnessError> {
        wait_until(within, || {
            self.nodes.iter().filter(|n| n.is_running()).all(|n| {
                cli(n.port, &["CLUSTER", "INFO"]).is_ok_and(|s| {
                    s.contains("cluster_state:ok") && s.contains("cluster_slots_ok:16384")
                })
            })
        })
        .map_err(|_| fail("the cluster did not reach cluster_state:ok"))
    }

    /// The node URLs, for `storage.redis.nodes`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// Indexes of the nodes that are primaries serving slots now (per the
    /// first running node).
    pub fn primaries(&self) -> Result<Vec<usize>, HarnessError> {
        if !self.cluster {
            return Ok(vec![0]);
        }
        let any = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .ok_or_else(|| fail("no node is running"))?;
        let text = cli(any.port, &["CLUSTER", "NODES"])?;
        let mut out = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // A primary serving slots (a replica being attached is briefly a
            // master without any).
            if fields.len() < 9 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let port: Option<u16> = fields[1]
                .split('@')
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok());
            if let Some(i) = self.nodes.iter().position(|n| Some(n.port) == port) {
                out.push(i);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// `SIGKILL` node `i` (by its pid), as a crash.
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].stop("-KILL", Duration::from_secs(3));
    }

    /// Every key matching `pattern` on the running primaries (`--scan`).
    pub fn keys(&self, pattern: &str) -> Result<Vec<String>, HarnessError> {
        let mut keys = Vec::new();
        for i in self.primaries()? {
            let out = cli(self.nodes[i].port, &["--scan", "--pattern", pattern])?;
            keys.extend(out.lines().filter(|l| !l.is_empty()).map(str::to_owned));
        }
        keys.sort_unstable();
        Ok(keys)
    }

    /// `redis-cli -c args…` on a running primary (redirections followed),
    /// its stdout.
    pub fn command(&self, args: &[&str]) -> Result<String, HarnessError> {
        let i = *self
            .primaries()?
            .first()
            .ok_or_else(|| fail("no primary is running"))?;
        let mut all = vec!["-c"];
        all.extend_from_slice(args);
        cli(self.nodes[i].port, &all)
    }

    /// Sum of `used_memory` over the running primaries (bytes).
    pub fn used_memory(&self) -> Result<u64, HarnessError> {
        let mut total = 0;
        for i in self.primaries()? {
            let info = cli(self.nodes[i].port, &["INFO", "memory"])?;
            total += info
                .lines()
                .find_map(|l| l.strip_prefix("used_memory:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| fail("INFO memory has no used_memory"))?;
        }
        Ok(total)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.stop("-TERM", Duration::from_secs(3));
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Remove the directories of clusters whose test process is gone (a cluster
/// kept in a `static` is never dropped, so its append-only files would
/// pile up in the temporary directory run after run).
fn sweep_dead_runs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("neardup-redis-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn spawn_node(port: u16, dir: &Path, cluster: bool) -> Result<Child, HarnessError> {
    let port_s = port.to_string();
    let dir_s = dir.display().to_string();
    let conf = dir.join("nodes.conf").display().to_string();
    let log = dir.join("redis.log").display().to_string();
    let pidfile = dir.join("redis.pid").display().to_string();
    let mut args: Vec<&str> = vec![
        "--port",
        &port_s,
        "--bind",
        "127.0.0.1",
        "--dir",
        &dir_s,
        "--logfile",
        &log,
        "--pidfile",
        &pidfile,
        "--daemonize",
        "no",
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--hash-max-listpack-value",
        "256",
        "--maxmemory-policy",
        "noeviction",
        // A replica's first sync starts at once (not 5 s later).
        "--repl-diskless-sync-delay",
        "0",
    ];
    if cluster {
        args.extend([
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &conf,
            "--cluster-node-timeout",
            "2000",
        ]);
    }
    // The watchdog: redis-server in the background, ended when the test
    // process (its grandparent's pid, passed in) is gone.
    let script = "redis-server \"$@\" & r=$!; \
        while kill -0 \"$WATCH\" 2>/dev/null && kill -0 $r 2>/dev/null; do sleep 0.5; done; \
        kill -9 $r 2>/dev/null; wait $r";
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .args(&args)
        .env("WATCH", std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| fail(format!("cannot start redis-server: {e}")))
}

fn wait_until(within: Duration, mut ok: impl FnMut() -> bool) -> Result<(), ()> {
    let deadline = Instant::now() + within;
    loop {
        if ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without redis-server on PATH a test that needs it says why in one
    /// line and passes, unless `CI` is set: then it fails. (This test runs
    /// the one below in a child process of this test binary, with a PATH
    /// that finds nothing.)
    #[test]
    fn without_redis_the_tests_skip_with_one_line_unless_ci_is_set() {
        let empty = tempfile::tempdir().unwrap();
        let run = |ci: Option<&str>| {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            cmd.args([
                "--exact",
                "testkit::redis_cluster::tests::a_three_by_one_cluster_starts_serves_and_stops",
                "--test-threads=1",
            ])
            .env("PATH", empty.path())
            .env_remove("CI");
            if let Some(v) = ci {
                cmd.env("CI", v);
            }
            let out = cmd.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            let all = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
            (out.status.success(), err, all)
        };
        let (ok, stderr, all) = run(None);
        assert!(ok, "{all}");
        let skipped: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("SKIPPED"))
            .collect();
        assert_eq!(skipped.len(), 1, "{all}");
        assert!(
            skipped[0].contains("redis-server is not on PATH")
                && skipped[0].contains("apt-get install redis-server"),
            "{all}"
        );
        for ci in ["true", "1"] {
            let (ok, _, all) = run(Some(ci));
            assert!(!ok, "CI={ci} must fail, not skip: {all}");
            assert!(all.contains("CI is set"), "{all}");
        }
        let (ok, _, all) = run(Some("false"));
        assert!(ok, "{all}");
    }

    #[test]
    fn a_three_by_one_cluster_starts_serves_and_stops() {
        if !RedisCluster::available_or_skip("the tests that start a Redis") {
            return;
        }
        let c = RedisCluster::start(3, 1).expect("cluster starts");
        assert_eq!(c.nodes.len(), 6);
        assert_eq!(c.primaries().unwrap().len(), 3);
        let port = c.nodes[0].port;
        // -c follows MOVED: the key lands wherever its slot is.
        assert_eq!(cli(port, &["-c", "SET", "k{x}", "v"]).unwrap().trim(), "OK");
        assert_eq!(cli(port, &["-c", "GET", "k{x}"]).unwrap().trim(), "v");
        let pids: Vec<u32> = c.nodes.iter().filter_map(Node::pid).collect();
        assert_eq!(pids.len(), 6, "every node wrote its pidfile");
        let root = c.root().to_owned();
        drop(c);
        for pid in pids {
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists()
                    || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .is_ok_and(|s| s.contains(") Z ")),
                "node {pid} still runs"
            );
        }
        assert!(!root.exists());
    }
}
