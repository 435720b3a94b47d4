"""Run one benchmark and keep its results as data under benchmarks/results/.

    .venv/bin/python benchmarks/record.py [--name NAME] benchmarks/<benchmark>.py [ARGS ...]

Runs the benchmark with its own arguments plus `--json` (its output goes to this
terminal as it comes), takes the last JSON object it printed and writes
`benchmarks/results/<NAME>.json` (NAME defaults to the script's name; give one per
run configuration, e.g. `--name scale-100k`) holding the command, the git commit,
the date, the machine (CPU count and model, memory, load average) and the
benchmark's own results. A new run replaces the file: the performance page shows
only the latest figure of each configuration (`benchmarks/render_results.py`).
Nothing is written when the benchmark fails or prints no JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last top-level JSON object in `text`: one starting with '{' at a line start."""
    decoder = json.JSONDecoder()
    for match in reversed(list(re.finditer(r"^\{", text, flags=re.MULTILINE))):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def machine() -> dict[str, Any]:
    """What the figures were measured on: they mean little without it."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def git_commit() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    # Benchmarks' own files and results do not make the code under test dirty.
    dirty = git("status", "--porcelain", "--", ".", ":!benchmarks/results")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(dirty)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--name", help="results file name (default: the benchmark script's name)")
    parser.add_argument(
        "--note",
        default="",
        help="how the machine was used meanwhile, e.g. 'shared with other test runs'",
    )
    parser.add_argument(
        "--results-dir", type=Path, default=RESULTS, help="default: benchmarks/results"
    )
    parser.add_argument(
        "benchmark", type=Path, help="the benchmark script, e.g. benchmarks/scale.py"
    )
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own arguments")
    args = parser.parse_args(argv)
    if not args.benchmark.is_file():
        parser.error(f"no benchmark script at {args.benchmark}")
    bench_args = [a for a in args.args if a != "--"]
    if "--json" not in bench_args:
        bench_args.append("--json")
    script = args.benchmark.resolve()
    if script.is_relative_to(ROOT):  # the command as a user types it in the checkout
        script = script.relative_to(ROOT)
    name = args.name or script.stem
    command = [".venv/bin/python", str(script), *bench_args]
    before = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), **git_commit()}
    print(f"running: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    # Output goes to the terminal line by line and is kept to find the JSON.
    proc = subprocess.Popen(
        [sys.executable, str(script), *bench_args], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    returncode = proc.wait()
    wall = time.perf_counter() - start
    if returncode != 0:
        print(f"benchmark failed (exit {returncode}): nothing recorded", file=sys.stderr)
        return returncode
    result = last_json_object("".join(lines))
    if result is None:
        print("the benchmark printed no JSON object: nothing recorded", file=sys.stderr)
        return 1
    record = {
        "benchmark": script.stem,
        "command": " ".join(command),
        **before,
        "wall_seconds": round(wall, 1),
        "machine": {**machine(), "note": args.note},
        "result": result,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{name}.json"
    tmp = out.with_suffix(".json.tmp")
    # Keys in the benchmark's own order: its tables are rendered in that order.
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(out)  # whole or not at all
    print(f"\nrecorded {out} ({wall:.0f} s); render the page with benchmarks/render_results.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
