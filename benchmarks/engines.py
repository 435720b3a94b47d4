"""Engines: our pipeline in-process, multi-process and on a standalone Spark cluster of 1
and 2 workers, and TFX's taxi example on the same 2-worker cluster through the same
runner, one invocation.

    .venv/bin/python benchmarks/engines.py [--rows 100000] [--worker-memory 2g]
        [--only NAME ...] [--timeout S] [--stop-at HH:MM] [--json] [--keep]

For each size N it generates a taxi span (``tfxp data generate taxi --rows N``, outside
the timing), then runs, each as a fresh process with fresh directories:

* ``in-process``: ``local_runner.py --beam in-process`` (the fast paths);
* ``multi-process``: ``--beam multi-process`` (one SDK worker per core);
* ``spark-1``, ``spark-2``: ``--beam spark`` on a cluster of 1 and of 2 one-core workers
  (``beam_spark.cluster``, as ``tfxp engine start spark --workers N`` starts it; the
  cluster is started before and stopped after the run, outside the timing);
* ``example-spark-2``: TFX's taxi example (``taxi_pipeline_native_keras.py``) on the same
  2-worker cluster, its ``beam_pipeline_args`` replaced by the same runner's flags.

It prints wall seconds, per-component seconds, eval accuracy; for the Spark runs each
application's jobs, stages and tasks (from Spark's event logs) and, per component, where
the time went (``spark_events.BREAKDOWN``): Spark scheduling (the driver alone between
jobs, tasks' scheduler delay), serialisation (task deserialise, result serialise, shuffle
write and fetch), the Python workers' start and imports (with each stage's harness setup),
and the time inside Beam's harness, from the event logs joined with the runner's own
timers (``--spark_timings``); and the peak RSS of the driver's process tree and of every
process of the cluster.

Targets (issue #55, at 1M rows on 2 workers): ours on Spark <= 2x our multi-process run,
and <= 0.7x the example on the same cluster. A missed target is reported, not failed,
with the largest of those costs named.

``--stop-at HH:MM`` (UTC) bounds a long run: a configuration not started by then is
skipped and one still running then is stopped; both are listed as not finished, and what
finished is reported. A configuration that fails is reported as failed (with its log)
and the others still run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Spark's event logs and the cluster's memory: benchmarks/support/, shared with its tests.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
import scale
import spark_events as spark
import taxi_vs_tfx_example as taxi
from taxi_example.example import prepare_example
from taxi_example.measure import PeakRss, RunResult, _run_timed

# The comparisons the targets need first: a run cut short keeps the most of them in its log.
CONFIGS = ("in-process", "multi-process", "spark-2", "example-spark-2", "spark-1")
SPARK_TARGET_VS_MULTI = 2.0
SPARK_TARGET_VS_EXAMPLE = 0.7
# What the cluster's Python workers need, as `tfxp engine start` gives them.
WORKER_ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}


def run_ours(workdir: Path, name: str, data_root: Path, args: list[str], timeout: float):
    folder = workdir / name
    folder.mkdir()
    return taxi.run_ours(folder, timeout, ("--data-root", str(data_root), *args))


def runner_flags(app: str, memory: str, events: Path) -> list[str]:
    """The Spark runner's flags, the same for ours and the example: those `--beam spark`
    passes (pipeline/beam.py: warm workers, one application per run), the event log and
    the harness's timers beside it."""
    from runtime.beam_workers import WORKER_PRELOAD

    return [
        f"--spark_app_name={app}",
        f"--spark_executor_memory={memory}",
        f"--spark_preload={','.join(WORKER_PRELOAD)}",
        "--spark_keep_context",
        f"--spark_timings={timings_path(events)}",
        *spark.spark_conf(events),
    ]


def timings_path(events: Path) -> Path:
    return events.parent / f"{events.name}-timings.jsonl"


def where_time_went(result: RunResult, metadata: Path, events: Path) -> None:
    """Names each application after its component, and adds the per-component breakdown."""
    windows = spark.component_windows(metadata)
    spark.label_by_component(result.extra["spark_applications"], windows)
    timings = spark.read_timings(timings_path(events))
    result.extra["spark_components"] = spark.breakdown(events, timings, windows)


class ClusterMemory:
    """The peak RSS of every process of a cluster while a run goes: each daemon's JVM and
    what it started (a worker's executors and their Python workers)."""

    def __init__(self, cluster: Any) -> None:
        self._samplers = {d.name: (d.pid, PeakRss(d.pid)) for d in cluster.daemons}

    def stop(self) -> list[dict[str, Any]]:
        peaks = []
        for daemon, (pid, sampler) in self._samplers.items():
            seen = sampler.stop()
            for process in seen["peak_rss_mb_by_process"]:
                if process["pid"] == pid:
                    what = f"{daemon} (JVM)"
                elif process["name"] == "java":
                    what = f"{daemon}: executor (JVM)"
                else:
                    what = f"{daemon}: {process['name']}"
                peaks.append({"process": what, "pid": process["pid"], "mb": process["mb"]})
        return sorted(peaks, key=lambda p: -p["mb"])


def run_on_cluster(
    workdir: Path, name: str, workers: int, memory: str, run, timeout: float
) -> RunResult:
    """`run(master_url, events_dir)` with a fresh cluster of `workers` workers; the
    applications' figures and the cluster's memory go into the result."""
    from beam_spark import cluster

    folder = workdir / f"cluster-{name}"
    started = cluster.start(folder, workers, cores=1, memory=memory, env=WORKER_ENV)
    print(f"[{name}] cluster {started.master_url}: {workers} worker(s)", flush=True)
    memory_sampler = ClusterMemory(started)
    events = workdir / f"events-{name}"
    try:
        result = run(started.master_url, events)
    finally:
        peaks = memory_sampler.stop()
        cluster.stop(folder)
    result.extra["cluster_peak_rss_mb"] = peaks
    apps = spark.applications(events) if events.exists() else []
    result.extra["spark_applications"] = apps
    result.extra["spark_totals"] = spark.totals(apps)
    return result


def run_ours_on_spark(workdir, name, data_root, workers, memory, timeout) -> RunResult:
    def run(master: str, events: Path) -> RunResult:
        flags = runner_flags(f"ours-{name}", memory, events)
        args = ["--beam", "spark", "--spark-master", master, *(f"--beam-arg={f}" for f in flags)]
        return run_ours(workdir, name, data_root, args, timeout)

    result = run_on_cluster(workdir, name, workers, memory, run, timeout)
    if result.returncode == 0:
        metadata = workdir / name / "ours" / "metadata.sqlite"
        where_time_went(result, metadata, workdir / f"events-{name}")
    return result


def run_example_on_spark(workdir, name, files, workers, memory, timeout) -> RunResult:
    example_dir = workdir / name

    def run(master: str, events: Path) -> RunResult:
        prepare_example(example_dir, files)
        empty = example_dir / "no-requirements.txt"
        empty.write_text("")  # a dependency flag: TFX then builds no package of its own
        beam = ["--runner=beam_spark.SparkRunner", f"--spark_master={master}"]
        beam += [*runner_flags(name, memory, events), f"--requirements_file={empty}"]
        cmd = [sys.executable, str(Path(__file__).resolve()), "--_run-example", str(example_dir)]
        cmd += [f"--_beam-arg={a}" for a in beam]
        return _run_timed(name, cmd, example_dir, workdir, timeout)

    result = run_on_cluster(workdir, name, workers, memory, run, timeout)
    if result.returncode == 0:
        taxi.read_example_results(result, example_dir)
        where_time_went(result, example_dir / "metadata.db", workdir / f"events-{name}")
    return result


def run_size(
    rows: int, workdir: Path, only: list[str], memory: str, timeout: float, stop_at: float | None
) -> tuple[dict[str, RunResult], list[str]]:
    """The configurations' results, and the names of those not finished by `stop_at`."""
    data_root = workdir / "data"
    files = scale.generate_span(rows, data_root, timeout)
    results: dict[str, RunResult] = {}
    unfinished: list[str] = []
    for name in (c for c in CONFIGS if c in only):
        left = timeout if stop_at is None else min(timeout, stop_at - time.time())
        if left <= 0:
            print(f"[{name}] not started: --stop-at has passed", flush=True)
            unfinished.append(name)
            continue
        result = run_config(name, workdir, data_root, files, memory, left)
        if result.returncode != 0 and stop_at is not None and time.time() >= stop_at - 1:
            print(f"[{name}] stopped at --stop-at, not finished", flush=True)
            unfinished.append(name)
            continue
        results[name] = result
        if result.returncode != 0:
            # The others still run: a long invocation keeps what did finish.
            taxi._print_failure(result)
            print(f"[{name}] FAILED at {rows:,} rows; its logs stay in {workdir}", flush=True)
    return results, unfinished


def run_config(name, workdir, data_root, files, memory, timeout) -> RunResult:
    if name in ("in-process", "multi-process"):
        return run_ours(workdir, name, data_root, ["--beam", name], timeout)
    if name.startswith("spark-"):
        workers = int(name.split("-")[1])
        return run_ours_on_spark(workdir, name, data_root, workers, memory, timeout)
    return run_example_on_spark(workdir, name, files, 2, memory, timeout)


def summarize(
    rows: int, results: dict[str, RunResult], unfinished: list[str] | None = None
) -> dict[str, Any]:
    wall = {n: r.wall_seconds for n, r in results.items() if r.returncode == 0}
    ours = wall.get("spark-2")

    def ratio(other: str) -> float | None:
        return ours / wall[other] if ours and wall.get(other) else None

    vs_multi, vs_example = ratio("multi-process"), ratio("example-spark-2")
    return {
        "rows": rows,
        "spark2_vs_multi_process": vs_multi,
        "spark2_vs_multi_process_target": SPARK_TARGET_VS_MULTI,
        "spark2_vs_multi_process_met": None if vs_multi is None else vs_multi <= 2.0,
        "spark2_vs_example": vs_example,
        "spark2_vs_example_target": SPARK_TARGET_VS_EXAMPLE,
        "spark2_vs_example_met": None if vs_example is None else vs_example <= 0.7,
        "not_finished": list(unfinished or []),
        "failed": {n: r.stderr_log for n, r in results.items() if r.returncode != 0},
        # The largest cost of ours on 2 workers (spark_events.BREAKDOWN), for a missed target.
        "spark2_largest_cost": _largest(results.get("spark-2")),
        "results": {n: asdict(r) for n, r in results.items()},
    }


def _largest(result: RunResult | None) -> tuple[str, float] | None:
    found = spark.largest_cost((result.extra.get("spark_components") or []) if result else [])
    return (spark.BREAKDOWN[found[0]], found[1]) if found else None


def render(summary: dict[str, Any]) -> str:
    results = summary["results"]
    names = list(results)
    lines = [f"\n== {summary['rows']:,} rows =="]
    table = [("", *names)]
    table.append(("wall seconds", *(taxi._fmt(results[n]["wall_seconds"], 1) for n in names)))
    table.append(
        ("eval binary_accuracy", *(taxi._fmt(results[n]["binary_accuracy"], 4) for n in names))
    )
    table.append(
        (
            "driver tree peak RSS MB",
            *(taxi._fmt(results[n]["extra"].get("peak_rss_mb_tree"), 0) for n in names),
        )
    )
    for key, label in (("applications", "Spark applications"), ("jobs", "Spark jobs")):
        table.append((label, *(_total(results[n], key) for n in names)))
    for key in ("stages", "tasks", "task_run_seconds", "driver_only_seconds"):
        table.append((f"Spark {key.replace('_', ' ')}", *(_total(results[n], key) for n in names)))
    nodes = sorted({c["node_id"] for r in results.values() for c in r["components"]})
    seconds = {n: {c["node_id"]: c["seconds"] for c in results[n]["components"]} for n in names}
    table += [(node, *(taxi._fmt(seconds[n].get(node), 1) for n in names)) for node in nodes]
    lines += scale._table(table)
    lines += _verdict_lines(summary)
    if summary.get("not_finished"):
        lines.append(f"not finished (--stop-at): {', '.join(summary['not_finished'])}")
    for name, log in (summary.get("failed") or {}).items():
        lines.append(f"FAILED: {name} (its log: {log})")
    for name in names:
        lines += _spark_lines(name, results[name]["extra"])
        lines += _breakdown_lines(name, results[name]["extra"])
    return "\n".join(lines)


def _breakdown_lines(name: str, extra: dict[str, Any]) -> list[str]:
    rows = extra.get("spark_components")
    if not rows:
        return []
    keys = list(spark.BREAKDOWN)
    lines = [f"\n{name}: where each component's Spark time went (seconds; tasks' costs summed)"]
    table = [("component", "wall", "tasks", *keys)]
    for row in rows:
        cells = (taxi._fmt(row[k], 1) for k in keys)
        table.append((row["component"], taxi._fmt(row["wall"], 1), str(row["tasks"]), *cells))
    lines += scale._table(table)
    lines += [f"  {key}: {what}" for key, what in spark.BREAKDOWN.items()]
    return lines


def _total(result: dict[str, Any], key: str) -> str:
    totals = result["extra"].get("spark_totals")
    return "" if not totals else taxi._fmt(totals.get(key), 1 if "seconds" in key else 0)


def _verdict_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    missed = False
    for key, what in (("multi_process", "our multi-process run"), ("example", "the example")):
        value = summary[f"spark2_vs_{key}"]
        if value is not None:
            target = summary[f"spark2_vs_{key}_target"]
            met = taxi._verdict(summary[f"spark2_vs_{key}_met"])
            missed = missed or summary[f"spark2_vs_{key}_met"] is False
            lines.append(f"ours on 2 workers / {what}: {value:.3f} (target <= {target}: {met})")
    largest = summary.get("spark2_largest_cost")
    if missed and largest:
        lines.append(f"largest cost of ours on 2 workers: {largest[0]} ({largest[1]} s)")
    return lines


def _spark_lines(name: str, extra: dict[str, Any]) -> list[str]:
    apps = extra.get("spark_applications")
    if not apps:
        return []
    lines = [f"\n{name}: where the Spark applications' time went (seconds)"]
    if extra.get("spark_components"):
        # One application spans the run's components: the per-component table says more.
        apps = []
        lines = []
    table = [("component", "wall", "jobs", "stages", "tasks", "in tasks", "per-task", "transfer")]
    table[0] += ("driver alone",)
    for app in apps:
        table.append(
            (
                app.get("component", "?"),
                *(
                    taxi._fmt(app.get(k), 1)
                    for k in ("wall_seconds", "jobs", "stages", "tasks", "task_run_seconds")
                ),
                taxi._fmt(app.get("task_overhead_seconds"), 1),
                taxi._fmt(app.get("task_transfer_seconds"), 1),
                taxi._fmt(app.get("driver_only_seconds"), 1),
            )
        )
    if apps:
        lines += scale._table(table)
    peaks = [p for p in extra.get("cluster_peak_rss_mb") or [] if p["mb"] >= 10]
    if peaks:
        lines.append(
            "cluster peak RSS (MB): " + ", ".join(f"{p['process']} {p['mb']:.0f}" for p in peaks)
        )
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000])
    parser.add_argument("--only", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument(
        "--worker-memory", default="2g", help="what each worker offers, and each executor's heap"
    )
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per run")
    parser.add_argument(
        "--stop-at",
        type=_utc_time,
        help="HH:MM UTC: start no configuration after it, stop one still running then",
    )
    parser.add_argument("--workdir", type=Path, help="default: a new temp dir")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    # Internal: the subprocess that runs TFX's example with the given Beam arguments.
    parser.add_argument("--_run-example", dest="run_example", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_beam-arg", dest="beam_args", action="append", help=argparse.SUPPRESS)
    return parser


def _utc_time(text: str) -> float:
    """HH:MM UTC today (tomorrow if already past) as epoch seconds."""
    try:
        clock = dt.datetime.strptime(text, "%H:%M").time()
    except ValueError:
        raise argparse.ArgumentTypeError(f"--stop-at {text!r}: expected HH:MM (UTC)") from None
    now = dt.datetime.now(dt.UTC)
    when = dt.datetime.combine(now.date(), clock, tzinfo=dt.UTC)
    if when <= now:
        when += dt.timedelta(days=1)
    return when.timestamp()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.run_example is not None:
        return taxi._drive_example(args.run_example.resolve(), beam_args=args.beam_args or [])
    if "example-spark-2" in args.only:
        taxi.check_example()  # before minutes of runs, not after
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="tfxp-engines-"))).resolve()
    print(f"work dir: {workdir}", flush=True)
    summaries = []
    for rows in sorted(args.rows):
        size_dir = workdir / f"rows-{rows}"
        size_dir.mkdir(parents=True, exist_ok=False)
        results, unfinished = run_size(
            rows, size_dir, args.only, args.worker_memory, args.timeout, args.stop_at
        )
        summaries.append(summarize(rows, results, unfinished))
        print(render(summaries[-1]), flush=True)
    if args.json:
        print(json.dumps({"sizes": summaries}, indent=2, sort_keys=True, default=str))
    if not (args.keep or args.workdir):
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"\nwork dir kept: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
