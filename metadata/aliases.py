"""Model aliases (champion, challenger, ...) as ML Metadata records, with who/when/why.

Every change of an alias is one execution of type `tfxp.AliasChange` in the
pipeline's `tfxp_model_registry` context, written in one `put_execution`
call (one transaction): its properties say which alias, what was done
(promote, rollback, push), by whom and why; an INPUT event keyed `model`
points at the Model artifact that now holds the alias, and one keyed
`previous` at the model that held it before. The alias's current model is
the newest change's `model`; its history is the list of changes, so
`rollback` needs no other state. Lineage follows the events like any other
execution's (`tfxp lineage model champion`).

Only names and ids are recorded here: no URL, path with credentials, or other
secret ever is.
"""

from __future__ import annotations

import datetime as dt
import getpass
import os
import re
import socket
from dataclasses import dataclass
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata.properties import event_key, prop
from metadata.store import LineageError

CONTEXT_TYPE = "tfxp_model_registry"
EXECUTION_TYPE = "tfxp.AliasChange"
MODEL_KEY = "model"
PREVIOUS_KEY = "previous"
ALIAS_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
ACTIONS = ("promote", "rollback", "push")
_PROPERTIES = ("alias", "action", "who", "why", "version", "previous_version", "pipeline")


@dataclass(frozen=True)
class AliasChange:
    """One change of one alias, read back from ML Metadata."""

    execution_id: int
    alias: str
    action: str
    model_id: int
    version: str | None
    previous_model_id: int | None
    previous_version: str | None
    who: str
    why: str
    when: str

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def check_alias(alias: str) -> str:
    if not ALIAS_NAME.match(alias or ""):
        raise LineageError(
            f"alias {alias!r} is not a valid name: lower-case letters, digits, - and _, "
            "starting with a letter (e.g. champion, challenger)"
        )
    return alias


def who_am_i() -> str:
    """user@host of the process making the change (TFXP_USER overrides, e.g. in CI)."""
    user = os.environ.get("TFXP_USER")
    if user:
        return user
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _key_path(key: str) -> pb.Event.Path:
    path = pb.Event.Path()
    path.steps.add().key = key
    path.steps.add().index = 0
    return path


def _types(store: Any) -> tuple[int, int]:
    """(context type id, execution type id), registered on first use."""
    ctx_type = pb.ContextType(name=CONTEXT_TYPE)
    ctx_type.properties["pipeline"] = pb.STRING
    ex_type = pb.ExecutionType(name=EXECUTION_TYPE)
    for name in _PROPERTIES:
        ex_type.properties[name] = pb.STRING
    return store.put_context_type(ctx_type), store.put_execution_type(ex_type)


def _context(store: Any, pipeline: str, *, create: bool) -> pb.Context | None:
    found = store.get_context_by_type_and_name(CONTEXT_TYPE, pipeline)
    if found is not None or not create:
        return found
    ctx_type_id, _ = _types(store)
    ctx = pb.Context(type_id=ctx_type_id, name=pipeline)
    ctx.properties["pipeline"].string_value = pipeline
    try:
        [ctx.id] = store.put_contexts([ctx])
    except Exception:  # another writer made it first
        found = store.get_context_by_type_and_name(CONTEXT_TYPE, pipeline)
        if found is None:
            raise
        return found
    return ctx


def record_change(
    store: Any,
    pipeline: str,
    alias: str,
    *,
    action: str,
    model_id: int,
    version: str | None,
    previous: AliasChange | None,
    why: str,
    who: str | None = None,
) -> AliasChange:
    """Writes one alias change (execution, events and context together) and returns it."""
    check_alias(alias)
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, not {action!r}")
    ctx = _context(store, pipeline, create=True)
    _, ex_type_id = _types(store)
    ex = pb.Execution(type_id=ex_type_id, last_known_state=pb.Execution.COMPLETE)
    values = {
        "alias": alias,
        "action": action,
        "who": who or who_am_i(),
        "why": why or "",
        "version": version or "",
        "previous_version": (previous.version or "") if previous else "",
        "pipeline": pipeline,
    }
    for name, value in values.items():
        ex.properties[name].string_value = value
    events = [pb.Event(artifact_id=model_id, type=pb.Event.INPUT, path=_key_path(MODEL_KEY))]
    if previous is not None:
        events.append(
            pb.Event(
                artifact_id=previous.model_id, type=pb.Event.INPUT, path=_key_path(PREVIOUS_KEY)
            )
        )
    execution_id, _, _ = store.put_execution(ex, [(None, e) for e in events], [ctx])
    return _changes_of(store, [store.get_executions_by_id([execution_id])[0]])[0]


def _changes_of(store: Any, executions: list[pb.Execution]) -> list[AliasChange]:
    if not executions:
        return []
    by_exec: dict[int, dict[str, int]] = {e.id: {} for e in executions}
    for ev in store.get_events_by_execution_ids(list(by_exec)):
        by_exec[ev.execution_id][event_key(ev)] = ev.artifact_id
    out = []
    for ex in sorted(executions, key=lambda e: e.id):
        keys = by_exec[ex.id]
        if MODEL_KEY not in keys:
            continue
        when = dt.datetime.fromtimestamp(ex.create_time_since_epoch / 1000)
        out.append(
            AliasChange(
                execution_id=ex.id,
                alias=prop(ex, "alias") or "",
                action=prop(ex, "action") or "",
                model_id=keys[MODEL_KEY],
                version=prop(ex, "version") or None,
                previous_model_id=keys.get(PREVIOUS_KEY),
                previous_version=prop(ex, "previous_version") or None,
                who=prop(ex, "who") or "",
                why=prop(ex, "why") or "",
                when=when.isoformat(timespec="seconds"),
            )
        )
    return out


def history(store: Any, pipeline: str, alias: str | None = None) -> list[AliasChange]:
    """Every change (of `alias`, or of all aliases) of the pipeline, oldest first."""
    ctx = _context(store, pipeline, create=False)
    if ctx is None:
        return []
    changes = _changes_of(store, list(store.get_executions_by_context(ctx.id)))
    return [c for c in changes if alias is None or c.alias == alias]


def current(store: Any, pipeline: str, alias: str) -> AliasChange | None:
    """The change that gave `alias` its model now, or None when it was never set."""
    changes = history(store, pipeline, alias)
    return changes[-1] if changes else None


def current_aliases(store: Any, pipeline: str) -> dict[str, AliasChange]:
    """alias -> its current change, for every alias the pipeline has."""
    out: dict[str, AliasChange] = {}
    for change in history(store, pipeline):
        out[change.alias] = change
    return out


def earlier_holder(store: Any, pipeline: str, alias: str) -> AliasChange | None:
    """The change whose model `rollback` gives `alias` back, or None when there is none.

    The history replays as a stack: a promote or push puts a model on top, a
    rollback takes the top one off. Rolling back twice goes two models back
    (not back and forth); a promote after a rollback is undone by the next one.
    """
    stack: list[AliasChange] = []
    for change in history(store, pipeline, alias):
        if change.action == "rollback":
            if stack:
                stack.pop()
            continue
        if stack and stack[-1].model_id == change.model_id:
            continue
        stack.append(change)
    return stack[-2] if len(stack) >= 2 else None
