"""The request log: scored requests as raw tf.Examples in the dataset's serving-log folder.

Format (docs/serving.md, shared with the validation gate's skew check):
`<data root>/serving-log/requests-<UTC %Y%m%dT%H%M%S>-<pid>-<seq:06d>.tfrecord.gz`,
GZIP TFRecord files of one serialized tf.Example per scored example: the raw
request features under the dataset's column names (never the label), plus
`__request_id`, `__logged_at` (Unix microseconds), `__model`, `__version`,
`__label`, `__role` (`served` or `shadow`) and `__output` (the model's main
output for the example).

A file is written under a hidden name (`.requests-....tmp`) and renamed when
it is complete (by size or age), so a published file is always whole. The
request path only puts a tuple on a queue: a background thread builds the
records (the metadata features are one more serialized Example appended to
the raw one, which protobuf parses as one merged message) and writes them. A
crash loses the open file's records at most; `salvage` publishes the readable
records of files left by a process that died.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

log = logging.getLogger("tfxp.serving")

FOLDER = "serving-log"
PREFIX = "requests-"
SUFFIX = ".tfrecord.gz"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_SECONDS = 300.0
QUEUE_LIMIT = 100_000
SERVED, SHADOW = "served", "shadow"


def log_folder(data_root: str) -> str:
    return os.path.join(data_root, FOLDER)


@dataclass
class Entry:
    """One scored request, as the request path hands it over (nothing built yet)."""

    request_id: str
    logged_at_us: int
    model: str
    version: int
    label: str
    role: str
    raw: list[bytes]  # one serialized raw tf.Example per example
    outputs: np.ndarray  # [rows, k] float: the main output per example


def metadata_example(e: Entry, row: int) -> bytes:
    from tensorflow.core.example import example_pb2

    ex = example_pb2.Example()
    f = ex.features.feature
    f["__request_id"].bytes_list.value.append(e.request_id.encode())
    f["__logged_at"].int64_list.value.append(e.logged_at_us)
    f["__model"].bytes_list.value.append(e.model.encode())
    f["__version"].int64_list.value.append(e.version)
    f["__label"].bytes_list.value.append(e.label.encode())
    f["__role"].bytes_list.value.append(e.role.encode())
    f["__output"].float_list.value.extend(float(x) for x in e.outputs[row])
    return ex.SerializeToString()


def without_label(raw: bytes, label: str | None) -> bytes:
    """The serialized example without its label feature (parsed only when it may hold one)."""
    if not label or label.encode() not in raw:
        return raw
    from tensorflow.core.example import example_pb2

    ex = example_pb2.Example.FromString(raw)
    if label not in ex.features.feature:
        return raw
    del ex.features.feature[label]
    return ex.SerializeToString()


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
    ) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"--log-fraction must be between 0 and 1, not {fraction}")
        self.folder = folder
        self.fraction = fraction
        self.label_key = label_key
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.on_written = on_written or (lambda n: None)
        self.on_dropped = on_dropped or (lambda n: None)
        self.published: list[str] = []
        self._queue: queue.Queue[Entry | threading.Event | None] = queue.Queue(QUEUE_LIMIT)
        self._seq = 0
        self._writer = None
        self._tmp = self._final = ""
        self._opened = 0.0
        self._bytes = 0
        os.makedirs(folder, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name="request-log", daemon=True)
        self._thread.start()

    def sampled(self) -> bool:
        return self.fraction >= 1.0 or (self.fraction > 0 and random.random() < self.fraction)

    def add(self, entry: Entry) -> None:
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            self.on_dropped(len(entry.raw))

    def rotate(self, timeout: float = 30.0) -> None:
        """Publishes the open file once everything queued so far is written."""
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Writes what is queued and publishes the open file."""
        self._queue.put(None)
        self._thread.join(timeout)

    # -- the writer thread

    def _loop(self) -> None:
        while True:
            try:
                entry = self._queue.get(timeout=min(1.0, self.max_seconds))
            except queue.Empty:
                entry = False
            if entry is None:
                self._publish()
                return
            if isinstance(entry, threading.Event):
                self._publish()
                entry.set()
                continue
            if entry:
                try:
                    self._write(entry)
                except Exception:  # noqa: BLE001 - logging must never stop serving
                    log.exception("could not write the request log in %s", self.folder)
            if self._writer and (
                self._bytes >= self.max_bytes or time.time() - self._opened >= self.max_seconds
            ):
                self._publish()

    def _open(self) -> None:
        import tensorflow as tf

        self._seq += 1
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        name = f"{PREFIX}{stamp}-{os.getpid()}-{self._seq:06d}{SUFFIX}"
        self._final = os.path.join(self.folder, name)
        self._tmp = os.path.join(self.folder, f".{name}.tmp")
        self._writer = tf.io.TFRecordWriter(self._tmp, options="GZIP")
        self._opened = time.time()
        self._bytes = 0

    def _write(self, e: Entry) -> None:
        if self._writer is None:
            self._open()
        for i, raw in enumerate(e.raw):
            record = without_label(raw, self.label_key) + metadata_example(e, i)
            self._writer.write(record)
            self._bytes += len(record)
        self.on_written(len(e.raw))

    def _publish(self) -> None:
        if self._writer is None:
            return
        self._writer.close()  # the GZIP trailer: the file is complete
        with open(self._tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(self._tmp, self._final)
        self.published.append(self._final)
        self._writer = None


def published_files(folder: str) -> list[str]:
    """The complete log files, oldest first (hidden names are files being written)."""
    if not os.path.isdir(folder):
        return []
    names = [n for n in os.listdir(folder) if n.startswith(PREFIX) and n.endswith(SUFFIX)]
    return [os.path.join(folder, n) for n in sorted(names)]


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

    out = []
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
            os.replace(tmp, os.path.join(folder, final_name))
            out.append(os.path.join(folder, final_name))
        os.remove(path)
    return out
