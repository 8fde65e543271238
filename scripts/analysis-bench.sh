#!/usr/bin/env bash
# The threshold advisor's cost on this machine: POST /analysis/histogram
# (k = 1, 2, 3, 4; 20 bins) and POST /analysis/accuracy (num_perm 16 … 256,
# k = 1 … 4) on N texts of each corpus, sent inline, and the same on a sample
# of N stored texts; medians of ROUNDS.
#
#   scripts/analysis-bench.sh                      # N=2000, ROUNDS=5
#   N=5000 CORPORA="a.jsonl b.jsonl" scripts/analysis-bench.sh
#
# CORPORA: JSON Lines files ({"text": ...}); the default is $N generated
# articles (110–150 made-up words, a fifth accented and a tenth Cyrillic,
# curly quotes, a planted twin of every 10th with 1–3 words changed) and,
# when scripts/bench.sh has made them, its news-like and real-text corpora
# (target/bench/corpus). Builds release; the server runs on 127.0.0.1:$PORT
# with a throwaway data directory and store_text on.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORT:-18083}"
N="${N:-2000}"
ROUNDS="${ROUNDS:-5}"
OUT="${OUT:-target/analysis-bench}"
mkdir -p "$OUT"
echo "building release ..."
cargo build --release --quiet --bin neardup
B="http://127.0.0.1:$PORT"

if [[ -z "${CORPORA:-}" ]]; then
    python3 - "$N" >"$OUT/articles.jsonl" <<'PY'
import json, random, sys
rng = random.Random(7)
latin = "abcdefghijklmnopqrstuvwxyzéüôç"
cyr = "абвгдежзиклмнопрстуфхцчшыэюя"
def word():
    alphabet = cyr if rng.random() < 0.1 else latin
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(3, 9)))
vocab = [word() for _ in range(4000)] + ["the", "of", "and", "a", "to", "in", "is", "que", "и", "der"] * 100
docs = []
while len(docs) < int(sys.argv[1]):
    words = [rng.choice(vocab) for _ in range(rng.randint(110, 150))]
    docs.append(words)
    if len(docs) % 10 == 0:
        twin = list(words)
        for _ in range(rng.randint(1, 3)):
            twin[rng.randrange(len(twin))] = rng.choice(vocab)
        docs.append(twin)
for words in docs[: int(sys.argv[1])]:
    text = " ".join(words)
    print(json.dumps({"text": "“" + text[0].upper() + text[1:] + ".” — £3"}, ensure_ascii=False))
PY
    CORPORA="$OUT/articles.jsonl"
    for f in target/bench/corpus/newslike-n5000-s6.jsonl target/bench/corpus/realtext-n20000-s6.jsonl; do
        [[ -f "$f" ]] && CORPORA="$CORPORA $f"
    done
fi

data_dir="$(mktemp -d "${TMPDIR:-/tmp}/neardup-analysis.XXXXXX")"
NEARDUP_SERVER__BIND="127.0.0.1:$PORT" NEARDUP_STORAGE__DATA_DIR="$data_dir" \
NEARDUP_STORAGE__STORE_TEXT=true NEARDUP_SERVER__REQUEST_TIMEOUT_SECS=300 \
NEARDUP_SERVER__MAX_BODY_BYTES=268435456 NEARDUP_LOG__LEVEL=warn \
    target/release/neardup >"$OUT/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data_dir"' EXIT
for _ in $(seq 1 200); do
    curl -fsS "$B/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

python3 - "$B" "$N" "$ROUNDS" $CORPORA <<'PY'
import json, statistics, sys, time, urllib.request
base, n, rounds, corpora = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]

def post(path, body, method="POST"):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method=method)
    t = time.perf_counter()
    with urllib.request.urlopen(req) as r:
        answer = json.load(r)
    return time.perf_counter() - t, answer

def median(f):
    times, answer = [], None
    for _ in range(rounds):
        t, answer = f()
        times.append(t)
    return statistics.median(times), answer

ks = [1, 2, 3, 4]
perms = [16, 32, 64, 128, 256]
print(f"{'corpus':<34} {'texts':>6} {'bytes/text':>10} {'histogram s':>12} {'accuracy s':>11} {'sample hist s':>13}  suggested (k=1..4)")
for path in corpora:
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                texts.append(json.loads(line)["text"])
            if len(texts) == n:
                break
    name = path.rsplit("/", 1)[-1][:34]
    coll = "bench" + str(abs(hash(path)) % 10**6)
    post(f"/collections/{coll}", {"store_text": True}, "PUT")
    for i in range(0, len(texts), 500):
        req = urllib.request.Request(f"{base}/collections/{coll}/documents/batch",
            data=json.dumps({"documents": [{"id": f"d{i+j}", "text": t} for j, t in enumerate(texts[i:i+500])]}).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(req).read()
    hist, answer = median(lambda: post(f"/collections/{coll}/analysis/histogram", {"texts": texts, "k": ks}))
    acc, _ = median(lambda: post(f"/collections/{coll}/analysis/accuracy", {"texts": texts, "k": ks, "num_perm": perms}))
    samp, sampled = median(lambda: post(f"/collections/{coll}/analysis/histogram", {"sample": n, "seed": 1, "k": ks}))
    assert sampled["texts"] == len(texts), sampled["texts"]
    size = sum(len(t.encode()) for t in texts) / len(texts)
    sug = [h["suggested_threshold"] for h in answer["histograms"]]
    print(f"{name:<34} {len(texts):>6} {size:>10.0f} {hist:>12.2f} {acc:>11.2f} {samp:>13.2f}  {sug}")
PY
