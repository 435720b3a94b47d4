"""benchmarks/engines.py: ours in-process, multi-process and on Spark, and TFX's example on Spark."""

from __future__ import annotations

from .tables import _components, _num, _table, _verdict


def render_engines(result: dict) -> list[str]:
    lines: list[str] = []
    for size in result["sizes"]:
        runs = size["results"]
        names = list(runs)

        def totals(name: str, key: str, runs: dict = runs) -> str:
            found = runs[name].get("extra", {}).get("spark_totals")
            return "" if not found else _num(found.get(key), 1 if "seconds" in key else 0)

        rows = [
            ["wall seconds (whole process)", *(_num(runs[n]["wall_seconds"]) for n in names)],
            ["eval binary_accuracy", *(_num(runs[n].get("binary_accuracy"), 4) for n in names)],
            [
                "driver's process tree, peak RSS MB",
                *(_num(runs[n].get("extra", {}).get("peak_rss_mb_tree"), 0) for n in names),
            ],
            ["Spark applications", *(totals(n, "applications") for n in names)],
            ["Spark jobs / stages / tasks", *(_jobs(runs[n]) for n in names)],
            [
                "seconds inside tasks (Beam's harness)",
                *(totals(n, "task_run_seconds") for n in names),
            ],
            ["seconds of the driver alone", *(totals(n, "driver_only_seconds") for n in names)],
        ]
        lines += [f"**{size['rows']:,} rows**", "", *_table(["", *names], rows), ""]
        for key, what in (("multi_process", "our multi-process run"), ("example", "the example")):
            value = size.get(f"spark2_vs_{key}")
            if value is not None:
                lines.append(
                    f"- ours on 2 workers / {what}: **{_num(value, 3)}** (target ≤ "
                    f"{size[f'spark2_vs_{key}_target']}: {_verdict(size[f'spark2_vs_{key}_met'])})"
                )
        largest = size.get("spark2_largest_cost")
        missed = False in (
            size.get("spark2_vs_multi_process_met"),
            size.get("spark2_vs_example_met"),
        )
        if largest and missed:
            lines.append(
                f"- largest cost of ours on 2 workers: {largest[0]} ({_num(largest[1])} s)"
            )
        if size.get("not_finished"):
            lines.append(f"- not finished in the time given: {', '.join(size['not_finished'])}")
        for name in size.get("failed") or {}:
            lines.append(f"- **{name} failed**: its figures are not comparable")
        lines += ["", *_components(runs, names), ""]
        for name in names:
            extra = runs[name].get("extra", {})
            lines += (
                _breakdown(name, extra) if extra.get("spark_components") else _where(name, extra)
            )
    return lines


# The per-component breakdown's columns (benchmarks/support/spark_events.py BREAKDOWN).
_BREAKDOWN = (
    ("scheduling", "scheduling s"),
    ("serialisation", "serialisation s"),
    ("python_start", "Python start, imports s"),
    ("harness", "in Beam's harness s"),
    ("rest_in_tasks", "rest of tasks s"),
)


def _breakdown(name: str, extra: dict) -> list[str]:
    header = ["component", "wall s", "tasks", *(label for _, label in _BREAKDOWN)]
    rows = [
        [
            row["component"],
            _num(row["wall"]),
            _num(row["tasks"], 0),
            *(_num(row[key]) for key, _ in _BREAKDOWN),
        ]
        for row in extra["spark_components"]
    ]
    lines = [f"{name}, where each component's Spark time went:", "", *_table(header, rows), ""]
    lines += [
        "Scheduling: the driver alone between jobs plus the tasks' scheduler delay; "
        "serialisation: task deserialise, result serialise, shuffle write and fetch; "
        "Python start: the workers' start, imports and each stage's harness setup (the "
        "runner's own timers); the rest of the tasks' run time is PySpark's data transfer "
        "and the JVM. Task costs are summed over tasks, which run in parallel.",
        "",
    ]
    return lines + _peaks(extra)


def _jobs(run: dict) -> str:
    found = run.get("extra", {}).get("spark_totals")
    if not found:
        return ""
    return f"{found['jobs']:.0f} / {found['stages']:.0f} / {found['tasks']:.0f}"


def _where(name: str, extra: dict) -> list[str]:
    apps = extra.get("spark_applications")
    if not apps:
        return []
    header = ["component", "wall s", "jobs", "stages", "tasks", "in tasks s", "per-task s"]
    header += ["transfer s", "driver alone s"]
    rows = [
        [
            app.get("component", "?"),
            _num(app.get("wall_seconds")),
            _num(app.get("jobs"), 0),
            _num(app.get("stages"), 0),
            _num(app.get("tasks"), 0),
            _num(app.get("task_run_seconds")),
            _num(app.get("task_overhead_seconds")),
            _num(app.get("task_transfer_seconds")),
            _num(app.get("driver_only_seconds")),
        ]
        for app in apps
    ]
    lines = [f"{name}, where each Spark application's time went:", "", *_table(header, rows), ""]
    return lines + _peaks(extra)


def _peaks(extra: dict) -> list[str]:
    # Helpers that start processes (rm, setsid, a JVM's spawn helper) are not worth a figure.
    peaks = [p for p in extra.get("cluster_peak_rss_mb") or [] if p["mb"] >= 10]
    if not peaks:
        return []
    return [
        "Peak RSS of the cluster's processes (MB): "
        + ", ".join(f"{p['process']} {p['mb']:.0f}" for p in peaks),
        "",
    ]
