//! Single-threaded signing rate: raw text → normalized → shingles →
//! MinHash signature, with the engine's configured pipeline
//! (`EngineParams::default()`: word 3-shingles, 128 permutations), on a JSONL
//! corpus of `{"id", "text"}` lines.
//!
//! ```text
//! cargo run --release --example sign_bench -- FILE [--repeat N] [--python PY | --no-peer]
//! ```
//!
//! Prints one JSON object: `docs`, `seconds`, `docs_per_s`, `ns_per_doc` for
//! `Engine::prepare` (the whole pipeline, allocation of the result included),
//! a per-phase `breakdown` in ns/doc (each phase timed alone on its own input),
//! and, when a Python with `rensa` is found, rensa's signing rate on the same
//! documents measured in the same run and `ratio_vs_rensa` (ours / theirs;
//! above 1 is faster). rensa is timed on `RMinHash.from_token_sets` alone, with
//! the shingle strings built beforehand (its tokenization is excluded; ours is
//! included). Every figure is the best of `--repeat` passes (default 5), which
//! filters out interference on a shared machine.
//!
//! The peer Python defaults to `$NEARDUP_BENCH_PYTHON`, else
//! `target/bench-venv/bin/python` if it exists (see `../shared/bench/README.md`
//! for the venv); `--no-peer` skips it.

use neardup::engine::{Engine, EngineParams};
use neardup::minhash::MinHasher;
use neardup::text::{normalize_into, Tokenizer};
use serde_json::{json, Value};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

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
best = float("inf")
for _ in range(repeat):
    t = time.perf_counter()
    sigs = RMinHash.from_token_sets(sets, num_perm=128, seed=42)
    best = min(best, time.perf_counter() - t)
    assert len(sigs) == len(sets)
print(json.dumps({"peer": "rensa", "docs": len(sets), "seconds": best, "docs_per_s": len(sets) / best, "ns_per_doc": best * 1e9 / len(sets)}))
"#;

struct Args {
    file: PathBuf,
    repeat: usize,
    python: Option<PathBuf>,
}

fn args() -> Args {
    let mut file = None;
    let mut repeat = 5;
    let mut python = std::env::var_os("NEARDUP_BENCH_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-venv/bin/python");
            venv.exists().then_some(venv)
        });
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--repeat" => {
                repeat = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--repeat takes a positive number")
            }
            "--python" => python = Some(it.next().expect("--python takes a path").into()),
            "--no-peer" => python = None,
            _ if file.is_none() && !a.starts_with("--") => file = Some(PathBuf::from(a)),
            _ => {
                eprintln!(
                    "usage: sign_bench FILE [--repeat N] [--python PY | --no-peer]\nunexpected argument {a:?}"
                );
                std::process::exit(2);
            }
        }
    }
    Args {
        file: file.unwrap_or_else(|| {
            eprintln!("usage: sign_bench FILE [--repeat N] [--python PY | --no-peer]");
            std::process::exit(2)
        }),
        repeat,
        python,
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

/// Best of `repeat` runs of `f`, in seconds.
fn best_of(repeat: usize, mut f: impl FnMut()) -> f64 {
    (0..repeat)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let args = args();
    let texts = load(&args.file);
    let params = EngineParams::default();
    let engine = Engine::new(params.clone()).expect("default parameters are valid");
    // The same components the engine builds from its parameters, for the
    // per-phase breakdown.
    let tokenizer = Tokenizer::new(params.normalize, params.shingle, params.seed);
    let minhasher = MinHasher::new(params.num_perm, params.seed);

    // Inputs of each phase, computed once outside the clock; also the check
    // that the phases compose to what the engine produces.
    let normalized: Vec<String> = texts
        .iter()
        .map(|t| {
            let mut s = String::new();
            normalize_into(t, &params.normalize, &mut s);
            s
        })
        .collect();
    let sets: Vec<_> = texts
        .iter()
        .filter_map(|t| engine.prepare(t).ok())
        .collect();
    let docs = sets.len();
    assert!(docs > 0, "no document in {} has words", args.file.display());
    let words: usize = normalized
        .iter()
        .map(|s| s.split(' ').filter(|w| !w.is_empty()).count())
        .sum();
    let shingles: usize = sets.iter().map(|p| p.shingles().len()).sum();

    // Whole pipeline: the engine's own entry point.
    let mut signed = 0usize;
    let total = best_of(args.repeat, || {
        signed = texts
            .iter()
            .filter_map(|t| engine.prepare(black_box(t)).ok())
            .map(|p| black_box(p).signature().len())
            .sum();
    });
    assert_eq!(signed, docs * params.num_perm);

    let mut scratch = String::new();
    let normalize = best_of(args.repeat, || {
        for t in &texts {
            normalize_into(black_box(t), &params.normalize, &mut scratch);
            black_box(&scratch);
        }
    });
    let mut hashes = Vec::new();
    let shingle = best_of(args.repeat, || {
        for s in &normalized {
            let _ = black_box(tokenizer.shingler().shingle_with(black_box(s), &mut hashes));
        }
    });
    let mut sig = vec![0u32; params.num_perm];
    let minhash = best_of(args.repeat, || {
        for p in &sets {
            minhasher.sign_into(black_box(p.shingles()), &mut sig);
            black_box(&sig);
        }
    });
    for p in &sets {
        minhasher.sign_into(p.shingles(), &mut sig);
        assert_eq!(&sig[..], p.signature(), "breakdown signs differently");
    }

    let ns = |secs: f64| secs * 1e9 / docs as f64;
    let mut report = json!({
        "docs": docs,
        "seconds": total,
        "docs_per_s": docs as f64 / total,
        "ns_per_doc": ns(total),
        "words_per_doc": words as f64 / docs as f64,
        "shingles_per_doc": shingles as f64 / docs as f64,
        "breakdown_ns_per_doc": {
            "normalize": ns(normalize),
            "shingle": ns(shingle),
            "minhash": ns(minhash),
        },
        "repeat": args.repeat,
    });
    if let Some(py) = &args.python {
        match peer(py, &args.file, args.repeat) {
            Ok(r) => {
                let theirs = r["docs_per_s"].as_f64().unwrap_or(f64::NAN);
                report["rensa"] = r;
                report["ratio_vs_rensa"] = json!(docs as f64 / total / theirs);
            }
            Err(e) => report["rensa_error"] = json!(e),
        }
    }
    println!("{report}");
}

fn peer(python: &Path, file: &Path, repeat: usize) -> Result<Value, String> {
    let out = Command::new(python)
        .arg("-c")
        .arg(RENSA)
        .arg(file)
        .arg(repeat.to_string())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bad peer output: {e}"))
}
