"""Ctrl-C stops a local run even where a library swallows the KeyboardInterrupt."""

from __future__ import annotations

import logging
import os
import signal
import threading

import pytest

from tfxp.local.progress import ProgressHandler, interrupts
from tfxp.local.runner import PipelineRunError, RunInterruptedError, _execute

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers are set from the main thread only",
)


def _starts(progress: ProgressHandler, component: str) -> None:
    progress.emit(logging.makeLogRecord({"msg": "Component %s is running.", "args": (component,)}))


def _interrupt_swallowed() -> None:
    """What a broad `except BaseException` in Beam or TensorFlow code does to Ctrl-C."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        threading.Event().wait(0.5)  # the signal is handled here, in the main thread
    except BaseException:  # noqa: BLE001, S110 - the library bug being simulated
        pass


def test_no_component_starts_after_a_swallowed_interrupt() -> None:
    progress = ProgressHandler(3, lambda _: None)
    with pytest.raises(KeyboardInterrupt), interrupts(progress):
        _starts(progress, "Transform")
        _interrupt_swallowed()
        _starts(progress, "Trainer")
    assert progress.interrupted_during == "Transform"


def test_a_run_that_returns_after_a_swallowed_interrupt_still_fails() -> None:
    progress = ProgressHandler(3, lambda _: None)
    with pytest.raises(KeyboardInterrupt), interrupts(progress):
        _starts(progress, "Pusher")
        _interrupt_swallowed()
    assert progress.interrupted_during == "Pusher"


def test_the_previous_handler_is_restored_and_a_quiet_run_passes() -> None:
    before = signal.getsignal(signal.SIGINT)
    progress = ProgressHandler(1, lambda _: None)
    with interrupts(progress):
        _starts(progress, "CsvExampleGen")
    assert signal.getsignal(signal.SIGINT) is before
    assert progress.interrupted_during is None


class _LibraryThatTurnsCtrlCIntoAnError:
    """LocalDagRunner whose component meets Ctrl-C inside library code that turns
    the interrupt into another error, as Beam (wrapping it with the step's name)
    and TensorFlow's C++ bindings do."""

    def __init__(self, progress: ProgressHandler, error: type[Exception], ctrl_c: bool) -> None:
        self._progress, self._error, self._ctrl_c = progress, error, ctrl_c

    def run_with_ir(self, ir, run_options=None) -> None:
        _starts(self._progress, "Transform")
        try:
            if self._ctrl_c:
                os.kill(os.getpid(), signal.SIGINT)
                threading.Event().wait(0.5)
            raise self._error("a bug in Transform")
        except KeyboardInterrupt:
            raise self._error("KeyboardInterrupt [while running 'Analyze']") from None


def _execute_with(monkeypatch, error: type[Exception], ctrl_c: bool) -> None:
    from tfx.orchestration.local import local_dag_runner

    progress = ProgressHandler(3, lambda _: None)
    library = _LibraryThatTurnsCtrlCIntoAnError(progress, error, ctrl_c)
    monkeypatch.setattr(local_dag_runner, "LocalDagRunner", lambda: library)
    # A server-backed store's connection: no run lock is taken.
    _execute(None, "R", None, None, (progress, print), "run.log", connection_config=object())


@pytest.mark.parametrize("error", [TypeError, RuntimeError])
def test_an_interrupt_a_library_turned_into_an_error_is_reported_as_the_interrupt(
    monkeypatch, error
) -> None:
    with pytest.raises(RunInterruptedError, match="interrupted during Transform; completed"):
        _execute_with(monkeypatch, error, ctrl_c=True)


def test_the_same_error_without_an_interrupt_is_reported_as_the_component_failing(
    monkeypatch,
) -> None:
    with pytest.raises(PipelineRunError, match="Transform failed: a bug in Transform") as e:
        _execute_with(monkeypatch, TypeError, ctrl_c=False)
    assert not isinstance(e.value, RunInterruptedError)
