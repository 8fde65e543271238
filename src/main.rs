//! The `neardup` binary: settings → logs → build → serve until a signal.

use clap::Parser;
use neardup::app::{shutdown_signal, App};
use neardup::config::Settings;
use std::path::PathBuf;

/// Near-duplicate text detection service.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// A TOML file layered over config/default.toml (env vars NEARDUP_* still win).
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the effective configuration as TOML-compatible JSON and exit.
    #[arg(long)]
    print_config: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("neardup: {e}");
            std::process::exit(2);
        }
    };
    if cli.print_config {
        println!("{}", serde_json::to_string_pretty(&settings)?);
        return Ok(());
    }
    neardup::telemetry::init(&settings.log);
    let app = App::build(settings).await?;
    app.run_until_stopped(shutdown_signal()).await
}
