"""Where a run's Python time went on the executors: the tasks' `harness.TaskTimes`, summed.

Spark's event log sees a Python task as one "executor run time". The harness's timers
split it: the Python workers' start (fork to first task), building each stage's harness
(unpickling its DoFns imports their libraries; their `setup` runs) and the bundles inside
Beam's harness. `--spark_timings=PATH` appends one JSON line per pipeline run, which
benchmarks/engines.py joins with the event log's job group of the same run.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

# Summed per stage and per run; the counts are tasks, harnesses built and Python workers.
SECONDS = ("worker_start", "setup", "bundles")


def summarize(by_partition: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    """Per stage and in total: tasks, harnesses built, distinct Python workers, seconds;
    and the daemons' (one per executor) preload seconds, each counted once."""
    stages: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"tasks": 0, "cold": 0, **{k: 0.0 for k in SECONDS}}
    )
    workers: dict[str, set[int]] = defaultdict(set)
    daemons: dict[int, float] = {}
    for (stage, _), times in sorted(by_partition.items()):
        row = stages[stage]
        row["tasks"] += 1
        row["cold"] += times.get("cold", 0)
        for key in SECONDS:
            row[key] += times.get(key, 0.0)
        workers[stage].add(times.get("pid", 0))
        daemon = times.get("daemon", 0)
        daemons[daemon] = max(daemons.get(daemon, 0.0), times.get("daemon_preload", 0.0))
    for stage, row in stages.items():
        row["workers"] = len(workers[stage])
        for key in SECONDS:
            row[key] = round(row[key], 3)
    total: dict[str, Any] = {
        "tasks": sum(r["tasks"] for r in stages.values()),
        "harnesses_built": sum(r["cold"] for r in stages.values()),
        "python_workers": len(set().union(*workers.values())) if workers else 0,
        "daemons": len(daemons),
        "daemon_preload": round(sum(daemons.values()), 3),
        **{key: round(sum(r[key] for r in stages.values()), 3) for key in SECONDS},
    }
    return {"total": total, "stages": dict(stages)}


def write(path: str, record: dict[str, Any]) -> None:
    """Append one run's record as a JSON line (several processes may share the file: one
    short write each)."""
    line = json.dumps({"written": time.time(), **record}, sort_keys=True) + "\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(line)
