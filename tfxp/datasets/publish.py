"""Publishing a new drop as the next span, atomically (`tfxp data add|generate`, `init`)."""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from pipeline.spans import (
    INCOMING_PREFIX,
    SpanDir,
    SpanError,
    check_same_header,
    csv_files,
    list_spans,
)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with path.open("rb") as f:
        os.fsync(f.fileno())


def next_span_number(data_root: str | os.PathLike) -> int:
    spans = list_spans(data_root)
    return max((s.span for s in spans), default=0) + 1


def copy_files(sources: Sequence[str | os.PathLike], dest: Path) -> None:
    """Copies `sources` into `dest` (names kept, `.csv` required)."""
    names = [Path(s).name for s in sources]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SpanError(f"two input files share the name {dupes[0]}; rename one")
    for src in sources:
        src = Path(src)
        if not src.is_file():
            raise SpanError(f"{src} is not a file")
        if src.suffix != ".csv":
            raise SpanError(f"{src}: only .csv files are ingested (ExampleGen reads *.csv)")
        shutil.copyfile(src, dest / src.name)


def publish_span(
    data_root: str | os.PathLike,
    fill: Callable[[Path], object],
    *,
    columns: dict[str, str] | None = None,
    check: bool = True,
    encoding: str = "utf-8",
    nan_free: Sequence[str] = (),
) -> SpanDir:
    """Makes a new span from what `fill(folder)` writes, all or nothing.

    `fill` writes into a hidden `.incoming-<uuid>` folder inside the dataset,
    which no `span-{SPAN}` pattern matches. The files are checked against the
    schema's `columns`, flushed to disk, and the folder is renamed to the next
    `span-<N>` in one `os.rename`: a run sees the whole drop or nothing, and a
    crash leaves only a hidden folder (removed here on errors; `tfxp data list`
    shows leftovers of a hard kill).
    """
    from components.example_gen import csv_checks

    root = Path(data_root)
    root.mkdir(parents=True, exist_ok=True)
    incoming = root / f"{INCOMING_PREFIX}{uuid.uuid4().hex[:12]}"
    incoming.mkdir()
    try:
        fill(incoming)
        files = csv_files(incoming)
        if not files:
            raise SpanError("nothing to publish: no .csv files were written")
        check_same_header(SpanDir(0, None, incoming, files), encoding)
        if check and columns:
            csv_checks.check_csv_files(
                [str(f) for f in files], columns, encoding=encoding, finite=nan_free
            )
        for f in files:
            _fsync_file(f)
        _fsync_dir(incoming)
        while True:
            number = next_span_number(root)
            target = root / f"span-{number}"
            if target.exists():
                continue
            try:
                os.rename(incoming, target)
                break
            except OSError as e:  # a concurrent `data add` took the number first
                if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise
    return SpanDir(number, None, target, csv_files(target))


def leftover_incoming(data_root: str | os.PathLike) -> list[Path]:
    root = Path(data_root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.name.startswith(INCOMING_PREFIX))
