"""Lineage graphs: a small layered layout drawn as SVG, HTML (the SVG inline), DOT or
PNG (Pillow). No Graphviz needed.
"""

from __future__ import annotations

import html
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from metadata.store import LineageError


@dataclass
class GraphNode:
    key: str
    kind: str  # artifact, execution, file
    title: str
    lines: list[str]
    highlight: bool = False


@dataclass
class Graph:
    title: str
    nodes: dict[str, GraphNode] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)

    def add(self, key: str, kind: str, title: str, lines: Sequence[str], highlight=False) -> None:
        if key not in self.nodes:
            self.nodes[key] = GraphNode(key, kind, title, [x for x in lines if x], highlight)
        elif highlight:
            self.nodes[key].highlight = True

    def edge(self, a: str, b: str) -> None:
        if (a, b) not in self.edges:
            self.edges.append((a, b))


CHAR_W = 7.0  # px per character of the 12 px monospace font
LINE_H = 15
PAD = 8
COL_GAP = 60
ROW_GAP = 18
_FILL = {"artifact": "#e8f1fb", "execution": "#fff4dd", "file": "#eeeeee"}
_STROKE = {"artifact": "#3b73b9", "execution": "#c98a00", "file": "#777777"}


@dataclass
class Box:
    node: GraphNode
    x: float
    y: float
    w: float
    h: float


def layout(
    g: Graph, measure: Callable[[str], float] | None = None
) -> tuple[list[Box], float, float]:
    """Left-to-right layers: a node's column is the longest path to it from a source."""
    measure = measure or (lambda text: len(text) * CHAR_W)
    preds: dict[str, list[str]] = defaultdict(list)
    for a, b in g.edges:
        if a in g.nodes and b in g.nodes:
            preds[b].append(a)
    rank: dict[str, int] = {}

    def rank_of(key: str, stack: frozenset = frozenset()) -> int:
        if key not in rank:
            ps = [p for p in preds.get(key, []) if p not in stack]
            rank[key] = 1 + max((rank_of(p, stack | {key}) for p in ps), default=-1)
        return rank[key]

    for key in g.nodes:
        rank_of(key)
    columns: dict[int, list[GraphNode]] = defaultdict(list)
    for key, node in g.nodes.items():
        columns[rank[key]].append(node)
    boxes: list[Box] = []
    x: float = PAD * 2
    height = 0.0
    top = 40.0  # room for the title
    for col in sorted(columns):
        nodes = columns[col]
        width = max(measure(t) for n in nodes for t in [n.title, *n.lines]) + 2 * PAD
        y = top
        for n in nodes:
            h = LINE_H * (1 + len(n.lines)) + PAD
            boxes.append(Box(n, x, y, width, h))
            y += h + ROW_GAP
        height = max(height, y)
        x += width + COL_GAP
    return boxes, max(x - COL_GAP + PAD * 2, measure(g.title) + 4 * PAD), height + PAD


def to_svg(g: Graph) -> str:
    boxes, width, height = layout(g)
    at = {b.node.key: b for b in boxes}
    esc = html.escape
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="DejaVu Sans Mono, Menlo, '
        'Consolas, monospace" font-size="12">',
        f"<title>{esc(g.title)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
        f'<rect width="100%" height="100%" fill="white"/>'
        f'<text x="{PAD * 2}" y="24" font-size="14" font-weight="bold">{esc(g.title)}</text>',
    ]
    for a, b in g.edges:
        if a not in at or b not in at:
            continue
        s, t = at[a], at[b]
        x1, y1 = s.x + s.w, s.y + s.h / 2
        x2, y2 = t.x, t.y + t.h / 2
        mid = (x1 + x2) / 2
        out.append(
            f'<path d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" '
            'fill="none" stroke="#555" stroke-width="1.2" marker-end="url(#arrow)"/>'
        )
    for box in boxes:
        n = box.node
        stroke = "#c0392b" if n.highlight else _STROKE[n.kind]
        rx = 10 if n.kind == "execution" else 2
        out.append(
            f'<g><rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
            f'rx="{rx}" fill="{_FILL[n.kind]}" stroke="{stroke}" '
            f'stroke-width="{3 if n.highlight else 1.2}"/>'
        )
        ty = box.y + LINE_H
        out.append(
            f'<text x="{box.x + PAD:.1f}" y="{ty:.1f}" font-weight="bold">{esc(n.title)}</text>'
        )
        for line in n.lines:
            ty += LINE_H
            out.append(f'<text x="{box.x + PAD:.1f}" y="{ty:.1f}">{esc(line)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def to_html(g: Graph, details: str = "") -> str:
    esc = html.escape
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'>"
        f"<title>{esc(g.title)}</title>"
        "<style>body{font-family:sans-serif;margin:1.5em}pre{background:#f6f6f6;padding:1em;"
        "overflow:auto}.graph{overflow:auto;border:1px solid #ddd}</style></head><body>"
        f"<h1 style='font-size:1.2em'>{esc(g.title)}</h1><div class='graph'>{to_svg(g)}</div>"
        + (f"<h2 style='font-size:1em'>Details</h2><pre>{esc(details)}</pre>" if details else "")
        + "</body></html>\n"
    )


def to_dot(g: Graph) -> str:
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    out = [
        "digraph lineage {",
        "  rankdir=LR;",
        f"  label={q(g.title)}; labelloc=t;",
        '  node [fontname="monospace", fontsize=10];',
    ]
    for n in g.nodes.values():
        shape = {"artifact": "box", "execution": "box, style=rounded", "file": "note"}[n.kind]
        color = ', color="red", penwidth=3' if n.highlight else ""
        label = "\\n".join([n.title, *n.lines]).replace('"', '\\"')
        out.append(f'  {q(n.key)} [shape={shape}, label="{label}"{color}];')
    for a, b in g.edges:
        if a in g.nodes and b in g.nodes:
            out.append(f"  {q(a)} -> {q(b)};")
    out.append("}")
    return "\n".join(out) + "\n"


def to_png(g: Graph, path: str) -> None:
    from PIL import Image, ImageDraw, ImageFont

    try:
        font = ImageFont.load_default(size=12)
    except TypeError:  # Pillow < 10.1
        font = ImageFont.load_default()
    measure = font.getlength
    boxes, width, height = layout(g, measure)
    at = {b.node.key: b for b in boxes}
    img = Image.new("RGB", (int(width) + 1, int(height) + 1), "white")
    d = ImageDraw.Draw(img)
    d.text((PAD * 2, 12), g.title, fill="black", font=font)
    for a, b in g.edges:
        if a in at and b in at:
            s, t = at[a], at[b]
            x1, y1, x2, y2 = s.x + s.w, s.y + s.h / 2, t.x, t.y + t.h / 2
            d.line([(x1, y1), ((x1 + x2) / 2, y1), ((x1 + x2) / 2, y2), (x2, y2)], fill="#555")
            d.polygon([(x2, y2), (x2 - 7, y2 - 4), (x2 - 7, y2 + 4)], fill="#555")
    for box in boxes:
        n = box.node
        d.rounded_rectangle(
            [box.x, box.y, box.x + box.w, box.y + box.h],
            radius=8 if n.kind == "execution" else 2,
            fill=_FILL[n.kind],
            outline="#c0392b" if n.highlight else _STROKE[n.kind],
            width=3 if n.highlight else 1,
        )
        ty = box.y + 4
        for i, line in enumerate([n.title, *n.lines]):
            d.text((box.x + PAD, ty), line, fill="black" if i else "#000040", font=font)
            ty += LINE_H
    img.save(path, format="PNG")


GRAPH_FORMATS = (".svg", ".html", ".htm", ".dot", ".gv", ".png")


def write_graph(g: Graph, path: str, details: str = "") -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in GRAPH_FORMATS:
        raise LineageError(
            f"--graph {path}: unknown format '{ext or '(none)'}'; use .svg, .html, .dot or .png"
        )
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise LineageError(f"--graph {path}: folder {parent} does not exist")
    if ext == ".png":
        to_png(g, path)
        return path
    text = {".svg": to_svg, ".dot": to_dot, ".gv": to_dot}.get(ext)
    content = text(g) if text else to_html(g, details)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    return path
