//! The text stage alone, per input byte: normalize + hash words (what word
//! shingling costs before the shingles are combined), on one thread, for
//! each JSONL file given and for each group of its documents (the id up to
//! its first `/`: the language in the real-text corpus).
//!
//! ```text
//! cargo run --release --example text_bench -- FILE... [--repeat N] [--rounds N] [--phases words,shingles]
//! ```
//!
//! Prints one JSON object per file: for the file and each group, `docs`,
//! `bytes_per_doc`, `words_per_doc`, `non_ascii_docs` and, per phase, the
//! median over `--rounds` (5) of the time per document, per byte and per
//! word. Phases: `words` (`Tokenizer::word_hashes`: normalize and hash every
//! word, the first stage of word shingling), `shingles` (`Tokenizer::hashes`:
//! the sorted, distinct word 3-shingle hashes), `normalize` (`normalize_into`:
//! the normalized string, the first stage of character shingling) and
//! `char5` (`Tokenizer::hashes` with character 5-shingles); `--phases`
//! runs only the phases listed (all four by default). Each round takes the
//! fastest of `--repeat` (5) passes over the whole file, each document once
//! a pass (the estimator of `sign_bench`, whose docs say why not the fastest
//! run of each 64-document chunk, as before: repeating a chunk lets the
//! branch predictor learn it). Rounds of the files alternate, so two files
//! given together (an ASCII twin and its typographic original) see the same
//! machine load.
//!
//! Only `neardup::text` is used, with its default options (recipe version 2:
//! NFKC, case folding, strip punctuation; word 3-shingles), the engine's
//! recipe; `--text-version 1`, `--fold-accents` and `--confusables` change
//! the recipe.

#[path = "common/median.rs"]
mod median;
#[path = "common/passes.rs"]
mod passes;

use clap::Parser;
use median::median;
use neardup::text::{
    normalize_into, NormalizeOptions, Scratch, ShingleKind, ShingleOptions, Tokenizer,
};
use passes::best_of;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::num::NonZeroUsize;
use std::path::PathBuf;

const SEED: u64 = 1;

struct Group {
    name: String,
    texts: Vec<String>,
    bytes: usize,
    words: usize,
    non_ascii: usize,
    /// Per phase, the seconds of each round.
    seconds: BTreeMap<&'static str, Vec<f64>>,
}

const PHASES: [&str; 4] = ["words", "shingles", "normalize", "char5"];

/// Command line (see the module docs).
#[derive(Parser)]
struct Args {
    /// JSONL files of `{"id", "text"}` lines.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Runs of each chunk of 64 documents; the fastest counts.
    #[arg(long, default_value = "5")]
    repeat: NonZeroUsize,
    /// Rounds; the medians are reported.
    #[arg(long, default_value = "5")]
    rounds: NonZeroUsize,
    /// Phases to run, comma-separated (all of them by default).
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(PHASES))]
    phases: Vec<String>,
    /// The recipe's version (1: lowercase, whitespace words; 2, the
    /// default: case folding, words in scripts written without spaces).
    #[arg(long, default_value_t = neardup::text::TEXT_VERSION)]
    text_version: u8,
    /// Version 2's opt-in accent folding.
    #[arg(long)]
    fold_accents: bool,
    /// Version 2's opt-in look-alike mapping.
    #[arg(long)]
    confusables: bool,
}

fn main() {
    let args = Args::parse();
    let (files, repeat, rounds) = (args.files, args.repeat.get(), args.rounds.get());
    let selected: Vec<&'static str> = PHASES
        .into_iter()
        .filter(|p| args.phases.is_empty() || args.phases.iter().any(|q| q == p))
        .collect();
    let opts = NormalizeOptions {
        version: args.text_version,
        fold_accents: args.fold_accents,
        confusables: args.confusables,
        ..NormalizeOptions::default()
    };
    opts.check().unwrap_or_else(|e| panic!("{e}"));
    let words = Tokenizer::new(opts, ShingleOptions::default(), SEED);
    let chars = Tokenizer::new(
        opts,
        ShingleOptions {
            kind: ShingleKind::Char,
            k: 5,
            multiset: false,
        },
        SEED,
    );
    let mut scratch = Scratch::default();

    // Per file: the whole file, then its groups.
    let mut all: Vec<Vec<Group>> = Vec::new();
    for path in &files {
        let raw = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let mut whole = Vec::new();
        let mut by_group: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in raw.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).expect("each line is a JSON object");
            let text = v["text"].as_str().expect("a string \"text\"").to_owned();
            let id = v["id"].as_str().unwrap_or("");
            let group = id.split('/').next().unwrap_or("").to_owned();
            by_group.entry(group).or_default().push(text.clone());
            whole.push(text);
        }
        let mut groups = vec![("all".to_owned(), whole)];
        if by_group.len() > 1 {
            groups.extend(by_group);
        }
        all.push(
            groups
                .into_iter()
                .map(|(name, texts)| {
                    let bytes = texts.iter().map(String::len).sum();
                    let words_n = texts
                        .iter()
                        .map(|t| words.word_hashes(t, &mut scratch).len())
                        .sum();
                    let non_ascii = texts.iter().filter(|t| !t.is_ascii()).count();
                    Group {
                        name,
                        texts,
                        bytes,
                        words: words_n,
                        non_ascii,
                        seconds: BTreeMap::new(),
                    }
                })
                .collect(),
        );
    }

    let mut norm = String::new();
    for _ in 0..rounds {
        for groups in all.iter_mut() {
            for g in groups.iter_mut() {
                let texts = &g.texts;
                let n = texts.len();
                for &phase in &selected {
                    let s = match phase {
                        "words" => best_of(n, repeat, |r| {
                            for t in &texts[r] {
                                black_box(words.word_hashes(black_box(t), &mut scratch));
                            }
                        }),
                        "shingles" => best_of(n, repeat, |r| {
                            for t in &texts[r] {
                                let _ = black_box(words.hashes(black_box(t), &mut scratch));
                            }
                        }),
                        "normalize" => best_of(n, repeat, |r| {
                            for t in &texts[r] {
                                normalize_into(black_box(t), &opts, &mut norm);
                                black_box(&norm);
                            }
                        }),
                        _ => best_of(n, repeat, |r| {
                            for t in &texts[r] {
                                let _ = black_box(chars.hashes(black_box(t), &mut scratch));
                            }
                        }),
                    };
                    g.seconds.entry(phase).or_default().push(s);
                }
            }
        }
    }

    for (path, groups) in files.iter().zip(&all) {
        let mut out = Map::new();
        out.insert("file".into(), json!(path.display().to_string()));
        out.insert("rounds".into(), json!(rounds));
        out.insert("repeat".into(), json!(repeat));
        let mut gs = Map::new();
        for g in groups {
            let docs = g.texts.len() as f64;
            let mut phases = Map::new();
            for &phase in &selected {
                let s = median(&g.seconds[phase]);
                phases.insert(
                    phase.into(),
                    json!({
                        "ns_per_doc": s * 1e9 / docs,
                        "ns_per_byte": s * 1e9 / g.bytes as f64,
                        "ns_per_word": s * 1e9 / g.words.max(1) as f64,
                        "rounds_ns_per_byte": g.seconds[phase].iter().map(|s| s * 1e9 / g.bytes as f64).collect::<Vec<_>>(),
                    }),
                );
            }
            gs.insert(
                g.name.clone(),
                json!({
                    "docs": g.texts.len(),
                    "bytes_per_doc": g.bytes as f64 / docs,
                    "words_per_doc": g.words as f64 / docs,
                    "non_ascii_docs": g.non_ascii,
                    "phases": phases,
                }),
            );
        }
        out.insert("groups".into(), Value::Object(gs));
        println!("{}", Value::Object(out));
    }
}
