"""What changed in a store since a reader last looked, and other cheap store-wide questions.

The console (tfxp/ui/browse.py) keeps each pipeline's `Lineage` between pages and
asks these before every page: a store with no new execution or context is not
read again, and one with new executions adds only those (`Lineage.absorb`).
"""

from __future__ import annotations

from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata.properties import prop

# (execution, its node context's name, its pipeline_run context's name)
ChangedExecution = tuple[pb.Execution, str | None, str | None]


def store_version(store: Any) -> tuple:
    """Cheap: the newest execution (by update time) and the newest context."""
    from ml_metadata.metadata_store import metadata_store as ms

    newest = ms.ListOptions(limit=1, order_by=ms.OrderByField.UPDATE_TIME, is_asc=False)
    execs = store.get_executions(list_options=newest)
    contexts = store.get_contexts(
        list_options=ms.ListOptions(limit=1, order_by=ms.OrderByField.ID, is_asc=False)
    )
    e = execs[0] if execs else None
    return (
        (e.id, e.last_update_time_since_epoch, e.last_known_state) if e else None,
        contexts[0].id if contexts else None,
    )


def executions_since(store: Any, since_ms: int) -> list[ChangedExecution]:
    """(execution, node context name, pipeline_run context name) of every execution
    updated at or after `since_ms`."""
    from ml_metadata.metadata_store import metadata_store as ms

    kinds = {t.id: t.name for t in store.get_context_types()}
    query = f"last_update_time_since_epoch >= {int(since_ms)}"
    out = []
    for ex in store.get_executions(list_options=ms.ListOptions(filter_query=query)):
        names = {kinds.get(c.type_id): c.name for c in store.get_contexts_by_execution(ex.id)}
        node, run = names.get("node"), names.get("pipeline_run")
        if node is None and names.get("run") and prop(ex, "component_id"):
            # TFX's legacy launcher (Airflow): see LineageCore._add_legacy_runs.
            pipeline = names.get("pipeline", "")
            node = f"{pipeline}.{prop(ex, 'component_id')}"
            run = names["run"].removeprefix(pipeline + ".")
        out.append((ex, node, run))
    return out


def pipeline_names(store: Any) -> list[str]:
    """Every pipeline the store records a run of, sorted."""
    return sorted(c.name for c in store.get_contexts_by_type("pipeline"))


def artifact_and_events(store: Any, artifact_id: int) -> tuple[pb.Artifact | None, list]:
    """The artifact (None: no such id) and every event that wrote or read it."""
    found = store.get_artifacts_by_id([artifact_id])
    if not found:
        return None, []
    return found[0], list(store.get_events_by_artifact_ids([artifact_id]))
