#!/usr/bin/env python3
"""The dependency rule of ARCHITECTURE.md ("Modules and the dependency
rule"), checked against the code: which top-level module of src/ may name
which other (every `crate::X` path, `use` or not, outside comments), that
the allowed graph has no cycle, and the storage seam: outside src/backend/
nothing matches on which backend a collection uses or names `persist` or
the backends' modules.
Prints each violation and exits 1; prints nothing and exits 0 when clean.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# module -> the modules it may import (ARCHITECTURE.md's table).
CORE = {"text", "hashsort", "minhash", "jaccard", "lsh", "engine", "prefetch"}
ALLOWED = {
    "minhash": set(),
    "jaccard": set(),
    "prefetch": set(),
    "allocator": set(),
    "hugepages": set(),
    "failing": set(),
    "hashsort": {"minhash"},  # its tests draw values with minhash's splitmix64
    "text": {"minhash", "hashsort"},
    "lsh": {"prefetch"},
    "engine": {"text", "hashsort", "minhash", "jaccard", "lsh", "prefetch"},
    "analysis": {"text", "minhash", "jaccard", "lsh"},
    "wire": {"engine"},
    "events": {"engine"},
    "review": {"engine"},
    "config": {"engine", "text"},
    "telemetry": {"config"},
    "persist": {"review", "engine", "events", "config", "text"},
    "backend": {"review", "engine", "events", "persist", "config", "jaccard", "text", "lsh", "minhash",
                "failing"},
    "collections": {"review", "backend", "events", "engine", "config", "text", "lsh"},
    "service": {"review", "collections", "backend", "events", "engine", "config", "hugepages", "failing"},
    "http": {"review", "service", "collections", "backend", "events", "engine", "config", "wire", "text",
             "analysis", "lsh", "minhash", "jaccard"},
    "cli": {"engine", "config", "wire", "analysis", "text", "minhash", "jaccard", "lsh"},
    "app": {"review", "http", "service", "collections", "events", "engine", "config", "hugepages", "telemetry"},
    "testkit": {"minhash", "text", "engine", "config", "backend"},
    "lib": set(),  # lib.rs declares the modules
    "main": None,  # the binary: everything
}

# The seam: files outside src/backend/ that may still reach a backend's
# internals, and why. None today; a new entry needs its reason here.
SEAM_EXCEPTIONS: dict[str, set[str]] = {}


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(re.sub(r"//.*$", "", line) for line in text.splitlines())


def top_module(path: pathlib.Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".rs")


def crate_refs(code: str) -> set[str]:
    refs = set(re.findall(r"\bcrate::(\w+)", code))
    for group in re.findall(r"\bcrate::\{([^}]*)\}", code):
        refs.update(re.findall(r"^\s*(\w+)", part)[0] for part in group.split(",") if part.strip())
    return refs


def acyclic(graph: dict) -> list[str]:
    state, cycle = {}, []

    def visit(n, stack):
        state[n] = 1
        for m in sorted(graph.get(n) or ()):
            if state.get(m) == 1:
                cycle.append(" -> ".join(stack + [n, m]))
            elif m in graph and not state.get(m):
                visit(m, stack + [n])
        state[n] = 2

    for n in sorted(graph):
        if graph[n] is not None and not state.get(n):
            visit(n, [])
    return cycle


def main() -> int:
    problems = [f"allowed imports form a cycle: {c}" for c in acyclic(ALLOWED)]
    for path in sorted(SRC.rglob("*.rs")):
        rel = path.relative_to(ROOT).as_posix()
        mod = top_module(path)
        code = strip_comments(path.read_text(encoding="utf-8"))
        allowed = ALLOWED.get(mod)
        if mod not in ALLOWED:
            problems.append(f"{rel}: module {mod!r} is not in the dependency table (scripts/check-layers.py, ARCHITECTURE.md)")
        elif allowed is not None and mod != "lib":
            # testkit: test corpora, compiled only for tests (feature `testkit`).
            for ref in sorted(crate_refs(code) - allowed - {mod, "testkit"}):
                problems.append(f"{rel}: {mod} may not import {ref}")
        if mod in CORE and re.search(r"\b(tokio|axum|tower_http|std::fs|std::net)::", code):
            problems.append(f"{rel}: the core ({mod}) does no I/O and imports neither tokio nor axum")
        if mod == "backend":
            continue
        exceptions = SEAM_EXCEPTIONS.get(rel, set())
        for pattern, what in [
            (r"\bBackend::(Memory|Redis)\b", "Backend::Redis("),
            (r"\bcrate::persist\b", "persist"),
            (r"\bbackend::redis\b", "backend::redis"),
            (r"\bbackend::memory\b", "backend::memory"),
        ]:
            if re.search(pattern, code) and what not in exceptions and mod not in ("persist", "lib", "testkit"):
                problems.append(f"{rel}: outside src/backend/, {pattern!r} (the storage seam: go through backend::Backend)")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
