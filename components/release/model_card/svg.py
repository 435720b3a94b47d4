"""Static SVG charts for the model card: drawn at card time, no JavaScript, so the card
reads the same mailed, printed or opened offline.

Three kinds, enough for the card's pictures: lines on numeric axes (ROC, PR,
calibration, training curves), grouped bars with an optional line (a metric per
slice), and a heat map (the multiclass confusion matrix). Every text is escaped.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeGuard

WIDTH, HEIGHT = 420, 320
LEFT, RIGHT, TOP, BOTTOM = 66, 16, 34, 46
GRID = "#e5e7eb"
INK = "#1f2328"
MUTED = "#656d76"


@dataclass(frozen=True)
class Series:
    name: str
    xs: Sequence[float | None]
    ys: Sequence[float | None]
    color: str = "#1f5fbf"
    dash: bool = False
    markers: bool = False


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    step = (high - low) / (count - 1)
    return [low + i * step for i in range(count)]


def _label(value: float) -> str:
    return f"{value:.3g}"


def _frame(title: str, width: int, height: int, chart_id: str) -> list[str]:
    return [
        f'<svg class="card-chart" id="{_e(chart_id)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="system-ui,DejaVu Sans,sans-serif" font-size="11">',
        f"<title>{_e(title)}</title>",
        f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="13" fill="{INK}">'
        f"{_e(title)}</text>",
    ]


def _finite(value: float | None) -> TypeGuard[float]:
    """A number to draw (None, NaN and infinities are gaps); narrows the type for mypy."""
    return value is not None and not math.isnan(value) and not math.isinf(value)


def _x_grid(ticks: Sequence[float], px: Callable[[float], float], plot_h: float) -> list[str]:
    """A vertical grid line and a value under the plot at each tick."""
    out = []
    for t in ticks:
        out.append(
            f'<line x1="{px(t):.1f}" y1="{TOP}" x2="{px(t):.1f}" y2="{TOP + plot_h}" stroke="{GRID}"/>'
        )
        out.append(
            f'<text x="{px(t):.1f}" y="{TOP + plot_h + 14}" text-anchor="middle" fill="{MUTED}">{_label(t)}</text>'
        )
    return out


def _y_grid(ticks: Sequence[float], py: Callable[[float], float], plot_w: float) -> list[str]:
    """A horizontal grid line and a value left of the plot at each tick."""
    out = []
    for t in ticks:
        out.append(
            f'<line x1="{LEFT}" y1="{py(t):.1f}" x2="{LEFT + plot_w}" y2="{py(t):.1f}" stroke="{GRID}"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end" fill="{MUTED}">{_label(t)}</text>'
        )
    return out


def _y_label(text: str, plot_h: float) -> str:
    return (
        f'<text transform="translate(14,{TOP + plot_h / 2}) rotate(-90)" text-anchor="middle" '
        f'fill="{INK}">{_e(text)}</text>'
    )


def _line_legend(
    entries: Sequence[tuple[str, str, bool]], plot_w: float, plot_h: float
) -> list[str]:
    """(name, color, dashed) entries stacked in the plot's bottom-right corner."""
    out = []
    for i, (name, color, dashed) in enumerate(entries):
        y = TOP + plot_h - 10 - 14 * (len(entries) - 1 - i)
        x = LEFT + plot_w - 170
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(
            f'<line x1="{x}" y1="{y - 4}" x2="{x + 18}" y2="{y - 4}" stroke="{color}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{x + 22}" y="{y}" fill="{INK}">{_e(name)}</text>')
    return out


def line_chart(
    chart_id: str,
    title: str,
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    x_range: tuple[float, float] | None = None,
    y_range: tuple[float, float] | None = None,
    diagonal: str | None = None,
    note: str = "",
) -> str:
    """Lines (and markers) of each series; `diagonal`: a dotted y = x line, so named;
    `note`: a line of text in the plot's top-left corner."""
    pairs = [(x, y) for s in series for x, y in zip(s.xs, s.ys, strict=True)]
    points: list[tuple[float, float]] = [(x, y) for x, y in pairs if _finite(x) and _finite(y)]
    xs, ys = [p[0] for p in points] or [0.0, 1.0], [p[1] for p in points] or [0.0, 1.0]
    x0, x1 = x_range or (min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1)
    y0, y1 = y_range or (min(0.0, min(ys)), max(ys) * 1.05 if max(ys) > 0 else 1.0)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    out = _frame(title, WIDTH, HEIGHT, chart_id)
    out.extend(_x_grid(_ticks(x0, x1), px, plot_h))
    out.extend(_y_grid(_ticks(y0, y1), py, plot_w))
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" text-anchor="middle" fill="{INK}">{_e(x_label)}</text>'
    )
    out.append(_y_label(y_label, plot_h))
    legend = []
    if diagonal:
        lo, hi = max(x0, y0), min(x1, y1)
        out.append(
            f'<line class="diagonal" x1="{px(lo):.1f}" y1="{py(lo):.1f}" x2="{px(hi):.1f}" '
            f'y2="{py(hi):.1f}" stroke="#bbbbbb" stroke-dasharray="2,3"/>'
        )
        legend.append((diagonal, "#bbbbbb", True))
    for s in series:
        drawn: list[tuple[float, float]] = [
            (x, y) for x, y in zip(s.xs, s.ys, strict=True) if _finite(x) and _finite(y)
        ]
        if not drawn:
            continue
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in drawn)
        dash = ' stroke-dasharray="6,4"' if s.dash else ""
        out.append(
            f'<polyline class="series" data-name="{_e(s.name)}" points="{path}" fill="none" '
            f'stroke="{s.color}" stroke-width="2"{dash}/>'
        )
        if s.markers:
            out.extend(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{s.color}"/>'
                for x, y in drawn
            )
        legend.append((s.name, s.color, s.dash))
    out.extend(_line_legend(legend, plot_w, plot_h))
    if note:
        out.append(
            f'<text class="note" x="{LEFT + 4}" y="{TOP + 12}" fill="{MUTED}">{_e(note)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(
    chart_id: str,
    title: str,
    labels: Sequence[str],
    groups: Sequence[tuple[str, Sequence[float | None], Sequence[str]]],
    y_label: str,
    line: tuple[float, str] | None = None,
    width: int = 1000,
    height: int = 380,
) -> str:
    """Bars per label, one per group (name, values, a color per bar); `line`: a
    horizontal dashed line (value, name)."""
    bottom = 130
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - bottom
    values = [v for _, vs, _ in groups for v in vs if _finite(v)] + ([line[0]] if line else [])
    y0 = min(0.0, min(values, default=0.0))
    y1 = max(values, default=1.0) * 1.08 or 1.0

    def py(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    out = _frame(title, width, height, chart_id)
    out.extend(_y_grid(_ticks(y0, y1), py, plot_w))
    out.append(_y_label(y_label, plot_h))
    slot = plot_w / max(len(labels), 1)
    bar = slot * 0.8 / max(len(groups), 1)
    for i, label in enumerate(labels):
        x = LEFT + i * slot
        for g, (name, vs, colors) in enumerate(groups):
            v = vs[i]
            if not _finite(v):
                continue
            top = py(max(v, y0))
            out.append(
                f'<rect class="bar" data-group="{_e(name)}" data-label="{_e(label)}" data-value="{v}" '
                f'x="{x + slot * 0.1 + g * bar:.1f}" y="{top:.1f}" width="{bar:.1f}" '
                f'height="{py(y0) - top:.1f}" fill="{colors[i]}"><title>{_e(label)}: {_e(name)} '
                f"{v:.4f}</title></rect>"
            )
        cx, cy = x + slot / 2, TOP + plot_h + 10
        out.append(
            f'<text transform="translate({cx:.1f},{cy}) rotate(-35)" text-anchor="end" '
            f'fill="{INK}">{_e(label)}</text>'
        )
    if line is not None:
        value, name = line
        out.append(
            f'<line class="threshold" x1="{LEFT}" y1="{py(value):.1f}" x2="{LEFT + plot_w}" '
            f'y2="{py(value):.1f}" stroke="#c0392b" stroke-dasharray="6,4"/>'
        )
        out.append(
            f'<text x="{LEFT + plot_w - 4}" y="{py(value) - 4:.1f}" text-anchor="end" '
            f'fill="#c0392b">{_e(name)} {value:g}</text>'
        )
    for g, (name, _, colors) in enumerate(groups):
        x = LEFT + 10 + 120 * g
        out.append(
            f'<rect x="{x}" y="{TOP - 8}" width="10" height="10" fill="{colors[0] if colors else INK}"/>'
        )
        out.append(f'<text x="{x + 14}" y="{TOP + 1}" fill="{INK}">{_e(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def heatmap(
    chart_id: str, title: str, names: Sequence[str], matrix: Sequence[Sequence[float]]
) -> str:
    """Rows: actual class; columns: predicted class; each cell's count written in it."""
    n = max(len(names), 1)
    cell = min(36, (WIDTH - LEFT - RIGHT) / n)
    size = int(LEFT + cell * n + RIGHT + 20)
    out = _frame(title, size, int(TOP + cell * n + BOTTOM), chart_id)
    peak = max((v for row in matrix for v in row), default=1.0) or 1.0
    for r, row in enumerate(matrix):
        for c, v in enumerate(row):
            shade = int(245 - 190 * (v / peak))
            ink = "#ffffff" if v / peak > 0.6 else INK
            x, y = LEFT + c * cell, TOP + r * cell
            out.append(
                f'<rect class="cell" data-actual="{_e(names[r])}" data-predicted="{_e(names[c])}" '
                f'data-value="{v:g}" x="{x:.1f}" y="{y:.1f}" width="{cell:.1f}" height="{cell:.1f}" '
                f'fill="rgb({shade},{shade + 5 if shade < 250 else 250},255)"/>'
            )
            out.append(
                f'<text x="{x + cell / 2:.1f}" y="{y + cell / 2 + 4:.1f}" text-anchor="middle" '
                f'font-size="9" fill="{ink}">{v:g}</text>'
            )
    for i, name in enumerate(names):
        out.append(
            f'<text x="{LEFT - 4}" y="{TOP + i * cell + cell / 2 + 4:.1f}" text-anchor="end" fill="{MUTED}">{_e(name)}</text>'
        )
        out.append(
            f'<text x="{LEFT + i * cell + cell / 2:.1f}" y="{TOP + n * cell + 14:.1f}" text-anchor="middle" fill="{MUTED}">{_e(name)}</text>'
        )
    out.append(
        f'<text x="{LEFT + n * cell / 2:.1f}" y="{TOP + n * cell + 32:.1f}" text-anchor="middle" fill="{INK}">predicted class</text>'
    )
    out.append(
        f'<text transform="translate(14,{TOP + n * cell / 2:.1f}) rotate(-90)" text-anchor="middle" fill="{INK}">actual class</text>'
    )
    out.append("</svg>")
    return "\n".join(out)
