#!/usr/bin/env python3
"""Replay the checked shell blocks of README.md against a fresh server.

Run through scripts/readme-check.sh, which builds the binary first.

Marker convention (README.md): a fenced block opened by the line
"```sh check" is replayed; every other block is left alone. Inside one:

  - a line that starts with neither "#" nor a space starts a command;
  - a line that starts with a space continues the command above it
    (backslash continuations and multi-line quoted bodies);
  - "#> TEXT" (or a bare "#>") is one line of the output the command above
    prints: stdout and stderr together, as a terminal shows them;
  - any other "#" line is a comment, and blank lines are ignored.

The checked blocks run in README order, as one bash session (variables
carry over), in an empty temporary directory that holds `examples` (a
link to the repository's) and a `neardup` on PATH, against the server this
script starts there on an empty data directory (./data) with the
compiled-in defaults, on a free port of 127.0.0.1: "127.0.0.1:8080" and
"localhost:8080" in the commands are replaced by its address.

Comparison: byte for byte, after two normalizations applied alike to what
the README shows and to what the command printed:
  1. an output that does not end in a newline gets one (curl -s prints
     none; the README shows each output on lines of its own);
  2. values that cannot repeat are masked (MASKS below): RFC 3339
     timestamps, UUIDs (request ids, generated document ids), and
     durations (JSON "milliseconds"/"seconds" values, "0.2 s" in the
     command-line tools' summaries).
On any difference it prints the command, its README line and a diff, and
exits 1. The server is stopped on every exit.

  --print   print each command's actual output in the "#> " form instead
            of comparing (for writing the README; check what you paste)
"""

import argparse
import difflib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"), "<time>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r'"(milliseconds|seconds)":\s*[-+0-9.eE]+'), r'"\1":<duration>'),
    (re.compile(r"\b\d+(?:\.\d+)? s\b"), "<duration> s"),
]
FENCE_OPEN = "```sh check"
TIMEOUT_S = 45


def mask(text):
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def with_newline(text):
    return text if text == "" or text.endswith("\n") else text + "\n"


def parse(path):
    """The checked commands: (README line, command text, expected output)."""
    commands = []
    inside = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        if not inside:
            if line.rstrip() == FENCE_OPEN:
                inside = True
            continue
        if line.startswith("```"):
            inside = False
            continue
        if line.startswith("#>"):
            if not commands:
                sys.exit(f"{path}:{number}: an output line before any command")
            out = line[3:] if line.startswith("#> ") else line[2:]
            commands[-1][2].append(out)
        elif line.startswith("#") or line.strip() == "":
            continue
        elif line.startswith(" "):
            if not commands or commands[-1][2]:
                sys.exit(f"{path}:{number}: an indented line that continues no command")
            commands[-1][1].append(line)
        else:
            commands.append((number, [line], []))
    if inside:
        sys.exit(f"{path}: a '{FENCE_OPEN}' block is not closed")
    return [
        (n, "\n".join(cmd), "\n".join(out) + "\n" if out else "")
        for n, cmd, out in commands
    ]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(addr, server, log_path):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if server.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"http://{addr}/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        sys.stderr.write(f.read())
    sys.exit(f"readme-check: the server on {addr} did not become ready")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--print", action="store_true", dest="print_")
    ap.add_argument("readme", nargs="?", default="README.md")
    args = ap.parse_args()

    repo = os.path.dirname(os.path.abspath(args.readme))
    binary = os.path.abspath(args.binary)
    commands = parse(args.readme)
    if len(commands) < 10:
        sys.exit(f"readme-check: only {len(commands)} checked commands in {args.readme}; "
                 f"are the '{FENCE_OPEN}' fences still there?")

    work = tempfile.mkdtemp(prefix="readme-check.")
    server = None

    def stop(*_):
        raise SystemExit(130)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        os.mkdir(os.path.join(work, "bin"))
        os.mkdir(os.path.join(work, "out"))
        os.symlink(binary, os.path.join(work, "bin", "neardup"))
        os.symlink(os.path.join(repo, "examples"), os.path.join(work, "examples"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
        env["PATH"] = os.path.join(work, "bin") + os.pathsep + env.get("PATH", "")
        env["NO_COLOR"] = "1"

        addr = f"127.0.0.1:{free_port()}"
        log_path = os.path.join(work, "server.log")
        with open(log_path, "wb") as log:
            server = subprocess.Popen(
                [binary], cwd=work, stdout=log, stderr=subprocess.STDOUT,
                env=dict(env, NEARDUP_SERVER__BIND=addr))
        wait_ready(addr, server, log_path)

        script = []
        for i, (_, cmd, _) in enumerate(commands):
            cmd = cmd.replace("127.0.0.1:8080", addr).replace("localhost:8080", addr)
            script.append(f"{{\n{cmd}\n}} >'{work}/out/{i}' 2>&1 </dev/null\n")
        script_path = os.path.join(work, "replay.sh")
        with open(script_path, "w", encoding="utf-8") as f:
            f.write("".join(script))
        try:
            subprocess.run(["bash", script_path], cwd=work, env=env, timeout=TIMEOUT_S,
                           check=False)
        except subprocess.TimeoutExpired:
            sys.exit(f"readme-check: the commands did not finish within {TIMEOUT_S} s")

        failures = 0
        for i, (line, cmd, expected) in enumerate(commands):
            with open(os.path.join(work, "out", str(i)), encoding="utf-8",
                      errors="replace") as f:
                actual = with_newline(f.read())
            if args.print_:
                print(f"{args.readme}:{line}: {cmd.splitlines()[0]}")
                for out_line in actual.rstrip("\n").split("\n") if actual else []:
                    print(f"#> {out_line}" if out_line else "#>")
                continue
            want, got = mask(expected), mask(actual)
            if want != got:
                failures += 1
                print(f"--- {args.readme}:{line}: {cmd}")
                sys.stdout.writelines(difflib.unified_diff(
                    want.splitlines(True), got.splitlines(True),
                    "README.md shows", "the command printed"))
                print()
        if args.print_:
            return 0
        if failures:
            print(f"readme-check: {failures} of {len(commands)} outputs differ from README.md "
                  f"(masked: timestamps, UUIDs, durations)")
            return 1
        print(f"readme-check: {len(commands)} commands of {args.readme} answered as shown")
        return 0
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
