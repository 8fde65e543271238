#!/usr/bin/env python3
"""realtext_fixtures.py: regenerate tests/fixtures/realtext/ (real Chinese,
Japanese and Thai prose for the tests of recipe version 2). Not run by CI:
it downloads Debian packages. Standard library only (plus apt-get,
dpkg-deb and groff, like scripts/bench/make_realtext.py).

  scripts/realtext_fixtures.py --src DIR [--out tests/fixtures/realtext] [--seed 42]

Sources (Debian 12 "bookworm", pinned versions and sha256):
- zh, ja: the translated manual pages of manpages-zh and manpages-ja,
  downloaded, unpacked and rendered to paragraphs exactly as
  make_realtext.py does (its fetch() and pages(), cached in DIR);
- th: the Thai translations (Description-th.UTF-8) of the debconf
  templates of a few packages (grub-pc, keyboard-configuration,
  console-setup, exim4-config, popularity-contest, debconf): each template's
  short description and each paragraph of its long description.

Selection: paragraphs of 40..=300 characters (code points) with no U+FFFD,
mostly in the language's script (at least 60% of the non-space characters
Han for zh, Han or kana for ja with at least one kana, Thai for th; no kana
for zh), distinct, at most one per man page (zh, ja) or five per package (th); then a seeded random draw of --zh, --ja, --th of them, written one
paragraph per line (UTF-8, in draw order) to zh.txt, ja.txt, th.txt, and
their origin to sources.tsv (file, line, package, version, source file).
"""
from __future__ import annotations

import argparse
import hashlib
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "bench"))
import make_realtext  # noqa: E402  (the zh/ja download and rendering)

# name -> (version, sha256 of the .deb): Thai debconf templates.
THAI = {
    "grub-pc": ("2.06-13+deb12u2", "9e1ab02f7793fa139de24e1432e62f0b643767b424678edc7d6528433e3ac1fa"),
    "keyboard-configuration": ("1.221", "d410789d702346e3fee560d1a32ecc850dcbba343ac3983ed713feb0873a8d4a"),
    "console-setup": ("1.221", "2041b0f9c6b2d3dc2d0ca458854bdb1fc392f39ec1422c1580f2176d3378ce42"),
    "exim4-config": ("4.96-15+deb12u11", "975a5a73a532418dcdc2e032db219bbf88eb959a1cd157495e84b734b567e9f0"),
    "popularity-contest": ("1.76", "b19a6af29a52831c621bf00bbabb88227e7914afcdd074290a825846266731a5"),
    "debconf": ("1.5.82", "74ab14194a3762b2fc717917dcfda42929ab98e3c59295a063344dc551cd7cc8"),
}


def is_han(c: str) -> bool:
    u = ord(c)
    return 0x4E00 <= u <= 0x9FFF or 0x3400 <= u <= 0x4DBF or 0xF900 <= u <= 0xFAFF or 0x20000 <= u <= 0x3FFFF


def is_kana(c: str) -> bool:
    return 0x3041 <= ord(c) <= 0x30FF


def is_thai(c: str) -> bool:
    return 0x0E01 <= ord(c) <= 0x0E5B


def fits(lang: str, p: str) -> bool:
    if not 40 <= len(p) <= 300 or "\ufffd" in p:
        return False
    chars = [c for c in p if not c.isspace()]
    if lang == "zh":
        script = sum(is_han(c) for c in chars)
        if any(is_kana(c) for c in chars):
            return False
    elif lang == "ja":
        script = sum(is_han(c) or is_kana(c) for c in chars)
        if not any(is_kana(c) for c in chars):
            return False
    else:
        script = sum(is_thai(c) for c in chars)
    return script >= 0.6 * len(chars)


def trigrams(p: str) -> set[str]:
    """Character trigrams of `p` without its whitespace."""
    t = "".join(p.split())
    return {t[i:i + 3] for i in range(len(t) - 2)}


def thai_templates(path: Path) -> list[str]:
    """The Thai paragraphs of a debconf templates file: each short
    description, and each paragraph of each long description (lines joined
    by a space, `.` lines separating paragraphs)."""
    out = []
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        cur = None
        for line in block.split("\n"):
            if line.startswith("Description-th.UTF-8:"):
                cur = [[line.split(":", 1)[1].strip()], []]
            elif cur is not None and line.startswith(" "):
                if line.strip() == ".":
                    cur.append([])
                else:
                    cur[-1].append(line.strip())
            elif cur is not None:
                out.extend(" ".join(p) for p in cur if p)
                cur = None
        if cur is not None:
            out.extend(" ".join(p) for p in cur if p)
    return [" ".join(p.split()) for p in out]


def fetch_thai(src: Path, verify: bool) -> dict[str, Path]:
    """Download (once) and check each pinned package; returns {name:
    its templates file}."""
    out = {}
    for name, (version, digest) in THAI.items():
        debs = sorted(src.glob(f"{name}_{version.replace(':', '%3a')}_*.deb"))
        if not debs:
            subprocess.run(["apt-get", "download", f"{name}={version}"], check=True, cwd=src,
                           stdout=subprocess.DEVNULL)
            debs = sorted(src.glob(f"{name}_*.deb"))
        deb = debs[0]
        got = hashlib.sha256(deb.read_bytes()).hexdigest()
        if verify and got != digest:
            sys.exit(f"realtext_fixtures.py: sha256 mismatch for {deb}: {got}; rerun with --no-verify")
        ctl = src / "control" / name
        if not (ctl / "templates").exists():
            ctl.mkdir(parents=True, exist_ok=True)
            subprocess.run(["dpkg-deb", "-e", str(deb), str(ctl)], check=True)
        out[name] = ctl / "templates"
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="download and cache directory (outside the repository)")
    ap.add_argument("--out", default=str(HERE.parent / "tests/fixtures/realtext"))
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--zh", type=int, default=30)
    ap.add_argument("--ja", type=int, default=30)
    ap.add_argument("--th", type=int, default=20)
    ap.add_argument("--no-verify", action="store_true")
    args = ap.parse_args()
    src = Path(args.src)
    src.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)

    # zh, ja: make_realtext.py's rendering; pages.jsonl keeps each page's name.
    roots = make_realtext.fetch(src, ["zh", "ja"], not args.no_verify)
    make_realtext.pages(src, roots)
    import json
    candidates = {"zh": [], "ja": [], "th": []}
    seen = set()
    with open(src / "pages.jsonl", encoding="utf-8") as f:
        f.readline()
        for line in f:
            rec = json.loads(line)
            lang = rec["lang"]
            if lang not in ("zh", "ja"):
                continue
            name, version, _ = make_realtext.PINNED[lang]
            ok = [p for p in rec["paras"] if fits(lang, p) and p not in seen]
            if ok:
                p = ok[rng.randrange(len(ok))]
                seen.add(p)
                candidates[lang].append((p, name, version, "/usr/share/man/" + rec["page"]))
    for name, templates in fetch_thai(src, not args.no_verify).items():
        version = THAI[name][0]
        ok = [p for p in thai_templates(templates) if fits("th", p) and p not in seen]
        for p in rng.sample(ok, min(5, len(ok))):
            seen.add(p)
            candidates["th"].append((p, name, version, "DEBIAN/templates (Description-th.UTF-8)"))

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = ["file\tline\tpackage\tversion\tsource"]
    for lang, n in (("zh", args.zh), ("ja", args.ja), ("th", args.th)):
        pool = candidates[lang]
        if len(pool) < n:
            sys.exit(f"realtext_fixtures.py: only {len(pool)} {lang} paragraphs fit")
        # A seeded shuffle, skipping a paragraph alike to one already drawn
        # (boilerplate shared by several man pages): tests need distinct texts.
        picked, grams = [], []
        for cand in rng.sample(pool, len(pool)):
            g = trigrams(cand[0])
            if all(len(g & h) < 0.3 * len(g | h) for h in grams):
                picked.append(cand)
                grams.append(g)
            if len(picked) == n:
                break
        if len(picked) < n:
            sys.exit(f"realtext_fixtures.py: only {len(picked)} distinct {lang} paragraphs")
        with open(out / f"{lang}.txt", "w", encoding="utf-8") as f:
            for i, (p, name, version, where) in enumerate(picked, 1):
                f.write(p + "\n")
                rows.append(f"{lang}.txt\t{i}\t{name}\t{version}\t{where}")
    (out / "sources.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    sizes = {l: (out / f"{l}.txt").stat().st_size for l in ("zh", "ja", "th")}
    print(json.dumps({"out": str(out), "bytes": sizes, "candidates": {l: len(v) for l, v in candidates.items()}}))


if __name__ == "__main__":
    main()
