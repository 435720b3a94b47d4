"""Custom properties of TFX artifacts, None when absent (TFX's getters return 0 or '')."""

from __future__ import annotations

from tfx import types


def custom_int(artifact: types.Artifact, name: str) -> int | None:
    if artifact.mlmd_artifact.custom_properties.get(name) is None:
        return None
    return artifact.get_int_custom_property(name)


def custom_str(artifact: types.Artifact, name: str) -> str | None:
    if artifact.mlmd_artifact.custom_properties.get(name) is None:
        return None
    return artifact.get_string_custom_property(name)
