"""Renders a model card: what the model was trained on, how it does for each group, and where it came from.

One self-contained HTML page (no network, no JavaScript): its pictures are SVG
drawn at card time (svg.py), so it reads the same mailed, printed or offline. Everything shown is read
by components/release/model_card/component.py from the run's artifacts and passed in
as plain data (`CardData`), so the page can be rendered and tested alone.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from components.release.model_card import svg

_CSS = """
body{font-family:system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:24px;color:#1f2328;max-width:1100px}
h1{font-size:22px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.fails td{background:#ffebe9} tr.small td{color:#656d76}
.verdict{display:inline-block;padding:4px 12px;border-radius:6px;color:#fff;font-weight:600}
.yes{background:#1a7f37} .no{background:#cf222e}
.pictures{display:flex;flex-wrap:wrap;gap:12px} .muted{color:#656d76} code{font-size:12px}
"""


@dataclass
class CardData:
    """What a card says (all plain values)."""

    dataset: str
    description: str = ""
    intended_use: str = ""
    limitations: str = ""
    # Examples: span, version, content hash, rows per split, ...
    data: dict[str, Any] = field(default_factory=dict)
    rows_per_split: dict[str, int] = field(default_factory=dict)
    # feature -> (type, presence/domain summary)
    schema: list[tuple[str, str, str]] = field(default_factory=list)
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    # The evaluation's slices.json (components/evaluation/slicing/evaluator.py).
    slices: dict[str, Any] = field(default_factory=dict)
    # The evaluation's plots.json (components/evaluation/pictures.py).
    pictures: dict[str, Any] = field(default_factory=dict)
    # The Trainer's TensorBoard scalars: {run folder: {tag: [(epoch, value)]}}.
    curves: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    blessed: bool | None = None
    blessing_message: str = ""
    baseline: str = ""
    serving_check: dict[str, Any] = field(default_factory=dict)
    pushed_to: str = ""
    lineage: dict[str, Any] = field(default_factory=dict)


def _e(value: object) -> str:
    return html.escape(str(value))


def _num(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:.4f}"
    return _e(value)


def _count(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _kv_table(table_id: str, items: dict[str, Any]) -> str:
    if not items:
        return "<p class=muted>none recorded</p>"
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in items.items())
    return f"<table id={table_id}>{rows}</table>"


def _model(models: dict[str, dict[str, float]], name: str) -> dict[str, float]:
    return models.get(name) or (models.get("") if name == "candidate" else None) or {}


def _metric_names(metrics: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    names: set[str] = set()
    for models in metrics.values():
        names |= set(_model(models, "candidate"))
    first = ["example_count"]
    return first + sorted(names - set(first))


def _slice_table(data: CardData) -> str:
    metrics = data.slices.get("metrics") or {}
    if not metrics:
        return "<p class=muted>No per-slice metrics were recorded.</p>"
    rules = data.slices.get("rules") or {}
    failing = {f["slice"] for f in data.slices.get("failures", [])}
    names = _metric_names(metrics)
    has_baseline = bool(data.slices.get("has_baseline"))
    judged = rules.get("metric")
    head = "".join(f"<th>{_e(n)}</th>" for n in names)
    if has_baseline and judged:
        head += f"<th>baseline {_e(judged)}</th>"
    rows = []
    order = sorted(metrics, key=lambda s: (s != "overall", s))
    for name in order:
        candidate = _model(metrics[name], "candidate")
        small = name != "overall" and candidate.get("example_count", 0) < rules.get(
            "min_examples", 1
        )
        css = "fails" if name in failing else ("small" if small else "")
        cells = "".join(
            f"<td class=num>{_num(_count(candidate.get(n)) if n == 'example_count' else candidate.get(n))}</td>"
            for n in names
        )
        if has_baseline and judged:
            cells += f"<td class=num>{_num(_model(metrics[name], 'baseline').get(judged))}</td>"
        rows.append(
            f"<tr class='slice-row {css}' data-slice='{_e(name)}'><td>{_e(name)}</td>{cells}</tr>"
        )
    return (
        f"<table id=slice-metrics><tr><th>slice</th>{head}</tr>{''.join(rows)}</table>"
        "<p class=muted>fall_out is the false positive rate and miss_rate the false negative "
        "rate (per class for multiclass models); slices in grey have fewer examples than the "
        "rules judge; red rows failed a rule.</p>"
    )


def _rules_list(data: CardData) -> str:
    t = data.thresholds
    rules = data.slices.get("rules") or {}
    items = []
    if t:
        bound = (
            f"at most {t['upper_bound']}"
            if t.get("upper_bound") is not None
            else f"at least {t.get('lower_bound')}"
        )
        items.append(
            f"whole eval split: {_e(t.get('metric'))} {bound}, and no worse than the baseline "
            f"by more than {abs(t.get('min_change') or 0):g}"
        )
    if rules.get("by"):
        slicings = "; ".join(" x ".join(s) for s in rules["by"])
        items.append(
            f"slices: {_e(slicings)}"
            + (f" (buckets: {_e(rules.get('buckets'))})" if rules.get("buckets") else "")
        )
        judged = f"each slice with at least {rules.get('min_examples', 1)} examples"
        for key, words in (("lower_bound", "at least"), ("upper_bound", "at most")):
            if rules.get(key) is not None:
                items.append(f"{judged}: {_e(rules['metric'])} {words} {rules[key]}")
        if rules.get("max_drop") is not None:
            items.append(
                f"{judged}: {_e(rules['metric'])} at most {rules['max_drop']} worse than the "
                "baseline on that slice"
            )
    return "<ul id=rules>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _chart(data: CardData) -> str:
    """The judged metric per slice: candidate and baseline bars, failing slices red,
    slices under the minimum example count grey, the slice floor as a line."""
    metrics = data.slices.get("metrics") or {}
    rules = data.slices.get("rules") or {}
    judged = rules.get("metric")
    if not metrics or not judged:
        return ""
    names = sorted(metrics, key=lambda s: (s != "overall", s))
    failing = {f.get("slice") for f in data.slices.get("failures") or []}
    minimum = rules.get("min_examples") or 0
    counts = [int(_model(metrics[n], "candidate").get("example_count") or 0) for n in names]
    candidate = [
        "#c0392b" if n in failing else ("#bbbbbb" if c < minimum else "#1f5fbf")
        for n, c in zip(names, counts, strict=True)
    ]
    groups = [
        (
            "candidate" if data.slices.get("has_baseline") else "this model",
            [_model(metrics[n], "candidate").get(judged) for n in names],
            candidate,
        )
    ]
    if data.slices.get("has_baseline"):
        groups.append(
            (
                "baseline",
                [_model(metrics[n], "baseline").get(judged) for n in names],
                ["#999999"] * len(names),
            )
        )
    line = (rules["lower_bound"], "slice floor") if rules.get("lower_bound") is not None else None
    labels = [f"{n} ({c:,})" for n, c in zip(names, counts, strict=True)]
    chart = svg.bar_chart(
        "slice-chart-svg",
        f"{judged} per slice (examples in brackets)",
        labels,
        groups,
        judged,
        line,
    )
    return f"<div class=chart id=slice-chart>{chart}</div>"


_MODEL_STYLE = {
    "candidate": ("#1f5fbf", False),
    "": ("#1f5fbf", False),
    "baseline": ("#888888", True),
}


def _area(value: float | None) -> str:
    return "" if value is None else f" (AUC {value:.3f})"


def _curve(models: dict[str, Any], kind: str, x: str, y: str) -> list[svg.Series]:
    found = []
    for model, plots in models.items():
        curve = plots.get(kind)
        if curve:
            color, dash = _MODEL_STYLE.get(model, ("#1f5fbf", False))
            name = (model or "model") + (_area(curve.get("auc")) if kind in ("roc", "pr") else "")
            found.append(
                svg.Series(
                    name,
                    curve[x],
                    curve[y],
                    color,
                    dash,
                    markers=kind in ("calibration", "predicted_actual"),
                )
            )
    return found


def _steps(lower: list[float], upper: list[float], counts: list[float]) -> tuple[list, list]:
    """A histogram's outline as a line: up, across and down each bin."""
    xs: list[float] = []
    ys: list[float] = []
    for a, b, n in zip(lower, upper, counts, strict=True):
        xs += [a, a, b, b]
        ys += [0.0, n, n, 0.0]
    return xs, ys


def _regression_plots(models: dict[str, Any]) -> list[str]:
    """Predicted against actual (with y = x) and the residual histogram, models overlaid."""
    charts = []
    series = _curve(models, "predicted_actual", "predicted", "actual")
    if series:
        # One range on both axes, so that the diagonal is y = x.
        values = [v for s in series for v in (*s.xs, *s.ys) if v is not None]
        span = (min(values), max(values) if max(values) > min(values) else min(values) + 1)
        charts.append(
            svg.line_chart(
                "predicted-actual",
                "Predicted vs actual",
                series,
                "mean prediction (bucket)",
                "mean actual label",
                span,
                span,
                diagonal="predicted = actual",
            )
        )
    outlines, beyond = [], []
    for model, plots in models.items():
        found = plots.get("residuals")
        if found:
            color, dash = _MODEL_STYLE.get(model, ("#1f5fbf", False))
            xs, ys = _steps(found["lower"], found["upper"], found["count"])
            outlines.append(svg.Series(model or "model", xs, ys, color, dash))
            # Residuals beyond the bins have no width to draw: their counts are written.
            if found.get("below") or found.get("above"):
                below, above = found.get("below") or 0, found.get("above") or 0
                beyond.append(f"{model or 'model'} {below:g} below, {above:g} above")
    if outlines:
        note = f"beyond the bins: {'; '.join(beyond)}" if beyond else ""
        charts.append(
            svg.line_chart(
                "residuals",
                "Residuals (label - prediction)",
                outlines,
                "residual",
                "examples",
                note=note,
            )
        )
    return charts


def _plots(data: CardData) -> str:
    """The whole eval split's ROC, PR, calibration and confusion matrix, as SVG."""
    overall = (data.pictures.get("slices") or {}).get("overall")
    if not overall:
        return "<p class=muted>No plots in this evaluation.</p>"
    models = overall["models"]
    charts = []
    unit = ((0.0, 1.0), (0.0, 1.0))
    for chart_id, kind, title, x, y, xl, yl, diagonal in (
        ("roc", "roc", "ROC", "fpr", "tpr", "false positive rate", "true positive rate", "chance"),
        ("pr", "pr", "Precision-recall", "recall", "precision", "recall", "precision", None),
        (
            "calibration",
            "calibration",
            "Calibration",
            "predicted",
            "observed",
            "mean prediction",
            "observed rate",
            "perfectly calibrated",
        ),
    ):
        series = _curve(models, kind, x, y)
        if series:
            charts.append(svg.line_chart(chart_id, title, series, xl, yl, *unit, diagonal=diagonal))
    charts += _regression_plots(models)
    for model, plots in models.items():
        confusion = plots.get("confusion")
        if confusion and confusion["classes"]:
            names = ["none" if c == -1 else str(c) for c in confusion["classes"]]
            title = f"Confusion matrix ({model or 'model'})"
            charts.append(
                svg.heatmap(f"confusion-{model or 'model'}", title, names, confusion["matrix"])
            )
    return (
        "<div class=pictures id=plots>"
        + "".join(f"<div class=chart>{c}</div>" for c in charts)
        + "</div>"
    )


def _training(data: CardData) -> str:
    """Loss, metrics and learning rate per epoch, train and validation overlaid."""
    if not data.curves:
        return "<p class=muted>No TensorBoard logs from the Trainer.</p>"
    tags = sorted({tag for tags in data.curves.values() for tag in tags})
    colors = {"train": ("#1f5fbf", False), "validation": ("#e67e22", True)}
    charts = []
    for tag in tags:
        series = []
        for run, by_tag in data.curves.items():
            points = by_tag.get(tag)
            if points:
                color, dash = colors.get(run, ("#444444", False))
                xs = [step + 1 for step, _ in points]
                series.append(
                    svg.Series(run, xs, [v for _, v in points], color, dash, markers=True)
                )
        name = tag.removeprefix("epoch_")
        charts.append(svg.line_chart(f"curve-{name}", name, series, "epoch", name))
    return (
        "<div class=pictures id=training-curves>"
        + "".join(f"<div class=chart>{c}</div>" for c in charts)
        + "</div>"
    )


def _serving_table(check: dict[str, Any]) -> str:
    if not check:
        return "<p class=muted>No serving check ran for this model.</p>"
    rows = {"verdict": check.get("verdict"), "message": check.get("message")}
    for key in ("rows", "load_seconds", "max_abs_diff"):
        if check.get(key) is not None:
            rows[key] = check[key]
    for key, value in sorted((check.get("latency_ms") or {}).items()):
        rows[f"latency {key.replace('_', ' ')} (ms)"] = f"{value:.3f}"
    return _kv_table("serving-check", rows)


def render_card(data: CardData) -> str:
    """The card as one HTML string."""
    verdict = (
        "<span class='verdict yes'>blessed</span>"
        if data.blessed
        else "<span class='verdict no'>not blessed</span>"
        if data.blessed is False
        else "<span class=muted>not evaluated</span>"
    )
    reasons = "".join(f"<li>{_e(r)}</li>" for r in data.blessing_message.split("; ") if r)
    schema_rows = "".join(
        f"<tr><td>{_e(n)}</td><td>{_e(t)}</td><td>{_e(d)}</td></tr>" for n, t, d in data.schema
    )
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang=en><head><meta charset=utf-8><title>Model card: {_e(data.dataset)}</title>
<style>{_CSS}</style>
</head><body>
<h1>Model card: {_e(data.dataset)}</h1>
<p class=muted>written {when}{" · pushed to " + _e(data.pushed_to) if data.pushed_to else ""}</p>
<p id=description>{_e(data.description)}</p>
<h2>Intended use</h2><p id=intended-use>{_e(data.intended_use) or "<span class=muted>not stated in the dataset file</span>"}</p>
<h2>Limitations</h2><p id=limitations>{_e(data.limitations) or "<span class=muted>not stated in the dataset file</span>"}</p>
<h2>Verdict</h2>
<p id=verdict>{verdict} {("against " + _e(data.baseline)) if data.baseline else "(no baseline: absolute thresholds only)"}</p>
<ul id=reasons>{reasons}</ul>
<h2>Thresholds</h2>
{_rules_list(data)}
<h2>Metrics overall and per slice</h2>
{_chart(data)}
{_slice_table(data)}
<h2>How it separates and how calibrated it is</h2>
<p class=muted>On the whole eval split{", the baseline dashed" if data.slices.get("has_baseline") else ""}: ROC and precision-recall curves (area under each in the legend), the calibration (mean prediction against the observed rate per bucket; the dotted diagonal is perfect), the confusion matrix of a multiclass model.</p>
{_plots(data)}
<h2>Serving check</h2>
{_serving_table(data.serving_check)}
<h2>Data</h2>
{_kv_table("data", data.data)}
<h3>Rows per split</h3>
{_kv_table("rows", data.rows_per_split)}
<h3>Schema</h3>
<table id=schema><tr><th>feature</th><th>type</th><th>domain / presence</th></tr>{schema_rows}</table>
<h2>Training</h2>
{_kv_table("hyperparameters", data.hyperparameters)}
<h3>Training curves</h3>
{_training(data)}
<h2>Lineage (ML Metadata ids)</h2>
{_kv_table("lineage", data.lineage)}
</body></html>
"""
