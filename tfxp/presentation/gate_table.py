"""The validation gate's findings as a table: one model, two renderings.

`findings_table` is what the console's run page draws (tfxp/ui/templates/run.html)
and `render_text` what `tfxp run` prints when the gate blocks: the baseline and
the compared data (a span, or a serving-log window with its files, count and time
range) named once above the rows, not inside every finding. The rows themselves
come from components/validation/findings.py (`table_row`).
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Sequence
from typing import Any

from components.validation.findings import (
    TABLE_COLUMNS,
    GateResult,
    compared_data,
    table_row,
)

ELLIPSIS = "…"
# The terminal's columns shown after the console's: TFDV's description of each
# finding, which takes whatever width the others leave.
DETAIL = "detail"
# A cut column keeps at least this many characters (its ellipsis included).
MIN_CELL = 6
# The detail is shown only when this much of it fits beside the other columns.
MIN_DETAIL = 24
GAP = "  "
INDENT = "  "


def findings_table(result: GateResult) -> dict[str, Any] | None:
    """The table's model (None without findings): spans, serving rows, the
    compared data each named once, and a row per finding."""
    if not result.findings:
        return None
    return {
        "compared": compared_data(result.findings),
        "current_span": result.current_span,
        "baseline_span": result.baseline_span,
        "serving_rows": result.serving_rows,
        "rows": [table_row(f) for f in result.findings],
    }


def read_result(path: str | None) -> GateResult | None:
    """The gate's result from its findings JSON; None when absent or unreadable
    (a run whose gate never wrote one, or a file of another version)."""
    if not path or "://" in path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return GateResult.from_dict(json.load(f))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis marking a cut."""
    if len(text) <= width:
        return text
    if width <= len(ELLIPSIS):
        return ELLIPSIS[:width]
    return text[: width - len(ELLIPSIS)] + ELLIPSIS


def fit_widths(natural: Sequence[int], width: int, last_first: bool = True) -> list[int]:
    """Column widths whose sum (with the gaps) fits `width`: the last column (the
    detail) gives way first when `last_first`, then the widest; none below MIN_CELL
    (or its natural width if smaller)."""
    widths = list(natural)
    room = width - len(INDENT) - len(GAP) * (len(widths) - 1)
    if last_first:
        last = len(widths) - 1
        widths[last] = max(min(widths[last], MIN_CELL), room - sum(widths[:last]))
        widths[last] = min(widths[last], natural[last])
    while sum(widths) > room:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= MIN_CELL:
            break  # every column at its floor: the line stays too long, not unreadable
        widths[widest] -= 1
    return widths


def _aligned(rows: Sequence[Sequence[str]], width: int) -> list[str]:
    natural = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    widths = fit_widths(natural, width, last_first=rows[0][-1] == DETAIL)
    return [
        (INDENT + GAP.join(cut(c, w).ljust(w) for c, w in zip(r, widths, strict=True))).rstrip()
        for r in rows
    ]


def _detail_room(rows: Sequence[Sequence[str]], width: int) -> int:
    """What the detail (last) column would get beside the others at their natural width."""
    others = sum(max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1))
    return width - len(INDENT) - len(GAP) * (len(rows[0]) - 1) - others


def _header(table: dict[str, Any], width: int) -> list[str]:
    current, baseline = table["current_span"], table["baseline_span"]
    data = f"span {current if current is not None else '?'}"
    data += f" against baseline span {baseline}" if baseline is not None else " (no baseline span)"
    if table["serving_rows"]:
        data += f"; {table['serving_rows']} serving rows"
    lines = [f"{INDENT}data: {data}"]
    # The compared data is named once, in full: wrapped, not cut (a serving-log
    # window's files, count and time range are what the reader needs to find it).
    label = f"{INDENT}compared: "
    for i, where in enumerate(table["compared"]):
        lead = label if i == 0 else " " * len(label)
        lines += textwrap.wrap(
            where,
            width=max(width, len(label) + 20),
            initial_indent=lead,
            subsequent_indent=" " * (len(label) + 2),
            break_long_words=False,
            break_on_hyphens=False,
        )
    return lines


def render_text(result: GateResult, width: int) -> str:
    """The gate's verdict for a terminal `width` columns wide: the head line, the
    compared data once, the findings as aligned rows, then the notes and advice."""
    lines = [result.headline()]
    table = findings_table(result)
    if table is not None:
        lines += _header(table, width)
        # One line per finding: TFDV's descriptions may hold newlines.
        cells = [
            [
                " ".join((r["description"] if c == DETAIL else r[c]).split())
                for c in (*TABLE_COLUMNS, DETAIL)
            ]
            for r in table["rows"]
        ]
        rows = [[*TABLE_COLUMNS, DETAIL], *cells]
        if _detail_room(rows, width) < MIN_DETAIL:
            rows = [r[:-1] for r in rows]  # a few letters of it would say nothing
        lines += _aligned(rows, width)
    for line in result.footer():
        lines += textwrap.wrap(
            line, width=max(width, 40), initial_indent=INDENT, subsequent_indent=INDENT * 2
        )
    return "\n".join(lines)
