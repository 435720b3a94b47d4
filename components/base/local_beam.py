"""What a component's Beam arguments say about where its work may run.

The fast paths (components/evaluation/fast/, components/fast/stats/,
components/fast/transform/) compute in the component's own process. They apply only when Beam itself would run in this
machine's processes. Under Flink, Spark, Dataflow or a portable job service the
data may not fit on the launcher, so TFX's executors run there. StatisticsGen's
in-process pass also gives way when Beam runs several worker processes here. One
process does not beat TFDV on every core at large inputs.

Under the project's own Spark runner (beam_spark) the fast paths run their Beam forms
on the cluster instead: StatisticsGen's and the Evaluator's
(components/fast/stats/on_cluster.py, components/evaluation/fast/on_cluster.py) the
same per-batch decoding, scoring and combiners, in Spark tasks, merged in piece order;
Transform runs TFX's own analysis there (reading the ingest's files by pieces), then
its write (components/fast/transform/on_cluster.py): the transform graph over each
piece's batches in a task, a GZIP shard per piece, committed by the driver.
"""

from __future__ import annotations

from collections.abc import Sequence

LOCAL_RUNNERS = (
    "",
    "DirectRunner",
    "FnApiRunner",
    "BundleBasedDirectRunner",
    "SwitchingDirectRunner",
)
# The project's Spark runner (beam_spark), by the names Beam's --runner resolves: its
# executors import this project from the driver's checkout, so the fast paths' own
# Beam forms run in its tasks. Other remote runners' workers may not have the project.
SPARK_RUNNERS = ("beam_spark.SparkRunner", "beam_spark.runner.SparkRunner")


def _last(args: Sequence[str], flag: str) -> str:
    value = ""
    for arg in args:  # later flags win, as in Beam's own parsing
        if arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def runner_refusal(args: Sequence[str], *, single_process: bool) -> str | None:
    """Why these Beam arguments rule out computing in this process, or None."""
    runner = _last(args, "--runner")
    if runner not in LOCAL_RUNNERS:
        return f"Beam runner {runner} (not this machine's processes)"
    if single_process and _last(args, "--direct_running_mode") == "multi_processing":
        return "Beam runs several worker processes here"
    return None


def cluster_runner(args: Sequence[str]) -> bool:
    """Whether these Beam arguments run on the project's Spark runner (a fast path's Beam
    form then runs there instead of TFX's pipeline)."""
    return _last(args, "--runner") in SPARK_RUNNERS
