"""Lineage as reports: titles, diffable facts and graphs built from the queries' answers.

The queries (metadata/lineage/) say what ML Metadata holds; this module
shapes their answers for people: a model's title, a run's facts for `tfxp runs
diff` (metadata/diff.py), and the lineage graphs `tfxp lineage --graph`
draws (tfxp/presentation/graph.py). Text rendering is tfxp/cli/render.py.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from metadata.lineage import Lineage
from metadata.lineage.records import DataVersion, ModelLineage, SpanLineage
from metadata.properties import prop
from pipeline.node_ids import EVALUATOR, PUSHER, SCHEMA_IMPORTER, TRAINER, TRANSFORM, TUNER
from tfxp.presentation.graph import Graph


def model_title(lineage: ModelLineage) -> str:
    spans = ", ".join(str(s) for s in lineage.spans) or "?"
    word = "span" if len(lineage.spans) <= 1 else "spans"
    return (
        f"Model #{lineage.model_id} of pipeline '{lineage.pipeline}', trained on {word} {spans}"
        f" (run {lineage.trained_in_run})"
    )


def data_facts(data: Sequence[DataVersion]) -> dict[str, Any]:
    """Training data as flat, diffable facts (one span: plain keys; several: per span)."""
    if len(data) == 1:
        d = data[0]
        return {
            "span": d.span,
            "version": d.version,
            "fingerprint": d.fingerprint,
            "rows": d.rows,
            # No Examples artifact id: a `--no-cache` re-ingestion of the same
            # bytes is a new artifact but the same data (the fingerprint says so).
        }
    out: dict[str, Any] = {"spans": ",".join(str(d.span) for d in data)}
    for d in data:
        tag = f"span {d.span}" + ("" if d.version is None else f" v{d.version}")
        out[f"{tag} fingerprint"] = d.fingerprint
        out[f"{tag} rows"] = d.rows
    return out


def span_graph(s: SpanLineage) -> Graph:
    """A span's Examples and the models trained on them, drawn."""
    g = Graph(title=f"span {s.span} of pipeline '{s.pipeline}': {len(s.models)} model(s)")
    for d in s.data:
        g.add(
            f"raw{d.examples_id}",
            "file",
            f"raw data span {d.span}",
            [os.path.join(d.input_base or "?", d.pattern or "?")],
        )
        g.add(
            f"a{d.examples_id}",
            "artifact",
            "Examples",
            [f"#{d.examples_id} span {d.span}", f"sha256 {(d.fingerprint or '?')[:12]}"],
            highlight=True,
        )
        g.edge(f"raw{d.examples_id}", f"a{d.examples_id}")
    for u in s.models:
        g.add(
            f"m{u.model_id}",
            "artifact",
            "Model",
            [
                f"#{u.model_id} run {u.trained_in_run}",
                f"spans {','.join(str(x) for x in u.spans)}",
                f"blessed {'yes' if u.blessed else 'no'}",
                "pushed " + (",".join(u.pushed_versions) if u.pushed else "no"),
            ],
        )
        for d in s.data:
            g.edge(f"a{d.examples_id}", f"m{u.model_id}")
    return g


def tuning_facts(lin: Lineage, tuner_execution_id: int) -> dict[str, Any]:
    """The Tuner's trials (values and eval-loss score, best first) from its TunerResults."""
    import json

    from tfx.utils import io_utils

    for art in lin.outputs(tuner_execution_id, "TunerResults"):
        path = os.path.join(art.uri, "tuner_results.json")
        try:
            trials = json.loads(io_utils.read_string_file(path))
        except Exception as e:  # noqa: BLE001 - a report must not hide the run's other facts
            return {"unreadable": f"{path}: {e}"}
        return {"trials": trials, "best": trials[0] if trials else None}
    return {}


def run_facts(lin: Lineage, run_id: str, *, with_metrics: bool = True) -> dict[str, dict[str, Any]]:
    """What a run trained on and produced, by section, for `diff_facts`."""
    facts: dict[str, dict[str, Any]] = {
        "data": {},
        "schema": {},
        "code": {},
        "hyperparameters": {},
        "metrics": {},
        "model": {},
    }
    info = lin.run_info(run_id)
    lineage = None
    if info.model_id is not None:
        lineage = lin.model_lineage(lin.artifact(info.model_id), with_metrics=with_metrics)
        data = lineage.data
    else:
        gen = lin.run_example_gen(run_id)
        data = [lin.data_version(a) for a in lin.outputs(gen.id, "Examples")] if gen else []
    facts["data"] = data_facts(data)
    schema_exec = lin.run_execution(run_id, SCHEMA_IMPORTER)
    if schema_exec is not None:
        facts["schema"] = {
            "content_sha256": prop(schema_exec, "content_sha256"),
            "file": prop(schema_exec, "schema_file"),
        }
    for node, key in ((TRANSFORM, "transform"), (TRAINER, "trainer")):
        ex = lin.run_execution(run_id, node)
        if ex is not None:
            c = lin.component_facts(ex)
            facts["code"][key] = c.get("code_fingerprint")
            if node == TRAINER:
                facts["hyperparameters"] = dict(c.get("hyperparameters") or {})
    tuner = lin.run_execution(run_id, TUNER)
    if tuner is not None:
        facts["tuning"] = tuning_facts(lin, tuner.id)
    if lineage is not None:
        facts["metrics"] = {k: v for k, v in lineage.metrics.items() if not k.endswith("_diff")}
        b = lineage.blessing
        facts["model"] = {
            "id": lineage.model_id,
            "trained_in_run": lineage.trained_in_run,
            "blessed": bool(b and b.blessed),
            "baseline_model_id": b.baseline_model_id if b else None,
            "pushed": lineage.pushed,
            "pushed_version": next((p.version for p in lineage.pushes if p.pushed), None),
        }
        if b and not b.blessed and b.message:
            # Why not: each failing threshold or slice with its numbers.
            facts["model"]["not_blessed_because"] = b.message
    return facts


def model_graph(lin: Lineage, lineage: ModelLineage) -> Graph:
    """The model's lineage drawn: executions, artifacts, raw files, blessing and pushes."""
    model = lin.artifact(lineage.model_id)
    steps = lin.producer_steps(model)
    g = Graph(title=model_title(lineage))
    by_id = {d.examples_id: d for d in lineage.data}
    for ex, ins, outs in steps:
        node = lin.node_of.get(ex.id, lin.exec_type(ex))
        lines = [f"execution #{ex.id}", f"run {lin.run_of.get(ex.id, '?')}"]
        if node == TRAINER:
            hp = lineage.trainer.get("hyperparameters", {})
            lines.append(", ".join(f"{k}={v}" for k, v in hp.items()))
            lines.append(f"code {str(lineage.trainer.get('code_fingerprint'))[:12]}")
        elif node == TRANSFORM:
            lines.append(f"code {str(lineage.transform.get('code_fingerprint'))[:12]}")
        elif node == SCHEMA_IMPORTER:
            lines.append(f"sha256 {str(lineage.schema.get('content_sha256'))[:12]}")
            g.add(f"f{ex.id}", "file", "schema file", [str(lineage.schema.get("file"))])
            g.edge(f"f{ex.id}", f"e{ex.id}")
        g.add(f"e{ex.id}", "execution", node, lines)
        for aid, _key in ins:
            g.edge(f"a{aid}", f"e{ex.id}")
        for aid in outs:
            art = lin.artifact(aid)
            g.edge(f"e{ex.id}", f"a{aid}")
            type_name = lin.type_of(art) if art else "?"
            lines = [f"#{aid}"]
            if aid in by_id:
                d = by_id[aid]
                lines = [
                    f"#{aid} span {d.span}" + ("" if d.version is None else f" v{d.version}"),
                    f"sha256 {(d.fingerprint or '?')[:12]}",
                    f"{d.rows if d.rows is not None else '?'} rows",
                ]
                raw_key = f"raw{aid}"
                g.add(
                    raw_key,
                    "file",
                    f"raw data span {d.span}",
                    [os.path.join(d.input_base or "?", d.pattern or "?")]
                    + [f"{len(d.files)} file(s) on disk now"],
                )
                g.edge(raw_key, f"e{ex.id}")
            g.add(f"a{aid}", "artifact", type_name, lines, highlight=aid == lineage.model_id)
    b = lineage.blessing
    if b is not None:
        verdict = "blessed" if b.blessed else "NOT blessed"
        base = f"baseline model #{b.baseline_model_id}" if b.baseline_model_id else "no baseline"
        metric_lines = [f"{k} {v:.4f}" for k, v in list(lineage.metrics.items())[:3]]
        g.add("eval", "execution", EVALUATOR, [f"run {b.run_id}"])
        g.add(
            f"a{b.blessing_id}",
            "artifact",
            "ModelBlessing",
            [f"#{b.blessing_id} {verdict}", base, *metric_lines],
        )
        g.edge(f"a{lineage.model_id}", "eval")
        g.edge("eval", f"a{b.blessing_id}")
        for p in lineage.pushes:
            g.add(f"push{p.pushed_model_id}", "execution", PUSHER, [f"run {p.run_id}"])
            g.add(
                f"a{p.pushed_model_id}",
                "artifact",
                "PushedModel",
                [
                    f"#{p.pushed_model_id} {'pushed' if p.pushed else 'not pushed'}",
                    f"version {p.version}" if p.pushed else "",
                ],
            )
            g.edge(f"a{b.blessing_id}", f"push{p.pushed_model_id}")
            g.edge(f"push{p.pushed_model_id}", f"a{p.pushed_model_id}")
    return g
