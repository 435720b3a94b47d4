"""Known-plaintext scan of raw storage files, as someone holding the disk would do it.

SeaweedFS gzips chunks whose type compresses (CSV, JSON, text) before it
stores them, so a byte search alone would miss a CSV value even when nothing
is encrypted. The scan therefore also inflates every gzip member it finds
(and gzip inside gzip: a GZIP TFRecord shard stored compressed), and looks
for each needle in the raw bytes and in everything inflated.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b\x08"
MAX_INFLATED = 256 * 1024 * 1024  # per member: a guard against a decompression bomb


def _inflated(data: bytes, depth: int = 2) -> Iterable[bytes]:
    """`data`'s gzip members, inflated, and (to `depth`) the members inside those."""
    view = memoryview(data)  # slices without copies: a volume file is up to 64 MB
    start = data.find(GZIP_MAGIC)
    while start != -1:
        try:
            out = zlib.decompressobj(31).decompress(view[start:], MAX_INFLATED)
        except zlib.error:
            out = b""
        if out:
            yield out
            if depth > 1:
                yield from _inflated(out, depth - 1)
        start = data.find(GZIP_MAGIC, start + 1)


def found_in(files: Iterable[Path], needles: Iterable[bytes]) -> dict[bytes, list[str]]:
    """{needle: names of the files whose raw or inflated bytes contain it}."""
    wanted = list(needles)
    hits: dict[bytes, list[str]] = {n: [] for n in wanted}
    for path in files:
        data = path.read_bytes()
        views = [data, *_inflated(data)]
        for needle in wanted:
            if any(needle in view for view in views):
                hits[needle].append(path.name)
    return hits
