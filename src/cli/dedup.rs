//! `neardup dedup INPUT`: deduplicate a corpus offline, with the server's
//! engine and configuration, no server and no data directory.
//!
//! ```text
//!   JSONL lines / files ─batches of 4096─▶ parse + sign + insert (every core)
//!        ─▶ scan every pair (every core) ─▶ groups, pairs or the drop list as JSON Lines on stdout
//! ```
//!
//! Originals and keep policies (`--drop-list --keep`) order documents as
//! the server does (`engine::originals`): by the RFC 3339 time in the
//! metadata field `originals.time_field` (or `--time-field`); a document
//! without a valid one dates from the run's start plus its line number
//! (its file's position, for a directory) in milliseconds, so input order
//! stands in for the order a server was written in.
//!
//! The input is streamed: at most one batch of texts is in memory at a
//! time, and the engine keeps each document's shingle set and signature
//! (a couple of KiB), never its text. Bad input (a malformed line, a
//! repeated id, an empty or oversized text, a file that is not UTF-8) is
//! reported on stderr with its line number or path and skipped. Progress
//! goes to stderr: a bar on a terminal, a line every few seconds otherwise.

use super::lines::JsonLines;
use super::progress::Progress;
use crate::config::Config;
use crate::engine::originals::Keep;
use crate::engine::{
    By, DocId, Engine, EngineError, FilterSpec, Groups, Measure, NoJournal, Prepared, Score, Stamp,
    Threshold, WriteMode,
};
use crate::wire::{drops, GroupOut, PairOut};
use anyhow::Context;
use rayon::prelude::*;
use serde::Deserialize;
use std::collections::HashSet;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Documents read, signed and inserted per step.
const BATCH: usize = 4096;
/// Problems printed one by one; beyond that only counted.
const MAX_REPORTED: usize = 100;

#[derive(Debug, Clone, clap::Args)]
pub struct DedupArgs {
    /// A JSON Lines file (`{"id": ..., "text": ...}` per line; `-` for
    /// stdin) or a directory (every regular file below it is one document,
    /// its path relative to the directory the id).
    pub input: PathBuf,
    /// Write every verified pair `{"a", "b", "jaccard", "a_in_b", "b_in_a"}`
    /// instead of groups.
    #[arg(long, conflicts_with = "drop_list")]
    pub pairs: bool,
    /// Write the drop list instead of groups: `{"id", "kept", "group"}` for
    /// every document to remove so that one per group is kept (the one
    /// `--keep` names), as `GET /duplicates/drop-list` answers.
    #[arg(long)]
    pub drop_list: bool,
    /// Which member of a group the drop list keeps: `oldest` (the original),
    /// `newest`, `longest` (most distinct shingles) or `max:<field>` (the
    /// highest number in that metadata field).
    #[arg(long, requires = "drop_list", value_parser = parse_keep, default_value = "oldest")]
    pub keep: Keep,
    /// The metadata field holding a document's time for originals and
    /// keep policies (default: originals.time_field).
    #[arg(long)]
    pub time_field: Option<String>,
    /// Exact score at or above which two documents are duplicates
    /// (default: index.threshold); for Jaccard the offline index is tuned
    /// for it.
    #[arg(long)]
    pub threshold: Option<f64>,
    /// `jaccard` (near-duplicates), or `containment`: either text inside
    /// the other at ≥ the threshold (excerpts, abridged copies, a text that
    /// embeds another), from a passage index built for this run.
    #[arg(long, value_enum, default_value_t = DedupMeasure::Jaccard)]
    pub measure: DedupMeasure,
    /// `raw` (every shingle), or `content`: the score over the shingles
    /// that are not boilerplate (held by at least index.boilerplate.share
    /// of the input's documents and index.boilerplate.min_docs of them,
    /// once it has index.boilerplate.min_collection_docs), counted over
    /// the whole input for this run.
    #[arg(long, value_enum, default_value_t = DedupScore::Raw)]
    pub score: DedupScore,
    /// Smallest group written.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..))]
    pub min_size: u64,
    /// No progress on stderr (the summary is still printed).
    #[arg(long, short)]
    pub quiet: bool,
    /// Exit with status 1 if any input was skipped.
    #[arg(long)]
    pub strict: bool,
    /// Only pairs whose two documents' `metadata` (a JSON object on each
    /// line) satisfy these conditions: a JSON object of field → value or
    /// non-empty array of values, as the API's `filter`
    /// (docs/collections.md, "Metadata filters").
    #[arg(long, value_name = "JSON")]
    pub filter: Option<String>,
    /// Comma-separated metadata fields: two documents with equal values of
    /// one of them are not a pair, as the API's `exclude_same`.
    #[arg(long, value_name = "FIELDS")]
    pub exclude_same: Option<String>,
}

fn parse_keep(raw: &str) -> Result<Keep, String> {
    Keep::parse("--keep", raw)
}

/// The score `neardup dedup` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DedupMeasure {
    Jaccard,
    Containment,
}

impl DedupMeasure {
    fn measure(self) -> Measure {
        match self {
            DedupMeasure::Jaccard => Measure::Jaccard,
            DedupMeasure::Containment => Measure::Containment,
        }
    }
}

/// Over which shingles `neardup dedup` scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DedupScore {
    Raw,
    Content,
}

impl DedupScore {
    fn score(self) -> Score {
        match self {
            DedupScore::Raw => Score::Raw,
            DedupScore::Content => Score::Content,
        }
    }
}

/// What a run did, printed at the end.
#[derive(Debug, Default, serde::Serialize)]
pub struct Summary {
    pub documents: usize,
    pub skipped: usize,
    pub groups: usize,
    /// Documents in groups beyond the first of each: what dedup would drop.
    pub duplicates: usize,
    pub pairs: usize,
    pub read_seconds: f64,
    pub scan_seconds: f64,
    pub seconds: f64,
}

/// One JSON Lines record: `id` may be a string or a number, or absent (the
/// line number is used); `metadata` is kept only for `--filter`,
/// `--exclude-same`, `--time-field` and `--drop-list` (anything but an
/// object counts as none); other fields are ignored.
#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    id: Option<serde_json::Value>,
    text: String,
    /// Kept as raw JSON when it is an object (for originals and `--keep`).
    #[serde(default)]
    metadata: Option<Box<serde_json::value::RawValue>>,
}

/// Skipped input, reported as it is met.
#[derive(Default)]
struct Problems {
    count: usize,
}

impl Problems {
    fn report(&mut self, what: &str, why: &str) {
        self.count += 1;
        if self.count <= MAX_REPORTED {
            eprintln!("neardup dedup: {what}: {why} (skipped)");
        } else if self.count == MAX_REPORTED + 1 {
            eprintln!("neardup dedup: more problems follow; only their count is reported");
        }
    }
}

/// Run `neardup dedup`; returns the process exit code.
pub fn run(config: &Config, args: &DedupArgs) -> anyhow::Result<i32> {
    let start = Instant::now();
    // The offline index lives for this run only: tune it for the threshold
    // asked for (explicit index.bands/rows, if configured, still apply).
    let measure = args.measure.measure();
    let score = args.score.score();
    let by = By::new(measure, score);
    let params = match (args.threshold, measure, score) {
        (None, Measure::Jaccard, Score::Raw) => config.engine().clone(),
        (t, _, _) => {
            let mut params = config.engine_params();
            if measure == Measure::Jaccard && score == Score::Raw {
                params.index.threshold = t.unwrap_or(params.index.threshold);
            }
            // A containment scan, or one on content scores, reads the
            // passage index; content scores need document frequency.
            params.index.passage_index |= by.via_passages();
            params.index.boilerplate.enabled |= score == Score::Content;
            params
                .validate()
                .map_err(|e| anyhow::anyhow!("--threshold: {e}"))?
        }
    };
    let filter = filter_of(args)?;
    let engine = Engine::new(params);
    let threshold = engine
        .threshold_for(measure, score, args.threshold)
        .map_err(|e| anyhow::anyhow!("--threshold: {e}"))?;
    let time_field = match &args.time_field {
        Some(f) => {
            let o = crate::config::Originals {
                time_field: Some(f.clone()),
            };
            o.check()
                .map_err(|e| anyhow::anyhow!("--time-field: {e}"))?;
            o
        }
        None => config.originals.clone(),
    };
    let mut problems = Problems::default();
    let max_text = config.limits.max_text_bytes;
    let load = Load {
        engine: &engine,
        max_text,
        started_ms: engine.now_ms(),
        // Lines' metadata costs memory: kept only when something reads it.
        keep_metadata: filter.is_some() || args.drop_list || time_field.time_field().is_some(),
    };
    if args.input.is_dir() {
        load_directory(&load, &args.input, args.quiet, &mut problems)?;
    } else {
        load_json_lines(&load, &args.input, args.quiet, &mut problems)?;
    }
    let read_seconds = start.elapsed().as_secs_f64();
    let mut summary = Summary {
        documents: engine.len(),
        skipped: problems.count,
        read_seconds,
        ..Default::default()
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let scan_start = Instant::now();
    let written = if args.pairs {
        write_pairs(
            &engine,
            Ask {
                threshold,
                by,
                filter: filter.as_ref(),
            },
            args.quiet,
            &mut out,
            &mut summary,
        )
    } else {
        write_groups(
            &engine,
            Ask {
                threshold,
                by,
                filter: filter.as_ref(),
            },
            args,
            time_field.time_field(),
            &mut out,
            &mut summary,
        )
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => {}
        // `| head` closed the pipe: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(0),
        Err(e) => return Err(e).context("writing to stdout"),
    }
    summary.scan_seconds = scan_start.elapsed().as_secs_f64();
    summary.seconds = start.elapsed().as_secs_f64();
    let found = if args.pairs {
        format!("{} pairs", summary.pairs)
    } else {
        format!(
            "{} groups, {} duplicates ({} pairs)",
            summary.groups, summary.duplicates, summary.pairs
        )
    };
    eprintln!(
        "neardup dedup: {} documents ({} skipped), {found} at {} ≥ {}; \
         read {:.1} s, scan {:.1} s, total {:.1} s",
        summary.documents,
        summary.skipped,
        match (measure, score) {
            (Measure::Jaccard, Score::Raw) => "Jaccard",
            (Measure::Jaccard, Score::Content) => "content Jaccard (boilerplate left out)",
            (_, Score::Raw) => "containment (either inside the other)",
            (_, Score::Content) => "content containment (boilerplate left out)",
        },
        threshold.value(),
        summary.read_seconds,
        summary.scan_seconds,
        summary.seconds
    );
    Ok(if args.strict && summary.skipped > 0 {
        1
    } else {
        0
    })
}

/// `--filter` and `--exclude-same`, checked as the API checks them.
fn filter_of(args: &DedupArgs) -> anyhow::Result<Option<Arc<FilterSpec>>> {
    let value = args
        .filter
        .as_deref()
        .map(|raw| {
            serde_json::from_str::<serde_json::Value>(raw)
                .map_err(|e| anyhow::anyhow!("--filter: not a valid JSON object: {e}"))
        })
        .transpose()?;
    let names: Vec<String> = args
        .exclude_same
        .as_deref()
        .map(|list| list.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let spec = FilterSpec::parse(value.as_ref(), &names)
        .map_err(|e| anyhow::anyhow!("--filter / --exclude-same: {e}"))?;
    Ok(spec.map(Arc::new))
}

/// What a scan asks for: pairs at or above `threshold` on `by`, among
/// those `filter` admits.
struct Ask<'a> {
    threshold: Threshold,
    by: By,
    filter: Option<&'a Arc<FilterSpec>>,
}

fn write_groups(
    engine: &Engine,
    Ask {
        threshold,
        by,
        filter,
    }: Ask<'_>,
    args: &DedupArgs,
    time_field: Option<&str>,
    out: &mut impl Write,
    summary: &mut Summary,
) -> std::io::Result<()> {
    let progress = Progress::new(args.quiet, "scanning", Some(engine.slot_span() as u64));
    let report = |done: usize, total: usize| {
        progress.update(done as u64, Some(total as u64), || {
            format!("{done}/{total} documents")
        });
    };
    let groups: Groups = engine.duplicate_groups_filtered(
        threshold,
        by,
        filter,
        None,
        args.min_size as usize,
        Some(&report),
    );
    progress.finish();
    summary.groups = groups.groups.len();
    summary.duplicates = groups.redundant();
    summary.pairs = groups.stats.pairs;
    for (i, group) in groups.groups.iter().enumerate() {
        if args.drop_list {
            for d in drops(group, i, &args.keep, time_field) {
                serde_json::to_writer(&mut *out, &d)?;
                out.write_all(b"\n")?;
            }
        } else {
            serde_json::to_writer(&mut *out, &GroupOut::new(group, time_field))?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

fn write_pairs(
    engine: &Engine,
    Ask {
        threshold,
        by,
        filter,
    }: Ask<'_>,
    quiet: bool,
    out: &mut impl Write,
    summary: &mut Summary,
) -> std::io::Result<()> {
    let progress = Progress::new(quiet, "scanning", Some(engine.slot_span() as u64));
    let found = AtomicU64::new(0);
    let report = |done: usize, total: usize| {
        progress.update(done as u64, Some(total as u64), || {
            format!(
                "{done}/{total} documents, {} pairs",
                found.load(Ordering::Relaxed)
            )
        });
    };
    let mut failure = None;
    let stats =
        engine.scan_pairs_filtered(threshold, by, filter, None, Some(&report), &mut |edges| {
            found.fetch_add(edges.len() as u64, Ordering::Relaxed);
            for edge in &edges {
                let line = serde_json::to_writer(&mut *out, &PairOut::from(edge))
                    .map_err(std::io::Error::from)
                    .and_then(|()| out.write_all(b"\n"));
                if let Err(e) = line {
                    failure = Some(e);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
    progress.finish();
    if let Some(e) = failure {
        return Err(e);
    }
    summary.pairs = stats.pairs;
    Ok(())
}

/// A document read from the input: where it was (for problems), its id,
/// its text or why it cannot be used, its metadata and its position.
struct Item {
    at: String,
    id: String,
    text: Result<String, String>,
    metadata: Option<Box<str>>,
    /// Its line number (a file's position in a directory), from 1.
    position: u64,
}

/// Where and how the input is loaded.
struct Load<'a> {
    engine: &'a Engine,
    max_text: usize,
    /// When the run started: a document's stored time is this plus its
    /// position, so input order is the order of `created_at`.
    started_ms: u64,
    /// Keep each line's metadata (for `--filter`, `--exclude-same`,
    /// `--time-field` and `--drop-list`).
    keep_metadata: bool,
}

/// Sign and insert a batch on every core; report problems in input order.
/// Of two lines with one id the first is kept: repeats within the batch
/// are found before the parallel part, earlier batches are already stored.
fn ingest(load: &Load<'_>, batch: Vec<Item>, problems: &mut Problems) {
    let (engine, max_text) = (load.engine, load.max_text);
    let repeated: Vec<bool> = {
        let mut seen = HashSet::with_capacity(batch.len());
        batch
            .iter()
            .map(|item| item.text.is_ok() && !seen.insert(item.id.as_str()))
            .collect()
    };
    let failures: Vec<(String, String)> = batch
        .into_par_iter()
        .zip(repeated)
        .filter_map(|(item, repeated)| {
            let outcome = if repeated {
                Err(repeat_message(&item.id))
            } else {
                let stamp = Stamp {
                    created_ms: load.started_ms + item.position,
                    expires_ms: None,
                };
                item.text
                    .and_then(|text| prepare(engine, &item.id, &text, max_text))
                    .and_then(|(id, doc)| {
                        match engine.insert_journaled(
                            id,
                            &doc,
                            item.metadata,
                            WriteMode::Create,
                            stamp,
                            &NoJournal,
                        ) {
                            Ok(_) => Ok(()),
                            Err(EngineError::AlreadyExists(id)) => Err(repeat_message(id.as_str())),
                            Err(e) => Err(e.to_string()),
                        }
                    })
            };
            outcome.err().map(|why| (item.at, why))
        })
        .collect();
    for (at, why) in failures {
        problems.report(&at, &why);
    }
}

fn repeat_message(id: &str) -> String {
    format!("id {id:?} appeared before; the first one is kept")
}

fn prepare(
    engine: &Engine,
    id: &str,
    text: &str,
    max_text: usize,
) -> Result<(DocId, Prepared), String> {
    if text.len() > max_text {
        return Err(format!(
            "text is {} bytes; the limit is {max_text} (limits.max_text_bytes)",
            text.len()
        ));
    }
    let id = DocId::parse(id).map_err(|e| format!("id: {e}"))?;
    let doc = engine
        .prepare(text)
        .map_err(|e| EngineError::from(e).to_string())?;
    Ok((id, doc))
}

fn load_json_lines(
    load: &Load<'_>,
    path: &Path,
    quiet: bool,
    problems: &mut Problems,
) -> anyhow::Result<()> {
    let engine = load.engine;
    let mut input = JsonLines::open(path)?;
    let total = input.total;
    let progress = Progress::new(quiet, "reading", total);
    let mut buf = Vec::new();
    loop {
        let mut lines: Vec<(u64, Vec<u8>)> = Vec::with_capacity(BATCH);
        while lines.len() < BATCH {
            let Some(line_no) = input.next_into(&mut buf)? else {
                break;
            };
            lines.push((line_no, std::mem::take(&mut buf)));
        }
        if lines.is_empty() {
            break;
        }
        let batch: Vec<Item> = lines
            .par_iter()
            .map(|(n, line)| parse_line(*n, line, load.keep_metadata))
            .collect();
        ingest(load, batch, problems);
        let docs = engine.len();
        let (bytes, line_no) = (input.bytes, input.line_no);
        progress.update(bytes, total, || format!("{docs} documents, line {line_no}"));
    }
    progress.finish();
    Ok(())
}

/// A line as an item; problems name the line number.
fn parse_line(line_no: u64, bytes: &[u8], keep_metadata: bool) -> Item {
    let at = format!("line {line_no}");
    let mut metadata = None;
    let (id, text) = match serde_json::from_slice::<Line>(bytes) {
        Err(e) => (
            String::new(),
            Err(format!("not a JSON object with a \"text\" string: {e}")),
        ),
        Ok(line) => {
            metadata = line
                .metadata
                .filter(|m| keep_metadata && m.get().starts_with('{'))
                .map(|m| m.get().into());
            match line.id {
                None | Some(serde_json::Value::Null) => (line_no.to_string(), Ok(line.text)),
                Some(serde_json::Value::String(id)) => (id, Ok(line.text)),
                Some(serde_json::Value::Number(n)) => (n.to_string(), Ok(line.text)),
                Some(_) => (String::new(), Err("id must be a string or a number".into())),
            }
        }
    };
    Item {
        at,
        id,
        text,
        metadata,
        position: line_no,
    }
}

fn load_directory(
    load: &Load<'_>,
    root: &Path,
    quiet: bool,
    problems: &mut Problems,
) -> anyhow::Result<()> {
    let engine = load.engine;
    let files = list_files(root)?;
    let total = files.len() as u64;
    let progress = Progress::new(quiet, "reading", Some(total));
    let mut done = 0u64;
    for (c, chunk) in files.chunks(BATCH).enumerate() {
        let batch: Vec<Item> = chunk
            .par_iter()
            .enumerate()
            .map(|(i, path)| {
                let text = std::fs::read(path)
                    .map_err(|e| e.to_string())
                    .and_then(|b| String::from_utf8(b).map_err(|e| format!("not UTF-8 text: {e}")));
                Item {
                    at: path.display().to_string(),
                    id: relative_id(root, path),
                    text,
                    metadata: None,
                    position: (c * BATCH + i + 1) as u64,
                }
            })
            .collect();
        ingest(load, batch, problems);
        done += chunk.len() as u64;
        let docs = engine.len();
        progress.update(done, Some(total), || format!("{docs} documents"));
    }
    progress.finish();
    Ok(())
}

/// The id of a file: its path below `root`, with `/` separators.
fn relative_id(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every regular file below `root`, sorted; hidden entries (`.name`) and
/// symbolic links are left out.
fn list_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("{}", dir.display()))?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_dir() {
                dirs.push(entry.path());
            } else if kind.is_file() {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_take_string_number_or_absent_ids() {
        assert_eq!(parse_line(3, br#"{"id":"a","text":"t"}"#, false).id, "a");
        assert_eq!(
            parse_line(3, br#"{"id":17,"text":"t","x":1}"#, false).id,
            "17"
        );
        assert_eq!(parse_line(3, br#"{"text":"t"}"#, false).id, "3");
        let bad = parse_line(9, br#"{"id":"a"}"#, false);
        assert_eq!(bad.at, "line 9");
        assert!(bad.text.unwrap_err().contains("text"));
        assert!(parse_line(9, b"{nope", false).text.is_err());
        assert!(parse_line(9, br#"{"id":[1],"text":"t"}"#, false)
            .text
            .is_err());
        let meta = r#"{"id":"a","text":"t","metadata":{"site":"é"}}"#.as_bytes();
        assert_eq!(
            parse_line(1, meta, true).metadata.as_deref(),
            Some(r#"{"site":"é"}"#)
        );
        assert_eq!(parse_line(1, meta, false).metadata, None);
        let not_object = br#"{"id":"a","text":"t","metadata":["site"]}"#;
        assert_eq!(parse_line(1, not_object, true).metadata, None);
    }

    #[test]
    fn lines_keep_a_metadata_object_and_their_position() {
        let meta = r#"{"published_at":"2024-03-01T10:00:00+02:00","titre":"Été “à Zürich”"}"#;
        let line = format!(r#"{{"id":"a","text":"t","metadata":{meta}}}"#);
        let item = parse_line(5, line.as_bytes(), true);
        assert_eq!(item.metadata.as_deref(), Some(meta));
        assert_eq!(item.position, 5);
        for other in [r#"[1]"#, r#""x""#, "null"] {
            let line = format!(r#"{{"id":"a","text":"t","metadata":{other}}}"#);
            assert!(
                parse_line(1, line.as_bytes(), true).metadata.is_none(),
                "{other}"
            );
        }
    }

    #[test]
    fn file_ids_are_slash_separated_relative_paths() {
        let root = Path::new("/data/corpus");
        assert_eq!(
            relative_id(root, Path::new("/data/corpus/a/b.txt")),
            "a/b.txt"
        );
    }
}
