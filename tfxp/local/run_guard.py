"""One local run at a time per run directory: never share a store.

SQLite ML Metadata does not take concurrent writers well; a second run waits
for the first (saying so) instead of failing halfway through with "database is
locked". (The checks before any work are tfxp/preflight.py's, every runner's.)

The SQLite store itself is judged under the lock: a run that holds it may be
creating the file, which is 0 bytes for a moment, so a run that is waiting
must not call it "interrupted" from outside (CI saw exactly that).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator

from metadata.store import MetadataStoreError, check_sqlite_store
from pipeline.config import PipelineConfig

LOCK_FILE = ".run.lock"


class StoreRefused(RuntimeError):
    """The SQLite store, checked once the lock is held, is unusable; says what to do."""


@contextlib.contextmanager
def run_lock(
    config: PipelineConfig, run_id: str, printer: Callable[[str], None] = print
) -> Iterator[None]:
    """Holds an exclusive lock on the run directory for the duration of a run, and
    checks the SQLite store once it holds it (StoreRefused, the lock released).

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
        try:
            check_sqlite_store(config.metadata_path)  # no other run is writing it now
        except MetadataStoreError as e:
            raise StoreRefused(str(e)) from None
        yield
    finally:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def flock_now(path: str, operation: int) -> Iterator[int | None]:
    """The lock file `path` (created if missing) held with `operation` (fcntl.LOCK_SH
    or LOCK_EX): its descriptor, or None when another process holds a conflicting
    lock now. Leaving the block closes the file, which releases the lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def unless_a_run_holds(config: PipelineConfig) -> Iterator[bool]:
    """Yields True holding a shared lock on the run directory (no run starts until it
    is released: keep it short), or False when a run holds the lock now.

    A run in progress may be creating the store; its checks wait for the lock.
    No run directory yet means no run, and nothing to hold.
    """
    if not os.path.isdir(config.local_dir):
        yield True
        return
    with flock_now(os.path.join(config.local_dir, LOCK_FILE), fcntl.LOCK_SH) as fd:
        yield fd is not None
