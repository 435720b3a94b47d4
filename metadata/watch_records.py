"""`tfxp watch`'s records in ML Metadata: which spans were handled, and how.

One `tfxp.SpanHandled` execution per span in the pipeline's `tfxp_watch`
context (one per pipeline and data root), with the outcome (trained, blocked
by the gate, failed), the run id, the attempts and a detail line. tfxp/monitor/watch.py
reads them back on every start, so a recorded span never runs twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata.properties import prop
from pipeline.config import PipelineConfig

CONTEXT_TYPE = "tfxp_watch"
EXECUTION_TYPE = "tfxp.SpanHandled"
_INT_PROPS = ("span", "attempts")
_STR_PROPS = ("data_root", "outcome", "run_id", "detail")


@dataclass(frozen=True)
class Handled:
    span: int
    outcome: str
    run_id: str
    attempts: int
    detail: str


def _types(store: Any) -> tuple[int, int]:
    ctx_type = pb.ContextType(name=CONTEXT_TYPE)
    ex_type = pb.ExecutionType(name=EXECUTION_TYPE)
    for name in _INT_PROPS:
        ex_type.properties[name] = pb.INT
    for name in _STR_PROPS:
        ex_type.properties[name] = pb.STRING
    return store.put_context_type(ctx_type), store.put_execution_type(ex_type)


def _context_name(config: PipelineConfig) -> str:
    # One record set per pipeline and data root: another data root is other data.
    return f"{config.pipeline_name}:{config.data_root.rstrip('/')}"


def _context(store: Any, config: PipelineConfig, *, create: bool) -> pb.Context | None:
    name = _context_name(config)
    try:
        found = store.get_context_by_type_and_name(CONTEXT_TYPE, name)
    except Exception:  # noqa: BLE001 - the type is not registered yet
        found = None
    if found is not None or not create:
        return found
    ctx_type_id, _ = _types(store)
    [ctx_id] = store.put_contexts([pb.Context(type_id=ctx_type_id, name=name)])
    return store.get_contexts_by_id([ctx_id])[0]


def handled_spans(store: Any, config: PipelineConfig) -> dict[int, Handled]:
    """span -> its record (the first one, should two ever exist)."""
    ctx = _context(store, config, create=False)
    if ctx is None:
        return {}
    out: dict[int, Handled] = {}
    for ex in sorted(store.get_executions_by_context(ctx.id), key=lambda e: e.id):
        span = prop(ex, "span")
        if span is not None and span not in out:
            out[span] = Handled(
                span,
                prop(ex, "outcome") or "",
                prop(ex, "run_id") or "",
                prop(ex, "attempts") or 0,
                prop(ex, "detail") or "",
            )
    return out


def record_handled(store: Any, config: PipelineConfig, h: Handled) -> None:
    ctx = _context(store, config, create=True)
    _, ex_type_id = _types(store)
    ex = pb.Execution(type_id=ex_type_id, last_known_state=pb.Execution.COMPLETE)
    ex.properties["span"].int_value = h.span
    ex.properties["attempts"].int_value = h.attempts
    ex.properties["data_root"].string_value = config.data_root
    ex.properties["outcome"].string_value = h.outcome
    ex.properties["run_id"].string_value = h.run_id
    ex.properties["detail"].string_value = h.detail[:2000]
    store.put_execution(ex, [], [ctx])
