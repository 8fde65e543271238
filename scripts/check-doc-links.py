#!/usr/bin/env python3
"""Check the relative links of the repository's Markdown documents.

For README.md, ARCHITECTURE.md and docs/*.md: every [text](target) link that
is not an absolute URL must name an existing file (relative to the document),
and a #fragment must name a heading of the target (GitHub's anchors:
lowercased, punctuation dropped, spaces to hyphens). Also fails if a docs/
page is not linked from README.md. Prints each broken link; exit 1 if any.

    python3 scripts/check-doc-links.py
"""

import glob
import os
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def slug(heading):
    text = re.sub(r"`|\*\*|\*|_(?=\W)|\[|\]\([^)]*\)", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen, fenced = set(), {}, False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    fenced = not fenced
                    continue
                m = None if fenced else HEADING.match(line)
                if m:
                    base = slug(m.group(1))
                    n = seen.get(base, 0)
                    found.add(base if n == 0 else f"{base}-{n}")
                    seen[base] = n + 1
        cache[path] = found
    return cache[path]


def links(path):
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                yield number, m.group(1) or m.group(2)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    docs = ["README.md", "ARCHITECTURE.md"] + sorted(glob.glob("docs/*.md"))
    bad = 0
    linked_from_readme = set()
    for doc in docs:
        for number, target in links(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            file_part, _, fragment = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(doc), file_part)) if file_part else doc
            if doc == "README.md":
                linked_from_readme.add(dest)
            if not os.path.exists(dest):
                print(f"{doc}:{number}: {target}: no such file")
                bad += 1
            elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
                print(f"{doc}:{number}: {target}: no heading #{fragment} in {dest}")
                bad += 1
    for page in glob.glob("docs/*.md"):
        if os.path.normpath(page) not in linked_from_readme:
            print(f"README.md: does not link {page}")
            bad += 1
    if bad:
        print(f"check-doc-links: {bad} broken")
        return 1
    print(f"check-doc-links: every relative link of {len(docs)} documents resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
