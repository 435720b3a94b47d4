"""Samples `tfxp serve`'s Prometheus metrics in the background (the console's Serving page).

Every `interval` seconds one GET of the server's metrics page, parsed into a
Sample per model (tfxp/monitor/serving_series.py) and kept in a ring of `keep`
samples: memory stays bounded however long the console runs (720 samples at 5 s
are an hour). A page that cannot be fetched is skipped and the reason kept for
the page to show; the next tick tries again.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable

from tfxp.monitor.serving_series import Sample, parse_samples

METRICS_PATH = "/monitoring/prometheus/metrics"
DEFAULT_INTERVAL = 5.0
DEFAULT_KEEP = 720
FETCH_TIMEOUT = 5.0


def metrics_url(server: str) -> str:
    """The metrics page of a server address (`http://127.0.0.1:8501`) or the page itself."""
    parsed = urllib.parse.urlsplit(server)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(
            f"--serving-url {server!r} is not a server address: give http://HOST:PORT "
            "(the REST address `tfxp serve` prints)"
        )
    server = server.rstrip("/")
    return server if server.endswith(METRICS_PATH) else server + METRICS_PATH


def fetch_page(url: str, token: str | None = None) -> str:
    request = urllib.request.Request(url)  # noqa: S310 - the user's own server address
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:  # noqa: S310
        return response.read().decode("utf-8")


class Sampler:
    """Keeps the last `keep` samples of one server's metrics, one every `interval` s."""

    def __init__(
        self,
        server: str,
        *,
        interval: float = DEFAULT_INTERVAL,
        keep: int = DEFAULT_KEEP,
        token: str | None = None,
        fetch: Callable[[str], str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"the sampling interval must be positive, not {interval}")
        if keep < 2:
            raise ValueError(f"keep at least 2 samples (a rate needs two), not {keep}")
        self.url = metrics_url(server)
        self.interval = interval
        self.keep = keep
        self._fetch = fetch or (lambda url: fetch_page(url, token))
        self._clock = clock
        # Per model (a server serves one): the oldest sample goes when `keep` are held.
        self._samples: dict[str, deque[Sample]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started_at: float | None = None
        self.last_error: str | None = None

    def sample_once(self) -> list[Sample]:
        """One fetch, its samples stored (none when the page could not be read)."""
        at = self._clock()
        try:
            found = parse_samples(self._fetch(self.url), at)
        except Exception as e:  # noqa: BLE001 - a server down or restarting: say so, try again
            self.last_error = f"{type(e).__name__}: {e}"
            return []
        self.last_error = None
        with self._lock:
            if self.started_at is None:
                self.started_at = at
            for s in found:
                self._samples.setdefault(s.model, deque(maxlen=self.keep)).append(s)
        return found

    def samples(self) -> list[Sample]:
        with self._lock:
            return sorted((s for ring in self._samples.values() for s in ring), key=lambda s: s.at)

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="serving-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(FETCH_TIMEOUT + self.interval)

    def _run(self) -> None:
        while True:
            self.sample_once()
            if self._stop.wait(self.interval):
                return
