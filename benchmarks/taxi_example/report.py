"""Ours against the example's configurations: the ratios, the checks, the printed table."""

from __future__ import annotations

from typing import Any

from .example import ANCHORS, IN_PROCESS_ANCHORS
from .measure import RunResult

WALL_RATIO_TARGET = 0.40
ANCHOR_LABELS = {
    "example": "example as shipped",
    "example_inprocess": "example in-process",
    "example_fnapi": "example in-process, FnApiRunner",
}


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "MISSED")


def _fmt(value: float | bool | None, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.{digits}f}"


def _eval_count(result: RunResult) -> int | None:
    count = (result.extra.get("metrics") or {}).get("example_count")
    return int(count) if isinstance(count, int | float) else None


def _examples_seen(result: RunResult) -> int | None:
    steps, batch = result.extra.get("train_steps"), result.extra.get("train_batch")
    return steps * batch if steps and batch else None


def compare(ours: RunResult, anchors: dict[str, RunResult]) -> dict[str, Any]:
    """Ratios against each anchor (the faster in-process example is the headline), and the checks."""
    verdict: dict[str, Any] = {"wall_ratio_target": WALL_RATIO_TARGET}
    for name, anchor in anchors.items():
        ratio = ours.wall_seconds / anchor.wall_seconds if anchor.wall_seconds else None
        verdict[f"wall_ratio_vs_{name}"] = ratio
    in_process = [n for n in IN_PROCESS_ANCHORS if anchors.get(n) and anchors[n].wall_seconds]
    best = min(in_process, key=lambda n: anchors[n].wall_seconds) if in_process else None
    headline = verdict[f"wall_ratio_vs_{best}"] if best else None
    verdict["headline_anchor"] = best
    verdict["wall_ratio"] = headline
    verdict["wall_ratio_met"] = None if headline is None else headline <= WALL_RATIO_TARGET
    accuracies = [a.binary_accuracy for a in anchors.values() if a.binary_accuracy is not None]
    verdict["accuracy_met"] = (
        ours.binary_accuracy >= max(accuracies)
        if ours.binary_accuracy is not None and accuracies
        else None
    )
    counts = {name: _eval_count(r) for name, r in {"ours": ours, **anchors}.items()}
    verdict["eval_example_counts"] = counts
    verdict["eval_counts_equal"] = (
        len(set(counts.values())) == 1 if None not in counts.values() else None
    )
    verdict["training_examples_seen"] = {
        name: _examples_seen(r) for name, r in {"ours": ours, **anchors}.items()
    }
    return verdict


def render(
    ours: RunResult, anchors: dict[str, RunResult], verdict: dict[str, Any], order: str
) -> str:
    names = [n for n in ANCHORS if n in anchors]
    runs = [ours, *(anchors[n] for n in names)]
    counts = verdict["eval_example_counts"]

    def steps_x_batch(r: RunResult) -> str:
        n = _examples_seen(r)
        return (
            "n/a" if n is None else f"{r.extra['train_steps']} x {r.extra['train_batch']} = {n:,}"
        )

    def ratio(name: str) -> str:
        cell = _fmt(verdict[f"wall_ratio_vs_{name}"], 3)
        return cell + " (headline)" if name == verdict.get("headline_anchor") else cell

    rows = [
        ("", "ours", *(ANCHOR_LABELS[n] for n in names), "target", ""),
        ("wall seconds (whole process)", *(_fmt(r.wall_seconds, 1) for r in runs), "", ""),
        (
            "wall ratio ours / anchor",
            "",
            *(ratio(n) for n in names),
            f"<= {WALL_RATIO_TARGET:.2f} (faster in-process)",
            _verdict(verdict["wall_ratio_met"]),
        ),
        (
            "eval binary_accuracy",
            *(_fmt(r.binary_accuracy) for r in runs),
            "ours >= examples",
            _verdict(verdict["accuracy_met"]),
        ),
        (
            "eval examples (Evaluator)",
            *(str(counts[n]) if counts[n] is not None else "n/a" for n in ("ours", *names)),
            "equal",
            _verdict(verdict["eval_counts_equal"]),
        ),
        ("training examples seen", *(steps_x_batch(r) for r in runs), "", ""),
        (
            "peak RSS MB (largest process)",
            *(_fmt(r.extra.get("peak_rss_mb_max_process"), 0) for r in runs),
            "",
            "",
        ),
        ("blessed", *(_fmt(r.blessed) for r in runs), "", ""),
        ("pushed", *(_fmt(r.pushed) for r in runs), "", ""),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"\nResults (order: {order}; wall clock of whole subprocesses, imports included)"]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    if verdict["eval_counts_equal"] is False:
        lines.append("WARNING: the eval sets differ in size: accuracy is not like for like")
    for result in runs:
        lines.append(f"\nper-component seconds, {result.name} (from its ML Metadata):")
        width = max((len(c["node_id"]) for c in result.components), default=10)
        for c in result.components:
            lines.append(f"  {c['node_id']:<{width}}  {c['state'].lower():<9} {c['seconds']:6.1f}s")
        if result.name == "ours" and result.extra.get("pipeline_wall_seconds") is not None:
            in_process = result.extra["pipeline_wall_seconds"]
            lines.append(f"  (LocalDagRunner run inside the process: {in_process:.1f}s)")
    return "\n".join(lines)
