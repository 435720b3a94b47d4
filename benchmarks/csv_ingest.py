"""Ingest benchmark: our Arrow CSV ExampleGen executor vs TFX's CsvExampleGen reader.

    .venv/bin/python benchmarks/csv_ingest.py [--rows 1000000] [--work DIR] [--one-child]

Generates a span (`python -m data.generate`), then, for each reader, runs the
pipeline up to CsvExampleGen in a fresh subprocess (the same component, the
same config except `csv_reader`). Prints, per reader: the component's executor
time (`Executor.Do`, what ingest costs inside a pipeline run) and the whole
process's wall time (which adds Python/TFX start-up and pipeline compilation,
the same for both), rows/s and MB/s of CSV over each, the executor's CPU time
(all threads; steadier than wall time on a shared machine), the child's peak RSS
(ru_maxrss) and the size of the GZIP shards; then the speed-up ratios, and
checks that both wrote the same examples per split (counts and a SHA-256 of
the sorted, deterministically re-serialized examples).

`--one-child` is for smoke runs, whose numbers do not matter: both readers run
in one child process, one after the other, which saves a second Python/TFX
start-up (~10 s of CPU). The second reader then runs warm and the process wall
and peak RSS are that one process's, shared: not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# One ingest in a fresh process (also benchmarks/object_storage.py's): the
# pipeline up to CsvExampleGen, its executor and the CSV checks timed; prints
# the timings (and the component's, driver included), the reader the Examples
# record and their row count as one JSON line. Its arguments are
# `reader data_root run_dir`, repeated for each ingest it runs one after the
# other (several only with --one-child). With s3://
# data tensorflow-io is loaded, which aborts at interpreter exit: leave by os._exit.
CHILD = r"""
import json, os, sys, time
from components.example_gen import csv_checks, csv_example_gen, csv_options, driver
from pipeline.config import PipelineConfig
from pipeline.datasets import dataset_config
from tfxp.local.runner import run_local
sides = sys.argv[1:]
timed = {}
do = csv_example_gen.Executor.Do
def timed_do(self, *args, **kwargs):
    start, cpu = time.perf_counter(), time.process_time()
    try:
        return do(self, *args, **kwargs)
    finally:
        timed["do"] = time.perf_counter() - start
        timed["do_cpu"] = time.process_time() - cpu
csv_example_gen.Executor.Do = timed_do
checks = csv_checks.check_csv_files
def timed_checks(*args, **kwargs):
    start = time.perf_counter()
    try:
        return checks(*args, **kwargs)
    finally:
        timed["checks"] = timed.get("checks", 0.0) + time.perf_counter() - start
csv_checks.check_csv_files = timed_checks
code = 1
try:
    for i in range(0, len(sides), 3):
        reader, data_root, run_dir = sides[i : i + 3]
        timed.clear()
        config = dataset_config("taxi").replace(data_root=data_root, run_dir=run_dir, csv_reader=reader)
        summary = run_local(config, to_nodes=["CsvExampleGen"], printer=lambda _: None)
        [timed["component"]] = [
            c.seconds for c in summary.components if c.node_id == "CsvExampleGen"
        ]
        from ml_metadata.metadata_store import metadata_store
        from ml_metadata.proto import metadata_store_pb2
        cfg = metadata_store_pb2.ConnectionConfig()
        cfg.sqlite.filename_uri = config.metadata_path
        [examples] = metadata_store.MetadataStore(cfg).get_artifacts_by_type("Examples")
        timed["reader"] = examples.custom_properties[csv_options.CSV_READER].string_value
        timed["rows"] = examples.custom_properties[driver.ROW_COUNT].int_value
        print(json.dumps(timed), flush=True)
    code = 0
finally:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
"""

# Per run folder given, per split: [examples, SHA-256 of the sorted examples,
# shards, bytes]; one process for all (one TensorFlow import), after the ingests.
DIGEST = r"""
import glob, hashlib, json, os, sys
import tensorflow as tf
out = {}
for run_dir in sys.argv[1:]:
    splits = out[run_dir] = {}
    for folder in sorted(glob.glob(run_dir + "/pipeline_root/CsvExampleGen/examples/*/Split-*")):
        files = sorted(glob.glob(folder + "/*.gz"))
        records = sorted(
            tf.train.Example.FromString(r).SerializeToString(deterministic=True)
            for r in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator()
        )
        h = hashlib.sha256()
        for r in records:
            h.update(len(r).to_bytes(4, "little") + r)
        size = sum(os.path.getsize(f) for f in files)
        splits[folder.rsplit("/", 1)[1]] = [len(records), h.hexdigest()[:16], len(files), size]
print(json.dumps(out), flush=True)
os._exit(0)  # skips TensorFlow's teardown (~2 s of CPU)
"""


CHILD_TIMEOUT = 3600.0  # seconds per child process; TFX's reader takes minutes per 1M rows


def _child(args: list[str]) -> tuple[float, float, str]:
    """Runs a Python child; returns wall seconds, its own peak RSS in MB (the
    ru_maxrss that wait4 reports for it) and its stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=out, stderr=err)
        # wait4 has no timeout: a watchdog kills a child that hangs.
        watchdog = threading.Timer(CHILD_TIMEOUT, proc.kill)
        watchdog.start()
        _, status, usage = os.wait4(proc.pid, 0)
        watchdog.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            sys.exit(f"failed: {args[:3]}\n{err.read().decode()[-3000:]}")
        return wall, usage.ru_maxrss / 1024, out.read().decode()


def _parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--work", default=None, help="working folder (default: a temp dir)")
    p.add_argument(
        "--one-child",
        action="store_true",
        help="smoke runs: both readers in one child process (not a measurement, see above)",
    )
    p.add_argument("--json", action="store_true", help="also print the results as JSON")
    return p.parse_args()


def _generate(span: Path, rows: int) -> None:
    """The generated span, once: a rerun with the same --work reuses it."""
    if not span.exists():
        print(f"generating {rows:,} rows in {span}", flush=True)
        subprocess.run(
            [sys.executable, "-m", "data.generate", str(span), "--rows", str(rows)],
            cwd=ROOT,
            check=True,
            timeout=CHILD_TIMEOUT,
        )


def _ingest(data_root: Path, run_dirs: dict[str, Path], one_child: bool) -> dict[str, dict]:
    """Each reader's timings, process wall time and peak RSS, and its splits' digests."""
    results = {}
    children = [list(run_dirs)] if one_child else [[reader] for reader in run_dirs]
    for readers in children:
        sides = []
        for reader in readers:
            print(f"ingesting with csv_reader={reader!r} into {run_dirs[reader]} ...", flush=True)
            sides += [reader, str(data_root), str(run_dirs[reader])]
        wall, peak_mb, out = _child(["-c", CHILD, *sides])
        for reader, line in zip(readers, out.strip().splitlines()[-len(readers) :], strict=True):
            timed = json.loads(line)
            print(
                f"  {reader}: executor {timed['do']:.1f} s ({timed['do_cpu']:.1f} s CPU), "
                f"process {wall:.1f} s",
                flush=True,
            )
            results[reader] = {**timed, "wall": wall, "peak": peak_mb}
    print("checking their splits ...", flush=True)
    _, _, digest = _child(["-c", DIGEST, *map(str, run_dirs.values())])
    splits = json.loads(digest)
    for reader, run_dir in run_dirs.items():
        results[reader]["splits"] = splits[str(run_dir)]
    return results


def _print_table(results: dict[str, dict], rows: int, csv_mb: float) -> None:
    print(
        "| reader | executor wall | rows/s | MB/s | executor CPU | process wall | rows/s "
        "| peak RSS | GZIP shards |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for reader, r in results.items():
        shards_mb = sum(s[3] for s in r["splits"].values()) / 1e6
        print(
            f"| {reader} | {r['do']:.1f} s | {rows / r['do']:,.0f} | {csv_mb / r['do']:.1f} "
            f"| {r['do_cpu']:.1f} s | {r['wall']:.1f} s | {rows / r['wall']:,.0f} | {r['peak']:,.0f} MB "
            f"| {shards_mb:.0f} MB |"
        )


def _compare(results: dict[str, dict]) -> dict:
    """Prints the ratios and the equivalence check; returns them (the JSON's figures)."""
    arrow, tfx = results["arrow"], results["tfx"]
    print(f"\nspeed-up, executor rows/s: {tfx['do'] / arrow['do']:.1f}x")
    checks = tfx.get("checks", 0.0)
    print(
        f"  (tfx's executor includes {checks:.1f} s of this project's CSV checks; "
        f"TFX's CsvExampleGen alone: {(tfx['do'] - checks) / arrow['do']:.1f}x)"
    )
    print(f"speed-up, process rows/s:  {tfx['wall'] / arrow['wall']:.1f}x")
    print(f"CPU time, tfx / arrow:     {tfx['do_cpu'] / arrow['do_cpu']:.1f}x")
    load = os.getloadavg()[0]
    print(f"load average at the end:   {load:.1f} on {os.cpu_count()} CPUs (a shared machine)")
    print(f"peak RSS, arrow / tfx:     {arrow['peak'] / tfx['peak']:.2f}")

    def examples(r):  # (count, digest) per split; shard count and size may differ
        return {split: v[:2] for split, v in r["splits"].items()}

    same = examples(arrow) == examples(tfx)
    print(f"splits (count, sha256 of sorted examples): arrow {examples(arrow)}")
    print(f"                                            tfx   {examples(tfx)}")
    print("equivalent: " + ("yes" if same else "NO"))
    return {
        "load_average": load,
        "speedup_executor": tfx["do"] / arrow["do"],
        "speedup_executor_without_checks": (tfx["do"] - checks) / arrow["do"],
        "speedup_process": tfx["wall"] / arrow["wall"],
        "cpu_ratio": tfx["do_cpu"] / arrow["do_cpu"],
        "equivalent": same,
    }


def main() -> None:
    args = _parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="csv-ingest-"))
    data_root = work / "data"
    span = data_root / "span-1"
    _generate(span, args.rows)
    csv_mb = sum(f.stat().st_size for f in span.glob("*.csv")) / 1e6
    run_dirs = {reader: work / f"run-{reader}" for reader in ("arrow", "tfx")}
    results = _ingest(data_root, run_dirs, args.one_child)

    print(f"\n{args.rows:,} rows, {csv_mb:.0f} MB of CSV ({work})\n")
    if args.one_child:
        print("--one-child: both readers in one process, tfx after arrow: not a measurement\n")
    _print_table(results, args.rows, csv_mb)
    figures = _compare(results)
    if args.json:
        payload = {
            "rows": args.rows,
            "csv_mb": csv_mb,
            "one_child": args.one_child,
            "readers": results,
            **figures,
        }
        print(json.dumps(payload, indent=2, sort_keys=True))
    sys.exit(0 if figures["equivalent"] else 1)


if __name__ == "__main__":
    from tfxp.cli import exit_now  # skips TensorFlow's teardown (~2 s of CPU)

    exit_now(main() or 0)
