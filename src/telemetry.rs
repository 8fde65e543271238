//! Structured logging with `tracing`: `RUST_LOG` wins over `log.level`;
//! `log.format` picks JSON lines or human-readable output. Logs go to
//! stderr, with ANSI colours only when stderr is a terminal (a container
//! log or a file gets plain text). Fields are values, never Rust `Debug`
//! renderings: an absent value is left out, not written `None`.

use crate::config::{LogFormat, LogSettings};
use tracing_subscriber::{fmt, EnvFilter};

/// Install the global subscriber. Call once, from `main`.
pub fn init(settings: &LogSettings) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&settings.level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match settings.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .init(),
        LogFormat::Pretty => builder.compact().init(),
    }
}
