#!/usr/bin/env python3
"""make_realtext.py: benchmark corpora of real text with non-ASCII characters.
Standard library only (plus apt-get, dpkg-deb and groff for `manpages`);
every output is a function of the downloaded packages, --seed and the
options alone. Generated data belongs under target/ (never in git).

  make_realtext.py manpages --src DIR --n N --seed S --out OUT.jsonl [--langs fr,de,ru,es,zh,ja]
      Prose from Debian's translated manual pages (manpages-fr, -de, -ru,
      -es, -zh, -ja of Debian 12 "bookworm"; pinned versions and sha256
      below, fetched once with `apt-get download` into DIR, unpacked with
      dpkg-deb and rendered to UTF-8 text with groff, cached in
      DIR/pages.jsonl). Documents of 100..1,500 words (a CJK character
      counts as one word) with 15% planted near-duplicates, like
      make_articles.py.

  make_realtext.py newslike --articles ARTICLES.jsonl --n N --seed S --out OUT.jsonl --twin TWIN.jsonl
      "English news-like" text: the first N articles of the (pure ASCII)
      articles corpus with typographic characters set in, as English news
      copy has them (’ for apostrophes, “ ” around a quote, – between
      clauses, é in a name, £ before an amount), 1..--marks of them per
      document; TWIN gets the same documents with each such character
      replaced by an ASCII one of the same kind (' " - e $), so the two
      files differ only in those characters: "a document with one ’ costs
      what its ASCII twin costs" is measured on the pair. `--marks 1
      --kinds apostrophe` makes documents with exactly one ’.

Documents (manpages). Each man page is rendered with `groff -k -Tutf8
-mandoc` on one very long line per paragraph (no hyphenation, no
line-breaking), its header and footer lines dropped; paragraphs (blank-line
separated, indentation removed) of at least 3 words form the language's
pool (`.so` alias pages are skipped). A base document picks a language
uniformly from --langs, draws a length L uniformly from
[--min-words, --max-words], and appends paragraphs drawn uniformly with
replacement from that language's pool, one per line, until it has L words
(a paragraph longer than --max-piece words contributes a random window of
half to all of --max-piece words; the last piece is cut to fit). Word counts
here: a whitespace token counts as one word, or as its number of CJK
characters (Han, kana, Hangul) if it has any, since Chinese and Japanese do
not separate words by spaces. Near-duplicates: make_articles.py's model
(same --dup-fraction, --max-variants, --max-delay, --edit-rates; word edits
on whitespace tokens, rate 0 = reformatting: upper case, commas, double
spaces), the edit vocabulary drawn from the same language. Ids are
"<lang>/<k>" and "<lang>/<k>#v<j>". The generator is sequential: the first K
lines of an --n N file are the --n K file (same seed and options).

  make_realtext.py fold --in REALTEXT.jsonl --out OUT.jsonl --twin TWIN.jsonl [--langs fr,de,es] [--n N]
      The Latin-script man pages of a `manpages` corpus beside their ASCII
      twins: each document of --langs whose folded text is pure ASCII goes to
      OUT unchanged and, folded, to TWIN (same id, same line). Folding:
      typographic characters to their ASCII kind (’ ‘ → ', « » “ ” → ",
      – — ‐ → -, • → *, ⟨ ⟩ → < >, NBSP → space), œ æ ß → oe ae ss, then
      NFKD with the combining marks dropped (é → e, Ä → A); a character
      with no ASCII folding (©, …) becomes "?". The pair measures what the
      non-ASCII characters of real prose cost, apart from what its genre
      (word lengths, punctuation) costs. The first --n documents that fold.

Output: JSONL {"id", "text"} and a sidecar OUT.variants.jsonl (manpages);
summary statistics as one JSON line on stdout.
"""
from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import random
import re
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_articles import make_variant, reformat  # noqa: E402  (one edit model for both corpora)

# Debian 12 (bookworm) main, amd64 "all" packages; `apt-cache policy` shows
# these as the candidates. A newer revision fails the check: rerun with
# --no-verify to accept it (the figures then come from other text).
PINNED = {
    "fr": ("manpages-fr", "4.18.1-1", "ec29759cc0e4a44dc7719c1e32869d0060667049e584f09556f0d982b969ea33"),
    "de": ("manpages-de", "4.18.1-1", "37d2e7ee51f22952aecec3af93647ff59194a3c74bb7a694560f49c7f7ab3978"),
    "ru": ("manpages-ru", "4.18.1-1", "5d5821dad5840652ba9c1c6b85bdc785c1fc52148a71c18fab6658c9659244c0"),
    "es": ("manpages-es", "4.18.1-1", "d21e9f85e487f149ae45b5c525b2b1a70ae7fd38d4b05b47c8753042c66f4c2b"),
    "zh": ("manpages-zh", "1.6.4.0-1", "81bae29495f6445db290e3f329f1203eb19b651c2a7ea165b74ebdc853a32ac1"),
    "ja": ("manpages-ja", "0.5.0.0.20221215+dfsg-1",
           "4d270e9a1e83be4de0c072a110892a17dc9caa4b501257324006ac28d82c5743"),
}
# Bump when the rendering or paragraph extraction changes (invalidates pages.jsonl).
PAGES_VERSION = 1


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(src: Path, langs, verify: bool) -> dict:
    """Download (once), check and unpack each language's package; returns
    {lang: unpacked man directory root}."""
    src.mkdir(parents=True, exist_ok=True)
    roots = {}
    for lang in langs:
        name, version, digest = PINNED[lang]
        deb = src / f"{name}_{version.split(':')[-1]}_all.deb"
        if not deb.exists():
            # Needs Debian apt lists (`apt-get update` once); no root needed to download.
            subprocess.run(["apt-get", "download", f"{name}={version}"], check=True, cwd=src,
                           stdout=subprocess.DEVNULL)
        if verify and sha256(deb) != digest:
            sys.exit(f"make_realtext.py: sha256 mismatch for {deb}: {sha256(deb)} (expected {digest}); "
                     "rerun with --no-verify to accept it")
        root = src / name
        if not (root / "usr/share/man").is_dir():
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        roots[lang] = root / "usr/share/man"
        print(f"[fetch] {lang}: {deb.name} ok", file=sys.stderr)
    return roots


_CJK = re.compile(r"[\u1100-\u11ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff]")


def units(token: str) -> int:
    n = len(_CJK.findall(token))
    return n if n else 1


def render(path: str):
    """One man page → its paragraphs (or None for an alias page)."""
    import gzip

    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw.lstrip().startswith(b".so "):
        return None
    r = subprocess.run(
        ["groff", "-k", "-Tutf8", "-mandoc", "-rHY=0", "-rLL=5000n", "-P-c", "-P-b", "-P-o", "-P-u"],
        input=raw, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    text = r.stdout.decode("utf-8", "replace")
    lines = text.split("\n")
    # Drop the header (first non-empty line) and the footer (last non-empty line).
    nonempty = [i for i, l in enumerate(lines) if l.strip()]
    if len(nonempty) < 3:
        return None
    lines = lines[nonempty[0] + 1:nonempty[-1]]
    paras, cur = [], []
    for line in lines:
        line = line.strip()
        if line:
            cur.append(line)
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    paras = [re.sub(r"[ \t]+", " ", p) for p in paras]
    return [p for p in paras if sum(units(t) for t in p.split()) >= 3 and "\ufffd" not in p]


def pages(src: Path, roots: dict) -> dict:
    """{lang: [paragraph, ...]}, rendered once and cached in src/pages.jsonl."""
    cache = src / "pages.jsonl"
    want = sorted(roots)
    if cache.exists():
        with open(cache, encoding="utf-8") as f:
            head = json.loads(f.readline())
            if head.get("version") == PAGES_VERSION and all(l in head["langs"] for l in want):
                pools = {l: [] for l in want}
                for line in f:
                    rec = json.loads(line)
                    if rec["lang"] in pools:
                        pools[rec["lang"]].extend(rec["paras"])
                return pools
    jobs = []
    for lang in want:
        files = sorted(str(p) for p in roots[lang].rglob("*.gz"))
        jobs.extend((lang, p) for p in files)
    print(f"[render] {len(jobs)} pages with groff ...", file=sys.stderr)
    with ProcessPoolExecutor() as ex:
        rendered = list(ex.map(render, [p for _, p in jobs], chunksize=16))
    tmp = cache.with_suffix(".tmp")
    pools = {l: [] for l in want}
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(json.dumps({"version": PAGES_VERSION, "langs": want}) + "\n")
        for (lang, path), paras in zip(jobs, rendered):
            if paras:
                page = os.path.relpath(path, roots[lang])
                out.write(json.dumps({"lang": lang, "page": page, "paras": paras}, ensure_ascii=False) + "\n")
                pools[lang].extend(paras)
    os.replace(tmp, cache)
    return pools


def make_doc(pool, rng, lo, hi, max_piece):
    target = rng.randint(lo, hi)
    lines, have = [], 0
    while have < target:
        toks = pool[rng.randrange(len(pool))]
        if len(toks) > max_piece:
            k = rng.randint(max_piece // 2, max_piece)
            start = rng.randrange(len(toks) - k + 1)
            toks = toks[start:start + k]
        piece = []
        for t in toks:
            if have >= target:
                break
            piece.append(t)
            have += units(t)
        lines.append(" ".join(piece))
    return "\n".join(lines)


def cmd_manpages(args):
    langs = args.langs.split(",")
    unknown = [l for l in langs if l not in PINNED]
    if unknown:
        sys.exit(f"make_realtext.py: unknown language(s) {unknown}; known: {sorted(PINNED)}")
    roots = fetch(Path(args.src), langs, not args.no_verify)
    pools_text = pages(Path(args.src), roots)
    pools = {l: [p.split() for p in pools_text[l]] for l in langs}
    for l in langs:
        if not pools[l]:
            sys.exit(f"make_realtext.py: no paragraphs for {l}")
    rng = random.Random(args.seed)
    vocab = {}
    for l in langs:
        idx = rng.sample(range(len(pools[l])), min(len(pools[l]), args.vocab_paras))
        vocab[l] = [w for i in idx for w in pools[l][i]]
    rates = [float(x) for x in args.edit_rates.split(",")]
    mean_k = (1 + args.max_variants) / 2
    f = args.dup_fraction
    q = min(1.0, f / (mean_k * (1 - f)))
    pending, seq = [], 0
    n_base = {l: 0 for l in langs}
    n_var = 0
    per_lang = {l: {"docs": 0, "bytes": 0, "non_ascii_docs": 0} for l in langs}
    tmp = args.out + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as out, open(tmp + ".variants", "w", encoding="utf-8") as side:
        for pos in range(args.n):
            if pending and pending[0][0] <= pos:
                _, _, vid, bid, lang, rate, ops, text = heapq.heappop(pending)
                side.write(json.dumps({"id": vid, "base_id": bid, "edit_rate": rate, "ops": ops}) + "\n")
                n_var += 1
            else:
                lang = langs[rng.randrange(len(langs))]
                bid = f"{lang}/{n_base[lang]}"
                n_base[lang] += 1
                text = make_doc(pools[lang], rng, args.min_words, args.max_words, args.max_piece)
                if rng.random() < q:
                    for j in range(rng.randint(1, args.max_variants)):
                        rate = rng.choice(rates)
                        if rate == 0:
                            vtext, ops = reformat(text, rng), {}
                        else:
                            vwords, ops = make_variant(text.split(), rate, vocab[lang], rng)
                            vtext = " ".join(vwords)
                        seq += 1
                        due = pos + rng.randint(1, args.max_delay)
                        heapq.heappush(pending, (due, seq, f"{bid}#v{j}", bid, lang, rate, ops, vtext))
                vid = bid
            out.write(json.dumps({"id": vid, "text": text}, ensure_ascii=False) + "\n")
            st = per_lang[lang]
            st["docs"] += 1
            st["bytes"] += len(text.encode())
            st["non_ascii_docs"] += not text.isascii()
    os.replace(tmp, args.out)
    os.replace(tmp + ".variants", args.out + ".variants.jsonl")
    print(json.dumps({
        "out": args.out, "docs": args.n, "variants": n_var, "seed": args.seed,
        "variant_share": round(n_var / args.n, 4) if args.n else 0,
        "packages": {l: f"{PINNED[l][0]} {PINNED[l][1]}" for l in langs},
        "paragraphs": {l: len(pools[l]) for l in langs},
        "per_lang": {l: dict(st, bytes_per_doc=round(st["bytes"] / max(st["docs"], 1)))
                     for l, st in per_lang.items()},
        "mbytes": round(os.path.getsize(args.out) / 1e6, 1),
    }, ensure_ascii=False))


# ---------------------------------------------------------- news-like --

# kind -> (typographic replacement, ASCII twin); applied to what the text has.
KINDS = ("apostrophe", "quotes", "dash", "accent", "pound")
ACCENTS = {"e": ("é", "e"), "a": ("à", "a"), "o": ("ö", "o"), "u": ("ü", "u"), "c": ("ç", "c"), "i": ("ï", "i")}


def typeset(words, kind, rng):
    """Set one typographic character (or pair) of `kind` into `words` (a
    list of [typographic, twin] token pairs); False if it does not apply."""
    n = len(words)
    if n < 4:
        return False
    i = rng.randrange(n - 3)
    t, a = words[i]
    if kind == "apostrophe":
        # A possessive or a contraction: word’s / word's.
        words[i] = [t + "’s", a + "'s"]
    elif kind == "quotes":
        k = rng.randint(2, 6)
        j = min(i + k, n - 1)
        words[i] = ["“" + t, '"' + a]
        tj, aj = words[j]
        words[j] = [tj + "”", aj + '"']
    elif kind == "dash":
        words.insert(i + 1, ["–", "-"])
    elif kind == "accent":
        hits = [p for p, ch in enumerate(t) if ch in ACCENTS]
        if not hits or t != a:
            return False
        p = hits[rng.randrange(len(hits))]
        typo, twin = ACCENTS[t[p]]
        words[i] = [t[:p] + typo + t[p + 1:], a[:p] + twin + a[p + 1:]]
    elif kind == "pound":
        amount = str(rng.randint(1, 999))
        words.insert(i + 1, ["£" + amount, "$" + amount])
    return True


def cmd_newslike(args):
    kinds = args.kinds.split(",")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        sys.exit(f"make_realtext.py: unknown kind(s) {bad}; known: {list(KINDS)}")
    lo, hi = (int(x) for x in args.marks.split(",")) if "," in args.marks else (int(args.marks),) * 2
    rng = random.Random(args.seed)
    n = 0
    marks_total = 0
    non_ascii_chars = 0
    with open(args.articles, encoding="utf-8") as src, \
            open(args.out + ".tmp", "w", encoding="utf-8") as out, \
            open(args.twin + ".tmp", "w", encoding="utf-8") as twin:
        for line in src:
            if n >= args.n:
                break
            if not line.strip():
                continue
            doc = json.loads(line)
            if not doc["text"].isascii():
                continue  # the twin must be pure ASCII
            # Keep the line structure: set marks into the tokens of each line.
            lines = [[[w, w] for w in l.split()] for l in doc["text"].split("\n")]
            want = rng.randint(lo, hi)
            done = tries = 0
            while done < want and tries < 50:
                tries += 1
                ln = lines[rng.randrange(len(lines))]
                done += typeset(ln, kinds[rng.randrange(len(kinds))], rng)
            if done == 0:
                continue
            typo = "\n".join(" ".join(t for t, _ in l) for l in lines)
            ascii_ = "\n".join(" ".join(a for _, a in l) for l in lines)
            assert ascii_.isascii() and not typo.isascii()
            out.write(json.dumps({"id": doc["id"], "text": typo}, ensure_ascii=False) + "\n")
            twin.write(json.dumps({"id": doc["id"], "text": ascii_}) + "\n")
            n += 1
            marks_total += done
            non_ascii_chars += sum(1 for ch in typo if ord(ch) > 127)
    if n < args.n:
        sys.exit(f"make_realtext.py: only {n} usable articles in {args.articles} (asked for {args.n})")
    os.replace(args.out + ".tmp", args.out)
    os.replace(args.twin + ".tmp", args.twin)
    print(json.dumps({"out": args.out, "twin": args.twin, "docs": n, "seed": args.seed, "kinds": kinds,
                      "marks_per_doc": round(marks_total / n, 2),
                      "non_ascii_chars_per_doc": round(non_ascii_chars / n, 2)}))


FOLD = {"’": "'", "‘": "'", "«": '"', "»": '"', "“": '"', "”": '"', "„": '"', "–": "-", "—": "-",
        "‐": "-", "‑": "-", "−": "-", "•": "*", "⟨": "<", "⟩": ">", "\u00a0": " ", "\u202f": " ",
        "œ": "oe", "Œ": "OE", "æ": "ae", "Æ": "AE", "ß": "ss", "ẞ": "SS"}


def fold(text: str) -> str:
    import unicodedata

    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        elif ch in FOLD:
            out.append(FOLD[ch])
        else:
            d = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
            out.append(d if d and d.isascii() else "?")
    return "".join(out)


def cmd_fold(args):
    langs = set(args.langs.split(","))
    n = 0
    with open(args.input, encoding="utf-8") as src, \
            open(args.out + ".tmp", "w", encoding="utf-8") as out, \
            open(args.twin + ".tmp", "w", encoding="utf-8") as twin:
        for line in src:
            if args.n and n >= args.n:
                break
            if not line.strip():
                continue
            doc = json.loads(line)
            if doc["id"].split("/")[0] not in langs or doc["text"].isascii():
                continue
            folded = fold(doc["text"])
            out.write(json.dumps({"id": doc["id"], "text": doc["text"]}, ensure_ascii=False) + "\n")
            twin.write(json.dumps({"id": doc["id"], "text": folded}) + "\n")
            n += 1
    if n == 0:
        sys.exit(f"make_realtext.py: no document of {sorted(langs)} in {args.input}")
    os.replace(args.out + ".tmp", args.out)
    os.replace(args.twin + ".tmp", args.twin)
    print(json.dumps({"out": args.out, "twin": args.twin, "docs": n, "langs": sorted(langs)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("manpages")
    m.add_argument("--src", required=True, help="download, unpack and render cache directory")
    m.add_argument("--out", required=True)
    m.add_argument("--n", type=int, required=True)
    m.add_argument("--seed", type=int, default=6)
    m.add_argument("--langs", default="fr,de,ru,es,zh,ja")
    m.add_argument("--min-words", type=int, default=100)
    m.add_argument("--max-words", type=int, default=1500)
    m.add_argument("--max-piece", type=int, default=200)
    m.add_argument("--dup-fraction", type=float, default=0.15)
    m.add_argument("--max-variants", type=int, default=3)
    m.add_argument("--max-delay", type=int, default=2000)
    m.add_argument("--edit-rates", default="0,0.01,0.02,0.04,0.08")
    m.add_argument("--vocab-paras", type=int, default=2000)
    m.add_argument("--no-verify", action="store_true", help="accept packages whose sha256 differs from the pin")
    w = sub.add_parser("newslike")
    w.add_argument("--articles", required=True, help="an articles corpus (make_articles.py)")
    w.add_argument("--out", required=True)
    w.add_argument("--twin", required=True)
    w.add_argument("--n", type=int, required=True)
    w.add_argument("--seed", type=int, default=6)
    w.add_argument("--marks", default="1,6", help="typographic marks per document: N or LO,HI")
    w.add_argument("--kinds", default=",".join(KINDS))
    f = sub.add_parser("fold")
    f.add_argument("--in", dest="input", required=True, help="a manpages corpus")
    f.add_argument("--out", required=True)
    f.add_argument("--twin", required=True)
    f.add_argument("--langs", default="fr,de,es")
    f.add_argument("--n", type=int, default=0, help="at most this many documents (0: all)")
    args = ap.parse_args()
    if args.cmd == "manpages":
        if not (0 <= args.dup_fraction < 1) or not (1 <= args.min_words <= args.max_words):
            sys.exit("need 0 <= --dup-fraction < 1 and 1 <= --min-words <= --max-words")
        cmd_manpages(args)
    elif args.cmd == "fold":
        cmd_fold(args)
    else:
        cmd_newslike(args)


if __name__ == "__main__":
    main()
