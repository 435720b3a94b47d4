"""What a local run does to its own process while TFX runs the components:
where its logs and its Beam workers' output go, the command line TFX's executors
see, and the heap a finished component freed.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import sys
from collections.abc import Iterator, Sequence

from pipeline.beam import runs_multi_process


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


@contextlib.contextmanager
def logging_to(log_path: str, progress: logging.Handler, verbose: bool) -> Iterator[None]:
    """TFX's full log to `log_path`, one progress line per component to the terminal."""
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)
    root = logging.getLogger()
    file_handler = logging.FileHandler(log_path)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    file_handler.setLevel(logging.INFO)
    # absl's own stderr handler would flood the terminal; the file keeps it all.
    absl_handler = absl_logging.get_absl_handler()
    # Handlers someone else put on the root logger (absl's, basicConfig's) would
    # flood the terminal with TFX's INFO lines; the log file keeps them all.
    tf_handlers = logging.getLogger("tensorflow").handlers
    muted = [h for h in [*root.handlers, *tf_handlers, absl_handler] if not verbose]
    saved_levels = [h.level for h in muted]
    for h in muted:
        h.setLevel(logging.ERROR)
    root.addHandler(file_handler)
    root.addHandler(progress)
    try:
        yield
    finally:
        root.removeHandler(file_handler)
        root.removeHandler(progress)
        file_handler.close()
        for h, level in zip(muted, saved_levels, strict=True):
            h.setLevel(level)


@contextlib.contextmanager
def worker_output_to(log_path: str, beam_args: Sequence[str], verbose: bool) -> Iterator[None]:
    """Within the block, this process's fd 2 appends to the run's log when Beam runs
    multi-process.

    Beam's SDK worker subprocesses inherit fd 2 and log to it themselves (their
    start-up INFO lines, Beam's and TensorFlow's warnings: ~400 lines on a
    1M-row run), out of reach of this process's log handlers. In-process runs
    need nothing: everything logs through the handlers `logging_to` set.
    """
    if verbose or not runs_multi_process(beam_args):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 2)
    os.close(log)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
