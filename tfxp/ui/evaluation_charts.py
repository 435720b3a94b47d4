"""The evaluation page's charts as plotly figures (JSON data, drawn by static/charts.js).

From the Evaluator's `plots.json` (components/evaluation/pictures.py) and `slices.json`
(components/evaluation/slicing): ROC and precision-recall with each model's area in the
legend, calibration against the diagonal, the multiclass confusion matrix as a heat
map, a regression model's predicted against actual (with the diagonal) and its
residual histogram, and the slice chart (each slice's blessing metric with its example count, the
rule's floor or ceiling as a line, failing slices in red). Candidate and baseline are
overlaid wherever both were evaluated. Each chart names the file its numbers are in
(`data`), which the page links.
"""

from __future__ import annotations

from typing import Any

from components.evaluation.pictures import PICTURES_FILE
from components.evaluation.slicing.evaluator import SLICES_FILE

OVERALL = "overall"
# Candidate in the console's blue, baseline grey and dashed: "ours" against "before".
STYLE = {
    "candidate": {"color": "#1f5fbf"},
    "": {"color": "#1f5fbf"},
    "baseline": {"color": "#888888", "dash": "dash"},
}
DIAGONAL = {"color": "#bbbbbb", "dash": "dot", "width": 1}


def _label(model: str) -> str:
    return model or "model"


def _layout(title: str, x: str, y: str, **extra: Any) -> dict[str, Any]:
    layout = {
        "title": {"text": title, "font": {"size": 14}},
        # The console's .chart box (static/console.css): 520 x 300.
        "height": 300,
        "width": 520,
        "margin": {"l": 56, "r": 12, "t": 36, "b": 44},
        "xaxis": {"title": {"text": x}, "range": [0, 1]},
        "yaxis": {"title": {"text": y}, "range": [0, 1.02]},
        "legend": {"x": 0.98, "xanchor": "right", "y": 0.04, "yanchor": "bottom"},
    }
    layout.update(extra)
    return layout


def _diagonal(name: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "x": [0, 1],
        "y": [0, 1],
        "name": name,
        "line": DIAGONAL,
    }


def _area(value: float | None) -> str:
    return "" if value is None else f" (AUC {value:.3f})"


def _curve_traces(models: dict[str, dict[str, Any]], kind: str, x: str, y: str) -> list[dict]:
    """One line per model that has the `kind` curve (roc, pr), its area in the legend."""
    traces = []
    for model, plots in models.items():
        curve = plots.get(kind)
        if curve:
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": _label(model) + _area(curve.get("auc")),
                    "x": curve[x],
                    "y": curve[y],
                    "text": [f"threshold {t:.2f}" for t in curve["threshold"]],
                    "line": STYLE.get(model, {}),
                }
            )
    return traces


def _bucket_traces(models: dict[str, dict[str, Any]], kind: str, y: str) -> list[dict]:
    """One line per model with the `kind` buckets (calibration, predicted_actual): the
    mean prediction of each bucket against its `y`, the bucket's count on hover."""
    traces = []
    for model, plots in models.items():
        found = plots.get(kind)
        if found:
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": _label(model),
                    "x": found["predicted"],
                    "y": found[y],
                    "text": [f"{int(n)} examples" for n in found["count"]],
                    "line": STYLE.get(model, {}),
                }
            )
    return traces


def curve_charts(models: dict[str, dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """ROC, PR and calibration of one slice, every model overlaid."""
    charts = []
    if any("roc" in p for p in models.values()):
        data = [_diagonal("chance")]
        data += _curve_traces(models, "roc", "fpr", "tpr")
        charts.append(
            _chart("roc", f"ROC · {where}", data, "false positive rate", "true positive rate")
        )
        data = _curve_traces(models, "pr", "recall", "precision")
        charts.append(_chart("pr", f"Precision-recall · {where}", data, "recall", "precision"))
    if any("calibration" in p for p in models.values()):
        data = [_diagonal("perfectly calibrated")]
        data += _bucket_traces(models, "calibration", "observed")
        charts.append(
            _chart(
                "calibration", f"Calibration · {where}", data, "mean prediction", "observed rate"
            )
        )
    charts += regression_charts(models, where)
    for model, plots in models.items():
        confusion = plots.get("confusion")
        if confusion and confusion["classes"]:
            names = [("none" if c == -1 else str(c)) for c in confusion["classes"]]
            data = [
                {
                    "type": "heatmap",
                    "z": confusion["matrix"],
                    "x": names,
                    "y": names,
                    "colorscale": "Blues",
                    "hovertemplate": "actual %{y}, predicted %{x}: %{z}<extra></extra>",
                }
            ]
            layout = _layout(
                f"Confusion matrix · {_label(model)} · {where}",
                "predicted class",
                "actual class",
                xaxis={"title": {"text": "predicted class"}, "type": "category"},
                yaxis={
                    "title": {"text": "actual class"},
                    "type": "category",
                    "autorange": "reversed",
                },
            )
            charts.append(
                {
                    "id": f"confusion-{_label(model)}",
                    "data": data,
                    "layout": layout,
                    "file": PICTURES_FILE,
                }
            )
    return charts


def _span(models: dict[str, dict[str, Any]]) -> list[float]:
    """The smallest and largest mean predicted or actual value of any model: the
    predicted-against-actual chart's axes, so its diagonal is y = x."""
    values = [
        v
        for plots in models.values()
        for key in ("predicted", "actual")
        for v in (plots.get("predicted_actual") or {}).get(key, [])
        if v is not None
    ]
    return [min(values), max(values)] if values else [0.0, 1.0]


def regression_charts(models: dict[str, dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """A regression model's predicted against actual (mean label per bucket of the
    prediction, the diagonal y = x) and its residual histogram, every model overlaid."""
    charts = []
    if any("predicted_actual" in p for p in models.values()):
        low, high = _span(models)
        data = [{**_diagonal("predicted = actual"), "x": [low, high], "y": [low, high]}]
        data += _bucket_traces(models, "predicted_actual", "actual")
        layout = _layout(
            f"Predicted vs actual · {where}",
            "mean prediction (bucket)",
            "mean actual label",
            xaxis={"title": {"text": "mean prediction (bucket)"}, "autorange": True},
            yaxis={"title": {"text": "mean actual label"}, "autorange": True},
        )
        charts.append(
            {"id": "predicted-actual", "data": data, "layout": layout, "file": PICTURES_FILE}
        )
    if any("residuals" in p for p in models.values()):
        charts.append(_residual_chart(models, where))
    return charts


def _residual_chart(models: dict[str, dict[str, Any]], where: str) -> dict[str, Any]:
    """Each model's residual bins as overlaid bars; what fell beyond the bins (in
    plots.json as `below`/`above`, no width to draw) is written in the plot's corner."""
    data = []
    for model, plots in models.items():
        found = plots.get("residuals")
        if found:
            edges = list(zip(found["lower"], found["upper"], strict=True))
            data.append(
                {
                    "type": "bar",
                    "name": _label(model),
                    "x": [(a + b) / 2 for a, b in edges],
                    "y": found["count"],
                    "width": [b - a for a, b in edges],
                    "opacity": 0.6,
                    "marker": {"color": STYLE.get(model, {}).get("color", "#1f5fbf")},
                    "hovertemplate": "residual %{x:.3g}: %{y} examples<extra></extra>",
                }
            )
    beyond = beyond_bins(models)
    corner = {"xref": "paper", "yref": "paper", "x": 0.01, "y": 0.99, "showarrow": False}
    layout = _layout(
        f"Residuals (label - prediction) · {where}",
        "residual",
        "examples",
        xaxis={"title": {"text": "residual"}, "autorange": True, "zeroline": True},
        yaxis={"title": {"text": "examples"}, "autorange": True},
        barmode="overlay",
        annotations=[{**corner, "xanchor": "left", "yanchor": "top", "text": beyond}]
        if beyond
        else [],
    )
    return {"id": "residuals", "data": data, "layout": layout, "file": PICTURES_FILE}


def beyond_bins(models: dict[str, dict[str, Any]]) -> str:
    """ "beyond the bins: candidate 2 below, 1 above; …" for the models whose residuals
    fell outside the histogram's range, "" when none did."""
    parts = []
    for model, plots in models.items():
        found = plots.get("residuals") or {}
        below, above = found.get("below") or 0, found.get("above") or 0
        if below or above:
            parts.append(f"{_label(model)} {below:g} below, {above:g} above")
    return f"beyond the bins: {'; '.join(parts)}" if parts else ""


def _chart(kind: str, title: str, data: list, x: str, y: str) -> dict[str, Any]:
    return {"id": kind, "data": data, "layout": _layout(title, x, y), "file": PICTURES_FILE}


def slice_chart(slices: dict[str, Any]) -> dict[str, Any] | None:
    """The blessing metric per slice (candidate bars, baseline markers), each slice's
    example count, the slice floor or ceiling as a line; failing slices red, slices
    under the rules' minimum example count grey (not judged)."""
    rules = slices.get("rules") or {}
    metric = rules.get("metric")
    per_slice = slices.get("metrics") or {}
    if not metric or not per_slice:
        return None
    names = sorted(per_slice, key=lambda s: (s != OVERALL, s))
    failing = {f["slice"] for f in slices.get("failures") or []}
    minimum = rules.get("min_examples") or 0

    def value(name: str, model: str) -> float | None:
        models = per_slice[name]
        found = models.get(model) or (models.get("") if model == "candidate" else None) or {}
        return found.get(metric)

    counts = [
        int((per_slice[n].get("candidate") or per_slice[n].get("") or {}).get("example_count", 0))
        for n in names
    ]
    colors = [
        "#c0392b" if n in failing else ("#bbbbbb" if c < minimum else STYLE["candidate"]["color"])
        for n, c in zip(names, counts, strict=True)
    ]
    labels = [f"{n} ({c:,})" for n, c in zip(names, counts, strict=True)]
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": "candidate",
            "x": labels,
            "y": [value(n, "candidate") for n in names],
            "marker": {"color": colors},
            "text": ["FAILS its rule" if n in failing else "" for n in names],
            "hovertemplate": "%{x}: %{y:.4f} %{text}<extra></extra>",
        }
    ]
    if slices.get("has_baseline"):
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "baseline",
                "x": labels,
                "y": [value(n, "baseline") for n in names],
                "marker": {"color": "#444444", "symbol": "line-ew-open", "size": 18},
            }
        )
    shapes = []
    bound = rules.get("lower_bound") if rules.get("higher_is_better", True) else None
    bound = bound if bound is not None else rules.get("upper_bound")
    if bound is not None:
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "y0": bound,
                "y1": bound,
                "line": {"color": "#c0392b", "dash": "dash"},
            }
        )
    layout = {
        "title": {"text": f"{metric} by slice (examples in brackets)", "font": {"size": 14}},
        "height": 380,  # a .chart.wide box: the page's width
        "margin": {"l": 56, "r": 12, "t": 40, "b": 130},
        "yaxis": {"title": {"text": metric}},
        "xaxis": {"tickangle": -35},
        "shapes": shapes,
        "showlegend": True,
    }
    return {"id": "slices", "data": data, "layout": layout, "file": SLICES_FILE, "wide": True}


def evaluation_charts(
    pictures: dict[str, Any] | None, slices: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Every chart of the evaluation page: the whole split's curves, then the slices."""
    charts = []
    overall = ((pictures or {}).get("slices") or {}).get(OVERALL)
    if overall:
        charts += curve_charts(overall["models"], "whole eval split")
    chart = slice_chart(slices or {})
    if chart:
        charts.append(chart)
    return charts
