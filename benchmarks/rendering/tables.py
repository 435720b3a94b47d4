"""Cells and Markdown tables shared by every renderer of the performance page."""

from __future__ import annotations

from typing import Any

SIDE_LABELS = {
    "ours": "ours",
    "example": "example as shipped",
    "example_inprocess": "example in-process",
    "example_fnapi": "example in-process, FnApiRunner named",
}


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and digits == 0:
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _components(results: dict[str, dict], names: list[str]) -> list[str]:
    """Per-component seconds of each side, components in pipeline order of the first side."""
    order: list[str] = []
    for name in names:
        for c in results[name].get("components", []):
            if c["node_id"] not in order:
                order.append(c["node_id"])
    seconds = {
        n: {c["node_id"]: c["seconds"] for c in results[n].get("components", [])} for n in names
    }
    rows = [
        [node, *(_num(seconds[n].get(node)) for n in names)]
        for node in order
        # resolvers and importers take no measurable time
        if max((seconds[n].get(node) or 0.0) for n in names) >= 0.05
    ]
    return _table(["component seconds", *(SIDE_LABELS.get(n, n) for n in names)], rows)


def _verdict(met: bool | None) -> str:
    return "n/a" if met is None else "met" if met else "not met"
