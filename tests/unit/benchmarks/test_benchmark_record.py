"""benchmarks/record.py keeps a benchmark's --json output with its provenance, or nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipeline.config import PROJECT_ROOT

RECORD = PROJECT_ROOT / "benchmarks" / "record.py"

# A stand-in benchmark: prints a table, then its results as JSON (as the real ones do).
FAKE = """\
import json, sys
print("| side | seconds |")
if "--fail" in sys.argv:
    sys.exit(3)
if "--json" in sys.argv and "--no-json" not in sys.argv:
    print(json.dumps({"ratio": 0.5, "args": sys.argv[1:]}, indent=2))
"""


def _record(tmp_path: Path, *bench_args: str, options: tuple[str, ...] = ()):
    script = tmp_path / "fake_bench.py"
    script.write_text(FAKE)
    results = tmp_path / "results"
    return subprocess.run(
        [
            sys.executable,
            str(RECORD),
            "--results-dir",
            str(results),
            *options,
            str(script),
            *bench_args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_run_is_kept_with_command_commit_date_and_machine(tmp_path):
    done = _record(
        tmp_path, "--rows=5", options=("--name", "fake-small", "--note", "a quiet machine")
    )
    assert done.returncode == 0, done.stderr
    assert "| side | seconds |" in done.stdout  # the benchmark's own output goes through
    record = json.loads((tmp_path / "results" / "fake-small.json").read_text())
    assert record["result"] == {"ratio": 0.5, "args": ["--rows=5", "--json"]}
    assert record["command"].endswith("fake_bench.py --rows=5 --json")
    assert record["benchmark"] == "fake_bench"
    assert len(record["commit"]) == 40 and record["date"].endswith("Z")
    machine = record["machine"]
    assert machine["cpu_count"] >= 1 and machine["memory_gb"] > 0 and machine["cpu_model"]
    assert machine["note"] == "a quiet machine"


def test_a_failed_run_or_one_without_json_keeps_nothing(tmp_path):
    failed = _record(tmp_path, "--fail")
    assert failed.returncode == 3 and "nothing recorded" in failed.stderr
    silent = _record(tmp_path, "--no-json")
    assert silent.returncode == 1 and "no JSON object" in silent.stderr
    assert not list((tmp_path / "results").glob("*"))
