"""The one reader of ML Metadata properties: an artifact's or execution's value as Python."""

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
