"""Running one pipeline process and measuring it: wall time, every process's peak RSS, its logs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOG_TAIL_LINES = 40
RUN_TIMEOUT = 1800.0  # seconds per pipeline process; a hung run is killed and reported


@dataclass
class RunResult:
    """One pipeline run, as measured from outside plus what its ML Metadata says."""

    name: str
    wall_seconds: float
    returncode: int
    stdout_log: str
    stderr_log: str
    binary_accuracy: float | None = None
    blessed: bool | None = None
    pushed: bool | None = None
    components: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return env


class PeakRss:
    """Samples the resident memory of a process tree; keeps each process's peak.

    Beam's multi-processing mode and TFX's workers are children of the pipeline process, so
    one figure for the parent would hide them: this keeps the peak of every process seen and
    of the whole tree at one instant.
    """

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        import threading

        self._pid, self._interval = pid, interval
        self.per_process: dict[int, int] = {}
        self.names: dict[int, str] = {}
        # The root process's RSS over time (epoch seconds, bytes): set against the run's log, it
        # says which component the driver's memory belongs to.
        self.root_timeline: list[tuple[float, int]] = []
        self.tree_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        try:
            root = psutil.Process(self._pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop.wait(self._interval):
            total = 0
            try:
                processes = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for proc in processes:
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                total += rss
                if proc.pid == self._pid:
                    self.root_timeline.append((time.time(), rss))
                self.per_process[proc.pid] = max(self.per_process.get(proc.pid, 0), rss)
                if proc.pid not in self.names:
                    self.names[proc.pid] = _process_name(proc)
            self.tree_peak = max(self.tree_peak, total)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join(timeout=5)
        mb = 1024 * 1024
        return {
            "peak_rss_mb_max_process": max(self.per_process.values(), default=0) / mb,
            "peak_rss_mb_tree": self.tree_peak / mb,
            "processes_seen": len(self.per_process),
            # Every process's own peak, largest first: which one holds memory as data grows.
            "peak_rss_mb_by_process": [
                {"pid": pid, "name": self.names.get(pid, "?"), "mb": round(rss / mb, 1)}
                for pid, rss in sorted(self.per_process.items(), key=lambda kv: -kv[1])
            ],
        }


_COMPONENT_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*Component (\S+) is (running|finished)\.$"
)


def driver_peaks(timeline: list[tuple[float, int]], run_logs: Path) -> dict[str, dict[str, float]]:
    """The driver's peak RSS (MB) while each component ran, and its rise, from the run's log.

    The log (tfxp/local/runner.py) stamps "Component X is running." and "... is finished." in
    local time; components that run in the driver's process show their own memory here.
    """
    logs = sorted(run_logs.glob("*.log"), key=lambda p: p.stat().st_mtime)
    if not logs or not timeline:
        return {}
    windows: dict[str, list[float]] = {}
    for line in logs[-1].read_text(errors="replace").splitlines():
        match = _COMPONENT_LINE.match(line)
        if match:
            stamp = time.mktime(time.strptime(match[1][:19], "%Y-%m-%d %H:%M:%S"))
            windows.setdefault(match[2], []).append(stamp + int(match[1][20:]) / 1000)
    mb = 1024 * 1024
    peaks = {}
    for node, stamps in windows.items():
        start, end = stamps[0], stamps[-1] if len(stamps) > 1 else float("inf")
        inside = [rss for t, rss in timeline if start <= t <= end]
        if inside:
            before = [rss for t, rss in timeline if t < start] or inside[:1]
            # The rise is what the component added: freed memory rarely leaves the process.
            peaks[node] = {
                "peak": round(max(inside) / mb, 1),
                "rise": round((max(inside) - before[-1]) / mb, 1),
            }
    return peaks


def _process_name(proc: Any) -> str:
    """A short name for a sampled process: the script or module it runs, else its executable."""
    import psutil

    try:
        argv = proc.cmdline()
    except psutil.Error:
        return "?"
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "-m" and i + 1 < len(argv):
            return argv[i + 1].rsplit(".", 1)[-1]
        if arg.endswith(".py"):
            return Path(arg).name
    return Path(argv[0]).name if argv else "?"


def _run_timed(
    name: str,
    cmd: list[str],
    cwd: Path,
    log_dir: Path,
    timeout: float = RUN_TIMEOUT,
    run_logs: Path | None = None,
) -> RunResult:
    """Runs `cmd` with stdout/stderr to log files; returns its whole-process wall time.

    A run still going after `timeout` seconds is killed and reported as failed (exit 124).
    The peak resident memory of every process in its tree is sampled (`PeakRss`).
    """
    stdout_log = log_dir / f"{name}.stdout.log"
    stderr_log = log_dir / f"{name}.stderr.log"
    print(f"[{name}] running: {' '.join(cmd)}", flush=True)
    print(f"[{name}]   cwd {cwd}", flush=True)
    print(f"[{name}]   logs {stdout_log}", flush=True)
    print(f"[{name}]        {stderr_log}", flush=True)
    with stdout_log.open("wb") as out, stderr_log.open("wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=_subprocess_env(), stdout=out, stderr=err, start_new_session=True
        )
        memory = PeakRss(proc.pid)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the whole tree: Beam workers too
            proc.wait()
            returncode = 124
            err.write(f"\nbenchmark: killed after {timeout:.0f} s (--timeout)\n".encode())
        wall = time.perf_counter() - started
        rss = memory.stop()
        if run_logs is not None:
            rss["peak_rss_mb_driver_by_component"] = driver_peaks(memory.root_timeline, run_logs)
    status = "ok" if returncode == 0 else f"FAILED (exit {returncode})"
    print(f"[{name}] {status} in {wall:.1f}s", flush=True)
    result = RunResult(name, wall, returncode, str(stdout_log), str(stderr_log))
    result.extra.update(rss)
    return result


def _tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    text = Path(path).read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def _print_failure(result: RunResult) -> None:
    print(f"\n{result.name} run failed (exit {result.returncode}).", file=sys.stderr)
    for log in (result.stdout_log, result.stderr_log):
        print(f"--- last {LOG_TAIL_LINES} lines of {log} ---", file=sys.stderr)
        print(_tail(log), file=sys.stderr)


def _fresh_dir(path: Path) -> Path:
    if path.exists():
        raise SystemExit(f"{path} already exists; runs need fresh directories (no caching)")
    path.mkdir(parents=True)
    return path
