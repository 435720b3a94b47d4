"""Named data versions: spans read from DVC, spans tagged (and published to DVC), and
the name a run asks for resolved to its span and bytes.

    add_from_dvc      a DVC revision's files -> the next span (or the span that holds them)
    tag_span          a name for a span's ingested Examples; with a repository, its
                      TFRecord shards added to DVC, committed, tagged and pushed
    resolve_version   `tfxp run --data-version NAME` -> span and content sha256

Every fact is recorded in ML Metadata through `metadata/sources.py`.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.io.content_fingerprint import files_sha256
from metadata import sources
from metadata.store import StoreLocation, open_store
from pipeline.config import PipelineConfig
from pipeline.spans import SpanDir, SpanError, list_spans
from tfxp.datasets import dvc as dvc_data
from tfxp.datasets.publish import publish_span


def writable_store(location: StoreLocation):
    """The store a record goes to, created when a dataset has had no run yet."""
    if not location.is_mysql:
        os.makedirs(os.path.dirname(os.path.abspath(location.sqlite_path or "")), exist_ok=True)
    return open_store(location, create=True, writable=True)


def span_sha256(config: PipelineConfig, span: SpanDir) -> str:
    """The span's content hash exactly as our ExampleGen records it (paths relative
    to the data root), so a record and an ingestion can be compared."""
    return files_sha256([str(f) for f in span.files], config.data_root)[0]


@dataclass
class Added:
    span: SpanDir
    origin: dvc_data.DvcOrigin
    content_sha256: str
    cached: bool  # the span already held this revision: nothing was added
    source_id: int | None = None


def _already_added(store, config: PipelineConfig, origin: dvc_data.DvcOrigin) -> Added | None:
    """The span a previous add made from the same commit and md5, when still unchanged."""
    spans = {s.span: s for s in list_spans(config.data_root)}
    for s in reversed(sources.sources(store, config.data_root)):
        f = s.facts
        same = (f.get("repo"), f.get("path"), f.get("commit"), f.get("dvc_md5")) == (
            origin.repo,
            origin.path,
            origin.commit,
            origin.dvc_md5,
        )
        if s.kind == "dvc" and same and s.span in spans:
            span = spans[s.span]
            if span_sha256(config, span) == s.content_sha256:
                return Added(span, origin, s.content_sha256, cached=True, source_id=s.source_id)
    return None


def add_from_dvc(
    config: PipelineConfig,
    location: StoreLocation,
    repo: str,
    path: str,
    rev: str | None,
    fill_checks,
) -> Added:
    """Publishes `path` at `rev` of a DVC repository as the next span and records it.

    `fill_checks(folder)` runs on the fetched files before they are published (the
    column renames `data add` applies); `publish_span`'s checks come with `config`.
    The same revision again returns its span, `cached=True`, with nothing written.
    Raises DvcError or SpanError with nothing published.
    """
    if rev is None and not dvc_data.is_url(repo):  # a local clone has a workspace
        changed = dvc_data.dirty(repo, [path])
        if changed:
            raise dvc_data.DvcError(
                f"DVC repository {dvc_data.normalized_repo(repo)} has uncommitted changes "
                f"({'; '.join(changed[:5])}); commit them (`dvc add`, `git commit`) or pass "
                "--rev: a span must come from a revision that can be read again"
            )
    origin = dvc_data.resolve(repo, path, rev)
    store = writable_store(location)
    hit = _already_added(store, config, origin)
    if hit is not None:
        return hit

    def fill(folder: Path) -> None:
        dvc_data.fetch(origin, folder)
        fill_checks(folder)

    span = publish_span(config.data_root, fill, **_publish_options(config))
    digest = span_sha256(config, span)
    origin_facts: dict[str, Any] = {k: v for k, v in origin.to_dict().items() if k != "files"}
    try:
        source_id = sources.record(
            store,
            kind="dvc",
            pipeline=config.pipeline_name,
            data_root=config.data_root,
            span=span.span,
            content_sha256=digest,
            uri=str(span.path),
            **origin_facts,
            files=",".join(f.name for f in span.files),
        )
    except Exception:
        shutil.rmtree(span.path, ignore_errors=True)  # no span without its record
        raise
    return Added(span, origin, digest, cached=False, source_id=source_id)


def _publish_options(config: PipelineConfig) -> dict:
    from components.validation.schema_importer import (
        load_schema,
        schema_column_types,
        schema_nan_free_columns,
    )

    schema = load_schema(config.schema_file)
    return {
        "columns": schema_column_types(schema),
        "encoding": config.csv_encoding,
        "nan_free": schema_nan_free_columns(schema),
    }


# ---------------------------------------------------------------------------
# Tags.


@dataclass
class Tagged:
    name: str
    span: int
    examples_id: int
    content_sha256: str
    published: dvc_data.Published | None
    source_id: int


def ingested_examples(store, config: PipelineConfig, span: int | None):
    """The newest LIVE Examples our ExampleGen wrote for `span` (None: any) of this data root."""
    from metadata.examples import span_ingestions

    found = span_ingestions(store, config.data_root, span)
    if not found:
        raise SpanError(
            f"span {span} of {config.data_root} was never ingested (no Examples in "
            f"{config.metadata_path}); `tfxp run --span {span}` ingests it first"
        )
    return max(found, key=lambda a: a.id)


def shard_files(examples_uri: str) -> list[tuple[str, str]]:
    """The TFRecord shards of an Examples artifact (every split): (path, `Split-x/name`)."""
    root = Path(examples_uri)
    return sorted((str(p), str(p.relative_to(root))) for p in root.glob("Split-*/*") if p.is_file())


def tag_span(
    config: PipelineConfig,
    location: StoreLocation,
    span: int,
    name: str | None,
    repo: str | None = None,
    dest: str | None = None,
) -> Tagged:
    """Names a span's newest ingestion; with `repo`, publishes its shards to DVC too."""
    from metadata.properties import prop

    store = writable_store(location)
    examples = ingested_examples(store, config, span)
    digest = prop(examples, "content_sha256")
    name = name or f"{config.pipeline_name}-span-{span}"
    taken = sources.find_name(store, config.data_root, name)
    if taken is not None and taken.span != span:
        raise SpanError(f"data version {name!r} already names span {taken.span}; pick another")
    published = None
    if repo is not None:
        shards = shard_files(examples.uri)
        if not shards:
            raise SpanError(f"Examples #{examples.id} at {examples.uri} has no shards")
        manifest = _manifest(config, span, examples.id, digest, shards)
        published = dvc_data.publish(
            repo,
            [*shards, (manifest, MANIFEST)],
            dest or f"{config.pipeline_name}/span-{span}",
            name,
            f"tfxp: {config.pipeline_name} span {span}, Examples #{examples.id} "
            f"(raw sha256 {digest})",
            encryption=config.storage,
        )
        shutil.rmtree(os.path.dirname(manifest), ignore_errors=True)
    facts = {}
    if published is not None:
        facts = dict(
            repo=published.repo,
            path=published.path,
            commit=published.commit,
            dvc_md5=published.dvc_md5,
            remote=published.pushed_to,
        )
    source_id = sources.record(
        store,
        kind="tag",
        pipeline=config.pipeline_name,
        data_root=config.data_root,
        span=span,
        content_sha256=digest,
        uri=examples.uri,
        examples_id=examples.id,
        name=name,
        **facts,
    )
    return Tagged(name, span, examples.id, digest, published, source_id)


MANIFEST = "tfxp-examples.json"


def _manifest(
    config, span: int, examples_id: int, digest: str, shards: list[tuple[str, str]]
) -> str:
    """A file beside the shards saying what they are: the span, its raw content sha256
    and each shard's sha256, so a clone can check what `dvc pull` gave it."""
    import hashlib
    import tempfile

    entries = {}
    for path, rel in shards:
        with open(path, "rb") as f:
            entries[rel] = hashlib.file_digest(f, "sha256").hexdigest()
    folder = Path(tempfile.mkdtemp(prefix="tfxp-tag-")) / "manifest"
    folder.mkdir()
    manifest = folder / MANIFEST
    manifest.write_text(
        json.dumps(
            {
                "dataset": config.pipeline_name,
                "span": span,
                "examples_id": examples_id,
                "raw_content_sha256": digest,
                "shards_sha256": entries,
            },
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    return str(manifest)


# ---------------------------------------------------------------------------
# Runs on a named version.


def resolve_version(config: PipelineConfig, location: StoreLocation, name: str) -> dict:
    """`--data-version NAME` as config overrides: span, data_version and data_sha256.

    NAME is a tag (`tfxp data tag`), a DVC revision given to `data add --dvc`, or a
    commit. ValueError names the known ones when it is none of them.
    """
    from metadata.store import MetadataStoreError

    try:
        store = open_store(location)
    except MetadataStoreError as e:
        raise ValueError(f"--data-version {name}: no record of data versions ({e})") from None
    found = sources.find_name(store, config.data_root, name)
    if found is None:
        known = ", ".join(sources.known_names(store, config.data_root)) or "none"
        raise ValueError(
            f"--data-version {name}: no span of {config.data_root} goes by that name in "
            f"{location.describe()} (known: {known}); `tfxp data add --dvc ... --rev {name}` "
            "or `tfxp data tag` names one"
        )
    return {"span": found.span, "data_version": name, "data_sha256": found.content_sha256}


# ---------------------------------------------------------------------------
# Branches over S3 (lakeFS's layout).


def record_bucket_ref(config: PipelineConfig, location: StoreLocation) -> sources.Source | None:
    """After a run on `s3://REPO/REF/...`: records the repo, branch and (when known) commit
    of the span it ingested, once per content. None for other data roots."""
    from metadata.properties import prop
    from pipeline.spans import remote_span_files
    from tfxp.storage import branches

    if branches.parse(config.data_root) is None:
        return None
    store = writable_store(location)
    examples = ingested_examples(store, config, config.span)
    span, digest = prop(examples, "span"), prop(examples, "content_sha256")
    files = sorted(remote_span_files(config.data_root).get(span, []))
    ref = branches.bucket_ref(config.data_root, files[0] if files else None)
    if ref is None:  # parsed above, so never: for the type checker
        return None
    facts: dict[str, Any] = {"repo": ref.repo, "branch": ref.branch, "commit": ref.commit or None}
    for s in sources.of_content(store, config.data_root, span, digest):
        if s.kind == "s3" and all(s.facts.get(k) == v for k, v in facts.items() if v):
            return s
    sources.record(
        store,
        kind="s3",
        pipeline=config.pipeline_name,
        data_root=config.data_root,
        span=span,
        content_sha256=digest,
        uri=f"{config.data_root.rstrip('/')}/span-{span}",
        examples_id=examples.id,
        **facts,
    )
    return sources.of_content(store, config.data_root, span, digest)[-1]
