"""Example files cut into pieces, the unit of work of the fast paths' Beam forms.

StatisticsGen's and the Evaluator's fast paths (components/fast/stats/,
components/evaluation/fast/) cut a split's TFRecord files the same way: a file per
piece, or a large file's batches interleaved over several pieces (a GZIP stream cannot
be entered in the middle, so each piece reads the file whole and keeps only its own
batches). Their Beam forms work a piece per Spark task; their in-process forms read
each file once and hand batch i to piece i mod count. Both merge in piece order.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import tensorflow as tf

BATCH_SIZE = 8192
# A piece per this many compressed bytes of a file (about 300k taxi rows): large enough
# that a task's fixed cost stays small beside its work, and that a file below it is one
# piece, one stream through the generators as TFX's single-bundle pipeline feeds them.
PIECE_BYTES = 16 << 20
# Every piece of a file reads all of it: more pieces per file would read it more often
# than they save in decoding.
MAX_PIECES_PER_FILE = 8


def example_files(split_uris: Sequence[str], refusal: type[Exception]) -> tuple[list[str], str]:
    """Every TFRecord file of the split(s) in name order and their compression ("GZIP"
    or ""). What a fast path cannot read as one set (no files, GZIP mixed with plain) is
    raised as `refusal`, the caller's way of handing the work to TFX's executor."""
    files = sorted(f for uri in split_uris for f in tf.io.gfile.glob(f"{uri}/*"))
    if not files:
        raise refusal(f"no example files under {', '.join(split_uris)}")
    return files, compression_of(files, refusal)


def compression_of(files: Sequence[str], refusal: type[Exception]) -> str:
    """The files' one compression ("GZIP" or ""); none or a mix is raised as `refusal`."""
    gzip = {f.endswith(".gz") for f in files}
    if len(gzip) != 1:
        raise refusal("a split mixes GZIP and uncompressed files (or has none)")
    return "GZIP" if gzip.pop() else ""


@dataclass(frozen=True)
class Piece:
    """Batches `index`, `index + count`, ... of a split's files read in order: `count`
    pieces cover the files, each reading them whole but decoding only its own batches
    (GZIP streams cannot be entered in the middle)."""

    files: tuple[str, ...]
    compression: str  # "GZIP" or ""
    index: int = 0
    count: int = 1
    batch_size: int = BATCH_SIZE


def pieces(files: list[str], compression: str, batch_size: int = BATCH_SIZE) -> list[Piece]:
    """The pieces a split's files are cut into, in merge order (file, then index)."""
    out = []
    for path in files:
        by_size = math.ceil(tf.io.gfile.stat(path).length / PIECE_BYTES)
        count = min(MAX_PIECES_PER_FILE, max(by_size, 1))
        out += [Piece((path,), compression, index, count, batch_size) for index in range(count)]
    return out


def write_whole(path: str, data: bytes) -> None:
    """`data` at `path`, written beside it and renamed into place: the driver reading a
    Beam form's result sees the whole file or none, and a retried task rewrites it (Beam's
    file sinks would commit through side inputs, each ending a Spark job)."""
    tf.io.gfile.makedirs(os.path.dirname(path))
    partial = f"{path}.partial"
    with tf.io.gfile.GFile(partial, "wb") as out:
        out.write(data)
    tf.io.gfile.rename(partial, path, overwrite=True)
