"""The one reader of ML Metadata properties (an artifact's or execution's value as
Python), of an event's key and of an execution's outputs."""

from __future__ import annotations

import json
from typing import Any


def prop(node: Any, key: str) -> Any:
    """A property or custom property of an artifact/execution, as a Python value."""
    for props in (node.properties, node.custom_properties):
        if key in props:
            value = props[key]
            kind = value.WhichOneof("value")
            if kind is None:
                return None
            if kind == "struct_value":
                from google.protobuf import json_format

                return json_format.MessageToDict(value.struct_value)
            if kind == "proto_value":
                return None
            return getattr(value, kind)
    return None


def json_prop(text: Any) -> Any:
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def output_artifacts(store: Any, execution_id: int) -> list:
    """The artifacts an execution wrote (OUTPUT events), in ML Metadata's order."""
    from ml_metadata.proto import metadata_store_pb2

    events = store.get_events_by_execution_ids([execution_id])
    ids = [e.artifact_id for e in events if e.type == metadata_store_pb2.Event.OUTPUT]
    return store.get_artifacts_by_id(ids) if ids else []


def event_key(event: Any) -> str:
    """The key an event's artifact is in (its input or output name), or ''."""
    for step in event.path.steps:
        if step.HasField("key"):
            return step.key
    return ""
