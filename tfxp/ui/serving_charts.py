"""The Serving page's charts over time: requests/s, p50/p99 latency and error rate per
model version, hot swaps as vertical lines, and the numbers behind them (JSON, CSV).

Two sources, said on every point (its trace's name and the page's legend): the
server's metrics sampled while the console runs (tfxp/monitor/sampler.py), and,
for the time before the first sample, the request log's records
(tfxp/monitor/traffic.py `logged_history`: requests only, no latency or errors).
"""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
from dataclasses import asdict, dataclass, field
from typing import Any

from tfxp.monitor.sampler import Sampler
from tfxp.monitor.serving_series import (
    LOGGED,
    SAMPLED,
    Point,
    Swap,
    sampled_points,
    sampled_swaps,
)

CHARTS = (
    # id, title, y-axis, (value, name suffix, dash), sources drawn
    ("requests", "Requests per second", "requests/s", (("rate", "", "solid"),), (SAMPLED, LOGGED)),
    (
        "latency",
        "Latency (p50 solid, p99 dashed)",
        "seconds",
        (("p50", " p50", "solid"), ("p99", " p99", "dash")),
        (SAMPLED,),
    ),
    ("errors", "Error rate", "share of requests", (("error_rate", "", "solid"),), (SAMPLED,)),
)
CSV_COLUMNS = (
    "model",
    "version",
    "source",
    "start",
    "end",
    "requests",
    "rate",
    "p50",
    "p99",
    "error_rate",
)
MARKERS = {SAMPLED: "circle", LOGGED: "square-open"}


@dataclass
class ModelSeries:
    model: str
    points: list[Point] = field(default_factory=list)
    swaps: list[Swap] = field(default_factory=list)


def collect(sampler: Sampler | None, log_folders: list[str]) -> dict[str, ModelSeries]:
    """Each model's points and swaps: the sampler's, and the request log's before the
    first sample (all of it without a sampler)."""
    from tfxp.monitor.traffic import logged_history

    out: dict[str, ModelSeries] = {}
    until = None
    if sampler is not None:
        samples = sampler.samples()
        until = samples[0].at if samples else None
        for p in sampled_points(samples):
            out.setdefault(p.model, ModelSeries(p.model)).points.append(p)
        for s in sampled_swaps(samples):
            out.setdefault(s.model, ModelSeries(s.model)).swaps.append(s)
    for folder in dict.fromkeys(log_folders):  # two pipelines may read one data root
        points, swaps = logged_history(folder, until=until)
        for p in points:
            out.setdefault(p.model, ModelSeries(p.model)).points.append(p)
        for s in swaps:
            out.setdefault(s.model, ModelSeries(s.model)).swaps.append(s)
    for series in out.values():
        series.points.sort(key=lambda p: (p.at, p.version))
        series.swaps.sort(key=lambda s: s.at)
    return dict(sorted(out.items()))


def iso(at: float) -> str:
    return dt.datetime.fromtimestamp(at, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _version_key(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (0, version)


def swap_groups(series: ModelSeries) -> list[tuple[float, list[str]]]:
    """The swaps at each distinct time, in order: what one vertical line stands for."""
    groups: dict[float, list[str]] = {}
    for s in series.swaps:
        groups.setdefault(s.at, []).append(s.what)
    return sorted(groups.items())


def figures(series: ModelSeries) -> list[dict[str, Any]]:
    """The three charts of one model, as plotly figures (data, layout)."""
    versions = sorted({p.version for p in series.points}, key=_version_key)
    groups = swap_groups(series)
    shapes = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": iso(at),
            "x1": iso(at),
            "y0": 0,
            "y1": 1,
            "line": {"color": "#b03a2e", "width": 1, "dash": "dot"},
        }
        for at, _ in groups
    ]
    # Each swap line numbered above the plot; what changed is in its hover text and
    # in the list under the charts (a version number can be 10 digits long).
    notes = [
        {
            "x": iso(at),
            "y": 1,
            "xref": "x",
            "yref": "paper",
            "text": str(i),
            # Plotly reads a few tags in text: a label or model name from logged data
            # is escaped, so it shows as written.
            "hovertext": "<br>".join(html.escape(w) for w in whats),
            "showarrow": False,
            "xanchor": "center",
            "yanchor": "bottom",
            "font": {"size": 11, "color": "#b03a2e"},
        }
        for i, (at, whats) in enumerate(groups, 1)
    ]
    out = []
    for chart_id, title, y_title, values, sources in CHARTS:
        data = []
        for version in versions:
            for source in sources:
                shown = [p for p in series.points if p.version == version and p.source == source]
                for value, suffix, dash in values:
                    kept = [p for p in shown if getattr(p, value) is not None]
                    if not kept:
                        continue
                    data.append(
                        {
                            "type": "scatter",
                            "mode": "lines+markers",
                            "name": html.escape(f"version {version}{suffix} ({source})"),
                            "x": [iso(p.at) for p in kept],
                            "y": [getattr(p, value) for p in kept],
                            # The requests each point stands for: what the test adds up.
                            "customdata": [p.requests for p in kept],
                            "line": {"dash": dash},
                            "marker": {"symbol": MARKERS[source], "size": 6},
                            "meta": {"version": version, "source": source, "value": value},
                        }
                    )
        layout = {
            "title": {"text": html.escape(f"{series.model}: {title}"), "font": {"size": 14}},
            "xaxis": {"type": "date"},  # UTC, as the page says
            "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
            "margin": {"l": 56, "r": 12, "t": 48, "b": 40},
            "legend": {"orientation": "h", "y": -0.2},
            "shapes": shapes,
            "annotations": notes,
        }
        out.append(
            {"id": f"{series.model}-{chart_id}", "kind": chart_id, "data": data, "layout": layout}
        )
    return out


def as_json(all_series: dict[str, ModelSeries], sampler: Sampler | None) -> dict[str, Any]:
    return {
        "sampler": None
        if sampler is None
        else {
            "url": sampler.url,
            "interval_seconds": sampler.interval,
            "keep": sampler.keep,
            "started_at": iso(sampler.started_at) if sampler.started_at else None,
            "last_error": sampler.last_error,
        },
        "models": {
            model: {
                "points": [{**asdict(p), "at": iso(p.at), "start": iso(p.start)} for p in s.points],
                "swaps": [{**asdict(w), "at": iso(w.at)} for w in s.swaps],
            }
            for model, s in all_series.items()
        },
    }


def as_csv(all_series: dict[str, ModelSeries]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for s in all_series.values():
        for p in s.points:
            writer.writerow(
                [
                    p.model,
                    p.version,
                    p.source,
                    iso(p.start),
                    iso(p.at),
                    p.requests,
                    p.rate,
                    "" if p.p50 is None else p.p50,
                    "" if p.p99 is None else p.p99,
                    "" if p.error_rate is None else p.error_rate,
                ]
            )
    return out.getvalue()
