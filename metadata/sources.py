"""Where a span came from and the names it goes by, recorded in ML Metadata.

One artifact type, `DatasetSource`, one artifact per fact about a span of a
data root:

- `kind=dvc`: the span was read from a DVC repository (`tfxp data add --dvc`):
  `repo`, `path`, `rev`, `commit`, `dvc_md5`, `remote`;
- `kind=s3`: the data root is an S3 gateway path `s3://REPO/BRANCH/...`
  (lakeFS's layout): `repo`, `branch`, and `commit` when the endpoint reports one;
- `kind=tag`: a name given to a span's ingested Examples (`tfxp data tag`), with
  `repo`, `path`, `commit`, `dvc_md5`, `remote` when they were published to DVC.

Every record carries the span's `content_sha256` as our ExampleGen computes
it, so a reader can tell whether the span on disk is still what was recorded.
Only `metadata/` talks to ML Metadata; commands use these functions.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from typing import Any

from metadata.properties import prop

TYPE_NAME = "DatasetSource"
_STRING_FIELDS = (
    "kind",
    "pipeline",
    "data_root",
    "content_sha256",
    "name",
    "repo",
    "path",
    "rev",
    "commit",
    "dvc_md5",
    "remote",
    "branch",
    "files",
)


@dataclass
class Source:
    source_id: int
    kind: str
    span: int
    data_root: str
    content_sha256: str
    recorded: str
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str | None:
        """The name a user asks for this span by: a tag, or the DVC revision."""
        return self.facts.get("name") or self.facts.get("rev")

    def describe(self) -> str:
        f = self.facts
        if self.kind == "dvc":
            return (
                f"dvc {f.get('repo')} {f.get('path')}@{f.get('rev')} (commit "
                f"{str(f.get('commit'))[:12]}, dvc md5 {f.get('dvc_md5')})"
            )
        if self.kind == "s3":
            commit = f.get("commit") or "not reported by the endpoint"
            return f"s3 repo {f.get('repo')} branch {f.get('branch')} (commit {commit})"
        where = ""
        if f.get("repo"):
            pushed = f", pushed to {f['remote']}" if f.get("remote") else ", no remote"
            where = (
                f" -> dvc {f['repo']} {f.get('path')} (commit {str(f.get('commit'))[:12]}, "
                f"dvc md5 {f.get('dvc_md5')}{pushed})"
            )
        return f"tag {f.get('name')}{where}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "kind": self.kind,
            "span": self.span,
            "data_root": self.data_root,
            "content_sha256": self.content_sha256,
            "recorded": self.recorded,
            **self.facts,
        }


def _type_id(store) -> int:
    from ml_metadata.proto import metadata_store_pb2 as pb

    t = pb.ArtifactType(name=TYPE_NAME)
    for key in _STRING_FIELDS:
        t.properties[key] = pb.STRING
    t.properties["span"] = pb.INT
    t.properties["examples_id"] = pb.INT
    return store.put_artifact_type(t, can_add_fields=True)


def _root(data_root: str) -> str:
    return data_root.rstrip("/") if "://" in data_root else os.path.abspath(data_root)


def record(
    store,
    *,
    kind: str,
    pipeline: str,
    data_root: str,
    span: int,
    content_sha256: str,
    uri: str,
    examples_id: int | None = None,
    **facts: str,
) -> int:
    """Records one fact about a span; returns the artifact id."""
    from ml_metadata.proto import metadata_store_pb2 as pb

    unknown = sorted(set(facts) - set(_STRING_FIELDS))
    if unknown:
        raise ValueError(f"not a DatasetSource property: {', '.join(unknown)}")
    a = pb.Artifact(type_id=_type_id(store), uri=uri, state=pb.Artifact.LIVE)
    values = dict(
        facts,
        kind=kind,
        pipeline=pipeline,
        data_root=_root(data_root),
        content_sha256=content_sha256,
    )
    for key, value in values.items():
        if value is not None:
            a.properties[key].string_value = str(value)
    a.properties["span"].int_value = int(span)
    if examples_id is not None:
        a.properties["examples_id"].int_value = int(examples_id)
    [artifact_id] = store.put_artifacts([a])
    return artifact_id


def _as_source(a) -> Source:
    facts = {
        k: prop(a, k)
        for k in (*_STRING_FIELDS, "examples_id")
        if k not in ("kind", "data_root", "content_sha256", "pipeline") and prop(a, k) is not None
    }
    return Source(
        source_id=a.id,
        kind=prop(a, "kind"),
        span=prop(a, "span"),
        data_root=prop(a, "data_root"),
        content_sha256=prop(a, "content_sha256"),
        recorded=dt.datetime.fromtimestamp(a.create_time_since_epoch / 1000).isoformat(
            timespec="seconds"
        ),
        facts=facts,
    )


def sources(store, data_root: str, span: int | None = None) -> list[Source]:
    """Every record about the spans of `data_root` (or one span), oldest first."""
    if TYPE_NAME not in {t.name for t in store.get_artifact_types()}:
        return []
    root = _root(data_root)
    found = [
        _as_source(a)
        for a in store.get_artifacts_by_type(TYPE_NAME)
        if prop(a, "data_root") == root and (span is None or prop(a, "span") == span)
    ]
    return sorted(found, key=lambda s: s.source_id)


def of_content(store, data_root: str, span: int, content_sha256: str | None) -> list[Source]:
    """The records that describe exactly these bytes of a span (lineage's question)."""
    return [s for s in sources(store, data_root, span) if s.content_sha256 == content_sha256]


def find_name(store, data_root: str, name: str) -> Source | None:
    """The newest record a data version name points at: a tag, a DVC revision, or a
    commit (or its prefix of 7+ characters)."""
    matches = []
    for s in sources(store, data_root):
        commit = str(s.facts.get("commit") or "")
        by_commit = len(name) >= 7 and s.kind == "dvc" and commit.startswith(name)
        if s.name == name or by_commit:
            matches.append(s)
    return matches[-1] if matches else None


def known_names(store, data_root: str) -> list[str]:
    """`name (span N)` for every name recorded for `data_root`, for error messages."""
    seen: dict[str, int] = {}
    for s in sources(store, data_root):
        if s.name:
            seen[s.name] = s.span
    return [f"{n} (span {span})" for n, span in seen.items()]
