"""Model status and metadata, as TF Serving prints them (REST JSON and gRPC messages)."""

from __future__ import annotations

from typing import Any

from serving.models import INIT_OP, LoadedVersion


def signature_def_map(version: LoadedVersion):
    """tensorflow.serving.SignatureDefMap of the version (the init op left out, as TF Serving does)."""
    from tensorflow_serving.apis import get_model_metadata_pb2

    out = get_model_metadata_pb2.SignatureDefMap()
    for name, sig in version.signature_defs.signature_def.items():
        if name != INIT_OP:
            out.signature_def[name].CopyFrom(sig)
    return out


def metadata_json(version: LoadedVersion) -> dict[str, Any]:
    from google.protobuf import json_format

    return {
        "model_spec": {
            "name": version.model,
            "signature_name": "",
            "version": str(version.version),
        },
        "metadata": {
            "signature_def": json_format.MessageToDict(
                signature_def_map(version), preserving_proto_field_name=True
            )
        },
    }


def status_json(versions: dict[int, LoadedVersion]) -> dict[str, Any]:
    return {
        "model_version_status": [
            {
                "version": str(lv.version),
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
            for _, lv in sorted(versions.items(), key=lambda kv: -kv[1].version)
        ]
    }
