"""Whole pipelines against TFX's examples: the taxi example, scale, the digits against MNIST."""

from __future__ import annotations

from typing import Any

from .tables import SIDE_LABELS, _components, _num, _table, _verdict


def render_taxi(result: dict) -> list[str]:
    names = ["ours", *(n for n in SIDE_LABELS if n != "ours" and n in result)]
    runs = {n: result[n] for n in names}
    counts = result.get("eval_example_counts", {})
    seen = result.get("training_examples_seen", {})
    rows = [
        [
            "wall seconds (whole process, imports included)",
            *(_num(runs[n]["wall_seconds"]) for n in names),
        ],
        ["ours / this", "", *(_num(result.get(f"wall_ratio_vs_{n}"), 3) for n in names[1:])],
        ["eval binary_accuracy", *(_num(runs[n].get("binary_accuracy"), 4) for n in names)],
        ["eval examples", *(_num(counts.get(n), 0) for n in names)],
        ["training examples seen (steps x batch)", *(_num(seen.get(n), 0) for n in names)],
        [
            "blessed / pushed",
            *(f"{_num(runs[n].get('blessed'))} / {_num(runs[n].get('pushed'))}" for n in names),
        ],
    ]
    headline = result.get("headline_anchor")
    lines = _table(["", *(SIDE_LABELS[n] for n in names)], rows)
    lines += [
        "",
        f"Ours / the faster in-process example ({SIDE_LABELS.get(headline, headline)}): "
        f"**{_num(result.get('wall_ratio'), 3)}** (target ≤ {result.get('wall_ratio_target')}: "
        f"{_verdict(result.get('wall_ratio_met'))}); accuracy at least the example's: "
        f"{_verdict(result.get('accuracy_met'))}; runs in the order {result.get('order')}.",
        "",
        *_components(runs, names),
    ]
    return lines


def render_scale(result: dict) -> list[str]:
    lines: list[str] = []
    sizes = result["sizes"]
    for size in sizes:
        runs = size["results"]
        names = ["ours", *(n for n in SIDE_LABELS if n != "ours" and n in runs)]
        rows_n = size["rows"]

        def extra(name: str, key: str, runs: dict = runs) -> Any:
            return runs[name].get("extra", {}).get(key)

        rows = [
            ["wall seconds (whole process)", *(_num(runs[n]["wall_seconds"]) for n in names)],
            ["rows/s", *(_num(round(rows_n / runs[n]["wall_seconds"]), 0) for n in names)],
            [
                "peak RSS MB, largest process",
                *(_num(extra(n, "peak_rss_mb_max_process"), 0) for n in names),
            ],
            ["peak RSS MB, process tree", *(_num(extra(n, "peak_rss_mb_tree"), 0) for n in names)],
            ["eval binary_accuracy", *(_num(runs[n].get("binary_accuracy"), 4) for n in names)],
            ["eval examples", *(_num(size["eval_example_counts"].get(n), 0) for n in names)],
        ]
        best = size["best_anchor"]
        if best is None:  # ours alone (--anchor none): one machine's limit
            lines += [
                f"**{rows_n:,} rows.** Ours alone: largest process "
                f"{_num(extra('ours', 'peak_rss_mb_max_process'), 0)} MB (target ≤ 1,536 MB: "
                f"{_verdict(size['ours_rss_met'])}).",
                "",
                *_table(["", "ours"], rows),
                "",
                *_driver_components(runs["ours"]),
                "",
                *_process_peaks(runs["ours"]),
            ]
            continue
        rows.append(["ours / this", "", *(_num(size["ratios"].get(n), 3) for n in names[1:])])
        lines += [
            f"**{rows_n:,} rows.** Ours / the example's fastest configuration here "
            f"({SIDE_LABELS.get(best, best)}): **{_num(size['ratio_vs_best'], 3)}** "
            f"(target ≤ {size.get('ratio_target', 0.4)}: {_verdict(size['ratio_met'])}); accuracy at least the example's: "
            f"{_verdict(size['accuracy_met'])}.",
            "",
            *_rounds(size),
            *_table(["", *(SIDE_LABELS[n] for n in names)], rows),
            "",
            *_components(runs, names),
            "",
        ]
    return lines[:-1] + _growth(sizes)


def _driver_components(ours: dict) -> list[str]:
    """Per component: seconds, and the run's own process's peak RSS while it ran (and the
    rise it added): the components that run in that process show their memory here."""
    driver = ours.get("extra", {}).get("peak_rss_mb_driver_by_component") or {}
    rows = [
        [
            c["node_id"],
            _num(c["seconds"]),
            f"{_num(driver[c['node_id']]['peak'], 0)} (+{_num(max(driver[c['node_id']]['rise'], 0), 0)})"
            if c["node_id"] in driver
            else "n/a",
        ]
        for c in ours.get("components", [])
        if c["seconds"] >= 0.05
    ]
    return _table(["component", "seconds", "run process peak MB (rise)"], rows)


def _process_peaks(ours: dict) -> list[str]:
    peaks = ours.get("extra", {}).get("peak_rss_mb_by_process") or []
    if not peaks:
        return []
    listed = ", ".join(f"{p['name']} {_num(p['mb'], 0)}" for p in peaks if p["mb"] >= 50)
    return [f"Peak RSS of every process (MB, 50 and up): {listed}.", ""]


def _growth(sizes: list[dict]) -> list[str]:
    """How ours' time grows from the smallest size to the largest (linear: x rows)."""
    if len(sizes) < 2:
        return []
    small, large = sizes[0], sizes[-1]
    factor = large["rows"] / small["rows"]
    times = large["results"]["ours"]["wall_seconds"] / small["results"]["ours"]["wall_seconds"]
    return [
        "",
        f"Ours from {small['rows']:,} to {large['rows']:,} rows (x{factor:g} rows): time "
        f"x{times:.2f} (target ≤ x{factor * 1.1:g}: {_verdict(times <= factor * 1.1)}).",
    ]


def _rounds(size: dict) -> list[str]:
    """Every round's ratio, when the size ran several rounds back to back."""
    rounds = size.get("rounds", [])
    if len(rounds) < 2:
        return []
    ratios = ", ".join(_num(r["ratio_vs_best"], 3) for r in rounds)
    return [
        f"{len(rounds)} rounds back to back, ours / the example: {ratios}; target met in every "
        f"round: {_verdict(size['ratio_met_every_round'])}. The table is the median round.",
        "",
    ]


def render_digits_pipeline(result: dict) -> list[str]:
    """Ours on the digits against TFX's MNIST example: every round's ratio, the median round."""
    runs = result["results"]
    names = ["ours", *(n for n in SIDE_LABELS if n != "ours" and n in runs)]
    seen = result["training_examples_seen"]

    def extra(name: str, key: str) -> Any:
        return runs[name].get("extra", {}).get(key)

    rows = [
        ["wall seconds (whole process)", *(_num(runs[n]["wall_seconds"]) for n in names)],
        [
            "peak RSS MB, largest process",
            *(_num(extra(n, "peak_rss_mb_max_process"), 0) for n in names),
        ],
        [
            "eval sparse_categorical_accuracy",
            *(_num(result["accuracies"].get(n), 4) for n in names),
        ],
        ["eval examples", *(_num(result["eval_example_counts"].get(n), 0) for n in names)],
        [
            "training examples seen (steps x batch)",
            *(
                f"{extra(n, 'train_steps')} x {extra(n, 'train_batch')} = {_num(seen.get(n), 0)}"
                if seen.get(n)
                else "n/a"
                for n in names
            ),
        ],
        ["ours / this", "", *(_num(result["ratios"].get(n), 3) for n in names[1:])],
    ]
    rounds = result["rounds"]
    ratios = ", ".join(
        f"{_num(r['ratio_vs_best'], 3)} ({SIDE_LABELS.get(r['best_anchor'], r['best_anchor'])})"
        for r in rounds
    )
    return [
        f"{len(rounds)} round(s) back to back, ours / the example's fastest configuration that "
        f"round: {ratios}; median **{_num(result['ratio_median'], 3)}**. The tables are the "
        f"median round ({result['median_round']}). Each side splits the images into train "
        "and eval by its own hashing, so the eval sets differ.",
        "",
        *_table(["", *(SIDE_LABELS[n] for n in names)], rows),
        "",
        *_components(runs, names),
    ]
