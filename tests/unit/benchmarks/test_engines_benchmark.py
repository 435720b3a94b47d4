"""benchmarks/engines.py: Spark's event logs read back, and the report's ratios and verdicts."""

from __future__ import annotations

import importlib.util
import json
import sys

from spark_events import application, applications, label_by_component, totals

from pipeline.config import PROJECT_ROOT


def _event_log(path, app_id: str, start: float) -> None:
    ms = int(start * 1000)
    events = [
        {"Event": "SparkListenerApplicationStart", "App Name": "ours", "Timestamp": ms},
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": ms + 1000},
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 0}},
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 1}},
    ]
    for tid, reason in ((0, "Success"), (1, "Success"), (2, "ExecutorLostFailure")):
        events.append(
            {
                "Event": "SparkListenerTaskEnd",
                "Task End Reason": {"Reason": reason},
                "Task Info": {"Launch Time": ms + 1000, "Finish Time": ms + 3000 + tid},
                "Task Metrics": {
                    "Executor Run Time": 1500,
                    "Executor Deserialize Time": 100,
                    "Result Serialization Time": 10,
                    "JVM GC Time": 40,
                },
            }
        )
    events += [
        {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": ms + 4000},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Submission Time": ms + 3500},
        {"Event": "SparkListenerJobEnd", "Job ID": 1, "Completion Time": ms + 6000},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": ms + 10000},
    ]
    (path / app_id).write_text("\n".join(json.dumps(e) for e in events) + "\n")


def test_an_applications_jobs_stages_tasks_and_time(tmp_path):
    _event_log(tmp_path, "app-1", 100.0)
    app = application(tmp_path / "app-1")
    assert (app["jobs"], app["stages"], app["tasks"], app["failed_tasks"]) == (2, 2, 3, 1)
    assert app["wall_seconds"] == 10.0
    # Jobs overlap from 3.5 to 4 s: 1..6 s is 5 s with a job, the other 5 s the driver alone.
    assert app["job_seconds"] == 5.0 and app["driver_only_seconds"] == 5.0
    assert app["task_run_seconds"] == 4.5 and app["task_overhead_seconds"] == 0.45
    assert app["task_transfer_seconds"] == round(2.0 + 2.001 + 2.002 - 4.5 - 0.3 - 0.03, 2)


def test_applications_are_named_after_the_component_that_ran_them(tmp_path):
    _event_log(tmp_path, "app-2", 200.0)
    _event_log(tmp_path, "app-1", 100.0)
    apps = label_by_component(
        applications(tmp_path), [("StatisticsGen", 99.5, 150.0), ("Transform", 190.0, 260.0)]
    )
    assert [(a["id"], a["component"]) for a in apps] == [
        ("app-1", "StatisticsGen"),
        ("app-2", "Transform"),
    ]
    assert totals(apps)["tasks"] == 6 and totals(apps)["applications"] == 2


def _engines(script: str = "engines.py"):
    path = PROJECT_ROOT / "benchmarks" / script
    spec = importlib.util.spec_from_file_location(script.removesuffix(".py"), path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_report_gives_both_ratios_and_where_spark_time_went(tmp_path):
    engines = _engines()
    _event_log(tmp_path, "app-1", 100.0)
    apps = label_by_component(applications(tmp_path), [("Transform", 99.0, 120.0)])

    def result(name, wall, spark=False):
        r = engines.RunResult(name, wall, 0, "", "", binary_accuracy=0.8)
        r.components = [{"node_id": "Transform", "state": "COMPLETE", "seconds": wall / 2}]
        if spark:
            r.extra = {
                "spark_applications": apps,
                "spark_totals": totals(apps),
                "cluster_peak_rss_mb": [{"process": "worker-1 (JVM)", "pid": 1, "mb": 180.0}],
            }
        return r

    summary = engines.summarize(
        100_000,
        {
            "multi-process": result("multi-process", 50.0),
            "spark-2": result("spark-2", 150.0, spark=True),
            "example-spark-2": result("example-spark-2", 300.0, spark=True),
        },
    )
    assert summary["spark2_vs_multi_process"] == 3.0
    assert summary["spark2_vs_multi_process_met"] is False
    assert summary["spark2_vs_example"] == 0.5 and summary["spark2_vs_example_met"] is True
    text = engines.render(summary)
    assert "ours on 2 workers / our multi-process run: 3.000 (target <= 2.0: MISSED)" in text
    assert "ours on 2 workers / the example: 0.500 (target <= 0.7: met)" in text
    assert "spark-2: where the Spark applications' time went" in text
    assert "worker-1 (JVM) 180" in text

    # The performance page renders the recorded JSON the same way.
    page = "\n".join(
        _engines("render_results.py").render_engines(json.loads(json.dumps({"sizes": [summary]})))
    )
    assert "ours on 2 workers / the example: **0.500** (target ≤ 0.7: met)" in page
    assert "| Spark jobs / stages / tasks |  | 2 / 2 / 3 | 2 / 2 / 3 |" in page
    assert "spark-2, where each Spark application's time went:" in page


def _grouped_log(path, start: float) -> None:
    """One application, two Beam pipelines (job groups g1, g2), as a shared context logs."""
    ms = int(start * 1000)

    def job(job_id, group, stage, begin, end):
        props = {"spark.jobGroup.id": group}
        return [
            {
                "Event": "SparkListenerJobStart",
                "Job ID": job_id,
                "Submission Time": ms + begin,
                "Stage IDs": [stage],
                "Properties": props,
            },
            {
                "Event": "SparkListenerTaskEnd",
                "Stage ID": stage,
                "Task End Reason": {"Reason": "Success"},
                "Task Info": {
                    "Launch Time": ms + begin,
                    "Finish Time": ms + end,
                    "Getting Result Time": 0,
                },
                "Task Metrics": {
                    "Executor Run Time": end - begin - 300,
                    "Executor Deserialize Time": 100,
                    "Result Serialization Time": 50,
                    "Shuffle Read Metrics": {"Fetch Wait Time": 200},
                    "Shuffle Write Metrics": {"Shuffle Write Time": 10**8},
                },
            },
            {"Event": "SparkListenerJobEnd", "Job ID": job_id, "Completion Time": ms + end},
        ]

    events = [{"Event": "SparkListenerApplicationStart", "App Name": "ours", "Timestamp": ms}]
    events += job(0, "g1", 0, 1000, 5000) + job(1, "g2", 1, 12000, 14000)
    events.append({"Event": "SparkListenerApplicationEnd", "Timestamp": ms + 20000})
    (path / "app-1").write_text("\n".join(json.dumps(e) for e in events) + "\n")


def test_each_components_time_is_split_into_the_reports_categories(tmp_path):
    from spark_events import BREAKDOWN, breakdown, largest_cost

    _grouped_log(tmp_path, 100.0)
    python = {"daemon_preload": 1.0, "worker_start": 0.5, "setup": 0.5, "bundles": 1.5}
    records = [
        {"job_group": "g1", "start": 100.5, "end": 106.0, "total": python},
        {"job_group": "g2", "start": 111.0, "end": 115.0, "total": dict(python, bundles=0.5)},
        {"job_group": "elsewhere", "start": 116.0, "end": 117.0, "total": python},
    ]
    windows = [("StatisticsGen", 100.0, 107.0), ("Transform", 110.0, 116.0)]
    rows = breakdown(tmp_path, records, windows)
    assert [r["component"] for r in rows] == ["StatisticsGen", "Transform"]
    stats = rows[0]
    assert set(BREAKDOWN) <= set(stats) and stats["tasks"] == 1 and stats["pipelines"] == 1
    # Wall 5.5 s, a job 1-5 s: 1.5 s the driver alone; the task ran 3.7 of its 4 s.
    assert stats["wall"] == 5.5 and stats["scheduling"] == round(1.5 + 0.15, 2)
    assert stats["serialisation"] == round(0.1 + 0.05 + 0.2 + 0.1, 2)
    assert stats["python_start"] == 2.0 and stats["harness"] == 1.5
    assert stats["rest_in_tasks"] == round(3.7 - 2.0 - 1.5, 2)
    assert rows[1]["harness"] == 0.5 and rows[1]["rest_in_tasks"] == 0.0
    assert largest_cost(rows) == ("python_start", 4.0)


def test_a_missed_target_names_the_largest_cost():
    engines = _engines()

    def result(name, wall, rows=None):
        r = engines.RunResult(name, wall, 0, "", "", binary_accuracy=0.8)
        r.extra = {"spark_components": rows} if rows else {}
        return r

    row = {"component": "Transform", "wall": 90.0, "tasks": 10, "pipelines": 1}
    row |= {"scheduling": 5.0, "serialisation": 1.0, "python_start": 60.0, "harness": 20.0}
    row |= {"rest_in_tasks": 4.0}
    failed = result("example-spark-2", 10.0)
    failed.returncode, failed.stderr_log = 1, "/w/example-spark-2.stderr.log"
    summary = engines.summarize(
        1_000_000,
        {
            "multi-process": result("multi-process", 40.0),
            "spark-2": result("spark-2", 100.0, [row]),
            "example-spark-2": failed,
        },
        ["spark-1"],
    )
    # A failed run's wall time is no figure to compare with.
    assert summary["spark2_vs_example"] is None
    assert summary["failed"] == {"example-spark-2": "/w/example-spark-2.stderr.log"}
    text = engines.render(summary)
    assert "target <= 2.0: MISSED" in text
    assert "largest cost of ours on 2 workers: Python workers' start, imports" in text
    assert "not finished (--stop-at): spark-1" in text
    assert "FAILED: example-spark-2 (its log: /w/example-spark-2.stderr.log)" in text
    assert "spark-2: where each component's Spark time went" in text
    page = "\n".join(
        _engines("render_results.py").render_engines(json.loads(json.dumps({"sizes": [summary]})))
    )
    assert "- largest cost of ours on 2 workers: Python workers' start" in page
    assert "- not finished in the time given: spark-1" in page
    assert "- **example-spark-2 failed**" in page
    assert "| Transform | 90.0 | 10 | 5.0 | 1.0 | 60.0 | 20.0 | 4.0 |" in page
