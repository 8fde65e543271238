//! The `neardup` binary: settings → logs → build → serve until a signal.
//! `neardup healthcheck` probes a running server (for container HEALTHCHECKs,
//! which should not need curl in the image).

use clap::{Parser, Subcommand};
use neardup::app::{shutdown_signal, App};
use neardup::config::{Config, Settings};
use std::path::PathBuf;

/// mimalloc for small blocks, the system allocator for the rest: see
/// `neardup::allocator` for why and what it measured.
#[global_allocator]
static GLOBAL: neardup::allocator::SplitAlloc = neardup::allocator::SplitAlloc;

/// Near-duplicate text detection service.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// A TOML file layered over config/default.toml (env vars NEARDUP_* still win).
    #[arg(long, short, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API (the default).
    Serve,
    /// Deduplicate a JSON Lines file or a directory offline: groups (or
    /// pairs) as JSON Lines on stdout, progress and a summary on stderr.
    Dedup(neardup::cli::dedup::DedupArgs),
    /// Choose a shingle size, a threshold and a signature size from a
    /// sample of a JSON Lines file: the pairwise Jaccard histogram per k
    /// with a suggested threshold, and the MinHash estimate's error per
    /// num_perm (tables on stdout, or --json; progress on stderr).
    Analyze(neardup::cli::analyze::AnalyzeArgs),
    /// Print the effective configuration (all layers applied) as JSON, with
    /// the derived LSH banding under "derived", and exit.
    PrintConfig,
    /// Exit 0 if the server answers GET /readyz with 200, else 1.
    Healthcheck {
        /// Address to probe; defaults to 127.0.0.1 on the configured port.
        #[arg(long)]
        addr: Option<String>,
        /// Probe /healthz (alive) instead of /readyz (ready).
        #[arg(long)]
        live: bool,
    },
}

/// Every collection keeps its log segment open, and every connection is a
/// descriptor too: raise the soft open-file limit to the hard one (as
/// servers commonly do) and warn when it still looks short for
/// `limits.max_collections`.
fn raise_open_file_limit(max_collections: usize) {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => {
            let wanted = max_collections as u64 + 1024;
            if limit < wanted {
                tracing::warn!(
                    open_file_limit = limit,
                    max_collections,
                    "the open-file limit is low for limits.max_collections (a log file per collection, plus connections); raise it (ulimit -n) or lower limits.max_collections"
                );
            } else {
                tracing::debug!(open_file_limit = limit, "open-file limit");
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not read or raise the open-file limit"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = match Settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("neardup: {e}");
            std::process::exit(2);
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            neardup::telemetry::init(&config.log);
            raise_open_file_limit(config.limits.max_collections);
            let app = App::build(config).await?;
            app.run_until_stopped(shutdown_signal()).await
        }
        Command::Dedup(args) => {
            let code = neardup::cli::dedup::run(&config, &args).unwrap_or_else(|e| {
                eprintln!("neardup dedup: {e:#}");
                2
            });
            std::process::exit(code);
        }
        Command::Analyze(args) => {
            let code = neardup::cli::analyze::run(&config, &args).unwrap_or_else(|e| {
                eprintln!("neardup analyze: {e:#}");
                2
            });
            std::process::exit(code);
        }
        Command::PrintConfig => {
            use std::io::Write;
            let text = serde_json::to_string_pretty(&effective(&config)?)?;
            // `print-config | head` closes the pipe early: not an error.
            match writeln!(std::io::stdout().lock(), "{text}") {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(()),
            }
        }
        Command::Healthcheck { addr, live } => {
            let addr = match addr {
                Some(a) => a,
                None => format!("127.0.0.1:{}", config.bind_addr().port()),
            };
            let path = if live { "/healthz" } else { "/readyz" };
            match probe(&addr, path) {
                Ok(()) => Ok(()),
                Err(e) => {
                    eprintln!("neardup healthcheck: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
}

/// Every setting, plus what the server derives from them (the LSH banding
/// chosen for `index.threshold`) under `derived`, which is not a setting.
fn effective(config: &Config) -> anyhow::Result<serde_json::Value> {
    let bands = config.engine().bands();
    let mut out = serde_json::to_value(config.settings())?;
    out["derived"] = serde_json::json!({
        "index": {
            "bands": bands.bands,
            "rows": bands.rows,
            "recall_at_threshold": bands.recall_at_threshold,
            "min_query_threshold": bands.min_query_threshold,
        }
    });
    Ok(out)
}

/// A minimal HTTP/1.1 GET with a 3 s budget; succeeds on status 200.
fn probe(addr: &str, path: &str) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    use std::net::{TcpStream, ToSocketAddrs};
    use std::time::Duration;
    let timeout = Duration::from_secs(3);
    let sock = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{addr} resolves to no address"))?;
    let mut stream = TcpStream::connect_timeout(&sock, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head)?;
    let line = String::from_utf8_lossy(&head[..n]);
    let status = line.split_whitespace().nth(1).unwrap_or("");
    anyhow::ensure!(
        status == "200",
        "{path} answered {:?}",
        line.lines().next().unwrap_or("")
    );
    Ok(())
}
