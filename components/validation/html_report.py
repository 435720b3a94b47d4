"""The validation report: one self-contained HTML page per run, readable offline.

Statistics per split and per feature (counts, missing, ranges or top values,
a distribution chart), the anomalies table, drift and skew per feature against
their thresholds, and the gate's decision. Charts are plotly figures whose
JavaScript is inlined from the installed plotly package once per page: no
network, no HTML imports (TFDV's Facets view needs both and renders nothing
offline).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from datetime import UTC, datetime

from tensorflow_metadata.proto.v0 import statistics_pb2

from components.validation.findings import BLOCK, PASS, WARN, GateResult
from components.validation.settings import ValidationSettings

_COLORS = {"train": "#1f77b4", "eval": "#2ca02c", "previous span": "#ff7f0e", "serving": "#9467bd"}
_DECISION_STYLE = {PASS: "#1a7f37", WARN: "#9a6700", BLOCK: "#cf222e"}
_CSS = """
body{font-family:system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px} h2{font-size:18px;margin-top:32px;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums}
.decision{display:inline-block;padding:6px 14px;border-radius:6px;color:#fff;font-weight:600}
tr.blocks td{background:#ffebe9} tr.warning td{background:#fff8c5} tr.over td{background:#ffebe9}
.chart{display:inline-block;width:520px;height:300px;vertical-align:top}
.muted{color:#656d76}
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return ""
    return (
        f"{value:.{digits}g}"
        if abs(value) >= 1e5
        else f"{value:.{digits}f}".rstrip("0").rstrip(".")
    )


def _features(stats: statistics_pb2.DatasetFeatureStatisticsList):
    return {".".join(f.path.step) or f.name: f for f in stats.datasets[0].features}


def _common(f: statistics_pb2.FeatureNameStatistics):
    kind = f.WhichOneof("stats")
    return (
        getattr(f, kind).common_stats
        if kind in ("num_stats", "string_stats", "bytes_stats")
        else None
    )


def _stats_table(name: str, stats: statistics_pb2.DatasetFeatureStatisticsList) -> str:
    ds = stats.datasets[0]
    rows = []
    for feature, f in sorted(_features(stats).items()):
        common = _common(f)
        present = common.num_non_missing if common else 0
        missing = common.num_missing if common else 0
        total = present + missing
        missing_pct = f"{100 * missing / total:.1f}%" if total else ""
        if f.HasField("num_stats"):
            n = f.num_stats
            detail = (
                f"min {_fmt(n.min)} · max {_fmt(n.max)} · mean {_fmt(n.mean)} · "
                f"std {_fmt(n.std_dev)} · zeros {n.num_zeros}"
            )
            kind = "numeric"
        elif f.HasField("string_stats"):
            s = f.string_stats
            top = ", ".join(f"{_e(v.value)} ({int(v.frequency)})" for v in s.top_values[:5])
            detail = f"{s.unique} unique · top: {top}"
            kind = "categorical"
        elif f.HasField("bytes_stats"):  # encoded images (image_domain): their sizes
            b = f.bytes_stats
            detail = f"bytes min {b.min_num_bytes:g} · max {b.max_num_bytes:g} · mean {b.avg_num_bytes:.1f}"
            kind = "bytes"
        else:
            detail, kind = "", f.WhichOneof("stats") or "?"
        rows.append(
            f"<tr><td>{_e(feature)}</td><td>{kind}</td><td class=num>{present}</td>"
            f"<td class=num>{missing} {missing_pct}</td><td>{detail if kind == 'categorical' else _e(detail)}</td></tr>"
        )
    return (
        f"<h3>{_e(name)} <span class=muted>({ds.num_examples} examples)</span></h3>"
        "<table class=stats><tr><th>feature</th><th>kind</th><th>present</th><th>missing</th>"
        f"<th>range / top values</th></tr>{''.join(rows)}</table>"
    )


def _quantiles(f: statistics_pb2.FeatureNameStatistics) -> tuple[list[float], list[float]]:
    for h in f.num_stats.histograms:
        if h.type == statistics_pb2.Histogram.QUANTILES and h.buckets:
            total = sum(b.sample_count for b in h.buckets) or 1.0
            xs, ys, seen = [0.0], [h.buckets[0].low_value], 0.0
            for b in h.buckets:
                seen += b.sample_count
                xs.append(seen / total)
                ys.append(b.high_value)
            return xs, ys
    return [], []


def feature_figure(
    feature: str, datasets: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList]
):
    """One feature's chart over `datasets` (name -> statistics) as a plotly Figure, or
    None when no dataset has it: category shares as bars, numbers as quantiles.
    The report inlines it; the console (`tfxp ui`) draws the same figure."""
    import plotly.graph_objects as go

    fig = go.Figure()
    categorical = False
    for name, stats in datasets.items():
        f = _features(stats).get(feature)
        if f is None:
            continue
        color = _COLORS.get(name)
        if f.HasField("string_stats"):
            categorical = True
            count = f.string_stats.common_stats.num_non_missing or 1
            top = list(f.string_stats.top_values[:12])
            fig.add_bar(
                name=name,
                x=[v.value for v in top],
                y=[v.frequency / count for v in top],
                marker_color=color,
            )
        elif f.HasField("num_stats"):
            xs, ys = _quantiles(f)
            if xs:
                fig.add_scatter(name=name, x=xs, y=ys, mode="lines+markers", line_color=color)
    if not fig.data:
        return None
    fig.update_layout(
        title=feature + (" (share of values)" if categorical else " (quantiles)"),
        barmode="group",
        margin={"l": 50, "r": 10, "t": 40, "b": 40},
        height=300,
        width=520,
        legend={"orientation": "h", "y": -0.2},
        xaxis_title=None if categorical else "fraction of examples",
        yaxis_title="share" if categorical else "value",
    )
    return fig


def _chart(
    feature: str, datasets: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList]
) -> str:
    fig = feature_figure(feature, datasets)
    if fig is None:
        return ""
    div = fig.to_html(full_html=False, include_plotlyjs=False, config={"displayModeBar": False})
    # The id: the console's findings table links each feature to its chart here.
    return f'<div class=chart id="feature-{_e(feature)}" data-feature="{_e(feature)}">{div}</div>'


def _findings_table(result: GateResult) -> str:
    if not result.findings:
        return "<p id=no-anomalies>No anomalies.</p>"
    rows = []
    for f in result.findings:
        verdict = "blocks" if f.severity == BLOCK else "warning"
        rows.append(
            f"<tr class='anomaly-row {verdict}'><td>{verdict}</td><td>{_e(f.kind)}</td>"
            f"<td>{_e(f.feature)}</td><td>{_e(f.anomaly)}</td>"
            f"<td class=num>{_fmt(f.measured)}</td><td class=num>{_fmt(f.threshold)}</td>"
            f"<td>{_e(f.measure or '')}</td><td>{_e(f.description)}</td><td>{_e(f.where)}</td></tr>"
        )
    return (
        "<table id=anomalies><tr><th>verdict</th><th>kind</th><th>feature</th><th>anomaly</th>"
        "<th>measured</th><th>threshold</th><th>measure</th><th>description</th><th>where</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _measurements_table(result: GateResult, kind: str) -> str:
    rows = [m for m in result.measurements if m.kind == kind]
    if not rows:
        return f"<p class=muted>No {kind} measured.</p>"
    body = "".join(
        f"<tr class='{'over' if m.exceeded else 'ok'}'><td>{_e(m.feature)}</td><td>{_e(m.measure)}</td>"
        f"<td class=num>{_fmt(m.value)}</td><td class=num>{_fmt(m.threshold)}</td>"
        f"<td>{'over threshold' if m.exceeded else 'ok'}</td></tr>"
        for m in rows
    )
    return (
        f"<table id={kind}-table><tr><th>feature</th><th>measure</th><th>measured</th>"
        f"<th>threshold</th><th></th></tr>{body}</table>"
    )


def _settings_html(settings: ValidationSettings) -> str:
    def one(name, t):
        per = ", ".join(f"{k}: {'off' if v is None else v}" for k, v in sorted(t.features.items()))
        return (
            f"<li>{name}: categorical (L-infinity) {t.categorical}, numeric (Jensen-Shannon) "
            f"{t.numeric}{'; ' + _e(per) if per else ''}</li>"
        )

    warn = ", ".join(settings.warn_only) or "none"
    return (
        f"<ul>{one('drift', settings.drift)}{one('skew', settings.skew)}"
        f"<li>downgraded to warnings: {_e(warn)}</li></ul>"
    )


def render_report(
    result: GateResult,
    *,
    current: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList],
    baseline: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList] | None,
    serving: statistics_pb2.DatasetFeatureStatisticsList | None,
    settings: ValidationSettings,
    title: str,
) -> str:
    """The whole page as one HTML string."""
    from plotly.offline import get_plotlyjs

    datasets: dict[str, statistics_pb2.DatasetFeatureStatisticsList] = dict(current)
    if baseline:
        datasets["previous span"] = baseline.get("train") or next(iter(baseline.values()))
    if serving is not None:
        datasets["serving"] = serving
    features = sorted({name for s in datasets.values() for name in _features(s)})
    charts = "".join(_chart(name, datasets) for name in features)
    color = _DECISION_STYLE[result.decision]
    span = f"span {result.current_span}" if result.current_span is not None else ""
    stats_tables = "".join(_stats_table(name, s) for name, s in datasets.items())
    notes = "".join(f"<li>{_e(n)}</li>" for n in result.notes)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang=en><head><meta charset=utf-8><title>Validation report: {_e(title)}</title>
<style>{_CSS}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head><body>
<h1>Data validation: {_e(title)} {_e(span)}</h1>
<p class=muted>written {when}</p>
<p>Gate decision: <span id=decision class=decision style="background:{color}">{result.decision}</span>
 {len(result.blocking)} blocking, {len(result.warnings)} warning(s)</p>
<ul id=notes>{notes}</ul>
<h2>Anomalies</h2>
{_findings_table(result)}
<h2>Drift (this span vs the previous span)</h2>
{_measurements_table(result, "drift")}
<h2>Skew (training vs serving)</h2>
{_measurements_table(result, "skew")}
<h2>Thresholds</h2>
{_settings_html(settings)}
<h2>Distributions</h2>
<div id=charts>{charts}</div>
<h2>Statistics per split</h2>
{stats_tables}
</body></html>
"""
