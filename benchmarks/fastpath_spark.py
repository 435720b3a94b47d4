"""StatisticsGen on a 2-worker Spark cluster: TFX's own Beam pipeline against the fast
path's Beam form, and the in-process fast path, same examples, one invocation.

    .venv/bin/python benchmarks/fastpath_spark.py [--rows 100000] [--workers 2]
        [--worker-memory 2g] [--json]

It generates a taxi span (``tfxp data generate taxi --rows N``) and runs the pipeline up
to StatisticsGen in-process (ExampleGen's examples: the inputs), outside the timing. It
starts a standalone cluster of `--workers` one-core workers (beam_spark/cluster.py, as
``tfxp engine start spark`` does, on loopback), also outside the timing, and then
reruns that StatisticsGen execution, each as a fresh process timed around the
executor's ``Do`` (imports excluded):

* ``tfx-spark``: TFX's StatisticsGen executor (TFDV's ``GenerateStatistics``) with
  ``tfxp run --beam spark``'s Beam arguments on the cluster;
* ``fast-spark``: the project's executor with the same arguments: the fast path's Beam
  form (components/fast/stats/on_cluster.py) in the cluster's tasks;
* ``in-process``: the project's executor without Beam arguments (the in-process pass).

It prints each one's seconds and Spark jobs/stages/tasks, the ratios, and whether the
outputs are equal: the Beam form against the in-process pass (every field, float sums to
1e-9 relative) and TFX's against the in-process pass (float sums to 1e-6, as the Spark
e2e test holds them).
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# A node's recorded inputs (evaluator_runs) and Spark's event logs (spark_events).
sys.path.insert(0, str(ROOT / "benchmarks" / "support"))

EXECUTORS = {
    "tfx-spark": "tfx.components.statistics_gen.executor.Executor",
    "fast-spark": "components.fast.stats.executor.Executor",
    "in-process": "components.fast.stats.executor.Executor",
}
ORDER = ("in-process", "fast-spark", "tfx-spark")
# What the cluster's Python workers need, as `tfxp engine start` gives them.
WORKER_ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
TIMEOUT_S = 900


def _one(name: str, metadata_path: str, out: str, beam_args: list[str]) -> None:
    """In a child process: one executor on StatisticsGen's recorded inputs; prints JSON."""
    import importlib

    from absl import logging
    from evaluator_runs import evaluator_inputs
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts

    module, cls = EXECUTORS[name].rsplit(".", 1)
    executor_class = getattr(importlib.import_module(module), cls)
    inputs, properties, _ = evaluator_inputs(
        SimpleNamespace(metadata_path=metadata_path), node="StatisticsGen"
    )
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = str(Path(out) / "statistics")
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=beam_args, tmp_dir=str(Path(out) / "tmp"), unique_id="1"
    )
    logging.set_verbosity(logging.INFO)  # which path the executor took
    started = time.perf_counter()
    executor_class(context).Do(inputs, {"statistics": [statistics]}, dict(properties))
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "uri": statistics.uri}))


def _spark_args(master: str, memory: str, events: Path, app: str) -> list[str]:
    """`tfxp run --beam spark`'s Beam arguments, plus an event log for the figures."""
    import spark_events

    from pipeline.beam import BeamOptions, beam_args

    options = BeamOptions(mode="spark", spark_master=master, spark_executor_memory=memory)
    return [*beam_args(options), f"--spark_app_name={app}", *spark_events.spark_conf(events)]


def _timed(name: str, metadata: Path, out: Path, args: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", name, "--metadata", str(metadata)]
    cmd += ["--out", str(out), *(f"--beam-arg={a}" for a in args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"[{name}] failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    paths = [line for line in done.stderr.splitlines() if "StatisticsGen: " in line]
    result["path"] = paths[-1].split("StatisticsGen: ", 1)[1] if paths else ""
    return result


def _comparable(uri: str, split: str) -> tuple[dict, list[float]]:
    import tensorflow_data_validation as tfdv
    from google.protobuf import json_format

    proto = tfdv.load_stats_binary(str(Path(uri) / f"Split-{split}" / "FeatureStats.pb"))
    as_dict = json_format.MessageToDict(proto)
    sums: list[float] = []
    for dataset in as_dict["datasets"]:
        dataset["features"].sort(key=lambda f: f["path"]["step"])
        for feature in dataset["features"]:
            numbers = feature.get("numStats", {})
            sums += [float(numbers.pop(key, 0.0)) for key in ("mean", "stdDev")]
    return as_dict, sums


def compare(ours: str, theirs: str, rel: float) -> dict[str, Any]:
    """Whether two statistics artifacts are equal: every field, float sums to `rel`."""
    largest, equal = 0.0, True
    for split in ("train", "eval"):
        a_rest, a_sums = _comparable(ours, split)
        b_rest, b_sums = _comparable(theirs, split)
        equal = equal and a_rest == b_rest and len(a_sums) == len(b_sums)
        for a, b in zip(a_sums, b_sums, strict=False):
            if a != b:
                largest = max(largest, abs(a - b) / max(abs(a), abs(b)))
            equal = equal and math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)
    return {"equal": equal, "tolerance": rel, "largest_relative_difference": largest}


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import spark_events
    from evaluator_runs import prepared_run

    from beam_spark import cluster

    metadata = prepared_run(args.rows, work, "StatisticsGen") / "metadata.sqlite"
    results: dict[str, Any] = {}
    started = cluster.start(
        work / "cluster", args.workers, cores=1, memory=args.worker_memory, env=WORKER_ENV
    )
    print(f"[cluster] {started.master_url}: {args.workers} worker(s)", flush=True)
    try:
        for name in ORDER:
            events = work / f"events-{name}"
            flags = []
            if name != "in-process":
                flags = _spark_args(started.master_url, args.worker_memory, events, name)
            result = _timed(name, metadata, work / name, flags)
            if events.exists():
                result["spark"] = spark_events.totals(spark_events.applications(events))
            spark = result.get("spark", {})
            jobs = (
                f"; Spark {spark['jobs']:.0f} jobs, {spark['stages']:.0f} stages, " if spark else ""
            )
            jobs += f"{spark['tasks']:.0f} tasks" if spark else ""
            print(f"[{name}] {result['seconds']:.1f} s: {result['path']}{jobs}", flush=True)
            results[name] = result
    finally:
        cluster.stop(work / "cluster")
    seconds = {name: round(r["seconds"], 2) for name, r in results.items()}
    return {
        "component": "StatisticsGen",
        "rows": args.rows,
        "workers": args.workers,
        "worker_memory": args.worker_memory,
        "seconds": seconds,
        "paths": {name: r["path"] for name, r in results.items()},
        "spark": {name: r["spark"] for name, r in results.items() if "spark" in r},
        "ratios": {
            "tfx_spark_over_fast_spark": round(seconds["tfx-spark"] / seconds["fast-spark"], 2),
            "fast_spark_over_in_process": round(seconds["fast-spark"] / seconds["in-process"], 2),
        },
        "equal": {
            "fast_spark_vs_in_process": compare(
                results["fast-spark"]["uri"], results["in-process"]["uri"], 1e-9
            ),
            "tfx_spark_vs_in_process": compare(
                results["tfx-spark"]["uri"], results["in-process"]["uri"], 1e-6
            ),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="2g")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", choices=sorted(EXECUTORS), help=argparse.SUPPRESS)
    parser.add_argument("--metadata", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--beam-arg", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.one, args.metadata, args.out, args.beam_arg)
        return
    # A TERM (a background job ignores INT) still stops the cluster and removes the folder.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="fastpath-spark-") as tmp:
        result = measure(args, Path(tmp))
    s, r = result["seconds"], result["ratios"]
    print(
        f"StatisticsGen, {args.rows:,} rows, {args.workers} Spark workers: TFX's pipeline "
        f"{s['tfx-spark']:.1f} s, the fast path's Beam form {s['fast-spark']:.1f} s "
        f"(TFX/fast {r['tfx_spark_over_fast_spark']:.1f}x), in-process {s['in-process']:.1f} s "
        f"(Beam form/in-process {r['fast_spark_over_in_process']:.1f}x)"
    )
    for pair, verdict in result["equal"].items():
        print(
            f"  {pair}: {'equal' if verdict['equal'] else 'NOT equal'} (float sums to "
            f"{verdict['tolerance']:g}; largest difference {verdict['largest_relative_difference']:.1e})"
        )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
