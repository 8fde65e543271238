//! Progress on stderr for the offline commands: an indicatif bar on a
//! terminal, a line every few seconds otherwise (a log or a pipe), nothing
//! with `--quiet`.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Progress on stderr: an indicatif bar on a terminal, periodic lines otherwise.
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
    phase: &'static str,
    last: Mutex<Instant>,
    start: Instant,
}

impl Progress {
    pub fn new(quiet: bool, phase: &'static str, total: Option<u64>) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            let bar = total.map_or_else(ProgressBar::new_spinner, ProgressBar::new);
            let template = if total.is_some() {
                format!("{phase:>8} [{{bar:30}}] {{percent:>3}}% {{msg}} {{per_sec}} ETA {{eta}}")
            } else {
                format!("{phase:>8} {{spinner}} {{msg}} {{per_sec}}")
            };
            bar.set_style(
                ProgressStyle::with_template(&template)
                    .expect("a valid progress template")
                    .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self {
            bar,
            lines: !quiet && !terminal,
            phase,
            last: Mutex::new(Instant::now()),
            start: Instant::now(),
        }
    }

    /// `done` of `total` units; `msg` says what has been counted.
    pub fn update(&self, done: u64, total: Option<u64>, msg: impl FnOnce() -> String) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            bar.set_message(msg());
            return;
        }
        if !self.lines {
            return;
        }
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() < Duration::from_secs(5) {
            return;
        }
        *last = Instant::now();
        let secs = self.start.elapsed().as_secs_f64();
        let rate = done as f64 / secs.max(1e-9);
        let eta = total
            .filter(|&t| t > done && rate > 0.0)
            .map(|t| format!(", ETA {:.0} s", (t - done) as f64 / rate))
            .unwrap_or_default();
        let pct = total
            .filter(|&t| t > 0)
            .map(|t| format!(" {:.1}%", 100.0 * done as f64 / t as f64))
            .unwrap_or_default();
        eprintln!("{}:{pct} {}{eta}, {secs:.0} s", self.phase, msg());
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
