"""Local disk vs S3 (a local SeaweedFS), in one invocation: the ingest alone, then the whole run.

    .venv/bin/python benchmarks/object_storage.py [--rows 15002] [--train-steps 200]
        [--ingest-rows 1000000] [--ingest-only] [--one-child]

Starts a private SeaweedFS (scripts/seaweedfs.sh) on a free loopback port. Then:

1. Ingest (`--ingest-rows`, 0 to skip): generates a span (`python -m
   data.generate`), uploads it to the bucket, and runs the pipeline up to
   CsvExampleGen twice, each a fresh process, with the same Arrow reader: once
   reading the span from local disk, once from the bucket (the pipeline root is
   local for both, so this is the read side alone). Prints the executor's wall
   and CPU seconds, rows/s and MB/s of CSV for each, and the component's
   seconds (adding the driver, whose content fingerprint reads every byte);
   the ratio bucket / local of rows/s; which reader each run used (it must be
   "arrow" on both sides); and whether both wrote the same shard bytes.
   `--one-child` (smoke runs, whose numbers do not matter) runs both ingests in
   one child process, local then bucket, saving a Python/TFX start-up (~10 s
   of CPU); the bucket side then runs warm: not a measurement.
2. Whole run (skipped with `--ingest-only`): uploads the embedded sample with
   `tfxp data upload`, then runs `tfxp run` twice, each a fresh process with a
   fresh store: once with data, pipeline root and serving dir on local disk
   (the anchor), once with all three in the bucket. Prints wall seconds
   (imports included), per-component seconds and the ratio s3 / local.

Both stores are on this machine, so the ratios measure the object-storage
path (HTTP, the relay, copy-instead-of-rename), not a network.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TFXP = str(Path(sys.executable).parent / "tfxp")
SCRIPT = str(ROOT / "scripts" / "seaweedfs.sh")
EMBEDDED = ROOT / "data" / "taxi" / "span-1" / "data.csv"
CHILD_TIMEOUT = 1800  # seconds per child process


def _ingest_child() -> str:
    """benchmarks/csv_ingest.py's child: one ingest in a fresh process, timed."""
    spec = importlib.util.spec_from_file_location("bench_csv_ingest", HERE / "csv_ingest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CHILD


def _run(args: list[str], env: dict[str, str]) -> tuple[float, dict]:
    started = time.perf_counter()
    done = subprocess.run(
        [TFXP, *args, "--json"], env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"tfxp {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, json.loads(done.stdout[done.stdout.index("{") :])


def _checked(cmd: list[str], env: dict[str, str] | None = None, **kw) -> str:
    done = subprocess.run(
        cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=CHILD_TIMEOUT, **kw
    )
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def _shard_bytes(run_dir: Path) -> dict[str, bytes]:
    root = run_dir / "pipeline_root" / "CsvExampleGen" / "examples"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob("*/Split-*/*"))}


def ingest_comparison(tmp: Path, env: dict[str, str], rows: int, one_child: bool = False) -> dict:
    """The same span ingested from local disk and from the bucket, with the Arrow reader.

    Each in a fresh process; `one_child`: both in one (smoke runs, not a measurement).
    """
    span = tmp / "ingest-data" / "span-1"
    print(f"generating {rows:,} rows in {span} ...", flush=True)
    _checked([sys.executable, "-m", "data.generate", str(span), "--rows", str(rows)])
    _checked([TFXP, "data", "upload", "s3://bench/ingest", "--source-root", str(span.parent)], env)
    csv_bytes = sum(f.stat().st_size for f in span.glob("*.csv"))
    results, child = {}, _ingest_child()
    data_roots = {"local": str(span.parent), "bucket": "s3://bench/ingest"}
    children = [list(data_roots)] if one_child else [[side] for side in data_roots]
    for sides in children:
        args = []
        for side in sides:
            print(f"ingesting from {data_roots[side]} ...", flush=True)
            args += ["arrow", data_roots[side], str(tmp / f"ingest-{side}")]
        out = _checked([sys.executable, "-c", child, *args], env)
        lines = out.strip().splitlines()[-len(sides) :]
        results.update({side: json.loads(line) for side, line in zip(sides, lines, strict=True)})
    same = _shard_bytes(tmp / "ingest-local") == _shard_bytes(tmp / "ingest-bucket")
    return {
        "rows": rows,
        "csv_bytes": csv_bytes,
        "same_bytes": same,
        "one_child": one_child,
        **results,
    }


def render_ingest(report: dict) -> str:
    rows, mb = report["rows"], report["csv_bytes"] / 1e6
    lines = [
        f"ingest: {rows:,} rows, {mb:.0f} MB of CSV; pipeline root on local disk for both",
        f"{'span read from':<16}{'reader':>8}{'executor s':>12}{'CPU s':>8}{'rows/s':>12}"
        f"{'MB/s':>8}{'component s':>13}{'rows/s':>12}",
    ]
    for side in ("local", "bucket"):
        r = report[side]
        lines.append(
            f"  {side:<14}{r['reader']:>8}{r['do']:>12.2f}{r['do_cpu']:>8.1f}"
            f"{rows / r['do']:>12,.0f}{mb / r['do']:>8.1f}"
            f"{r['component']:>13.2f}{rows / r['component']:>12,.0f}"
        )
    ratio = report["local"]["do"] / report["bucket"]["do"]
    lines.append(f"ratio bucket / local, ingest rows/s: {ratio:.2f}")
    # The component adds the driver (the span's content fingerprint reads every byte).
    whole = report["local"]["component"] / report["bucket"]["component"]
    lines.append(f"  (the whole component, driver's content hash included: {whole:.2f})")
    readers = {report[s]["reader"] for s in ("local", "bucket")}
    lines.append("same reader on both sides: " + ("yes (arrow)" if readers == {"arrow"} else "NO"))
    lines.append("same shard bytes: " + ("yes" if report["same_bytes"] else "NO"))
    if report.get("one_child"):
        lines.append(
            "--one-child: both sides in one process, bucket after local: not a measurement"
        )
    return "\n".join(lines)


def whole_runs(tmp: Path, env: dict[str, str], rows: int, train_steps: int) -> str:
    """Whole `tfxp run`s, everything local vs everything in the bucket; the printed table."""
    span = tmp / "local-data" / "span-1"
    span.mkdir(parents=True)
    with EMBEDDED.open() as src, (span / "data.csv").open("w") as dst:
        dst.writelines(itertools.islice(src, rows + 1))
    _checked([TFXP, "data", "upload", "s3://bench/taxi", "--source-root", str(span.parent)], env)
    steps = ["--train-steps", str(train_steps)]
    local_wall, local = _run(
        ["run", "--data-root", str(span.parent), "--run-dir", str(tmp / "local"), *steps], env
    )
    s3_args = ["run", "--data-root", "s3://bench/taxi", "--run-dir", "s3://bench/runs/taxi"]
    s3_wall, s3 = _run([*s3_args, "--state-dir", str(tmp / "s3-state"), *steps], env)
    lines = [f"whole run: rows {rows}, train steps {train_steps}"]
    lines.append(f"{'component':<26}{'local s':>9}{'s3 s':>9}")
    s3_by_node = {c["node_id"]: c for c in s3["components"]}
    for c in local["components"]:
        other = s3_by_node.get(c["node_id"], {})
        lines.append(f"  {c['node_id']:<24}{c['seconds']:>9.1f}{other.get('seconds', 0.0):>9.1f}")
    lines.append(f"{'wall (process)':<26}{local_wall:>9.1f}{s3_wall:>9.1f}")
    lines.append(f"ratio s3 / local: {s3_wall / local_wall:.2f}")
    lines.append(f"pushed: {local['pushed_model']} | {s3['pushed_model']}")
    return "\n".join(lines)


def _start_store(tmp: Path) -> dict[str, str]:
    """Starts SeaweedFS in `tmp`; the environment of a client of it."""
    started = _checked([SCRIPT, "start", str(tmp / "seaweedfs"), "auto"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
    for line in started.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value
    return env


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=15002, help="rows of the embedded CSV")
    parser.add_argument("--train-steps", type=int, default=200)
    parser.add_argument(
        "--ingest-rows", type=int, default=1_000_000, help="rows of the ingest span (0: skip)"
    )
    parser.add_argument("--ingest-only", action="store_true", help="skip the whole runs")
    parser.add_argument(
        "--one-child",
        action="store_true",
        help="smoke runs: both ingests in one child process (not a measurement, see above)",
    )
    args = parser.parse_args()

    reports = []
    with tempfile.TemporaryDirectory(prefix="tfxp-bench-s3-") as tmp:
        tmp = Path(tmp)
        env = _start_store(tmp)
        try:
            ingest = (
                ingest_comparison(tmp, env, args.ingest_rows, args.one_child)
                if args.ingest_rows
                else None
            )
            if ingest:
                reports.append(render_ingest(ingest))
            if not args.ingest_only:
                reports.append(whole_runs(tmp, env, args.rows, args.train_steps))
        finally:
            subprocess.run(
                [SCRIPT, "stop", str(tmp / "seaweedfs")], capture_output=True, timeout=120
            )
    print("\n\n".join(reports))
    load = os.getloadavg()[0]
    print(f"\nload average at the end: {load:.1f} on {os.cpu_count()} CPUs (a shared machine)")
    if ingest and not (
        ingest["same_bytes"] and ingest["local"]["reader"] == "arrow" == ingest["bucket"]["reader"]
    ):
        sys.exit(1)


if __name__ == "__main__":
    from tfxp.cli import exit_now  # skips TensorFlow's teardown (~2 s of CPU)

    exit_now(main() or 0)
