"""What the templates draw: graphs laid out by tfxp.presentation.graph, charts as plotly
figure JSON, and the per-type details of an artifact page."""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata.lineage import Lineage
from metadata.lineage.records import RunInfo
from metadata.properties import prop
from pipeline.node_ids import EVALUATOR, PUSHER
from tfxp.presentation.graph import Graph, layout
from tfxp.ui.browse import StoreBrowser

# -- formatting ------------------------------------------------------------------


def when(ms: int | str | None) -> str:
    if ms is None or ms == "":
        return ""
    if isinstance(ms, str):
        return ms.replace("T", " ")
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="seconds")


def number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# -- graphs ------------------------------------------------------------------------


def _drawn(g: Graph, link, css) -> dict[str, Any]:
    """Boxes and curves for the SVG template; `link(key)` and `css(node)` per node."""
    boxes, width, height = layout(g)
    at = {b.node.key: b for b in boxes}
    edges = []
    for a, b in g.edges:
        if a in at and b in at:
            s, t = at[a], at[b]
            x1, y1, x2, y2 = s.x + s.w, s.y + s.h / 2, t.x, t.y + t.h / 2
            mid = (x1 + x2) / 2
            edges.append(
                f"M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
            )
    nodes = [
        {
            "key": b.node.key,
            "x": round(b.x, 1),
            "y": round(b.y, 1),
            "w": round(b.w, 1),
            "h": round(b.h, 1),
            "title": b.node.title,
            "lines": b.node.lines,
            "css": css(b.node),
            "href": link(b.node.key),
        }
        for b in boxes
    ]
    return {
        "title": g.title,
        "width": round(width),
        "height": round(height),
        "nodes": nodes,
        "edges": edges,
    }


def run_graph(browser: StoreBrowser, lin: Lineage, info: RunInfo) -> dict[str, Any]:
    """The run's components as boxes, each with its state and duration, linked to its execution."""
    g = Graph(title=f"run {info.run_id}")
    state = {}
    for c in info.components:
        timing = "" if c.state in ("cached", "resolved") else f"{c.seconds:.1f} s"
        g.add(f"e{c.execution_id}", "execution", c.node_id, [c.state, timing])
        state[f"e{c.execution_id}"] = c.state
    for a, b in browser.run_edges(lin, info.run_id):
        g.edge(f"e{a}", f"e{b}")
    key_of = {c.node_id: f"e{c.execution_id}" for c in info.components}
    missing, edges = browser.skipped(lin, info.run_id)
    for node in missing:
        key_of[node] = f"skipped-{node}"
        g.add(key_of[node], "execution", node, ["skipped"])
        state[key_of[node]] = "skipped"
    for before, after in edges:
        if before in key_of and after in key_of:
            g.edge(key_of[before], key_of[after])
    return _drawn(
        g,
        lambda key: f"/execution/{key[1:]}" if key[1:].isdigit() else None,
        lambda node: f"node state-{state.get(node.key, 'unknown')}",
    )


def lineage_graph(g: Graph | None) -> dict[str, Any] | None:
    """A lineage graph: artifacts link to their pages, executions to theirs."""
    if g is None:
        return None

    def link(key: str) -> str | None:
        for prefix, route in (("a", "artifact"), ("e", "execution"), ("m", "artifact")):
            rest = key[len(prefix) :]
            if key.startswith(prefix) and rest.isdigit():
                return f"/artifact/{rest}" if route == "artifact" else f"/execution/{rest}"
        return None

    def css(node) -> str:
        return f"node kind-{node.kind}" + (" highlight" if node.highlight else "")

    return _drawn(g, link, css)


# -- charts -------------------------------------------------------------------------


def metrics_charts(series: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One small chart per metric over the pipeline's runs (x: run start), as plotly
    figure JSON: a count and an AUC on one axis would flatten the AUC."""
    charts = []
    for name, points in sorted(series.items()):
        trace = {
            "type": "scatter",
            "mode": "lines+markers",
            "name": name,
            "x": [p["started"] for p in points],
            "y": [p["value"] for p in points],
            "text": [f"run {p['run']}, span {p['spans']}" for p in points],
        }
        layout_ = {
            "title": {"text": name, "font": {"size": 13}},
            "height": 260,
            "width": 420,
            "margin": {"l": 50, "r": 10, "t": 36, "b": 40},
            "showlegend": False,
        }
        charts.append({"data": [trace], "layout": layout_})
    return charts


def statistics_charts(uri: str) -> list[dict[str, Any]]:
    """Per split: its feature table and one chart per feature, as the gate's report draws them."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    from components.validation.html_report import feature_figure

    out: list[dict[str, Any]] = []
    if "://" in uri or not os.path.isdir(uri):
        return out
    for split in sorted(os.listdir(uri)):
        path = os.path.join(uri, split, "FeatureStats.pb")
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            stats = statistics_pb2.DatasetFeatureStatisticsList.FromString(f.read())
        if not stats.datasets:
            continue
        ds = stats.datasets[0]
        features = []
        for feat in ds.features:
            name = ".".join(feat.path.step) or feat.name
            fig = feature_figure(name, {split: stats})
            features.append(
                {
                    "name": name,
                    "summary": _feature_summary(feat),
                    "figure": json.loads(fig.to_json()) if fig is not None else None,
                }
            )
        out.append({"split": split, "examples": ds.num_examples, "features": features})
    return out


def _feature_summary(f) -> str:
    if f.HasField("num_stats"):
        n = f.num_stats
        return f"numeric: min {n.min:.4g}, max {n.max:.4g}, mean {n.mean:.4g}, missing {n.common_stats.num_missing}"
    if f.HasField("string_stats"):
        s = f.string_stats
        top = ", ".join(v.value for v in s.top_values[:5])
        return f"categorical: {s.unique} unique; top {top}"
    return f.WhichOneof("stats") or ""


# -- artifact pages ---------------------------------------------------------------------


def _read_text(path: str, limit: int = 200_000) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def artifact_details(
    browser: StoreBrowser, lin: Lineage, art: pb.Artifact, type_name: str
) -> dict[str, Any]:
    """What matters for this type of artifact; {} for a type without a page of its own
    (its generic page: properties, URI, producer, consumers, files)."""
    handler = _DETAILS.get(type_name)
    return {"kind": type_name, **handler(browser, lin, art)} if handler else {}


def _examples(browser, lin, art) -> dict[str, Any]:
    d = lin.data_version(art)
    splits = (
        sorted(n for n in os.listdir(art.uri) if n.startswith("Split-"))
        if os.path.isdir(art.uri)
        else []
    )
    return {
        "data": d,
        "splits": splits,
        "span_link": (lin.pipeline, d.span) if d.span is not None else None,
    }


def _statistics(browser, lin, art) -> dict[str, Any]:
    return {"splits": statistics_charts(art.uri)}


def _schema(browser, lin, art) -> dict[str, Any]:
    text = _read_text(os.path.join(art.uri, "schema.pbtxt"))
    return {"text": text}


def _validation(browser, lin, art) -> dict[str, Any]:
    return {
        "decision": prop(art, "decision"),
        "findings": prop(art, "findings"),
        "notes": prop(art, "notes"),
        "report": os.path.isfile(os.path.join(art.uri, "report.html")),
    }


def _anomalies(browser, lin, art) -> dict[str, Any]:
    found = []
    if os.path.isdir(art.uri):
        for split in sorted(os.listdir(art.uri)):
            found.append(
                {
                    "split": split,
                    "present": os.path.isfile(os.path.join(art.uri, split, "SchemaDiff.pb")),
                }
            )
    return {"splits": found}


def training_charts(curves: dict[str, dict[str, list]]) -> list[dict[str, Any]]:
    """One chart per TensorBoard tag (epoch_loss, epoch_auc, epoch_learning_rate ...),
    its train and validation curves overlaid, x the epoch."""
    tags = sorted({tag for tags in curves.values() for tag in tags})
    charts = []
    for tag in tags:
        data = []
        for run, tags_of_run in curves.items():
            points = tags_of_run.get(tag)
            if points:
                data.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "name": run,
                        "x": [step + 1 for step, _ in points],
                        "y": [value for _, value in points],
                    }
                )
        name = tag.removeprefix("epoch_")
        values = [v for trace in data for v in trace["y"]]
        layout_ = {
            "title": {"text": name, "font": {"size": 13}},
            "height": 260,
            "width": 420,
            "margin": {"l": 56, "r": 10, "t": 36, "b": 40},
            "xaxis": {"title": {"text": "epoch"}, "dtick": 1},
        }
        if values and min(values) == max(values) > 0:
            # A constant (the learning rate without a schedule): from 0, not around it.
            layout_["yaxis"] = {"range": [0, 2 * values[0]]}
        charts.append({"id": f"curve-{name}", "data": data, "layout": layout_})
    return charts


def trials_chart(curves: dict[str, dict[str, list]]) -> dict[str, Any] | None:
    """The tuner's trials' last eval loss (the objective: lower is better) and last
    train loss, a bar per trial, from each `trial-<n>/` folder's event files."""
    trials: dict[str, dict[str, float]] = {}
    for run, tags in curves.items():
        trial, _, kind = run.partition("/")
        points = tags.get("epoch_loss")
        if trial.startswith("trial-") and points:
            trials.setdefault(trial, {})[kind] = points[-1][1]
    if not trials:
        return None
    names = sorted(trials, key=lambda t: (len(t), t))  # trial-2 before trial-10
    data = [
        {
            "type": "bar",
            "name": f"{kind} loss",
            "x": names,
            "y": [trials[t].get(kind) for t in names],
            "marker": {"color": color},
        }
        for kind, color in (("validation", "#1f5fbf"), ("train", "#bbbbbb"))
    ]
    layout_ = {
        "title": {"text": "tuner trials: final loss (lower is better)", "font": {"size": 13}},
        "height": 260,
        "width": 420,
        "margin": {"l": 56, "r": 10, "t": 36, "b": 40},
        "barmode": "group",
    }
    return {"id": "trials", "data": data, "layout": layout_}


def _model(browser, lin, art) -> dict[str, Any]:
    trainer = browser.trainer_of(lin, art.id)
    facts = lin.component_facts(trainer) if trainer is not None else {}
    blessing = lin.blessing(art.id)
    return {
        "hyperparameters": facts.get("hyperparameters") or {},
        "code_fingerprint": facts.get("code_fingerprint"),
        "trainer": trainer.id if trainer is not None else None,
        "input_wait": browser.input_wait(lin, art.id),
        "blessing": blessing,
        "pushes": lin.pushes(art.id),
        "metrics": browser.metrics(lin, art.id),
        "training_charts": training_charts(browser.training_curves(lin, art.id)),
        "trials_chart": trials_chart(browser.trial_curves(lin, art.id)),
    }


def _evaluation(browser, lin, art) -> dict[str, Any]:
    model_id = browser.model_read_by(lin, art.id, EVALUATOR)
    blessing = lin.blessing(model_id) if model_id is not None else None
    evaluator = lin.producer(art.id)
    thresholds = None
    if evaluator is not None and lin.node_of.get(evaluator.id) == EVALUATOR:
        thresholds = _eval_thresholds(prop(evaluator, "eval_config"))
    return {
        "model_id": model_id,
        "metrics": browser.metrics(lin, model_id) if model_id is not None else {},
        "blessing": blessing,
        "thresholds": thresholds,
        "charts": _evaluation_charts(art.uri),
    }


def _evaluation_charts(uri: str) -> list[dict[str, Any]]:
    """The Evaluator's plots and slices (plots.json, slices.json) as plotly figures."""
    from components.evaluation.pictures import load_pictures
    from components.evaluation.slicing.evaluator import SLICES_FILE
    from tfxp.ui.evaluation_charts import evaluation_charts

    if "://" in uri or not os.path.isdir(uri):
        return []
    slices = None
    text = _read_text(os.path.join(uri, SLICES_FILE))
    if text:
        try:
            slices = json.loads(text)
        except ValueError:
            slices = None
    return evaluation_charts(load_pictures(uri), slices)


def _eval_thresholds(config_text: Any) -> list[dict[str, Any]]:
    """The metric thresholds of the Evaluator's eval_config (JSON in ML Metadata)."""
    try:
        config = json.loads(config_text) if isinstance(config_text, str) else {}
    except ValueError:
        return []
    out = []
    for spec in config.get("metrics_specs", []) or config.get("metricsSpecs", []):
        for metric in spec.get("metrics", []):
            threshold = metric.get("threshold")
            if threshold:
                out.append(
                    {
                        "metric": metric.get("class_name") or metric.get("className"),
                        "threshold": json.dumps(threshold, sort_keys=True),
                    }
                )
    return out


def _blessing(browser, lin, art) -> dict[str, Any]:
    return {
        "blessed": prop(art, "blessed") == 1,
        "model_id": prop(art, "current_model_id"),
        "baseline_model_id": prop(art, "baseline_model_id"),
    }


def _pushed(browser, lin, art) -> dict[str, Any]:
    return {
        "pushed": prop(art, "pushed") == 1,
        "version": prop(art, "pushed_version"),
        "destination": prop(art, "pushed_destination"),
        "model_id": browser.model_read_by(lin, art.id, PUSHER),
    }


_DETAILS = {
    "Examples": _examples,
    "ExampleStatistics": _statistics,
    "Schema": _schema,
    "tfxp.ValidationResult": _validation,
    "ValidationResult": _validation,
    "ExampleAnomalies": _anomalies,
    "Model": _model,
    "ModelEvaluation": _evaluation,
    "ModelBlessing": _blessing,
    "PushedModel": _pushed,
}
