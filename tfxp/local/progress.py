"""A local run's progress line per component, and Ctrl-C that stops the run.

Both follow TFX's launcher through its log records: the component running is
the one a Ctrl-C is charged to, and no component starts after one landed.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from tfxp.local.process import return_freed_memory

Printer = Callable[[str], None]


class ProgressHandler(logging.Handler):
    """Turns TFX's launcher log lines into one progress line per component."""

    def __init__(self, total: int, printer: Printer) -> None:
        super().__init__(logging.INFO)
        self._total = total
        self._printer = printer
        self._index = 0
        self._start = 0.0
        self._cached = False
        self.current: str | None = None
        # Where Ctrl-C landed (set by `interrupts`); no component starts after it.
        self.interrupted_during: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg if isinstance(record.msg, str) else ""
        if msg == "Component %s is running.":
            if self.interrupted_during:
                # The interrupt was swallowed inside the last component: stop here.
                raise KeyboardInterrupt
            self._index += 1
            args = record.args if isinstance(record.args, tuple) else ()
            self.current = str(args[0]) if args else "?"
            self._start = time.perf_counter()
            self._cached = False
            self._printer(f"[{self._index}/{self._total}] {self.current} ...")
        elif msg.startswith("A cached execution"):
            self._cached = True
        elif msg == "Component %s is finished.":
            took = time.perf_counter() - self._start
            how = "cached" if self._cached else f"done in {took:.1f}s"
            self._printer(f"[{self._index}/{self._total}] {self.current} {how}")
            self.current = None
            return_freed_memory()


@contextlib.contextmanager
def interrupts(progress: ProgressHandler) -> Iterator[None]:
    """Ctrl-C stops the run even where a library swallows KeyboardInterrupt.

    Beam and TensorFlow code catch broad exceptions in places; an interrupt that
    lands there was lost and the run went on to exit 0. The handler remembers
    the component it hit, and the progress handler refuses to start another.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def handler(signum: int, frame: Any) -> None:
        progress.interrupted_during = progress.interrupted_during or progress.current or "start-up"
        # An interrupt raised while a weakref callback or __del__ runs (garbage
        # collection, at any bytecode) is printed and dropped ("Exception ignored"),
        # and the component would run to the end: raise it again every 0.2 s until
        # the run has unwound to here.
        signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    previous_alarm = signal.signal(signal.SIGALRM, handler)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGALRM, previous_alarm)
    if progress.interrupted_during:
        raise KeyboardInterrupt  # the run returned normally, but was interrupted


def was_interrupted(progress: ProgressHandler, error: BaseException) -> bool:
    """Whether `error` is how a Ctrl-C surfaced.

    Library code turns an interrupt that lands inside it into other errors:
    Beam's DoFn runner re-raises it as a new exception carrying the step's
    name, and an interrupt inside TensorFlow's code has surfaced as a bare
    TypeError. Once the handler has charged an interrupt to a component, any
    failure that follows is the interrupt, not a bug to report.
    """
    return isinstance(error, KeyboardInterrupt) or progress.interrupted_during is not None
