"""Ingest-only benchmark: our Arrow CSV executor vs TFX's CsvExampleGen reader.

    .venv/bin/python benchmarks/csv_ingest.py [--rows 1000000] [--work DIR]

Generates a span (`python -m data.generate`), then runs a partial pipeline
(to CsvExampleGen) with each reader in a fresh subprocess, and prints rows/s,
MB/s of CSV, wall time and the child's peak RSS (ru_maxrss), then checks that
both wrote the same examples per split (counts and a SHA-256 of the sorted,
deterministically re-serialized examples).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import sys
from pipeline.config import PipelineConfig
from pipeline.runner import run_local
reader, data_root, run_dir = sys.argv[1:4]
config = PipelineConfig(data_root=data_root, run_dir=run_dir, csv_reader=reader)
run_local(config, to_nodes=["CsvExampleGen"], printer=lambda _: None)
"""

DIGEST = r"""
import glob, hashlib, json, sys
import tensorflow as tf
out = {}
for folder in sorted(glob.glob(sys.argv[1] + "/pipeline_root/CsvExampleGen/examples/*/Split-*")):
    files = sorted(glob.glob(folder + "/*.gz"))
    records = sorted(
        tf.train.Example.FromString(r).SerializeToString(deterministic=True)
        for r in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator()
    )
    h = hashlib.sha256()
    for r in records:
        h.update(len(r).to_bytes(4, "little") + r)
    out[folder.rsplit("/", 1)[1]] = [len(records), h.hexdigest()[:16]]
print(json.dumps(out))
"""


def _child(args: list[str]) -> tuple[float, float, str]:
    """Runs a Python child; returns wall seconds, its own peak RSS in MB (the
    ru_maxrss that wait4 reports for it) and its stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            sys.exit(f"failed: {args[:3]}\n{err.read().decode()[-3000:]}")
        return wall, usage.ru_maxrss / 1024, out.read().decode()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--work", default=None, help="working folder (default: a temp dir)")
    args = p.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="csv-ingest-"))
    data_root = work / "data"
    span = data_root / "span-1"
    if not span.exists():
        subprocess.run(
            [sys.executable, "-m", "data.generate", str(span), "--rows", str(args.rows)],
            cwd=ROOT,
            check=True,
        )
    csv_bytes = sum(f.stat().st_size for f in span.glob("*.csv"))
    results = {}
    for reader in ("arrow", "tfx"):
        run_dir = work / f"run-{reader}"
        wall, peak_mb, _ = _child(["-c", CHILD, reader, str(data_root), str(run_dir)])
        _, _, digest = _child(["-c", DIGEST, str(run_dir)])
        results[reader] = (wall, peak_mb, json.loads(digest))
    print(f"\n{args.rows:,} rows, {csv_bytes / 1e6:.0f} MB of CSV ({work})\n")
    print("| reader | wall (process) | rows/s | MB/s | peak RSS |")
    print("|---|---|---|---|---|")
    for reader, (wall, peak, _) in results.items():
        print(
            f"| {reader} | {wall:.1f} s | {args.rows / wall:,.0f} | "
            f"{csv_bytes / 1e6 / wall:.1f} | {peak:,.0f} MB |"
        )
    ratio = results["tfx"][0] / results["arrow"][0]
    print(f"\nspeed-up (rows/s): {ratio:.1f}x")
    same = results["arrow"][2] == results["tfx"][2]
    print(f"splits (count, sha256 of sorted examples): arrow {results['arrow'][2]}")
    print(f"                                            tfx   {results['tfx'][2]}")
    print("equivalent: " + ("yes" if same else "NO"))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
