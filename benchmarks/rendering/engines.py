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
        lines += ["", *_components(runs, names), ""]
        for name in names:
            lines += _where(name, runs[name].get("extra", {}))
    return lines


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
    # Helpers that start processes (rm, setsid, a JVM's spawn helper) are not worth a figure.
    peaks = [p for p in extra.get("cluster_peak_rss_mb") or [] if p["mb"] >= 10]
    if peaks:
        lines += [
            "Peak RSS of the cluster's processes (MB): "
            + ", ".join(f"{p['process']} {p['mb']:.0f}" for p in peaks),
            "",
        ]
    return lines
