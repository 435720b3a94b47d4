"""What each name serves, kept current while the server runs: versions, labels, hot swaps.

The repository watches the serving folder the Pusher writes (`<serving>/<version>`)
and the aliases `tfxp models promote|rollback` and each push move. An alias is
read through the registry (`serving.pointers.read_pointer`, the `<serving>/<alias>.json`
pointer it writes with one atomic rename), the same module `tfxp models` uses.

Served: the newest version (what TF Serving's default policy serves) and every
version an alias points at. A request without a version or label gets the
champion when there is one, else the newest version.

A swap never fails a request: the new version is loaded and warmed up *before*
the `State` (an immutable snapshot) is replaced with one assignment. A request
holds the version it resolved to until it is answered, so a version swapped
out finishes what it has in flight (its batcher closes after its queue
drains; anything arriving later runs in the caller's thread).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from serving import pointers
from serving.models import LoadedVersion, ModelLoadError, load_version, version_folders

log = logging.getLogger("serving")
ALIAS_FILE = re.compile(r"^([a-z][a-z0-9_-]{0,39})\.json$")
DEFAULT_POLL_SECONDS = 1.0


class NotFound(LookupError):
    """An unknown model, version or label (HTTP 404, gRPC NOT_FOUND)."""


@dataclass(frozen=True)
class State:
    versions: dict[int, LoadedVersion] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)

    @property
    def default_version(self) -> int | None:
        if pointers.CHAMPION in self.labels:
            return self.labels[pointers.CHAMPION]
        return max(self.versions) if self.versions else None


@dataclass(frozen=True)
class Resolved:
    """What a request is answered by: the version, and the label it came through ('' if none)."""

    version: LoadedVersion
    label: str


class Repository:
    """The served versions of one model (a dataset's pushed models)."""

    def __init__(
        self,
        model: str,
        serving_dir: str,
        *,
        max_batch_size: int,
        batch_timeout_ms: float,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        observe_batch: Callable[[int, str, int], None] | None = None,
        on_swap: Callable[[State], None] | None = None,
    ) -> None:
        self.model = model
        self.serving_dir = serving_dir
        self.max_batch_size = max_batch_size
        self.batch_timeout_ms = batch_timeout_ms
        self.poll_seconds = poll_seconds
        self.observe_batch = observe_batch
        self.on_swap = on_swap
        self.state = State()
        self.errors: dict[int, str] = {}  # version -> why it could not be loaded
        self.swaps = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._refresh_lock = threading.Lock()

    # -- reading what is on disk

    def wanted(self) -> tuple[dict[int, str], dict[str, int]]:
        """(version -> folder to serve, label -> version) as the serving folder says now."""
        folders = version_folders(self.serving_dir)
        labels: dict[str, int] = {}
        if os.path.isdir(self.serving_dir):
            for name in sorted(os.listdir(self.serving_dir)):
                m = ALIAS_FILE.match(name)
                if not m:
                    continue
                try:
                    pointer = pointers.read_pointer(self.serving_dir, m.group(1))
                    version = int(pointer["version"]) if pointer else None
                except (ValueError, KeyError, TypeError, OSError) as e:
                    log.warning("ignoring alias pointer %s: %s", name, e)
                    continue
                if version in folders:
                    labels[m.group(1)] = version
        wanted = set(labels.values())
        if folders:
            wanted.add(max(folders))
        return {v: folders[v] for v in wanted}, labels

    def refresh(self) -> bool:
        """Loads new versions, then swaps the state in one step; True when it changed."""
        with self._refresh_lock:
            wanted, labels = self.wanted()
            current = self.state
            versions = {v: lv for v, lv in current.versions.items() if v in wanted}
            for v, path in sorted(wanted.items()):
                if v in versions or v in self.errors:
                    continue
                try:
                    versions[v] = self._load(v, path)
                except ModelLoadError as e:
                    self.errors[v] = str(e)
                    log.error("version %s not served: %s", v, e)
            labels = {k: v for k, v in labels.items() if v in versions}
            if versions == current.versions and labels == current.labels:
                return False
            self.state = State(versions, labels)  # the swap: one assignment
            self.swaps += 1
            if self.on_swap:
                self.on_swap(self.state)
            for v, lv in current.versions.items():
                if v not in versions:
                    lv.close()  # drains what it has queued, then stops
            log.info("serving %s: versions %s, labels %s", self.model, sorted(versions), labels)
            return True

    def _load(self, version: int, path: str) -> LoadedVersion:
        started = time.monotonic()

        def observe(signature: str, rows: int) -> None:
            if self.observe_batch:
                self.observe_batch(version, signature, rows)

        lv = load_version(
            self.model,
            version,
            path,
            max_batch_size=self.max_batch_size,
            timeout_ms=self.batch_timeout_ms,
            observe=observe,
        )
        log.info(
            "loaded %s version %s in %.1f s (%d warmup requests)",
            self.model,
            version,
            time.monotonic() - started,
            lv.warmup_records,
        )
        return lv

    # -- watching

    def start(self) -> None:
        self._thread = threading.Thread(target=self._poll, name="serving-poll", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(10)
        for lv in self.state.versions.values():
            lv.close()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.refresh()
            except Exception:  # keep serving what is loaded; say why
                log.exception("refreshing %s from %s failed", self.model, self.serving_dir)

    # -- answering

    @property
    def ready(self) -> bool:
        return self.state.default_version is not None

    def resolve(self, model: str, version: str | None = None, label: str | None = None) -> Resolved:
        """The loaded version a request names (NotFound says what is served instead)."""
        state = self.state
        if model != self.model:
            raise NotFound(
                f"model {model!r} is not served here (this server serves {self.model!r})"
            )
        if version is not None:
            if not version.isdigit() or int(version) not in state.versions:
                raise NotFound(
                    f"version {version!r} of model {model!r} is not served ({self._served(state)})"
                )
            v = int(version)
            return Resolved(state.versions[v], "")
        if label is not None:
            if label not in state.labels:
                raise NotFound(
                    f"label {label!r} of model {model!r} is not set ({self._served(state)}); "
                    f"`tfxp models promote VERSION --alias {label}` sets it"
                )
            return Resolved(state.versions[state.labels[label]], label)
        default = state.default_version
        if default is None:
            raise NotFound(
                f"model {model!r} has no version loaded yet (serving folder {self.serving_dir})"
            )
        chosen = pointers.CHAMPION if state.labels.get(pointers.CHAMPION) == default else ""
        return Resolved(state.versions[default], chosen)

    def label_of(self, name: str) -> LoadedVersion | None:
        state = self.state
        v = state.labels.get(name)
        return state.versions.get(v) if v is not None else None

    @staticmethod
    def _served(state: State) -> str:
        versions = ", ".join(str(v) for v in sorted(state.versions)) or "none"
        labels = ", ".join(f"{k}={v}" for k, v in sorted(state.labels.items())) or "none"
        return f"served versions: {versions}; labels: {labels}"
