"""Ctrl-C stops a local run even where a library swallows the KeyboardInterrupt."""

from __future__ import annotations

import logging
import os
import signal
import threading

import pytest

from tfxp.local.runner import _interrupts, _ProgressHandler

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers are set from the main thread only",
)


def _starts(progress: _ProgressHandler, component: str) -> None:
    progress.emit(logging.makeLogRecord({"msg": "Component %s is running.", "args": (component,)}))


def _interrupt_swallowed() -> None:
    """What a broad `except BaseException` in Beam or TensorFlow code does to Ctrl-C."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        threading.Event().wait(0.5)  # the signal is handled here, in the main thread
    except BaseException:  # noqa: BLE001, S110 - the library bug being simulated
        pass


def test_no_component_starts_after_a_swallowed_interrupt() -> None:
    progress = _ProgressHandler(3, lambda _: None)
    with pytest.raises(KeyboardInterrupt), _interrupts(progress):
        _starts(progress, "Transform")
        _interrupt_swallowed()
        _starts(progress, "Trainer")
    assert progress.interrupted_during == "Transform"


def test_a_run_that_returns_after_a_swallowed_interrupt_still_fails() -> None:
    progress = _ProgressHandler(3, lambda _: None)
    with pytest.raises(KeyboardInterrupt), _interrupts(progress):
        _starts(progress, "Pusher")
        _interrupt_swallowed()
    assert progress.interrupted_during == "Pusher"


def test_the_previous_handler_is_restored_and_a_quiet_run_passes() -> None:
    before = signal.getsignal(signal.SIGINT)
    progress = _ProgressHandler(1, lambda _: None)
    with _interrupts(progress):
        _starts(progress, "CsvExampleGen")
    assert signal.getsignal(signal.SIGINT) is before
    assert progress.interrupted_during is None
