"""What a local run does to its own process while TFX runs the components:
the command line TFX's executors see, and the heap a finished component freed.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys
from collections.abc import Iterator


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:  # not glibc
        return None


def return_freed_memory() -> None:
    """Hands the heap a finished component freed back to the system.

    glibc keeps freed memory for reuse, so without this the next in-process component
    (the Evaluator after the ingest's buffers, at 10M rows) starts from the earlier one's
    high-water mark, and the run's largest process is the sum of both.
    """
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


@contextlib.contextmanager
def program_name_only_argv() -> Iterator[None]:
    """`sys.argv` cut to the program name while TFX runs the components.

    TFX's BaseBeamExecutor parses `sys.argv + beam_pipeline_args` as absl flags
    (known flags only). Our own command line is not meant for it: a trailing `-v`
    (`tfxp run ... -v`) is absl's verbosity flag, which then swallows the first
    Beam argument as its value ("invalid literal for int(): '--runner=...'").
    """
    saved = sys.argv
    sys.argv = saved[:1]
    try:
        yield
    finally:
        sys.argv = saved
