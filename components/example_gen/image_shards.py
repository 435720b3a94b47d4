"""Image files -> GZIP TFRecord shards cut by bytes, written by one Beam DoFn per shard.

Shard count (`shards_for`), per output split:

    shards = ceil(split bytes / target)              target: image.shard_mb, 128 MB default
    if that is fewer than 10 x workers, raise it to
        min(10 x workers, split bytes // 16 MB)     never shards under 16 MB

so a large span gets ~128 MB shards, a mid-sized one at least ten shards per
worker (a reader interleaves many shards, and every worker gets several),
and a small one few shards of at least 16 MB (per-file overhead stays
negligible); a tiny span gets one. `num_shards` (`tfxp run --num-shards`)
fixes the count instead.

A file goes to shard `sha256(path) % shards`, so shards get every class and
each shard's files, sorted by that hash, mix classes; the same files give
the same shards on every run.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import time
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
from absl import logging
from tfx.components.example_gen import write_split
from tfx.dsl.io import fileio

from components.example_gen.image_decode import decode, image_example, probe, split_of
from components.example_gen.image_dicom import dicom_to_png, is_dicom

DEFAULT_SHARD_MB = 128
MIN_SHARD_BYTES = 16 * 1024 * 1024
SHARDS_PER_WORKER = 10
INCOMPLETE = ".incomplete"  # suffix of a shard being written (readers glob *.gz)


def shards_for(
    split_bytes: float, configured: int = 0, *, workers: int = 1, shard_mb: float = DEFAULT_SHARD_MB
) -> int:
    """Shards of the largest split (see the module doc for the rule)."""
    if configured > 0:
        return configured
    shards = max(1, math.ceil(split_bytes / (shard_mb * 1024 * 1024)))
    if shards < SHARDS_PER_WORKER * workers:
        shards = max(shards, min(SHARDS_PER_WORKER * workers, int(split_bytes // MIN_SHARD_BYTES)))
    return shards


def shard_key(path: str) -> bytes:
    return hashlib.sha256(path.encode()).digest()


def shard_of(path: str, num_shards: int) -> int:
    return int.from_bytes(shard_key(path)[:8], "big") % num_shards


def gzip_level(sample_record: bytes) -> int:
    """1 for records that compress; 0 (GZIP framing, stored blocks) for ones that do not.

    Encoded PNG/JPEG bytes are compressed already: deflating them again costs
    ~2-4 ms per 224x224 image (more than decoding it) and saves nothing.
    Raw pixels and small records (the 8x8 digits: 0.32) compress well at
    level 1, about as well as at level 6.
    """
    if not sample_record:
        return 1
    return 0 if len(zlib.compress(sample_record, 1)) > 0.95 * len(sample_record) else 1


def decode_threads() -> int:
    """Threads that read and decode images inside one shard writer: one per core."""
    return max(1, min(8, os.cpu_count() or 1))


class WriteShard(beam.DoFn):
    """One shard's image files -> one GZIP TFRecord file per split; yields what it wrote.

    Only file paths travel through Beam: each worker reads, checks and encodes
    its shard's images and streams them into its own output files, so no
    record is shuffled between workers and memory stays flat however large
    the images. Within a worker, a thread pool reads, decodes, hashes and
    encodes images (Pillow, hashlib and zlib release the GIL, so this uses
    every core even under Beam's one-thread in-process runner) while this
    thread writes the records in hash order, so the output is the same as
    one thread's; at most `_AHEAD` images per thread are in flight, so at
    most that many files are open. Files are written under a temporary name
    and renamed when complete: a reader never sees a half-written shard.
    """

    _AHEAD = 4

    def __init__(
        self, image_format, cumulative_buckets, split_uris, num_shards, gzip_level, threads=0
    ):
        self._level = gzip_level
        self._format = image_format
        self._buckets = cumulative_buckets
        self._uris = split_uris
        self._shards = num_shards
        self._threads = threads or decode_threads()
        self._written = 0

    def _prepare(self, item: tuple[str, int]) -> tuple[int, int, bytes | None, str, int]:
        """(split, label, serialized example, format, bytes read), or (-1, label, None,
        "path: why", bytes read) for a file that is no image."""
        path, label = item
        with fileio.open(path, "rb") as f:
            data = f.read()
        try:
            # DICOM, which TensorFlow cannot decode, becomes a lossless PNG.
            stored, extra = dicom_to_png(data) if is_dicom(data) else (data, None)
            # Encoded bytes are stored as they are: check they decode, keep the
            # shape, and skip converting and copying the pixels.
            pixels, fmt = decode(stored) if self._format == "raw" else probe(stored)
        except ValueError as e:
            return -1, label, None, f"{path}: {e}", len(data)
        split = split_of(data, self._buckets)
        record = image_example(stored, pixels, label, self._format, fmt, extra)
        return split, label, record, "dicom" if extra else fmt, len(data)

    def _prepared(self, files: list[tuple[str, int]]):
        """`_prepare` of each file, in order, computed by the thread pool."""
        if self._threads == 1:
            yield from map(self._prepare, files)
            return
        with ThreadPoolExecutor(self._threads, thread_name_prefix="image-decode") as pool:
            pending: deque = deque()
            for item in files:
                pending.append(pool.submit(self._prepare, item))
                if len(pending) >= self._AHEAD * self._threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

    def process(self, element):
        from compat.beam import TFRecordUtil

        shard, items = element
        started = time.perf_counter()
        # Hash order: the same on every run whatever order the listing gave.
        files = [(p, label) for _, p, label in sorted((shard_key(p), p, lb) for p, lb in items)]
        name = f"{write_split.DEFAULT_FILE_NAME}-{shard:05d}-of-{self._shards:05d}.gz"
        counts: dict[tuple[int, int], int] = {}
        formats: dict[str, int] = {}
        bad: list[str] = []
        outputs, handles, nbytes = [], [], 0
        try:
            for uri in self._uris:
                fileio.makedirs(uri)
                raw = fileio.open(os.path.join(uri, name + INCOMPLETE), "wb")
                # mtime=0, no file name: the same images give the same bytes.
                handles.append(raw)
                outputs.append(
                    gzip.GzipFile(
                        fileobj=raw, mode="wb", filename="", mtime=0, compresslevel=self._level
                    )
                )
            for split, label, record, what, size in self._prepared(files):
                nbytes += size
                if record is None:
                    bad.append(what)
                    continue
                TFRecordUtil.write_record(outputs[split], record)
                counts[(split, label)] = counts.get((split, label), 0) + 1
                formats[what] = formats.get(what, 0) + 1
        finally:
            for out, raw in zip(outputs, handles, strict=False):
                out.close()
                raw.close()
        for uri in self._uris:
            fileio.rename(
                os.path.join(uri, name + INCOMPLETE), os.path.join(uri, name), overwrite=True
            )
        seconds = time.perf_counter() - started
        self._written += 1  # this worker's shards so far: the progress of a long ingest
        logging.info(
            "image shard %d of %d written (%d by this worker): %d images, %.1f MB in %.1fs "
            "(%.0f images/s, %.1f MB/s)",
            shard + 1, self._shards, self._written, len(files), nbytes / 1e6, seconds,
            len(files) / max(seconds, 1e-9), nbytes / 1e6 / max(seconds, 1e-9),
        )  # fmt: skip
        yield {
            "counts": sorted(counts.items()),
            "bad": bad,
            "formats": formats,
            "bytes": nbytes,
            "seconds": seconds,
        }
