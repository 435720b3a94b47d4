"""What a pipeline run did on a Spark cluster: its applications' jobs, stages and tasks
(from Spark's event log) and where their time went (benchmarks/engines.py's
measurements; its tests read fabricated logs).

The project's runner turns the driver's web UI off (it would bind every interface), so
the figures come from the event log each application writes when asked
(`spark_conf()`), one JSON event per line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def spark_conf(event_dir: Path) -> list[str]:
    """The runner flags that make every application write its event log to `event_dir`."""
    event_dir.mkdir(parents=True, exist_ok=True)
    return [
        "--spark_conf=spark.eventLog.enabled=true",
        f"--spark_conf=spark.eventLog.dir=file://{event_dir}",
        "--spark_conf=spark.eventLog.compress=false",
    ]


def _union_seconds(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def application(log: Path) -> dict[str, Any]:
    """One application's figures from its event log (times in seconds)."""
    app: dict[str, Any] = {"id": log.name.split(".")[0]}
    jobs: dict[int, list[float]] = {}
    stages, tasks, failed = set(), 0, 0
    run = deserialize = serialize = gc = launch_to_finish = 0.0
    for line in log.read_text(errors="replace").splitlines():
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerApplicationStart":
            app.update(name=event.get("App Name"), start=event["Timestamp"] / 1000)
        elif kind == "SparkListenerApplicationEnd":
            app["end"] = event["Timestamp"] / 1000
        elif kind == "SparkListenerJobStart":
            jobs[event["Job ID"]] = [event["Submission Time"] / 1000]
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
            jobs[event["Job ID"]].append(event["Completion Time"] / 1000)
        elif kind == "SparkListenerStageCompleted":
            stages.add(event["Stage Info"]["Stage ID"])
        elif kind == "SparkListenerTaskEnd":
            tasks += 1
            if event.get("Task End Reason", {}).get("Reason") != "Success":
                failed += 1
            info, metrics = event["Task Info"], event.get("Task Metrics") or {}
            launch_to_finish += (info["Finish Time"] - info["Launch Time"]) / 1000
            run += metrics.get("Executor Run Time", 0) / 1000
            deserialize += metrics.get("Executor Deserialize Time", 0) / 1000
            serialize += metrics.get("Result Serialization Time", 0) / 1000
            gc += metrics.get("JVM GC Time", 0) / 1000
    wall = app.get("end", app.get("start", 0)) - app.get("start", 0)
    in_jobs = _union_seconds([(j[0], j[1]) for j in jobs.values() if len(j) == 2])
    app.update(
        wall_seconds=round(wall, 2),
        jobs=len(jobs),
        stages=len(stages),
        tasks=tasks,
        failed_tasks=failed,
        # Time inside tasks: Beam's harness running the fused stages (Python), per task.
        task_run_seconds=round(run, 2),
        # Per-task costs around that: deserializing the task, serializing its result, GC.
        task_overhead_seconds=round(deserialize + serialize + gc, 2),
        # Launch to finish minus the executor's own time: sending tasks and results.
        task_transfer_seconds=round(max(launch_to_finish - run - deserialize - serialize, 0), 2),
        # Wall time with a job running, and without one (the driver alone: its SparkContext,
        # Beam's planning, collecting and broadcasting side inputs between jobs).
        job_seconds=round(in_jobs, 2),
        driver_only_seconds=round(max(wall - in_jobs, 0), 2),
    )
    return app


def applications(event_dir: Path) -> list[dict[str, Any]]:
    """Every application that logged into `event_dir`, oldest first."""
    logs = [p for p in event_dir.glob("*") if p.is_file()]
    return sorted((application(p) for p in logs), key=lambda a: a.get("start", 0))


def label_by_component(apps: list[dict[str, Any]], windows: list[tuple[str, float, float]]):
    """Names each application after the component that started last before it (one
    component's execution ends within a second of the next one's application starting)."""
    for app in apps:
        start = app.get("start", 0)
        before = [(begin, node) for node, begin, _ in windows if begin <= start + 1]
        app["component"] = max(before)[1] if before else "?"
    return apps


def component_windows(metadata_path: Path) -> list[tuple[str, float, float]]:
    """(component, start, end) in epoch seconds of every execution in a run's ML Metadata."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(metadata_path)
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    store = metadata_store.MetadataStore(config)
    node_type = store.get_context_type("node")
    windows = []
    for execution in store.get_executions():
        node = next(
            (
                c.name.split(".", 1)[-1]
                for c in store.get_contexts_by_execution(execution.id)
                if node_type is not None and c.type_id == node_type.id
            ),
            "?",
        )
        windows.append(
            (
                node,
                execution.create_time_since_epoch / 1000,
                execution.last_update_time_since_epoch / 1000,
            )
        )
    return windows


def totals(apps: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("wall_seconds", "jobs", "stages", "tasks", "failed_tasks", "task_run_seconds")
    keys += ("task_overhead_seconds", "task_transfer_seconds", "job_seconds")
    keys += ("driver_only_seconds",)
    return {k: round(sum(a.get(k, 0) for a in apps), 2) for k in keys} | {"applications": len(apps)}


# Where a pipeline run's time went, per component: the event log's tasks of the run's job
# group (the runner names one per Beam pipeline) joined with the harness's own timers
# (`--spark_timings`, one JSON line per pipeline run: beam_spark/timings.py).
BREAKDOWN = {
    "scheduling": "Spark scheduling: the driver alone between jobs + tasks' scheduler delay",
    "serialisation": "serialisation: task deserialise + result serialise + shuffle write/fetch",
    "python_start": "Python workers' start, imports and each stage's harness setup",
    "harness": "inside Beam's harness (the bundles)",
    "rest_in_tasks": "rest of the tasks' run time (PySpark's data transfer, JVM side)",
}


def _group_of_stage(event: dict[str, Any], stage_group: dict[int, str]) -> None:
    group = (event.get("Properties") or {}).get("spark.jobGroup.id")
    if group:
        for stage in event.get("Stage IDs", []):
            stage_group[stage] = group


def job_groups(log: Path) -> dict[str, dict[str, Any]]:
    """Per Spark job group of an application's event log: its jobs' intervals, tasks and
    the tasks' summed costs (seconds)."""
    groups: dict[str, dict[str, Any]] = {}
    stage_group: dict[int, str] = {}
    job_group: dict[int, str] = {}

    def group(name: str) -> dict[str, Any]:
        return groups.setdefault(
            name,
            {"jobs": {}, "tasks": 0, "run": 0.0, "deserialize": 0.0, "serialize": 0.0}
            | {"scheduler_delay": 0.0, "shuffle": 0.0},
        )

    for line in log.read_text(errors="replace").splitlines():
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            _group_of_stage(event, stage_group)
            name = (event.get("Properties") or {}).get("spark.jobGroup.id")
            if name:
                job_group[event["Job ID"]] = name
                group(name)["jobs"][event["Job ID"]] = [event["Submission Time"] / 1000]
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in job_group:
            jobs = group(job_group[event["Job ID"]])["jobs"]
            jobs[event["Job ID"]].append(event["Completion Time"] / 1000)
        elif kind == "SparkListenerTaskEnd" and event.get("Stage ID") in stage_group:
            _add_task(group(stage_group[event["Stage ID"]]), event)
    return groups


def _add_task(figures: dict[str, Any], event: dict[str, Any]) -> None:
    info, metrics = event["Task Info"], event.get("Task Metrics") or {}
    run = metrics.get("Executor Run Time", 0) / 1000
    deserialize = metrics.get("Executor Deserialize Time", 0) / 1000
    serialize = metrics.get("Result Serialization Time", 0) / 1000
    duration = (info["Finish Time"] - info["Launch Time"]) / 1000
    fetching = info.get("Getting Result Time", 0) / 1000
    read = metrics.get("Shuffle Read Metrics") or {}
    write = metrics.get("Shuffle Write Metrics") or {}
    figures["tasks"] += 1
    figures["run"] += run
    figures["deserialize"] += deserialize
    figures["serialize"] += serialize
    # As Spark's UI computes it: the task's time not spent on the executor.
    figures["scheduler_delay"] += max(duration - run - deserialize - serialize - fetching, 0)
    figures["shuffle"] += read.get("Fetch Wait Time", 0) / 1000
    figures["shuffle"] += write.get("Shuffle Write Time", 0) / 1e9


def read_timings(path: Path) -> list[dict[str, Any]]:
    """The runner's per-pipeline-run records (`--spark_timings`), oldest first."""
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(records, key=lambda r: r.get("start", 0))


def breakdown(
    event_dir: Path, timing_records: list[dict[str, Any]], windows: list[tuple[str, float, float]]
) -> list[dict[str, Any]]:
    """Per component (in the order they ran): wall seconds of its Beam pipelines and the
    BREAKDOWN categories in seconds, from the event logs and the harness's timers."""
    groups: dict[str, dict[str, Any]] = {}
    for log in (p for p in event_dir.glob("*") if p.is_file()):
        groups.update(job_groups(log))
    rows: dict[str, dict[str, Any]] = {}
    for record in label_by_component([dict(r) for r in timing_records], windows):
        spark = groups.get(record["job_group"])
        if spark is None:
            continue
        row = rows.setdefault(
            record["component"],
            {"component": record["component"], "pipelines": 0, "wall": 0.0, "tasks": 0}
            | {key: 0.0 for key in BREAKDOWN},
        )
        _add_run(row, record, spark)
    for row in rows.values():
        for key in ("wall", *BREAKDOWN):
            row[key] = round(row[key], 2)
    return list(rows.values())


def _add_run(row: dict[str, Any], record: dict[str, Any], spark: dict[str, Any]) -> None:
    wall = record["end"] - record["start"]
    intervals = [(j[0], j[1]) for j in spark["jobs"].values() if len(j) == 2]
    python = record.get("total", {})
    started = python.get("daemon_preload", 0) + python.get("worker_start", 0)
    python_start = started + python.get("setup", 0)
    harness = python.get("bundles", 0)
    row["pipelines"] += 1
    row["wall"] += wall
    row["tasks"] += spark["tasks"]
    row["scheduling"] += max(wall - _union_seconds(intervals), 0) + spark["scheduler_delay"]
    row["serialisation"] += spark["deserialize"] + spark["serialize"] + spark["shuffle"]
    row["python_start"] += python_start
    row["harness"] += harness
    row["rest_in_tasks"] += max(spark["run"] - python_start - harness, 0)


def largest_cost(rows: list[dict[str, Any]]) -> tuple[str, float] | None:
    """The BREAKDOWN category with the most seconds over every component."""
    if not rows:
        return None
    sums = {key: sum(r[key] for r in rows) for key in BREAKDOWN}
    key = max(sums, key=lambda k: sums[k])
    return key, round(sums[key], 1)
