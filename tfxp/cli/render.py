"""Lineage as text: runs, one run, a model, a span, a diff, and stable JSON (pure)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from metadata.diff import SECTIONS
from metadata.lineage.records import ComponentRun, ModelLineage, RunInfo, SpanLineage
from tfxp.presentation.lineage_report import model_title


def _short(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}"
    text = str(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12]  # a SHA-256
    return text


def render_diff(report: dict[str, Any]) -> str:
    lines = [f"runs diff  A = {report['a']}", f"           B = {report['b']}"]
    rows = [("section", "what", "A", "B")]
    for section, keys in report["changed"].items():
        for key, ab in keys.items():
            extra = ""
            if isinstance(ab["a"], float) and isinstance(ab["b"], float):
                extra = f"  ({ab['b'] - ab['a']:+.4f})"
            rows.append((section, key, _short(ab["a"]), _short(ab["b"]) + extra))
    if len(rows) > 1:
        lines.append(_table(rows))
    else:
        lines.append("no differences")
    if report["unchanged"]:
        lines.append("unchanged: " + ", ".join(report["unchanged"]))
    return "\n".join(lines)


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=True)]
        out.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(out)


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def render_runs(runs: Sequence[RunInfo], verdicts: dict[int, tuple[bool, bool]]) -> str:
    """`runs list` table; `verdicts` maps model id -> (blessed, pushed)."""
    if not runs:
        return "no runs"
    rows = [("run", "started", "took", "status", "span", "model", "blessed", "pushed", "ran")]
    details = []
    for r in runs:
        blessed, pushed = verdicts.get(r.model_id, (None, None)) if r.model_id else (None, None)
        n_exec, n_cache = len(r.executed), len(r.cached)
        rows.append(
            (
                r.run_id,
                r.started.replace("T", " "),
                f"{r.seconds:.1f}s",
                r.status,
                ",".join(str(s) for s in r.spans) or "-",
                f"#{r.model_id}" if r.model_id else "-",
                _yes(blessed),
                _yes(pushed),
                f"{n_exec} executed, {n_cache} cached",
            )
        )
        details.append(r)
    lines = [_table(rows)]
    for r in details:
        parts = [f"{state}: {', '.join(nodes)}" for state, nodes in _by_state(r.components)]
        lines.append(f"  {r.run_id}  " + "; ".join(parts))
    return "\n".join(lines)


def _by_state(components: Sequence[ComponentRun]) -> list[tuple[str, list[str]]]:
    grouped: dict[str, list[str]] = {}
    for c in components:
        grouped.setdefault(c.state, []).append(c.node_id)
    return list(grouped.items())


def render_run(info: RunInfo, facts: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"run {info.run_id}: {info.status}, started {info.started.replace('T', ' ')}, "
        f"took {info.seconds:.1f}s"
    ]
    rows = [("component", "state", "seconds", "execution")]
    for c in info.components:
        secs = f"{c.seconds:.1f}" if c.state == "executed" else ""
        rows.append((c.node_id, c.state, secs, f"#{c.execution_id}"))
    lines.append(_table(rows))
    for section in SECTIONS:
        values = facts.get(section) or {}
        shown = ", ".join(f"{k} {_short(v)}" for k, v in values.items()) or "-"
        lines.append(f"{section:<16} {shown}")
    lines.extend(_trial_lines(facts.get("tuning") or {}))
    return "\n".join(lines)


def _trial_lines(tuning: dict[str, Any]) -> list[str]:
    """The Tuner's trials, best first: score (eval loss, lower is better) and values."""
    if not tuning:
        return []
    if "unreadable" in tuning:
        return [f"{'tuning':<16} unreadable: {tuning['unreadable']}"]
    trials = tuning.get("trials") or []
    lines = [f"{'tuning':<16} {len(trials)} trial(s), best first (score: eval loss)"]
    for t in trials:
        # %g, not _short's 4 decimals: a learning rate of 1e-06 must not read 0.0000.
        values = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={_short(v)}"
            for k, v in t.items()
            if k not in ("trial_id", "score")
        )
        lines.append(f"  trial {t.get('trial_id')}  score {_short(t.get('score'))}  {values}")
    return lines


def render_model(m: ModelLineage) -> str:
    lines = [model_title(m), f"  model      #{m.model_id} {m.model_uri} (created {m.created})"]
    if m.reused_by_runs:
        lines.append(f"  reused by  {', '.join(m.reused_by_runs)} (cached)")
    for d in m.data:
        version = "" if d.version is None else f" version {d.version}"
        lines.append(
            f"  data       span {d.span}{version}: Examples #{d.examples_id}, "
            f"{d.rows_text}, sha256 {d.fingerprint or '?'}"
        )
        lines.append(
            f"             from {os.path.join(d.input_base or '?', d.pattern or '?')}"
            f" (ingested in run {d.ingested_in_run})"
        )
        for f in d.files:
            lines.append(f"               {f}")
        for o in d.origins:
            lines.append(f"             origin {o['describe']}")
    s = m.schema
    lines.append(
        f"  schema     Schema #{s.get('schema_id')} sha256 {s.get('content_sha256')} "
        f"({s.get('file')})"
    )
    t = m.transform
    lines.append(
        f"  transform  execution #{t.get('execution_id')} ({t.get('code')}) code "
        f"{t.get('code_fingerprint')}"
    )
    tr = m.trainer
    lines.append(
        f"  trainer    execution #{tr.get('execution_id')} ({tr.get('code')}) code "
        f"{tr.get('code_fingerprint')}"
    )
    hp = tr.get("hyperparameters") or {}
    lines.append("  hyperparameters " + (", ".join(f"{k}={v}" for k, v in hp.items()) or "-"))
    b = m.blessing
    if b is None:
        lines.append("  blessed    not evaluated")
    else:
        base = (
            f"against baseline model #{b.baseline_model_id}"
            if b.baseline_model_id
            else "no baseline (no earlier blessed model): absolute thresholds only"
        )
        verdict = "yes" if b.blessed else "no"
        lines.append(f"  blessed    {verdict} (evaluated in run {b.run_id}), {base}")
        if not b.blessed and b.message:
            lines.extend(f"             {reason}" for reason in b.message.split("; "))
    if m.metrics:
        lines.append("  metrics    " + ", ".join(f"{k} {_short(v)}" for k, v in m.metrics.items()))
    pushed = [p for p in m.pushes if p.pushed]
    if pushed:
        for p in pushed:
            lines.append(f"  pushed     version {p.version} -> {p.destination} (run {p.run_id})")
    else:
        lines.append("  pushed     no")
    for c in m.aliases:
        gained = c["model_id"] == m.model_id
        verb = "became" if gained else "lost"
        why = f": {c['why']}" if c["why"] else ""
        lines.append(
            f"  alias      {verb} {c['alias']} ({c['action']}) {c['when']} by {c['who']}{why}"
        )
    return "\n".join(lines)


def render_span(s: SpanLineage) -> str:
    lines = [f"span {s.span} of pipeline '{s.pipeline}'"]
    for d in s.data:
        version = "" if d.version is None else f" version {d.version}"
        lines.append(
            f"  ingested{version}: Examples #{d.examples_id}, {d.rows_text}, sha256 "
            f"{(d.fingerprint or '?')[:12]}, from {os.path.join(d.input_base or '?', d.pattern or '?')}"
            f" (run {d.ingested_in_run})"
        )
        lines.extend(f"    origin {o['describe']}" for o in d.origins)
    if not s.models:
        lines.append("  no model was trained on this span")
        return "\n".join(lines)
    rows = [("model", "trained in run", "spans", "blessed", "baseline", "pushed")]
    for u in s.models:
        rows.append(
            (
                f"#{u.model_id}",
                u.trained_in_run or "-",
                ",".join(str(x) for x in u.spans),
                _yes(u.blessed),
                f"#{u.baseline_model_id}" if u.baseline_model_id else "-",
                ("yes " + ",".join(u.pushed_versions)) if u.pushed else "no",
            )
        )
    lines.append(_table(rows))
    return "\n".join(lines)


def dumps(value: Any) -> str:
    """Stable JSON: sorted keys, fixed indentation."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)
