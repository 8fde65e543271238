//! Single-threaded signing rate: raw text → normalized → shingles →
//! MinHash signature, with the engine's configured pipeline
//! (`EngineParams::default()`: word 3-shingles, 128 permutations), on a JSONL
//! corpus of `{"id", "text"}` lines.
//!
//! ```text
//! cargo run --release --example sign_bench -- FILE [--repeat N] [--rounds N] [--python PY | --no-peer]
//! ```
//!
//! Prints one JSON object: `docs`, `seconds`, `docs_per_s`, `ns_per_doc` for
//! `Engine::prepare` (the whole pipeline, allocation of the result included),
//! the same into reused buffers, a per-phase `breakdown_ns_per_doc` (each
//! phase timed alone on its precomputed input: normalize + hash words, combine
//! word hashes into shingle hashes, sort + dedup, MinHash),
//! and, when a Python with `rensa` is found, rensa's signing rate on the same
//! documents measured in the same run and `ratio_vs_rensa` (ours / theirs;
//! above 1 is faster). rensa is timed on `RMinHash.from_token_sets` alone, with
//! the shingle strings built beforehand (its tokenization is excluded; ours is
//! included). Every figure is the fastest of `--repeat` passes over the whole
//! file (default 5), each document once a pass; rensa is timed the same way
//! (and so is `scripts/bench/peers.py rensa-sign`, which `scripts/bench.sh`
//! runs).
//!
//! Why whole passes: this tool used to sum, over chunks of 64 documents, the
//! fastest of 5 runs of each chunk, to drop runs another process preempted.
//! Running a chunk again lets the CPU's branch predictor learn its
//! documents, which a service's stream of new documents never allows, and
//! it flattered the branchy parts most: on the articles corpus 483k docs/s
//! that way against 395k with each document seen once (the insertion sort
//! of the shingle hashes 397 vs 589 ns a document), while `bench.sh` timed
//! rensa in whole passes. Preemption is now left to the best-of and to the
//! rounds' median.
//!
//! The peer Python defaults to `$NEARDUP_BENCH_PYTHON`, else
//! `target/bench-venv/bin/python` if it exists (see `../shared/bench/README.md`
//! for the venv); `--no-peer` skips it.

#[path = "common/median.rs"]
mod median;
#[path = "common/passes.rs"]
mod passes;

use clap::Parser;
use median::median;
use neardup::engine::{Engine, EngineParams};
use neardup::minhash::MinHasher;
use neardup::text::{normalize_into, Scratch, Tokenizer};
use passes::best_of;
use serde_json::{json, Value};
use std::hint::black_box;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// rensa's fastest signing path, timed alone: token sets (word 3-shingles
/// with the service's recipe, as `shared/bench/exact_pairs.py` builds them)
/// are prepared before the clock starts.
const RENSA: &str = r#"
import json, re, sys, time, unicodedata
from rensa import RMinHash
NON_WORD = re.compile(r"[^\w\s]")
def shingles(text, k=3):
    w = NON_WORD.sub("", unicodedata.normalize("NFKC", text).lower()).split()
    if len(w) < k:
        return [" ".join(w)] if w else []
    return list(dict.fromkeys(" ".join(w[i:i + k]) for i in range(len(w) - k + 1)))
path, repeat = sys.argv[1], int(sys.argv[2])
sets = [s for s in (shingles(json.loads(l)["text"]) for l in open(path, encoding="utf-8") if l.strip()) if s]
print("ready", flush=True)
# One timing per "go" line, so that the caller can interleave its own rounds
# with ours. The fastest of `repeat` passes over every set (the same
# estimator as the caller's).
for line in sys.stdin:
    if line.strip() != "go":
        break
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        sigs = RMinHash.from_token_sets(sets, num_perm=128, seed=42)
        best = min(best, time.perf_counter() - t)
        assert len(sigs) == len(sets)
        del sigs
    print(json.dumps({"peer": "rensa", "docs": len(sets), "seconds": best, "docs_per_s": len(sets) / best, "ns_per_doc": best * 1e9 / len(sets)}), flush=True)
"#;

/// Command line (see the module docs).
#[derive(Parser)]
struct Args {
    /// JSONL file of `{"id", "text"}` lines.
    file: PathBuf,
    /// Passes over the whole file; the fastest counts.
    #[arg(long, default_value = "5")]
    repeat: NonZeroUsize,
    /// Rounds; the median is reported.
    #[arg(long, default_value = "5")]
    rounds: NonZeroUsize,
    /// Python with `rensa` for the peer measurement (default:
    /// `$NEARDUP_BENCH_PYTHON`, else `target/bench-venv/bin/python` if it exists).
    #[arg(long, conflicts_with = "no_peer")]
    python: Option<PathBuf>,
    /// Skip the peer measurement.
    #[arg(long)]
    no_peer: bool,
}

impl Args {
    /// The peer's Python, if any (module docs).
    fn peer_python(&self) -> Option<PathBuf> {
        if self.no_peer {
            return None;
        }
        self.python
            .clone()
            .or_else(|| std::env::var_os("NEARDUP_BENCH_PYTHON").map(PathBuf::from))
            .or_else(|| {
                let venv =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-venv/bin/python");
                venv.exists().then_some(venv)
            })
    }
}

fn load(path: &Path) -> Vec<String> {
    let raw = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    raw.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("each line is a JSON object");
            v["text"]
                .as_str()
                .expect("each line has a string \"text\"")
                .to_owned()
        })
        .collect()
}

fn main() {
    let args = Args::parse();
    let repeat = args.repeat.get();
    let texts = load(&args.file);
    let params = EngineParams::default();
    let engine = Engine::new(
        params
            .clone()
            .validate()
            .expect("default parameters are valid"),
    );
    // The same components the engine builds from its parameters, for the
    // per-phase breakdown.
    let tokenizer = Tokenizer::new(params.normalize, params.shingle, params.index.seed);
    let minhasher = MinHasher::new(params.index.num_perm, params.index.seed);

    // Inputs of each phase, computed once outside the clock; also the check
    // that the phases compose to what the engine produces.
    let sets: Vec<_> = texts
        .iter()
        .filter_map(|t| engine.prepare(t).ok())
        .collect();
    let docs = sets.len();
    assert!(docs > 0, "no document in {} has words", args.file.display());
    let mut scratch = Scratch::default();
    let words: Vec<Vec<u64>> = texts
        .iter()
        .map(|t| tokenizer.word_hashes(t, &mut scratch).to_vec())
        .collect();
    let raw: Vec<Vec<u32>> = words
        .iter()
        .map(|w| {
            let mut out = Vec::new();
            tokenizer.shingler().combine(w, &mut out);
            out
        })
        .collect();
    let word_count: usize = words.iter().map(Vec::len).sum();
    let shingles: usize = sets.iter().map(|p| p.shingles().len()).sum();

    // Whole pipeline: the engine's own entry point (allocates its result),
    // in `rounds` rounds, each followed by a round of rensa's signing, so
    // that both see the same machine load; the ratio is the median of the
    // per-round ratios.
    let mut peer = args
        .peer_python()
        .map(|py| Peer::start(&py, &args.file, repeat));
    let mut ours = Vec::new();
    let mut theirs: Vec<Value> = Vec::new();
    let mut peer_error = None;
    for _ in 0..args.rounds.get() {
        let mut signed = 0usize;
        ours.push(best_of(texts.len(), repeat, |r| {
            signed += texts[r]
                .iter()
                .filter_map(|t| engine.prepare(black_box(t)).ok())
                .map(|p| black_box(p).signature().len())
                .sum::<usize>();
        }));
        assert_eq!(signed, docs * params.index.num_perm * repeat);
        match peer
            .as_mut()
            .map(|p| p.as_mut().map_err(|e| e.clone())?.round())
        {
            Some(Ok(r)) => theirs.push(r),
            Some(Err(e)) => {
                peer_error = Some(e);
                peer = None;
            }
            None => {}
        }
    }
    drop(peer);
    let total = median(&ours);

    // The same pipeline into reused buffers: no allocation per document.
    let mut sig = vec![0u32; params.index.num_perm];
    let reused = best_of(texts.len(), repeat, |r| {
        for t in &texts[r] {
            if let Ok(h) = tokenizer.hashes(black_box(t), &mut scratch) {
                minhasher.sign_into(h, &mut sig);
                black_box(&sig);
            }
        }
    });

    // Phases, each alone on its precomputed input.
    let words_phase = best_of(texts.len(), repeat, |r| {
        for t in &texts[r] {
            black_box(tokenizer.word_hashes(black_box(t), &mut scratch));
        }
    });
    let mut out = Vec::new();
    let combine = best_of(words.len(), repeat, |r| {
        for w in &words[r] {
            out.clear();
            tokenizer.shingler().combine(black_box(w), &mut out);
            black_box(&out);
        }
    });
    let mut spare = Vec::new();
    let sort_dedup = best_of(raw.len(), repeat, |r| {
        for r in &raw[r] {
            out.clear();
            out.extend_from_slice(r);
            let _ = black_box(tokenizer.shingler().finish(&mut out, &mut spare));
        }
    });
    let minhash = best_of(sets.len(), repeat, |r| {
        for p in &sets[r] {
            minhasher.sign_into(black_box(p.shingles()), &mut sig);
            black_box(&sig);
        }
    });
    for p in &sets {
        minhasher.sign_into(p.shingles(), &mut sig);
        assert_eq!(&sig[..], p.signature(), "breakdown signs differently");
    }
    // For reference: the normalized string alone (the path of non-ASCII
    // text and character shingles; ASCII word shingling never builds it).
    let mut norm = String::new();
    let normalize = best_of(texts.len(), repeat, |r| {
        for t in &texts[r] {
            normalize_into(black_box(t), &params.normalize, &mut norm);
            black_box(&norm);
        }
    });

    let ns = |secs: f64| secs * 1e9 / docs as f64;
    let mut report = json!({
        "docs": docs,
        "seconds": total,
        "docs_per_s": docs as f64 / total,
        "ns_per_doc": ns(total),
        "reused_buffers_ns_per_doc": ns(reused),
        "words_per_doc": word_count as f64 / docs as f64,
        "shingles_per_doc": shingles as f64 / docs as f64,
        "breakdown_ns_per_doc": {
            "normalize_and_hash_words": ns(words_phase),
            "combine_shingles": ns(combine),
            "sort_dedup": ns(sort_dedup),
            "minhash": ns(minhash),
            "normalize_string_only": ns(normalize),
        },
        "minhash_kernel": minhasher.kernel().name(),
        "repeat": repeat,
        "rounds": args.rounds.get(),
    });
    if !theirs.is_empty() {
        let ratios: Vec<f64> = ours
            .iter()
            .zip(&theirs)
            .map(|(o, t)| t["seconds"].as_f64().unwrap_or(f64::NAN) / o)
            .collect();
        let mut by_speed = theirs.clone();
        by_speed.sort_by(|a, b| {
            a["seconds"]
                .as_f64()
                .partial_cmp(&b["seconds"].as_f64())
                .unwrap()
        });
        report["rensa"] = by_speed[by_speed.len() / 2].clone();
        report["ratio_vs_rensa"] = json!(median(&ratios));
        report["ratio_vs_rensa_per_round"] = json!(ratios);
    }
    if let Some(e) = peer_error {
        report["rensa_error"] = json!(e);
    }
    println!("{report}");
}

/// The rensa process: builds its token sets once, then times one round per
/// request.
struct Peer {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Peer {
    fn start(python: &Path, file: &Path, repeat: usize) -> Result<Self, String> {
        use std::process::Stdio;
        let mut child = Command::new(python)
            .arg("-c")
            .arg(RENSA)
            .arg(file)
            .arg(repeat.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
        let input = child.stdin.take().expect("piped");
        let output = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut peer = Self {
            child,
            input,
            output,
        };
        // Wait until its tokenization is over: it must not run during ours.
        match peer.line()?.trim() {
            "ready" => Ok(peer),
            other => Err(format!("unexpected peer output {other:?}")),
        }
    }

    fn line(&mut self) -> Result<String, String> {
        use std::io::BufRead;
        let mut line = String::new();
        match self.output.read_line(&mut line) {
            Ok(0) => Err("the peer exited (is rensa installed?)".to_owned()),
            Ok(_) => Ok(line),
            Err(e) => Err(format!("reading the peer: {e}")),
        }
    }

    fn round(&mut self) -> Result<Value, String> {
        use std::io::Write;
        writeln!(self.input, "go").map_err(|e| format!("writing to the peer: {e}"))?;
        serde_json::from_str(&self.line()?).map_err(|e| format!("bad peer output: {e}"))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = writeln!(self.input, "stop");
        let _ = self.child.wait();
    }
}
