"""Data generator and ingest throughput: rows/s and peak memory, each in a fresh subprocess.

    .venv/bin/python benchmarks/generator.py [--rows 1000000 10000000] [--ingest-rows 1000000]

Measures, on one core (the generator is single-threaded numpy + str.join):
  - `python -m data.generate` at each --rows: wall, rows/s, MB/s, peak RSS;
  - CsvExampleGen alone (a partial run, `to_nodes=[CsvExampleGen]`) on a
    generated span of --ingest-rows: wall (process start-up included and
    excluded), rows/s and peak RSS, plus the TFRecord shards and bytes written.
Peak memory is `resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` of the child.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

INGEST_CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
from pipeline.config import PipelineConfig
from pipeline.datasets import dataset_config
from tfxp.local.runner import run_local
config = dataset_config("taxi").replace(data_root={data!r}, run_dir={run!r})
started = time.perf_counter()
summary = run_local(config, to_nodes=["CsvExampleGen"], printer=lambda _: None)
took = time.perf_counter() - started
node = [c for c in summary.components if c.node_id == "CsvExampleGen"][0]
print("RESULT " + json.dumps({{"run_seconds": took, "component_seconds": node.seconds,
                               "state": node.state}}))
"""


# A fresh wrapper per measurement: RUSAGE_CHILDREN's maxrss is a running maximum
# over every child a process ever waited for, so each child gets its own parent.
_WRAPPER = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], timeout=3600); "
    "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(r.returncode)"
)


def _child(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """Runs `cmd`; returns (wall seconds, peak RSS in MB, stdout)."""
    started = time.perf_counter()
    proc = subprocess.run(
        [PY, "-c", _WRAPPER, *cmd],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        timeout=3700,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    line = [x for x in proc.stderr.splitlines() if x.startswith("MAXRSS ")][-1]
    return wall, int(line.split()[1]) // 1024, proc.stdout


def bench_generate(rows: int, tmp: Path) -> dict:
    out = tmp / f"gen-{rows}"
    # taskset pins the child to one core where available.
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    cmd = [*pin, PY, "-m", "data.generate", str(out), "--rows", str(rows), "--seed", "1"]
    wall, peak_mb, _ = _child(cmd)
    nbytes = sum(f.stat().st_size for f in out.iterdir())
    shutil.rmtree(out)
    return {
        "rows": rows,
        "seconds": round(wall, 2),
        "rows_per_s": round(rows / wall),
        "mb_per_s": round(nbytes / wall / 1e6, 1),
        "csv_mb": round(nbytes / 1e6, 1),
        "peak_rss_mb": peak_mb,
    }


def bench_ingest(rows: int, tmp: Path) -> dict:
    data = tmp / "ingest" / "data"
    subprocess.run(
        [PY, "-m", "data.generate", str(data / "span-1"), "--rows", str(rows), "--seed", "2"],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=3600,
    )
    csv_bytes = sum(f.stat().st_size for f in (data / "span-1").iterdir())
    run = tmp / "ingest" / "run"
    code = INGEST_CHILD.format(root=str(ROOT), data=str(data), run=str(run))
    wall, peak_mb, stdout = _child([PY, "-c", code], env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    result = json.loads(next(x for x in stdout.splitlines() if x.startswith("RESULT "))[7:])
    shards = list(run.glob("pipeline_root/CsvExampleGen/examples/*/Split-*/*.gz"))
    tfrecord_bytes = sum(p.stat().st_size for p in shards)
    return {
        "rows": rows,
        "csv_mb": round(csv_bytes / 1e6, 1),
        "process_seconds": round(wall, 1),
        "component_seconds": round(result["component_seconds"], 1),
        "rows_per_s_component": round(rows / result["component_seconds"]),
        "peak_rss_mb": peak_mb,
        "shards": len(shards),
        "tfrecord_mb": round(tfrecord_bytes / 1e6, 1),
        "tfrecord_to_csv": round(tfrecord_bytes / csv_bytes, 2),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, nargs="*", default=[1_000_000, 10_000_000])
    p.add_argument("--ingest-rows", type=int, default=1_000_000, help="0 skips the ingest run")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    results: dict = {"generate": [], "ingest": None}
    with tempfile.TemporaryDirectory(prefix="bench-gen-") as tmp:
        if args.ingest_rows:
            results["ingest"] = bench_ingest(args.ingest_rows, Path(tmp))
            shutil.rmtree(Path(tmp) / "ingest")
        for rows in sorted(args.rows):
            results["generate"].append(bench_generate(rows, Path(tmp)))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for g in results["generate"]:
        print(
            f"generate {g['rows']:>11,} rows: {g['seconds']:6.1f}s  {g['rows_per_s']:>9,} rows/s  "
            f"{g['mb_per_s']:6.1f} MB/s  {g['csv_mb']:8.1f} MB CSV  peak RSS {g['peak_rss_mb']} MB"
        )
    if results["ingest"]:
        i = results["ingest"]
        print(
            f"ingest   {i['rows']:>11,} rows ({i['csv_mb']} MB CSV): CsvExampleGen "
            f"{i['component_seconds']}s = {i['rows_per_s_component']:,} rows/s "
            f"(process {i['process_seconds']}s), peak RSS {i['peak_rss_mb']} MB, "
            f"{i['shards']} shards, {i['tfrecord_mb']} MB TFRecord "
            f"({i['tfrecord_to_csv']}x the CSV)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
