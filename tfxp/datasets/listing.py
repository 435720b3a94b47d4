"""The spans of a dataset with what ML Metadata knows of each: its ingestions (rows,
bytes, content fingerprint, when, origin) and what used them (runs, models, pushes).

`tfxp data list` prints it (`render`); the listing is ML Metadata's answer
(metadata/lineage/spans.py `span_listing`), laid over the span folders on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from metadata.examples import examples_ingested_from
from metadata.lineage import Lineage
from metadata.lineage.records import ModelUse, SpanIngestion
from metadata.store import LineageError, StoreLocation, open_store
from pipeline.config import PipelineConfig
from pipeline.spans import list_spans
from tfxp.datasets.publish import leftover_incoming


@dataclass
class Ingestion:
    examples_id: int
    uri: str
    rows: int | None
    raw_bytes: int | None
    fingerprint: str | None
    ingested_at: str
    runs: list[str] = field(default_factory=list)
    models: list[ModelUse] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)  # DVC revision, tags (metadata/sources.py)


@dataclass
class SpanRow:
    span: int
    version: int | None
    path: str
    files: int
    bytes_on_disk: int
    ingestions: list[Ingestion] = field(default_factory=list)


# ---------------------------------------------------------------------------
# ML Metadata lineage.


def _ingestion(found: SpanIngestion) -> Ingestion:
    data = found.data
    return Ingestion(
        examples_id=data.examples_id,
        uri=found.uri,
        rows=data.rows,
        raw_bytes=found.raw_bytes,
        fingerprint=data.fingerprint,
        ingested_at=found.ingested_at,
        runs=found.runs,
        models=found.models or [],
        origins=[o["describe"] for o in data.origins],
    )


def _open_store(config: PipelineConfig, location: StoreLocation | None):
    """The store that records the dataset's ingestions, or None before the first run."""
    location = location or StoreLocation(sqlite_path=config.metadata_path)
    if not location.is_mysql and not os.path.exists(config.metadata_path):
        return None
    return open_store(location)


def _remote_rows(data_root: str) -> list[SpanRow]:
    """Spans of an s3:// or gs:// data root (versions folded into their span)."""
    from tfx.dsl.io import fileio

    from pipeline.spans import remote_span_files
    from tfxp.storage.storage import Location, check_location, enable_filesystems

    check_location(Location(data_root, "data root", write=False))
    enable_filesystems([data_root])
    root = data_root.rstrip("/")
    return [
        SpanRow(n, None, f"{root}/span-{n}", len(files), sum(fileio.stat(f).length for f in files))
        for n, files in sorted(remote_span_files(root).items())
    ]


def describe_dataset(
    config: PipelineConfig, location: StoreLocation | None = None
) -> list[SpanRow]:
    """Spans on disk with their ingestions and lineage (from `location`, default the
    run dir's SQLite store), oldest first."""
    if "://" in config.data_root:
        rows = _remote_rows(config.data_root)
    else:
        rows = [
            SpanRow(s.span, s.version, str(s.path), len(s.files), s.nbytes)
            for s in list_spans(config.data_root)
        ]
    store = _open_store(config, location)
    if store is None:
        return rows
    try:
        lineage = Lineage(store, config.pipeline_name)
    except LineageError:  # no run of this pipeline in the store yet
        return rows
    # The listing is ML Metadata's answer (metadata/lineage/spans.py span_listing),
    # the console's too; here it is laid over the span folders on disk.
    by_key: dict[tuple[int, int | None], list[Ingestion]] = {}
    for span in lineage.span_listing(examples_ingested_from(store, config.data_root)):
        for found in span.ingestions:
            key = (span.span, found.data.version)
            by_key.setdefault(key, []).append(_ingestion(found))
    for row in rows:
        row.ingestions = by_key.get((row.span, row.version), [])
    return rows


def human_bytes(n: float | None) -> str:
    """`n` bytes in B, KB, MB or GB (1024s); "-" when unknown."""
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def render(name: str, config: PipelineConfig, rows: list[SpanRow]) -> str:
    lines = [f"dataset {name}: {config.data_root}", f"  ML Metadata: {config.metadata_path}"]
    if not rows:
        lines.append("  no spans (add one: tfxp data add NAME FILE.csv)")
    header = (
        f"  {'span':>4} {'ver':>3} {'rows':>11} {'bytes':>9}  {'fingerprint':<12}  "
        f"{'ingested':<19}  {'runs':>4}  models"
    )
    if rows:
        lines.append(header)
    for r in rows:
        version = "-" if r.version is None else str(r.version)
        if not r.ingestions:
            lines.append(
                f"  {r.span:>4} {version:>3} {'-':>11} {human_bytes(r.bytes_on_disk):>9}  "
                f"{'-':<12}  {'not ingested':<19}  {'-':>4}  -"
            )
            continue
        for i, ing in enumerate(reversed(r.ingestions)):
            models = ", ".join(f"#{m.model_id}{' pushed' if m.pushed else ''}" for m in ing.models)
            tag = "" if i == 0 else "  (earlier content)"
            lines.append(
                f"  {r.span:>4} {version:>3} {_count(ing.rows):>11} {human_bytes(ing.raw_bytes):>9}  "
                f"{(ing.fingerprint or '-')[:12]:<12}  {ing.ingested_at:<19}  "
                f"{len(ing.runs):>4}  {models or '-'}{tag}"
            )
            lines.extend(f"{'':>10}origin {o}" for o in ing.origins)
    for p in leftover_incoming(config.data_root):
        lines.append(f"  leftover of an interrupted add (not ingested; safe to delete): {p}")
    return "\n".join(lines)
