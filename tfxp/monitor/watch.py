"""`tfxp watch`: every new, completely published span starts exactly one run.

What makes a span "completely published":
- local disk: it is a `span-<N>` folder with data files. `tfxp data add`
  writes a drop into a hidden folder and renames it into place, so a watcher
  never sees half of one (tfxp/datasets/publish.py).
- object storage: `span-<N>/_PUBLISHED` exists. S3 has no folder rename, so
  `tfxp data upload` writes this marker after the last file; anything else
  that delivers spans to a bucket writes it last too.

Which spans were handled is recorded in ML Metadata (the pipeline's own store),
one `tfxp.SpanHandled` execution per span in the `tfxp_watch` context with the
outcome (trained, blocked by the gate, failed) and the run id. A watcher that
is killed and restarted reads it back: a span whose run was cut short was not
recorded, so it runs again (its completed components come from the cache),
and a recorded one never does. Two watchers of one store take turns through a
lock file beside the run lock (flock: released by the kernel when the holder
dies, even by SIGKILL) and re-read the records after taking it, so each span
runs once.

A failing run is retried with back-off (30 s, 60 s, ... by default) up to
`--max-attempts`, then recorded as failed and alerted, and the watcher goes on
with the next span. A span the gate blocks is recorded on the first run and
alerted once. Ctrl-C (or SIGTERM) between runs stops the watcher at once;
during a run it stops the run (completed components are cached) and the span
runs again on the next start.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from metadata.examples import newest_ingested_span
from metadata.watch_records import Handled, handled_spans, record_handled
from pipeline.config import PipelineConfig
from pipeline.spans import PUBLISHED_MARKER, list_spans, member_glob
from tfxp.local.run_guard import flock_now
from tfxp.local.runner import (
    PipelineRunError,
    RunInterruptedError,
    ValidationBlockedError,
    quiet_third_party,
    run_local,
)

LOCK_FILE = ".watch.lock"
TRAINED, BLOCKED, FAILED = "trained", "blocked", "failed"

Printer = Callable[[str], None]


class WatchStopped(Exception):
    """Ctrl-C or SIGTERM: the watcher stops (between runs, or by stopping the run)."""


@dataclass(frozen=True)
class WatchOptions:
    interval: float = 30.0
    max_attempts: int = 3
    backoff: float = 30.0
    # Handle the spans there now, then return (cron, CI, tests).
    once: bool = False
    # Seconds between skew checks of the latest span against the request log
    # (None: none); `spans=False` only checks skew, never runs the pipeline.
    skew_every: float | None = None
    spans: bool = True


# ---------------------------------------------------------------------------
# Which spans are there, which were handled.


def published_spans(config: PipelineConfig) -> list[int]:
    """Span numbers that are completely published under the data root, ascending."""
    root = config.data_root
    if "://" not in root:
        return sorted({s.span for s in list_spans(root, member_glob(config)) if s.files})
    from tfx.dsl.io import fileio

    from tfxp.storage.storage import enable_filesystems

    enable_filesystems([root])
    base = root.rstrip("/")
    found = set()
    for marker in fileio.glob(f"{base}/span-*/{PUBLISHED_MARKER}"):
        name = marker[len(base) + 1 :].split("/", 1)[0]
        if name.startswith("span-") and name[5:].isdigit():
            found.add(int(name[5:]))
    return sorted(found)


def next_span_ready(config: PipelineConfig, store: Any | None) -> int | None:
    """A published span newer than every ingested one (the one a run would take), or None.

    The schedulers' sensor (airflow/taxi_dag.py): a run takes the latest span,
    so "new data" is a published span past the newest ingested. `store` None:
    no store yet, so any published span is new.
    """
    published = published_spans(config)
    if not published:
        return None
    newest = newest_ingested_span(store) if store is not None else None
    return published[-1] if newest is None or published[-1] > newest else None


# ---------------------------------------------------------------------------
# Taking turns and stopping.


@contextlib.contextmanager
def watch_turn(config: PipelineConfig) -> Iterator[bool]:
    """Yields True while this process holds the watchers' lock, False if another does."""
    os.makedirs(config.local_dir, exist_ok=True)
    with flock_now(os.path.join(config.local_dir, LOCK_FILE), fcntl.LOCK_EX) as fd:
        if fd is not None:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid()}).encode(), 0)
        yield fd is not None


@contextlib.contextmanager
def _stop_on_term() -> Iterator[None]:
    """SIGTERM stops the watcher the way Ctrl-C does (service managers send it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    # A shell starts background jobs (`tfxp watch &`) with SIGINT ignored; a
    # watcher is meant to be stopped, so Ctrl-C / kill -INT work here too.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


# ---------------------------------------------------------------------------
# The watcher.


class Watcher:
    """Runs the pipeline once per new span of `config.data_root`."""

    def __init__(
        self,
        config: PipelineConfig,
        open_store: Callable[[], Any],
        *,
        options: WatchOptions = WatchOptions(),
        printer: Printer = print,
        run: Callable[..., Any] = run_local,
        run_kwargs: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        notify: Callable[[Any], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        # Sends an alerts.Alert (the skew check's; runs send their own).
        self.notify = notify
        self.clock = clock
        self._next_skew_check: float | None = None
        self.open_store = open_store
        self.options = options
        self.printer = printer
        self.run = run
        self.run_kwargs = run_kwargs or {}
        self.sleep = sleep
        self._said_waiting: tuple | None = None
        # The last step found another watcher running a span (so `once` must not end yet).
        self.busy = False

    def say(self, text: str) -> None:
        self.printer(f"[watch {time.strftime('%H:%M:%S')}] {text}")

    def pending(self, store: Any) -> list[int]:
        handled = handled_spans(store, self.config)
        return [s for s in published_spans(self.config) if s not in handled]

    def step(self) -> int | None:
        """Handles the oldest unhandled span, if any and if no other watcher is busy.

        Returns the span handled, or None.
        """
        with watch_turn(self.config) as mine:
            self.busy = not mine
            if not mine:
                self._waiting("another watcher of this store is running a span")
                return None
            try:
                # Read after taking the turn: another watcher may just have run a span.
                pending = self.pending(self.open_store())
            except Exception as e:  # noqa: BLE001 - a bucket or store that is down: keep going
                self._waiting(f"cannot list the spans or read ML Metadata ({_first_line(e)})")
                return None
            if not pending:
                self._waiting(f"waiting for a new span in {self.config.data_root}")
                return None
            self._said_waiting = None
            span = pending[0]
            more = f" ({len(pending) - 1} more waiting)" if len(pending) > 1 else ""
            self.say(f"span {span}: new{more}; running the pipeline")
            try:
                handled = self._run_span(span)
            finally:
                _quiet_absl()
            record_handled(self.open_store(), self.config, handled)
            self.say(f"span {span}: {handled.outcome} (run {handled.run_id}) {handled.detail}")
            return span

    def _waiting(self, text: str) -> None:
        if self._said_waiting != (text,):
            self.say(text + f" (every {self.options.interval:g}s; Ctrl-C stops)")
            self._said_waiting = (text,)

    def _run_span(self, span: int) -> Handled:
        config = self.config.replace(span=span, version=None, window=1)
        attempts = self.options.max_attempts
        for attempt in range(1, attempts + 1):
            run_id = None
            try:
                summary = self.run(
                    config,
                    printer=lambda line: self.printer(f"  {line}"),
                    # Only the last attempt's failure is worth telling anyone about.
                    alert_failures=attempt == attempts,
                    **self.run_kwargs,
                )
                return Handled(span, TRAINED, summary.run_id, attempt, _pushed(summary))
            except RunInterruptedError as e:
                raise WatchStopped(str(e)) from None
            except ValidationBlockedError as e:
                first = str(e).splitlines()[0]
                return Handled(span, BLOCKED, _run_id(e) or "", attempt, first)
            except (PipelineRunError, ValueError) as e:
                run_id = _run_id(e)
                error = str(e).splitlines()[0]
                if attempt == attempts:
                    return Handled(
                        span, FAILED, run_id or "", attempt, f"after {attempt} attempt(s): {error}"
                    )
                pause = self.options.backoff * 2 ** (attempt - 1)
                self.say(
                    f"span {span}: attempt {attempt}/{attempts} failed ({error}); "
                    f"retrying in {pause:g}s"
                )
                self.sleep(pause)
        raise AssertionError("unreachable")

    def skew_step(self, force: bool = False) -> Any:
        """Checks skew on the request log when due (or `force`); the SkewResult, or None."""
        from runtime import alerts
        from tfxp.monitor import skew

        now = self.clock()
        if not force and (self._next_skew_check is None or now < self._next_skew_check):
            return None
        self._next_skew_check = now + (self.options.skew_every or 0.0)
        previous = skew.last_result(self.config)
        try:
            result = skew.check_serving_skew(self.config, self.open_store())
        except Exception as e:  # noqa: BLE001 - a bad log or store: said, and tried again later
            self.say(f"skew check failed: {_first_line(e)}")
            return None
        finally:
            _quiet_absl()
        skew.record(self.config, result)
        check_id = "skew-check " + result.checked_at
        was = previous.state if previous else None
        name = self.config.pipeline_name
        if result.state == skew.SKEWED:
            self.say(f"skew check: {len(result.blocking)} skewed feature(s); {result.described}")
            if was != skew.SKEWED and self.notify:
                self.notify(
                    alerts.skew_appeared(
                        name, check_id, result.span, result.described, result.blocking
                    )
                )
        elif result.state == skew.CLEAR:
            self.say(f"skew check: no skew; {result.described}")
            if was == skew.SKEWED and self.notify:
                self.notify(alerts.skew_cleared(name, check_id, result.span, result.described))
        else:
            self.say(f"skew check: {result.described}")
        return result

    def _pause(self) -> None:
        """Sleeps until the next look for spans or the next skew check, whichever is first."""
        pause = self.options.interval
        if self.options.skew_every and self._next_skew_check is not None:
            pause = min(pause, max(0.0, self._next_skew_check - self.clock()))
        self.sleep(pause)

    def run_forever(self) -> int:
        """Polls until Ctrl-C/SIGTERM (or, with `once`, until nothing is pending)."""
        if self.options.spans:
            self.say(
                f"watching {self.config.data_root} for pipeline '{self.config.pipeline_name}'; "
                f"handled spans are recorded in ML Metadata ({self.config.metadata_path})"
            )
        if self.options.skew_every:
            self.say(
                f"checking skew on the request log every {self.options.skew_every:g}s "
                f"({self.config.local_dir}/serving-skew.json)"
            )
            self._next_skew_check = self.clock()
            quiet_third_party()  # a run would; a skew check imports TensorFlow and Beam too
        try:
            with _stop_on_term():
                while True:
                    if self.options.skew_every:
                        self.skew_step()
                    if self.options.spans and self.step() is not None:
                        continue  # maybe more are waiting: no pause between spans
                    if self.options.once and not self.busy:
                        self.say("nothing left to run (--once)")
                        return 0
                    self._pause()
        except WatchStopped as e:
            self.say(f"stopped: {e}")
            return 130
        except KeyboardInterrupt:
            self.say("stopped between runs")
            return 130


def parse_duration(text: str) -> float:
    """Seconds of `90`, `90s`, `15m`, `2h` or `1d`; ValueError naming the text otherwise."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    raw = text.strip().lower()
    number, unit = (raw[:-1], raw[-1]) if raw and raw[-1] in units else (raw, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"a duration such as 90s, 15m, 2h or 1d, not {text!r}")
    return seconds


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def _quiet_absl() -> None:
    """A run turns absl's INFO lines on (for its log file); between runs they are noise."""
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.WARNING)


def _run_id(e: BaseException) -> str | None:
    import re

    run_id = getattr(e, "run_id", None)
    if run_id:
        return run_id
    m = re.search(r"run (\d{8}T\d{6}-[0-9a-f]{6})", str(e))
    if m:
        return m.group(1)
    m = re.search(r"logs/(\d{8}T\d{6}-[0-9a-f]{6})\.log", str(e))
    return m.group(1) if m else None


def _pushed(summary: Any) -> str:
    if getattr(summary, "pushed", None):
        return f"pushed {summary.pushed_model}"
    if getattr(summary, "blessed", None) is False:
        return "not blessed: not pushed"
    return ""
