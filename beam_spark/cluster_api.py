"""What a standalone Spark cluster says about itself: the master's and workers' REST
API (`<web UI>/json/`), and what its executors logged.

Standard library only: any program can ask a cluster `beam_spark.cluster` started
(or any standalone master whose web UI it can reach) the same questions.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REST_TIMEOUT_S = 5.0
# An executor's log (Spark's default log4j profile, INFO) has such a line per task that
# succeeded on it, counted by task id: the worker's copy of an executor's stderr can
# repeat its last lines when the executor is stopped mid-write (seen in CI: one task's
# line twice, after a garbled fragment).
_FINISHED_TASK = re.compile(r"Executor: Finished task \S+ in stage \S+ \(TID (\d+)\)")


class RestError(RuntimeError):
    """A Spark daemon's REST API did not answer; the message names the address."""


def master_json(web_ui: str, timeout: float = REST_TIMEOUT_S) -> dict[str, Any]:
    """The master's state: workers (state ALIVE or DEAD), activeapps, completedapps."""
    return _get_json(web_ui.rstrip("/") + "/json/", timeout)


def _get_json(url: str, timeout: float) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - the master's http:// REST API
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise RestError(f"{url} did not answer ({reason})") from None


def master_addresses(url: str) -> list[tuple[str, int]]:
    """HOST:PORT of each master in spark://H:P (or spark://H1:P1,H2:P2 for standby
    masters); [] for a URL that names no standalone master (local[N], yarn, k8s://)."""
    if not url.startswith("spark://"):
        return []
    addresses = []
    for part in url[len("spark://") :].split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"Spark master URL {url!r}: {part!r} is not HOST:PORT")
        addresses.append((host, int(port)))
    return addresses


def check_master(url: str, timeout: float = REST_TIMEOUT_S) -> None:
    """Raises RestError unless some master of `url` accepts a connection (nothing to
    check for local[N] and cluster managers other than standalone)."""
    problems = []
    for host, port in master_addresses(url):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as e:
            problems.append(f"{host}:{port}: {e.strerror or e}")
    if problems:
        raise RestError(f"the Spark master {url} does not answer ({'; '.join(problems)})")


@dataclass(frozen=True)
class ExecutorRun:
    """One executor of one application on one worker, and the tasks it finished."""

    worker: str  # the worker's folder name under work/ (worker-1, ...)
    app_id: str
    executor_id: str
    tasks: int
    log: str


def executor_runs(work_dir: str | Path, app_ids: Iterable[str] | None = None) -> list[ExecutorRun]:
    """Every executor the workers under `work_dir` (work/worker-N/APP/EXECUTOR/stderr) ran,
    for `app_ids` only if given: read from their logs, so a worker killed since counts too."""
    wanted = set(app_ids) if app_ids is not None else None
    runs = []
    for log in sorted(Path(work_dir).glob("*/app-*/*/stderr")):
        app_id = log.parent.parent.name
        if wanted is not None and app_id not in wanted:
            continue
        text = log.read_text(errors="replace")
        runs.append(
            ExecutorRun(
                worker=log.parent.parent.parent.name,
                app_id=app_id,
                executor_id=log.parent.name,
                tasks=len(set(_FINISHED_TASK.findall(text))),
                log=str(log),
            )
        )
    return runs
