"""What a component's Beam arguments say about where its work may run.

The fast paths (components/evaluation/fast/, components/fast/stats/) compute in the
component's own process. They apply only when Beam itself would run in this
machine's processes. Under Flink, Spark, Dataflow or a portable job service the
data may not fit on the launcher, so TFX's executors run there. StatisticsGen's
in-process pass also gives way when Beam runs several worker processes here. One
process does not beat TFDV on every core at large inputs.
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
