//! Structured logging with `tracing`: `RUST_LOG` wins over `log.level`;
//! `log.format` picks JSON lines or human-readable output.

use crate::config::{LogFormat, LogSettings};
use tracing_subscriber::{fmt, EnvFilter};

/// Install the global subscriber. Call once, from `main`.
pub fn init(settings: &LogSettings) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&settings.level));
    let builder = fmt().with_env_filter(filter).with_target(true);
    match settings.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .init(),
        LogFormat::Pretty => builder.compact().init(),
    }
}
