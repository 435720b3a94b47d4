"""Checks and locks around a local run: fail before any work, never share a store.

- `check_locations`: the run directory, the serving directory and the ML
  Metadata file must be usable before Beam or TensorFlow do anything, so a
  bad location costs seconds and leaves nothing half-created.
- `run_lock`: one run at a time per run directory. SQLite ML Metadata does not
  take concurrent writers well; a second run waits for the first (saying so)
  instead of failing halfway through with "database is locked".
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator

from pipeline.config import PipelineConfig

LOCK_FILE = ".run.lock"


class RunGuardError(RuntimeError):
    """A location is unusable or a lock cannot be taken; the message says what to do."""


def _writable_dir(path: str, what: str) -> None:
    if "://" in path:
        return  # remote locations are checked by the filesystem plugin on first write
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".write-test-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        raise RunGuardError(
            f"{what} {path} is not writable ({e.strerror}); choose another with --run-dir "
            "or fix its permissions"
        ) from None


def check_metadata_store(path: str) -> None:
    """Opens an existing SQLite ML Metadata store read-only enough to prove it is one."""
    if not os.path.exists(path):
        return
    if os.path.getsize(path) == 0:
        raise RunGuardError(
            f"ML Metadata store {path} is empty (0 bytes), probably from an interrupted "
            "creation; delete it to start a new store"
        )
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = path
    cfg.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE
    try:
        metadata_store.MetadataStore(cfg).get_context_types()
    except Exception as e:  # MLMD raises RuntimeError/errors.* for corrupt files
        first_line = str(e).splitlines()[0][:160]
        raise RunGuardError(
            f"ML Metadata store {path} is unreadable ({first_line}); restore it from a "
            "backup, or move it aside to start a new store (the lineage of earlier runs "
            "is in that file)"
        ) from None


def check_locations(config: PipelineConfig, *, check_sqlite_store: bool = True) -> None:
    # The store first: a corrupt store must not leave new empty folders behind.
    if check_sqlite_store:
        check_metadata_store(config.metadata_path)
    _writable_dir(config.local_dir, "run directory")
    _writable_dir(config.pipeline_root, "pipeline root")
    _writable_dir(config.serving_dir, "serving directory")


@contextlib.contextmanager
def run_lock(
    config: PipelineConfig, run_id: str, printer: Callable[[str], None] = print
) -> Iterator[None]:
    """Holds an exclusive lock on the run directory for the duration of a run.

    The lock is an flock: the kernel drops it when the holder dies, even by
    SIGKILL, so a crashed run never blocks the next one.
    """
    os.makedirs(config.local_dir, exist_ok=True)  # run_dir, or its local state dir
    path = os.path.join(config.local_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"
            printer(f"another run holds {path} ({holder}); waiting for it to finish ...")
            started = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            printer(f"lock acquired after {time.monotonic() - started:.0f}s")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "run_id": run_id}).encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor releases the flock
