#!/usr/bin/env python3
"""Fails when .dockerignore keeps a file cargo needs out of the build context.

The Dockerfile copies the whole build context (the repository root, as in
docker-compose.yml's `build: .`) and runs `cargo build`, which parses all of
Cargo.toml: a declared [[bench]], [[example]], [[test]] or [[bin]] whose file
is missing breaks the build. This script asks cargo for every target
(`cargo metadata --no-deps --format-version 1`, so auto-discovered targets are
included too) and checks that each target's src_path, each package's
Cargo.toml, and Cargo.lock and .cargo/config.toml (when present) are inside
the context. It also checks that the large things (target/, data/, .git) are
excluded.

Matching follows Docker's .dockerignore rules (moby/patternmatcher, which
buildah's copy shares):
  * one pattern per line; lines starting with '#' and blank lines are skipped;
    surrounding whitespace is trimmed;
  * a leading '!' makes the pattern an exception (re-includes what it matches);
  * patterns are relative to the context root: they are cleaned like Go's
    filepath.Clean and a leading '/' is dropped, so `/target`, `target` and
    `./target` are the same pattern, and `*.md` matches only top-level files;
  * '*' matches any run of characters except '/', '?' one character except
    '/', '[...]' a character class, '\\' escapes the next character;
  * '**' matches any number of directories, including none (`**/x`, `a/**/x`),
    and a trailing '**' matches everything below;
  * a pattern that matches a parent directory matches everything in it;
  * patterns are applied in order and the last one that matches decides.

Usage: scripts/check-dockerignore.py [--context DIR] [--self-test]
Exit status 0 when everything needed is in the context, 1 otherwise.
"""

import argparse
import json
import os
import re
import subprocess
import sys


def clean(pattern):
    """Go's filepath.Clean for '/'-separated paths."""
    rooted = pattern.startswith("/")
    out = []
    for part in pattern.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not rooted:
                out.append("..")
            continue
        out.append(part)
    path = "/".join(out)
    if rooted:
        return "/" + path
    return path or "."


def compile_pattern(pattern):
    """Translates one cleaned pattern to an anchored regex, as patternmatcher does."""
    regex = "^"
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            if i + 1 < n and pattern[i + 1] == "*":
                i += 1
                if i + 1 < n and pattern[i + 1] == "/":  # '**/' is treated as '**'
                    i += 1
                if i + 1 >= n:
                    regex += ".*"  # trailing '**': everything below
                else:
                    regex += "(.*/)?"  # any number of directories, even none
            else:
                regex += "[^/]*"
        elif ch == "?":
            regex += "[^/]"
        elif ch in ".+()|{}$":
            regex += "\\" + ch
        elif ch == "\\":
            i += 1
            if i >= n:
                raise ValueError(f"bad pattern {pattern!r}: trailing backslash")
            regex += re.escape(pattern[i])
        else:
            regex += ch  # includes '[', ']', '^' of character classes
        i += 1
    return re.compile(regex + "$")


def parse_line(line):
    """One .dockerignore line -> (text, exclusion, regex), or None to skip it."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    exclusion = text.startswith("!")
    if exclusion:
        text = text[1:].strip()
    if not text:
        return None
    cleaned = clean(text)
    if len(cleaned) > 1 and cleaned.startswith("/"):
        cleaned = cleaned[1:]
    return (("!" if exclusion else "") + text, exclusion, compile_pattern(cleaned))


def read_patterns(dockerignore):
    """Parses .dockerignore into a list of (text, exclusion, regex)."""
    if not os.path.exists(dockerignore):
        return []
    with open(dockerignore, encoding="utf-8") as f:
        return [p for p in map(parse_line, f) if p is not None]


def excluded_by(patterns, path):
    """Returns the deciding pattern's text if `path` (relative, '/'-separated)
    is outside the context, else None. Last match wins; a pattern matching a
    parent directory matches the path."""
    parents = path.split("/")[:-1]
    candidates = [path] + ["/".join(parents[: i + 1]) for i in range(len(parents))]
    decision = None
    for text, exclusion, regex in patterns:
        if any(regex.match(c) for c in candidates):
            decision = None if exclusion else text
    return decision


def self_test():
    def check(lines, path, want_excluded):
        pats = [p for p in map(parse_line, lines) if p is not None]
        got = excluded_by(pats, path) is not None
        assert got == want_excluded, f"{lines} {path}: excluded={got}, want {want_excluded}"

    check(["target"], "target/release/neardup", True)
    check(["/target"], "target/x", True)
    check(["./target/"], "target/x", True)
    check(["target"], "src/target/x.rs", False)  # anchored at the root
    check(["*.md"], "README.md", True)
    check(["*.md"], "docs/a.md", False)  # '*' does not cross '/'
    check(["**/*.md"], "docs/a.md", True)
    check(["**/*.md"], "README.md", True)  # '**' may be no directory at all
    check(["a/**/b"], "a/b", True)
    check(["a/**/b"], "a/x/y/b", True)
    check(["a/**"], "a/x/y", True)
    check(["tests/*"], "tests/api/main.rs", True)  # parent directory matches
    check(["tests", "!tests/api"], "tests/api/main.rs", False)
    check(["tests", "!tests/api", "tests/api/*.rs"], "tests/api/main.rs", True)  # last wins
    check(["!src", "src"], "src/main.rs", True)
    check(["# target", "", "  target  "], "target/x", True)  # comments, blanks, spaces
    check(["bench?"], "benches/x.rs", False)
    check(["bench?s"], "benches/x.rs", True)
    check(["[bc]enches"], "benches/x.rs", True)
    check(["examples/loadgen.rs"], "examples/sign_bench.rs", False)
    check(["\\*"], "*", True)
    check(["\\*"], "a", False)
    check(["a.b"], "axb", False)  # '.' is literal
    print("check-dockerignore: self-test ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--context", default=".", help="build context root (default: .)")
    ap.add_argument("--self-test", action="store_true", help="only test the matcher")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0

    root = os.path.realpath(args.context)
    dockerignore = os.path.join(root, ".dockerignore")
    patterns = read_patterns(dockerignore)
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"],
            cwd=root, check=True, capture_output=True, text=True,
        ).stdout
    )

    needed = []  # (description, absolute path)
    for pkg in meta["packages"]:
        needed.append((f"manifest of {pkg['name']}", pkg["manifest_path"]))
        for t in pkg["targets"]:
            kinds = "/".join(t["kind"])
            needed.append((f"{kinds} target '{t['name']}'", t["src_path"]))
    for extra in ("Cargo.lock", ".cargo/config.toml", ".cargo/config"):
        path = os.path.join(meta.get("workspace_root", root), extra)
        if os.path.exists(path):
            needed.append((extra, path))

    problems = []
    for what, path in needed:
        rel = os.path.relpath(os.path.realpath(path), root).replace(os.sep, "/")
        if rel == ".." or rel.startswith("../"):
            problems.append(f"{what}: {path} is outside the build context {root}")
            continue
        pattern = excluded_by(patterns, rel)
        if pattern is not None:
            problems.append(f"{what}: {rel} is excluded by .dockerignore pattern '{pattern}'")

    for big in ("target", "data", ".git"):
        if excluded_by(patterns, big) is None:
            problems.append(f"{big} is in the build context: add it to .dockerignore")

    if problems:
        print("check-dockerignore: FAIL: the image build would miss files cargo needs "
              "(or send large ones):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        print("  Fix .dockerignore (a '!path' line re-includes a path).", file=sys.stderr)
        return 1
    print(f"check-dockerignore: the build context holds all {len(needed)} paths cargo "
          f"needs (manifest, lockfile, config, targets); target, data and .git are excluded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
