//! `neardup analyze FILE.jsonl`: choose a shingle size, a threshold and a
//! signature size from a sample of your own texts, offline, with the same
//! computation as `POST /analysis/histogram` and `/analysis/accuracy`
//! ([`crate::analysis`]) and the configured recipe (only k and num_perm
//! vary).
//!
//! ```text
//!   JSONL lines ─stream─▶ uniform sample of --sample texts (reservoir, --seed)
//!        ─▶ per k: shingle sets, pairwise exact Jaccard (every core) ─▶ histogram + advice
//!        ─▶ per (num_perm, k): MinHash estimate error, LSH misses at the threshold
//! ```
//!
//! Only the sample is held in memory: a file of any size is read once. Bad
//! lines (not JSON, no `text`, a text over `limits.max_text_bytes` or with
//! nothing left after normalization) are reported on stderr with their line
//! number and skipped. Tables (or `--json`) go to stdout, progress to stderr.

use super::lines::JsonLines;
use super::progress::Progress;
use crate::analysis::{self, AccuracyRow, Histogram, Recipe};
use crate::config::Config;
use crate::text::normalize;
use anyhow::Context;
use serde::Deserialize;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Problems printed one by one; beyond that only counted.
const MAX_REPORTED: usize = 20;

#[derive(Debug, Clone, clap::Args)]
pub struct AnalyzeArgs {
    /// A JSON Lines file (`{"text": ...}` per line, other fields ignored;
    /// `-` for stdin).
    pub input: PathBuf,
    /// Shingle sizes to compare, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4",
          value_parser = clap::value_parser!(u64).range(1..=crate::engine::MAX_SHINGLE_K as u64))]
    pub k: Vec<u64>,
    /// Texts drawn uniformly from the file (all of them if fewer); every
    /// pair of them is compared.
    #[arg(long, default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(2..=analysis::MAX_TEXTS as u64))]
    pub sample: u64,
    /// Seed of the draw (the same file and seed give the same sample).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Equal-width histogram bins over [0, 1].
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(2..=100))]
    pub bins: u64,
    /// Signature sizes whose estimate error is measured, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "16,32,64,128,256",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub num_perm: Vec<u64>,
    /// Threshold at which LSH misses are counted (default: index.threshold).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// Print one JSON object (the two HTTP answers' fields) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Deserialize)]
struct Line {
    text: String,
}

/// The whole answer, as `--json` prints it.
#[derive(serde::Serialize)]
struct Report {
    texts: usize,
    lines: u64,
    skipped: usize,
    bands: usize,
    rows: usize,
    histograms: Vec<Histogram>,
    threshold: f64,
    accuracy: Vec<AccuracyRow>,
    seconds: f64,
}

/// A uniform sample of a stream (Algorithm R), driven by splitmix64.
struct Reservoir {
    keep: usize,
    seen: u64,
    rng: crate::engine::sample::SplitMix64,
    items: Vec<String>,
}

impl Reservoir {
    fn new(keep: usize, seed: u64) -> Self {
        Self {
            keep,
            seen: 0,
            rng: crate::engine::sample::SplitMix64::new(seed),
            items: Vec::with_capacity(keep.min(1 << 16)),
        }
    }

    fn next(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn offer(&mut self, text: String) {
        self.seen += 1;
        if self.items.len() < self.keep {
            self.items.push(text);
        } else {
            let j = self.next() % self.seen;
            if (j as usize) < self.keep {
                self.items[j as usize] = text;
            }
        }
    }
}

fn distinct(name: &str, values: &[u64]) -> anyhow::Result<Vec<usize>> {
    if values.len() > analysis::MAX_VALUES {
        anyhow::bail!("--{name}: at most {} values", analysis::MAX_VALUES);
    }
    let mut out: Vec<usize> = Vec::with_capacity(values.len());
    for &v in values {
        if out.contains(&(v as usize)) {
            anyhow::bail!("--{name}: {v} is given twice");
        }
        out.push(v as usize);
    }
    Ok(out)
}

/// Run `neardup analyze`; returns the process exit code.
pub fn run(config: &Config, args: &AnalyzeArgs) -> anyhow::Result<i32> {
    let start = Instant::now();
    let ks = distinct("k", &args.k)?;
    let perms = distinct("num-perm", &args.num_perm)?;
    let params = config.engine().params();
    let threshold = args.threshold.unwrap_or(params.index.threshold);
    if !(threshold > 0.0 && threshold <= 1.0) {
        anyhow::bail!("--threshold must be in (0, 1], got {threshold}");
    }
    let recipe = Recipe {
        normalize: params.normalize,
        kind: params.shingle.kind,
        multiset: params.shingle.multiset,
        seed: params.index.seed,
    };
    let bands = *config.engine().bands();

    let mut input = JsonLines::open(&args.input)?;
    let mut sample = Reservoir::new(args.sample as usize, args.seed);
    let max_text = config.limits.max_text_bytes;
    let mut skipped = 0usize;
    let mut skip = |line: u64, why: String| {
        skipped += 1;
        if skipped <= MAX_REPORTED {
            eprintln!("neardup analyze: line {line}: {why} (skipped)");
        } else if skipped == MAX_REPORTED + 1 {
            eprintln!("neardup analyze: more problems follow; only their count is reported");
        }
    };
    let reading = Progress::new(args.quiet, "reading", input.total);
    let mut buf = Vec::new();
    while let Some(line_no) = input.next_into(&mut buf)? {
        match serde_json::from_slice::<Line>(&buf) {
            Err(e) => skip(
                line_no,
                format!("not a JSON object with a \"text\" string: {e}"),
            ),
            Ok(Line { text }) if text.len() > max_text => skip(
                line_no,
                format!(
                    "text is {} bytes; the limit is {max_text} (limits.max_text_bytes)",
                    text.len()
                ),
            ),
            Ok(Line { text }) if normalize(&text, &params.normalize).is_empty() => skip(
                line_no,
                "the text has no words or characters left after normalization".into(),
            ),
            Ok(Line { text }) => sample.offer(text),
        }
        if line_no % 4096 == 0 {
            reading.update(input.bytes, input.total, || format!("line {line_no}"));
        }
    }
    reading.finish();
    let texts = sample.items;
    if texts.len() < 2 {
        anyhow::bail!(
            "{}: {} usable text(s); at least two are needed to compare pairs",
            args.input.display(),
            texts.len()
        );
    }

    let stop = AtomicBool::new(false);
    let counting = Progress::new(args.quiet, "pairs", Some((texts.len() * ks.len()) as u64));
    let histograms = analysis::histograms(
        &recipe,
        &texts,
        &ks,
        args.bins as usize,
        (bands.bands, bands.rows),
        None,
        &stop,
        &|done, total| counting.update(done, Some(total), || format!("{done}/{total} rows")),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    counting.finish();
    let estimating = Progress::new(
        args.quiet,
        "accuracy",
        Some((texts.len() * ks.len() * (1 + perms.len())) as u64),
    );
    let accuracy = analysis::accuracy(
        &recipe,
        &texts,
        &ks,
        &perms,
        threshold,
        &stop,
        &|done, total| estimating.update(done, Some(total), || format!("{done}/{total}")),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    estimating.finish();

    let report = Report {
        texts: texts.len(),
        lines: sample.seen + skipped as u64,
        skipped,
        bands: bands.bands,
        rows: bands.rows,
        histograms,
        threshold,
        accuracy,
        seconds: start.elapsed().as_secs_f64(),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = if args.json {
        serde_json::to_writer(&mut out, &report)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        write_tables(&mut out, &report, &recipe)
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(e).context("writing to stdout"),
    }
}

fn write_tables(out: &mut impl Write, r: &Report, recipe: &Recipe) -> std::io::Result<()> {
    let pairs = r.histograms.first().map_or(0, |h| h.pairs);
    let kind = format!("{:?}", recipe.kind).to_lowercase();
    writeln!(
        out,
        "{} texts sampled from {} lines ({} skipped); {kind} shingles, text recipe {}, the rest of the recipe as configured; banding (b, r) = ({}, {}); {:.1} s",
        r.texts,
        r.lines,
        r.skipped,
        recipe.normalize.recipe_name(),
        r.bands,
        r.rows,
        r.seconds
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "Pairs per bin of exact Jaccard ({pairs} pairs), by shingle size k"
    )?;
    write!(out, "{:<14}", "jaccard")?;
    for h in &r.histograms {
        write!(out, "{:>12}", format!("k={}", h.k))?;
    }
    writeln!(out)?;
    let bins = r.histograms.first().map_or(0, |h| h.bins.len());
    for i in 0..bins {
        let b = &r.histograms[0].bins[i];
        let close = if i + 1 == bins { ']' } else { ')' };
        write!(out, "{:<14}", format!("[{:.2}, {:.2}{close}", b.lo, b.hi))?;
        for h in &r.histograms {
            write!(out, "{:>12}", h.bins[i].count)?;
        }
        writeln!(out)?;
    }
    write!(out, "{:<14}", "suggested")?;
    for h in &r.histograms {
        let s = h
            .suggested_threshold
            .map_or_else(|| "none".to_owned(), |t| format!("{t:.3}"));
        write!(out, "{s:>12}")?;
    }
    writeln!(out)?;
    write!(out, "{:<14}", "recall there")?;
    for h in &r.histograms {
        let s = h
            .recall_at_suggested
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.4}"));
        write!(out, "{s:>12}")?;
    }
    writeln!(out)?;
    writeln!(out)?;
    for h in &r.histograms {
        writeln!(out, "k={}: {}", h.k, h.why)?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "MinHash estimate against exact Jaccard; LSH misses at threshold {}",
        r.threshold
    )?;
    writeln!(
        out,
        "{:>8} {:>3} {:>10} {:>10} {:>10} {:>10} {:>11} {:>8}",
        "num_perm", "k", "pairs", "mean err", "p95 err", "(b, r)", "pairs >= t", "missed"
    )?;
    for a in &r.accuracy {
        let banding = match (a.bands, a.rows) {
            (Some(b), Some(r)) => format!("({b}, {r})"),
            _ => "none".into(),
        };
        let missed = a.missed.map_or_else(|| "-".to_owned(), |m| m.to_string());
        let error = |e: Option<f64>| e.map_or_else(|| "-".to_owned(), |e| format!("{e:.4}"));
        writeln!(
            out,
            "{:>8} {:>3} {:>10} {:>10} {:>10} {:>10} {:>11} {:>8}",
            a.num_perm,
            a.k,
            a.measured_pairs,
            error(a.mean_abs_error),
            error(a.p95_abs_error),
            banding,
            a.pairs_at_threshold,
            missed
        )?;
    }
    Ok(())
}
