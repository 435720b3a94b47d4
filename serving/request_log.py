"""The request log: scored requests as raw tf.Examples in the dataset's serving-log folder.

Format (docs/serving.md, shared with the validation gate's skew check):
`<data root>/serving-log/requests-<UTC %Y%m%dT%H%M%S>-<pid>-<seq:06d>.tfrecord.gz`,
GZIP TFRecord files of one serialized tf.Example per scored example: the raw
request features under the dataset's column names (never the label), plus
`__request_id`, `__logged_at` (Unix microseconds), `__model`, `__version`,
`__label`, `__role` (`served` or `shadow`), `__output` (the model's main
output for the example) and `__policy` (the fingerprint of the dataset's
`request_log:` policy the features were written under: components/io/log_policy.py;
columns it drops are absent, columns it hashes hold `h:<hmac>` categories).

A file is written under a hidden name (`.requests-....tmp`) and renamed when
it is complete (by size or age), so a published file is always whole. The
request path only appends the request's examples and outputs to a deque (no
lock, no thread woken): a background thread drains it every 100 ms, builds
the records (the metadata features are one more serialized Example appended
to the raw one, which protobuf parses as one merged message; serving/records.py)
and writes them. A
crash loses the open file's records at most; `salvage` publishes the readable
records of files left by a process that died.
"""

from __future__ import annotations

import collections
import io
import logging
import os
import random
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from components.io.log_policy import Applier
from serving import records

log = logging.getLogger("serving")

PREFIX = "requests-"
SUFFIX = ".tfrecord.gz"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_SECONDS = 300.0
QUEUE_LIMIT = 100_000
DRAIN_SECONDS = 0.1
SERVED, SHADOW = "served", "shadow"
GZIP_LEVEL = 1  # fast: the log is written beside the requests, on the same cores


@dataclass
class Entry:
    """One scored request, as the request path hands it over (nothing built yet)."""

    request_id: str
    logged_at_us: int
    model: str
    version: int
    label: str
    role: str
    raw: Sequence[bytes]  # one serialized raw tf.Example per example
    outputs: dict[str, np.ndarray]  # the model's outputs (main_output picks the logged one)


_PREFIXES = records.Prefixes()
# Output names that hold the model's main output, most telling first.
MAIN_OUTPUTS = ("probability", "logistic", "probabilities", "predictions", "scores", "outputs")


def main_output(outputs: dict[str, np.ndarray], rows: int) -> np.ndarray:
    """[rows, k] floats: the output named like a score (else the first numeric one)."""
    names = [n for n in MAIN_OUTPUTS if n in outputs]
    names += sorted(n for n in outputs if outputs[n].dtype.kind == "f")
    names += sorted(n for n in outputs if outputs[n].dtype.kind in "iub")
    if not names:
        return np.zeros((rows, 0), dtype=np.float32)
    return np.asarray(outputs[names[0]], dtype=np.float64).reshape(rows, -1)


def metadata_features(e: Entry, scores: np.ndarray, row: int, policy: str = "none") -> bytes:
    """The `__*` features of one logged example, as a serialized tf.Example."""
    p = _PREFIXES
    constant = p.constant(
        (e.model, e.version, e.label, e.role, policy),
        lambda: b"".join(
            (
                records.bytes_feature("__model", [e.model.encode()]),
                records.int64_feature("__version", [e.version]),
                records.bytes_feature("__label", [e.label.encode()]),
                records.bytes_feature("__role", [e.role.encode()]),
                records.bytes_feature("__policy", [policy.encode()]),
            )
        ),
    )
    return records.example(
        (
            p.bytes1("__request_id", e.request_id.encode()),
            p.int1("__logged_at", e.logged_at_us),
            constant,
            p.floats("__output", scores[row]),
        )
    )


class RequestLog:
    """Samples `fraction` of requests and writes them in a background thread."""

    def __init__(
        self,
        folder: str,
        *,
        fraction: float = 1.0,
        label_key: str | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_seconds: float = DEFAULT_MAX_SECONDS,
        on_written: Callable[[int], None] | None = None,
        on_dropped: Callable[[int], None] | None = None,
        policy: Applier | None = None,
    ) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"--log-fraction must be between 0 and 1, not {fraction}")
        if "://" in folder:
            # The writer appends to local files (and fsyncs them); a bucket takes whole
            # objects only, and no object-storage writer here would apply `storage:`.
            raise ValueError(
                f"request log folder {folder}: the request log is written to a local folder; "
                "give `tfxp serve --log-dir` a local path (and copy published files to the "
                "bucket with a tool that sets its encryption)"
            )
        # The dataset's request_log: policy with its key (checked by the caller, at start).
        self.policy = policy or Applier(None)
        self.folder = folder
        self.fraction = fraction
        self.label_key = label_key
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.on_written = on_written or (lambda n: None)
        self.on_dropped = on_dropped or (lambda n: None)
        self.published: list[str] = []
        # A deque, not a Queue: appending takes no lock and wakes no thread; the writer
        # drains it every DRAIN_SECONDS (or at once when woken for rotate/close).
        self._queue: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._seq = 0
        self._file: io.BufferedWriter | None = None
        self._gzip: Any = None  # zlib's compressor of the open file
        self._tmp = self._final = ""
        self._opened = self._synced = 0.0
        self._bytes = 0
        os.makedirs(folder, mode=0o700, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name="request-log", daemon=True)
        self._thread.start()

    def sampled(self) -> bool:
        return self.fraction >= 1.0 or (self.fraction > 0 and random.random() < self.fraction)  # noqa: S311 - sampling, not a secret

    def add(self, entry: Entry) -> None:
        if len(self._queue) >= QUEUE_LIMIT:
            self.on_dropped(len(entry.raw))
            return
        self._queue.append(entry)

    def rotate(self, timeout: float = 30.0) -> None:
        """Publishes the open file once everything queued so far is written."""
        done = threading.Event()
        self._queue.append(done)
        self._wake.set()
        done.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Writes what is queued and publishes the open file."""
        self._queue.append(None)
        self._wake.set()
        self._thread.join(timeout)

    # -- the writer thread

    def _loop(self) -> None:
        while True:
            self._wake.wait(DRAIN_SECONDS)
            self._wake.clear()
            batch = []
            while self._queue:
                batch.append(self._queue.popleft())
            entries = [e for e in batch if isinstance(e, Entry)]
            if entries:
                try:
                    self._write(entries)
                except Exception:  # logging must never stop serving
                    log.exception("could not write the request log in %s", self.folder)
            for marker in batch:
                if marker is None or isinstance(marker, threading.Event):
                    self._publish()
                    if marker is None:
                        return
                    marker.set()
            if self._file and (
                self._bytes >= self.max_bytes or time.time() - self._opened >= self.max_seconds
            ):
                self._publish()

    def _open(self) -> io.BufferedWriter:
        self._seq += 1
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        name = f"{PREFIX}{stamp}-{os.getpid()}-{self._seq:06d}{SUFFIX}"
        self._final = os.path.join(self.folder, name)
        self._tmp = os.path.join(self.folder, f".{name}.tmp")
        # Owner-only from the first byte: the log holds what clients sent.
        fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._file = os.fdopen(fd, "wb")
        self._gzip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: a gzip stream
        self._opened = self._synced = time.time()
        self._bytes = 0
        return self._file

    def _write(self, entries: list[Entry]) -> None:
        out: list[bytes] = []
        pending = 0
        for e in entries:
            scores = main_output(e.outputs, len(e.raw))
            for i, raw in enumerate(e.raw):
                raw = records.without_feature(raw, self.label_key) if self.label_key else raw
                raw = self.policy.example(raw)
                meta = metadata_features(e, scores, i, self.policy.fingerprint)
                out.append(records.tfrecord(raw + meta))
                pending += len(out[-1])
            if self._bytes + pending >= self.max_bytes:  # rotate by size, between requests
                self._append(out, pending)
                self._publish()
                out, pending = [], 0
        if out:
            self._append(out, pending)
        self.on_written(sum(len(e.raw) for e in entries))

    def _append(self, out: list[bytes], size: int) -> None:
        file = self._file if self._file is not None else self._open()
        self._bytes += size
        file.write(self._gzip.compress(b"".join(out)))
        if time.time() - self._synced >= 1.0:
            # Up to here the file decompresses: a killed server loses one second at most.
            file.write(self._gzip.flush(zlib.Z_SYNC_FLUSH))
            file.flush()
            self._synced = time.time()

    def _publish(self) -> None:
        if self._file is None:
            return
        self._file.write(self._gzip.flush())  # the gzip trailer: the file is complete
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self._tmp, self._final)
        self.published.append(self._final)
        self._file = None


def published_files(folder: str) -> list[str]:
    """The complete log files, oldest first: the readers' own listing (components/validation/serving_log.py)."""
    from components.validation import serving_log

    return [f.path for f in reversed(serving_log.published_files(folder))]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def salvage(folder: str) -> list[str]:
    """Publishes the readable records of hidden files whose writer process is gone."""
    import tensorflow as tf

    out: list[str] = []
    if not os.path.isdir(folder):
        return out
    for name in sorted(os.listdir(folder)):
        if not (name.startswith("." + PREFIX) and name.endswith(SUFFIX + ".tmp")):
            continue
        final_name = name[1 : -len(".tmp")]
        try:
            pid = int(final_name[len(PREFIX) :].split("-")[1])
        except (IndexError, ValueError):
            continue
        if pid == os.getpid() or _pid_alive(pid):
            continue
        path = os.path.join(folder, name)
        records = []
        try:
            for r in tf.data.TFRecordDataset(path, compression_type="GZIP"):
                records.append(r.numpy())
        except (tf.errors.DataLossError, tf.errors.OutOfRangeError):
            pass  # the unflushed tail of a killed writer
        if records:
            tmp = os.path.join(folder, f".{final_name}.salvage")
            with tf.io.TFRecordWriter(tmp, options="GZIP") as w:
                for r in records:
                    w.write(r)
            os.chmod(tmp, 0o600)
            os.replace(tmp, os.path.join(folder, final_name))
            out.append(os.path.join(folder, final_name))
        os.remove(path)
    return out
