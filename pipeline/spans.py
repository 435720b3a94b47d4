"""Data versions on disk: span folders and which spans a run takes.

A dataset folder holds one folder per raw drop: `span-<N>/*.csv`, or, when a
drop is re-delivered, `span-<N>/version-<V>/*.csv` (one layout per dataset).
ExampleGen ingests them with TFX's `{SPAN}`/`{VERSION}` patterns; this module
answers the questions TFX answers late or not at all: does the span a run asks
for exist, is it empty, do its files agree on their columns. How a new drop
appears without a run ever seeing half of it: `tfxp/datasets/publish.py`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import PipelineConfig

SPAN_DIR = re.compile(r"^span-(\d+)$")
VERSION_DIR = re.compile(r"^version-(\d+)$")
# Hidden, and not matched by `span-{SPAN}`: a drop being written is invisible to runs.
INCOMING_PREFIX = ".incoming-"
# Written last into an object-storage span (no folder rename there): the span is whole.
PUBLISHED_MARKER = "_PUBLISHED"
UNVERSIONED_PATTERN = "span-{SPAN}/*.csv"
VERSIONED_PATTERN = "span-{SPAN}/version-{VERSION}/*.csv"


class SpanError(ValueError):
    """The data folder does not hold what the run asks for; the message says what to do."""


@dataclass(frozen=True)
class SpanDir:
    span: int
    version: int | None
    path: Path
    files: tuple[Path, ...]

    @property
    def label(self) -> str:
        return f"span {self.span}" + ("" if self.version is None else f" version {self.version}")

    @property
    def nbytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)


def is_remote(root: str) -> bool:
    return "://" in root


def csv_files(folder: Path, pattern: str = "*.csv") -> tuple[Path, ...]:
    return tuple(sorted(p for p in folder.glob(pattern) if p.is_file()))


def member_glob(config: PipelineConfig) -> str:
    """A span folder's files, from the dataset's pattern: `*.csv`, or `*/*` for image class folders."""
    return config.span_pattern.split("/", 1)[1] if "/" in config.span_pattern else "*"


def is_versioned(root: Path) -> bool:
    """True when the dataset uses span-<N>/version-<V>/ folders."""
    for span in root.iterdir() if root.is_dir() else ():
        if (
            SPAN_DIR.match(span.name)
            and span.is_dir()
            and any(VERSION_DIR.match(v.name) and v.is_dir() for v in span.iterdir())
        ):
            return True
    return False


def list_spans(data_root: str | os.PathLike, files: str = "*.csv") -> list[SpanDir]:
    """Every span (and version) folder of a dataset, oldest first; empty ones included.

    `files` globs a span's data files inside its folder (see `member_glob`).
    """
    root = Path(data_root)
    if not root.is_dir():
        return []
    versioned = is_versioned(root)
    found: list[SpanDir] = []
    for span_dir in root.iterdir():
        m = SPAN_DIR.match(span_dir.name)
        if not m or not span_dir.is_dir():
            continue
        span = int(m.group(1))
        if not versioned:
            found.append(SpanDir(span, None, span_dir, csv_files(span_dir, files)))
            continue
        versions = [v for v in span_dir.iterdir() if VERSION_DIR.match(v.name) and v.is_dir()]
        if not versions:
            found.append(SpanDir(span, None, span_dir, csv_files(span_dir, files)))
        for v in versions:
            matched = VERSION_DIR.match(v.name)
            if matched is None:  # filtered above
                continue
            version = int(matched.group(1))
            found.append(SpanDir(span, version, v, csv_files(v, files)))
    return sorted(found, key=lambda s: (s.span, -1 if s.version is None else s.version))


def input_pattern(config: PipelineConfig) -> str:
    """The ExampleGen split pattern for this dataset's layout."""
    if config.versioned is not None:
        return config.version_pattern if config.versioned else config.span_pattern
    if is_remote(config.data_root):
        return config.span_pattern
    return config.version_pattern if is_versioned(Path(config.data_root)) else config.span_pattern


def _latest_per_span(spans: Sequence[SpanDir]) -> dict[int, SpanDir]:
    latest: dict[int, SpanDir] = {}
    for s in spans:  # sorted by (span, version): the last one wins
        latest[s.span] = s
    return latest


def _header(path: Path, encoding: str = "utf-8") -> list[str]:
    from components.io import csv_text

    try:
        return [h.strip() for h in csv_text.read_header(str(path), encoding)]
    except csv_text.CsvTextError as e:
        raise SpanError(f"{e}") from e


def check_same_header(span: SpanDir, encoding: str = "utf-8") -> None:
    """All files of one drop must share a header (ExampleGen reads them with the first's).

    Headers are read as every reader reads them (components/io/csv_text.py): a
    byte-order mark is skipped; a compressed file or invalid text is a
    SpanError naming the file.
    """
    if not span.files or any(f.suffix != ".csv" for f in span.files):
        return  # image folders have no header
    first = _header(span.files[0], encoding)
    for f in span.files[1:]:
        other = _header(f, encoding)
        if other != first:
            extra = sorted(set(other) - set(first))
            missing = sorted(set(first) - set(other))
            detail = []
            if missing:
                detail.append(f"missing {', '.join(missing)}")
            if extra:
                detail.append(f"extra {', '.join(extra)}")
            raise SpanError(
                f"{span.label} ({span.path}): {f.name} has different columns from "
                f"{span.files[0].name} ({'; '.join(detail) or 'different order'}); files of one "
                "drop must share a header. Fix or remove the file, then rerun."
            )


def select_spans(config: PipelineConfig) -> list[SpanDir]:
    """The span folders a run ingests, oldest first (the last is ExampleGen's own span).

    Raises SpanError before anything runs when the data folder cannot serve the
    run: no spans, an empty span, a mixed layout, a pinned span or version that
    does not exist, a window longer than the spans on disk, or a drop whose
    files disagree on their columns.
    """
    if is_remote(config.data_root):
        raise SpanError(
            f"{config.data_root}: --window and version layouts need a local data root "
            "(object-storage data roots take one span per run)"
        )
    root = Path(config.data_root)
    if not root.is_dir():
        raise SpanError(f"data folder {root} does not exist; point --data-root at a dataset")
    files = member_glob(config)
    spans = list_spans(root, files)
    if not spans:
        raise SpanError(
            f"data folder {root} holds no span folders: expected {root}/span-1/{files} "
            "(one folder per data drop; `tfxp data add` makes them)"
        )
    versioned = is_versioned(root)
    if versioned:
        flat = [s for s in spans if s.version is None]
        if flat:
            raise SpanError(
                f"data folder {root} mixes layouts: {flat[0].path.name} has no version-<V>/ "
                "folders while other spans do; move its files into "
                f"{flat[0].path}/version-1/"
            )
    for s in spans:
        if not s.files:
            stray = sorted(p.name for p in s.path.iterdir())
            hint = f" (it holds: {', '.join(stray[:5])})" if stray else ""
            raise SpanError(
                f"{s.label} folder {s.path} is empty: no {files} files{hint}. A run would silently "
                "skip it; remove it, or add the drop with `tfxp data add`."
            )
    latest = _latest_per_span(spans)
    numbers = sorted(latest)
    available = ", ".join(str(n) for n in numbers)
    if config.version is not None and config.span is None:
        raise SpanError("--version needs --span: a version number belongs to one span")
    if config.version is not None and not versioned:
        raise SpanError(
            f"--version {config.version}: data folder {root} has no version-<V>/ folders"
        )
    target = config.span if config.span is not None else numbers[-1]
    if target not in latest:
        raise SpanError(f"span {target} does not exist in {root}; spans there: {available}")
    chosen = latest[target]
    if config.version is not None:
        match = [s for s in spans if s.span == target and s.version == config.version]
        if not match:
            versions = ", ".join(str(s.version) for s in spans if s.span == target)
            raise SpanError(
                f"span {target} has no version {config.version} in {root}; versions: {versions}"
            )
        chosen = match[0]
    if config.window < 1:
        raise SpanError(f"--window must be at least 1, not {config.window}")
    older = [n for n in numbers if n < target][-(config.window - 1) :] if config.window > 1 else []
    if len(older) < config.window - 1:
        raise SpanError(
            f"--window {config.window} ending at span {target} needs {config.window} spans; "
            f"{root} has {len(older) + 1} up to span {target} (spans: {available})"
        )
    selection = [latest[n] for n in older] + [chosen]
    for s in selection:
        check_same_header(s, config.csv_encoding)
    if config.data_sha256:
        check_content(config, chosen)
    return selection


def check_content(config: PipelineConfig, span: SpanDir) -> None:
    """A run on a named data version takes exactly the bytes recorded for it."""
    from components.io.content_fingerprint import files_sha256

    actual = files_sha256([str(f) for f in span.files], config.data_root)[0]
    if actual != config.data_sha256:
        name = config.data_version or "the pinned data version"
        raise SpanError(
            f"{span.label} at {span.path} is not {name} any more: its content sha256 is "
            f"{actual[:12]}, {name} was recorded as {(config.data_sha256 or '')[:12]}; nothing was "
            f"run. Restore the files, or add {name} again (`tfxp data add --dvc ...`)"
        )


def check_spans(config: PipelineConfig) -> list[SpanDir]:
    """Pre-flight for a run; remote data roots get the checks a listing can answer."""
    if is_remote(config.data_root):
        check_remote_spans(config)
        return []
    return select_spans(config)


def remote_span_files(data_root: str) -> dict[int, list[str]]:
    """span -> CSV files (either layout) under an s3:// or gs:// data root, via tf.io.gfile."""
    from tfx.dsl.io import fileio

    root = data_root.rstrip("/")
    found: dict[int, list[str]] = {}
    for pattern in ("span-*/*.csv", "span-*/version-*/*.csv"):
        for path in fileio.glob(f"{root}/{pattern}"):
            m = SPAN_DIR.match(path[len(root) + 1 :].split("/", 1)[0])
            if m:
                found.setdefault(int(m.group(1)), []).append(path)
    return found


def check_remote_spans(config: PipelineConfig) -> None:
    """No spans, or a pinned span that is not there: say so before Beam starts."""
    root = config.data_root.rstrip("/")
    spans = remote_span_files(root)
    if not spans:
        raise SpanError(
            f"data root {root} holds no span folders with CSV files: expected "
            f"{root}/span-1/*.csv (`tfxp data upload {root}` puts the embedded dataset there)"
        )
    if config.span is not None and config.span not in spans:
        available = ", ".join(str(n) for n in sorted(spans))
        raise SpanError(f"span {config.span} does not exist in {root}; spans there: {available}")


def inference_span(config: PipelineConfig, span: int | None = None) -> SpanDir:
    """The span batch inference scores: `span` (its newest version), or the newest span of
    the dataset's inference data root (batch_inference.data_root, else its data root)."""
    root = config.inference_data_root
    if is_remote(root):
        raise SpanError(f"{root}: batch inference reads spans from a local folder")
    spans = [s for s in list_spans(root) if s.files]
    if not spans:
        raise SpanError(
            f"{root} holds no span-<N>/ folder with CSV files to score; put the rows in "
            f"{root}/span-<N>/ (or set batch_inference.data_root in the dataset file)"
        )
    if span is None:
        return spans[-1]
    matching = [s for s in spans if s.span == span]
    if not matching:
        available = ", ".join(sorted({str(s.span) for s in spans}, key=int))
        raise SpanError(f"span {span} is not in {root}; spans there: {available}")
    return matching[-1]
