"""benchmarks/fastpath_spark.py: a component's fast path as a Beam pipeline on Spark,
against TFX's own pipeline on the same cluster and the in-process fast path."""

from __future__ import annotations

from .tables import _num, _table

LABELS = {
    "tfx-spark": "TFX's pipeline on Spark",
    "fast-spark": "fast path's Beam form on Spark",
    "in-process": "fast path in-process",
}
PAIRS = {
    "fast_spark_vs_in_process": "the Beam form on Spark against in-process",
    "tfx_spark_vs_in_process": "TFX's pipeline on Spark against in-process",
}


def render_fastpath_spark(result: dict) -> list[str]:
    names = [n for n in LABELS if n in result["seconds"]]
    spark = result.get("spark", {})

    def jobs(name: str) -> str:
        found = spark.get(name)
        if not found:
            return ""
        return f"{found['jobs']:.0f} / {found['stages']:.0f} / {found['tasks']:.0f}"

    rows = [
        ["seconds (the executor's Do)", *(_num(result["seconds"][n]) for n in names)],
        ["Spark jobs / stages / tasks", *(jobs(n) for n in names)],
        [
            "seconds inside tasks",
            *(_num(spark.get(n, {}).get("task_run_seconds")) if n in spark else "" for n in names),
        ],
    ]
    ratios = result["ratios"]
    lines = [
        f"**{result['component']}, {result['rows']:,} rows, {result['workers']} workers**",
        "",
        *_table(["", *(LABELS[n] for n in names)], rows),
        "",
        f"- TFX's pipeline / the fast path's Beam form, both on Spark: "
        f"**{_num(ratios['tfx_spark_over_fast_spark'], 2)}**",
        f"- the Beam form on Spark / in-process: **{_num(ratios['fast_spark_over_in_process'], 2)}**",
    ]
    for pair, verdict in result["equal"].items():
        lines.append(
            f"- {PAIRS.get(pair, pair)}: {'equal' if verdict['equal'] else '**not equal**'} "
            f"(every field; float sums to {verdict['tolerance']:g}, largest relative "
            f"difference {verdict['largest_relative_difference']:.1e})"
        )
    return lines
