"""The artifact registry: `run-local`'s stand-in for the cluster's ML Metadata.

Every output artifact of earlier completed tasks under one pipeline root is a line of
`<root>/.run-local/artifacts.jsonl`; TFX's resolver tasks are answered from it."""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    pass

from kubeflow.local.job import LocalRunError

REGISTRY = os.path.join(".run-local", "artifacts.jsonl")


# --- the artifact registry: the harness's stand-in for ML Metadata -----------


def type_title(artifact_type: Any) -> str:
    if artifact_type.schema_title:
        return artifact_type.schema_title
    if artifact_type.instance_schema:
        return yaml.safe_load(artifact_type.instance_schema).get("title", "")
    return ""


class ArtifactRegistry:
    """Every output artifact of earlier completed tasks under one pipeline root, oldest first."""

    def __init__(self, pipeline_root: str) -> None:
        self.path = os.path.join(pipeline_root, REGISTRY)

    def entries(self) -> list[dict[str, Any]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def record(self, entries: list[dict[str, Any]]) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "a") as f:
            for entry in entries:
                f.write(json.dumps(entry, sort_keys=True) + "\n")

    _CLAUSE = re.compile(
        r'^(?:schema_title="(?P<title>[^"]*)"'
        r"|state=(?P<state>\w+)"
        r'|name="(?P<name>[^"]*)"'
        r"|metadata\.(?P<key>\w+)\.(?P<kind>number_value|string_value)=(?P<value>.+))$"
    )

    def latest(self, query: str) -> dict[str, Any] | None:
        """The newest artifact matching a TFX resolver's filter (the forms TFX 1.16 compiles)."""
        tests: list[Any] = []  # predicates over an entry
        for clause in (c.strip() for c in query.split(" AND ")):
            m = self._CLAUSE.match(clause)
            if not m:
                raise LocalRunError(f"resolver filter clause {clause!r} is not supported locally")
            if m["title"] is not None:
                tests.append(lambda e, t=m["title"]: e["type"] == t)
            elif m["state"] is not None:
                tests.append(lambda e, s=m["state"]: s == "LIVE")
            elif m["name"] is not None:
                tests.append(lambda e, n=m["name"]: e["name"] == n)
            else:
                raw = m["value"].strip('"')
                want: Any = float(raw) if m["kind"] == "number_value" else raw
                tests.append(lambda e, k=m["key"], w=want: e["metadata"].get(k) == w)
        matching = [e for e in self.entries() if all(t(e) for t in tests)]
        return matching[-1] if matching else None


# --- one task ----------------------------------------------------------------


def artifact_entry(artifact: Any, title: str, run_id: str, task: str, key: str) -> dict:
    return {
        "name": artifact.name,
        "uri": artifact.uri,
        "metadata": dict(artifact.metadata),
        "type": title,
        "run_id": run_id,
        "task": task,
        "key": key,
    }


def dsl_artifact(entry: dict[str, Any]) -> Any:
    from kfp import dsl

    return dsl.Artifact(name=entry["name"], uri=entry["uri"], metadata=entry["metadata"])
