"""Examples into GZIP TFRecord shards, columnar: TFX's split rule, TFRecord framing, the shard writer.

The Arrow ingest (csv_ingest.py) and the fast Transform (components/fast/transform/)
write their examples through these: the split of each record by TFX's own
rule (SHA-256 of the serialized example), vectorised; the TFRecord framing
(length, masked CRC32C of it, record, masked CRC32C of it) of a whole batch at
once; and one GZIP stream per shard, compressed in a thread.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tfx.dsl.io import fileio

from components.example_gen import arrow_csv

# zlib level of the GZIP shards. Beam's sink (and so CsvExampleGen) uses 6;
# level 3 takes under half its CPU for shards ~6% larger (1M taxi rows: 53 MB
# vs CsvExampleGen's 50 MB).
GZIP_LEVEL = 3
_DIGEST_BYTES = 32  # SHA-256


# --- TFX's split rule, vectorised -----------------------------------------


def buckets_of(digests: bytes, modulus: int) -> np.ndarray:
    """int(sha256 hexdigest, 16) % modulus for each 32-byte digest.

    The digest is a base-256 number, so it is the dot product of its bytes with
    256**k % modulus, taken modulo `modulus` (exact in int64 below 2**50).
    """
    modulus = int(modulus)
    if not 0 < modulus < 1 << 50:
        raise ValueError(f"hash bucket total {modulus} out of range")
    d = np.frombuffer(digests, dtype=np.uint8).reshape(-1, _DIGEST_BYTES)
    weights = np.array(
        [pow(256, _DIGEST_BYTES - 1 - j, modulus) for j in range(_DIGEST_BYTES)], dtype=np.int64
    )
    return (d.astype(np.int64) @ weights) % modulus


def split_of(buckets: np.ndarray, boundaries: Sequence[int]) -> np.ndarray:
    """bisect.bisect(boundaries, bucket), as TFX's _PartitionFn."""
    return np.searchsorted(np.asarray(boundaries, dtype=np.int64), buckets, side="right")


# --- TFRecord framing ------------------------------------------------------

_CRC32C_TABLE = np.zeros(256, dtype=np.uint32)
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE[_i] = _c


def _crc32c_rows(matrix: np.ndarray) -> np.ndarray:
    """CRC32C of each row of a small uint8 matrix (used for the 8-byte length headers)."""
    crc = np.full(len(matrix), 0xFFFFFFFF, dtype=np.uint32)
    for j in range(matrix.shape[1]):
        crc = _CRC32C_TABLE[(crc ^ matrix[:, j]) & 0xFF] ^ (crc >> 8)
    return crc ^ np.uint32(0xFFFFFFFF)


def _masked(crc: np.ndarray) -> np.ndarray:
    crc = crc.astype(np.uint32)
    return (((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(0xA282EAD8)).astype(
        np.uint32
    )


def _fixed_width(matrix: np.ndarray) -> pa.Array:
    n, w = matrix.shape
    offsets = np.arange(0, (n + 1) * w, w, dtype=np.int64)
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(matrix.reshape(-1))]
    )


def framed_examples(
    batch: pa.RecordBatch,
    columns: dict[str, str],
    empty_columns: frozenset[str],
    digests: bool,
) -> tuple[pa.LargeBinaryArray, bytes]:
    """The TFRecord-framed serialized examples of `batch` (uint64 length, masked CRC32C
    of it, the example, masked CRC32C of the example), and their SHA-256 digests
    concatenated (when asked: TFX's split key)."""
    n = batch.num_rows
    parts, sizes = arrow_csv.example_parts(batch, columns, empty_columns)
    head = _length_headers(np.broadcast_to(sizes, (n,)))
    tail = np.zeros((n, 4), dtype=np.uint8)  # the example's CRC, filled in below
    sep = pa.scalar(b"", pa.large_binary())
    framed = pc.binary_join_element_wise(_fixed_width(head), *parts, _fixed_width(tail), sep)
    offsets = np.frombuffer(framed.buffers()[1], dtype=np.int64)[: n + 1]
    buffer = framed.buffers()[2]
    data = buffer.to_pybytes()
    bounds = offsets.tolist()
    # The one per-record Python loop: CRC32C (and SHA-256) of each example.
    examples = [data[a + 12 : b - 4] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    crcs = np.fromiter(map(google_crc32c.value, examples), dtype=np.uint32, count=n)
    sha = hashlib.sha256
    keys = b"".join([sha(e).digest() for e in examples]) if digests else b""
    writable: np.ndarray = np.ndarray((buffer.size,), dtype=np.uint8, buffer=buffer)
    at = offsets[1:, None] - 4 + np.arange(4)[None, :]
    writable[at] = _masked(crcs).astype("<u4").view(np.uint8).reshape(n, 4)
    return framed, keys


def framed_buffer(batch: pa.RecordBatch, columns: dict[str, str]) -> pa.Buffer:
    """The examples of a batch of one-value-or-missing columns, TFRecord-framed into one
    buffer (what GzipShardWriter takes)."""
    framed, _ = framed_examples(batch, columns, frozenset(), digests=False)
    return contiguous(framed)


def _length_headers(sizes: np.ndarray) -> np.ndarray:
    """Each record's 12-byte TFRecord header: uint64 length, masked CRC32C of the length."""
    n = len(sizes)
    head = np.empty((n, 12), dtype=np.uint8)
    head[:, :8] = sizes.astype("<u8").view(np.uint8).reshape(n, 8)
    head[:, 8:] = _masked(_crc32c_rows(head[:, :8])).astype("<u4").view(np.uint8).reshape(n, 4)
    return head


def frame_records(records: Sequence[bytes]) -> pa.Buffer:
    """Serialized records TFRecord-framed into one buffer (what GzipShardWriter takes)."""
    n = len(records)
    if n == 0:
        return pa.py_buffer(b"")
    head = _length_headers(np.fromiter(map(len, records), dtype=np.uint64, count=n))
    crcs = np.fromiter(map(google_crc32c.value, records), dtype=np.uint32, count=n)
    tail = _masked(crcs).astype("<u4").view(np.uint8).reshape(n, 4)
    framed = pc.binary_join_element_wise(
        _fixed_width(head),
        pa.array(records, pa.large_binary()),
        _fixed_width(tail),
        pa.scalar(b"", pa.large_binary()),
    )
    return contiguous(framed)


def contiguous(framed: pa.LargeBinaryArray) -> pa.Buffer:
    n = len(framed)
    offsets = np.frombuffer(framed.buffers()[1], dtype=np.int64)[
        framed.offset : framed.offset + n + 1
    ]
    return framed.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


# --- GZIP shard writer ---------------------------------------------------------


class GzipShardWriter:
    """One GZIP stream (header, deflate, CRC-32 and size trailer; no flush points) per shard.

    Written to `<path>.incomplete` and renamed when complete, so a shard is
    either whole or absent. Compression runs in a thread: zlib releases the GIL.
    """

    MAX_PENDING = 2

    def __init__(self, path: str, level: int = GZIP_LEVEL) -> None:
        self.path = path
        self.records = 0
        self._tmp = path + ".incomplete"
        self._file = fileio.open(self._tmp, "wb")
        self._zip = zlib.compressobj(level, zlib.DEFLATED, 31)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gzip-shard")
        self._pending: list[Future] = []

    def _write(self, data) -> None:
        out = self._zip.compress(data)
        if out:
            self._file.write(out)

    def write(self, data: pa.Buffer, records: int) -> None:
        self.records += records
        while len(self._pending) >= self.MAX_PENDING:
            self._pending.pop(0).result()
        self._pending.append(self._pool.submit(self._write, data))

    def close(self) -> None:
        for f in self._pending:
            f.result()
        self._pool.shutdown()
        self._file.write(self._zip.flush(zlib.Z_FINISH))
        self._file.close()
        fileio.rename(self._tmp, self.path, overwrite=True)

    def abort(self) -> None:
        self._pool.shutdown(cancel_futures=True)
        self._file.close()
        # The file is created lazily: an abort before the first write finds none.
        if fileio.exists(self._tmp):
            fileio.remove(self._tmp)
