"""The harness's per-task timers summed per stage and per run, and written as JSON lines."""

from __future__ import annotations

import json

from beam_spark import timings


def _task(pid: int, daemon: int, **seconds: float) -> dict:
    return {"pid": pid, "daemon": daemon, "cold": 0, "daemon_preload": 0.0} | seconds


def test_tasks_sum_per_stage_and_each_daemon_counts_once(tmp_path):
    by_partition = {
        ("s1", 0): _task(
            11, 1, worker_start=0.5, setup=2.0, bundles=1.0, cold=1, daemon_preload=9.0
        ),
        ("s1", 1): _task(12, 1, worker_start=0.0, setup=0.0, bundles=3.0, daemon_preload=9.0),
        ("s2", 0): _task(11, 1, setup=1.0, bundles=0.5, cold=1),
        ("s2", 1): _task(21, 2, worker_start=0.25, bundles=0.5, daemon_preload=4.0),
    }
    summary = timings.summarize(by_partition)
    assert summary["stages"]["s1"] == {
        "tasks": 2,
        "cold": 1,
        "worker_start": 0.5,
        "setup": 2.0,
        "bundles": 4.0,
        "workers": 2,
    }
    assert summary["stages"]["s2"]["workers"] == 2 and summary["stages"]["s2"]["cold"] == 1
    assert summary["total"] == {
        "tasks": 4,
        "harnesses_built": 2,
        "python_workers": 3,
        "daemons": 2,
        "daemon_preload": 13.0,
        "worker_start": 0.75,
        "setup": 3.0,
        "bundles": 5.0,
    }
    path = tmp_path / "t" / "timings.jsonl"
    timings.write(str(path), {"job_group": "a", **summary})
    timings.write(str(path), {"job_group": "b", **timings.summarize({})})
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["job_group"] for line in lines] == ["a", "b"]
    assert lines[1]["total"]["tasks"] == 0 and lines[0]["total"]["bundles"] == 5.0
