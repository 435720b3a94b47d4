"""Stopping a multi-process run leaves none of its processes behind.

Under multi-process Beam a run has a process tree of its own: the zygote
(tfxp/local/warm_workers.py), each worker's stand-in and the workers forked
from the zygote, each in a session of its own, out of reach of the signal a
terminal sends its foreground group. Whether the user presses Ctrl-C (SIGINT to
the run's whole process group) or the kernel kills the run (SIGKILL to the
driver alone), every one of them must end, even a worker that does not notice
(stopped here): a worker left behind would hold a core and a gigabyte. The run
is a real `local_runner.py` on 2,000 rows, stopped once Transform's two workers
are running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import child  # tests/support/child.py
import pytest
from reliability_support import write_sample

from pipeline.config import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

WORKERS = 2


def _processes() -> dict[int, tuple[int, str, str]]:
    """{pid: (parent pid, state, command line)} of every process now."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        found[int(name)] = (int(fields[1]), fields[0], cmdline)
    return found


def _descendants(pid: int, procs: dict[int, tuple[int, str, str]]) -> dict[int, str]:
    """{pid: command line} of every live process below `pid` in `procs`."""
    children: dict[int, list[int]] = {}
    for p, (ppid, state, _) in procs.items():
        if state != "Z":
            children.setdefault(ppid, []).append(p)
    below, todo = {}, [pid]
    while todo:
        for p in children.get(todo.pop(), []):
            below[p] = procs[p][2]
            todo.append(p)
    return below


def _forked_workers(run_pid: int) -> dict[int, str]:
    """The workers forked from the run's zygote (the zygote: the run's child that serves forks)."""
    procs = _processes()
    tree = _descendants(run_pid, procs)
    zygotes = [p for p, c in tree.items() if "runtime.forkserver" in c and procs[p][0] == run_pid]
    return {p: c for p, c in tree.items() if procs[p][0] in zygotes}


def _alive(pids) -> dict[int, str]:
    procs = _processes()
    return {p: procs[p][2] for p in pids if p in procs and procs[p][1] != "Z"}


@pytest.mark.parametrize("stop", ["ctrl-c", "sigkill"])
def test_every_process_of_a_stopped_multi_process_run_ends(forkserver, tmp_path: Path, stop: str):
    write_sample(tmp_path)
    cmd = [sys.executable, "local_runner.py", "--data-root", str(tmp_path / "data")]
    cmd += ["--run-dir", str(tmp_path / "run"), "--train-steps", "20", "--eval-steps", "1"]
    cmd += ["--beam", "multi-process", "--beam-workers", str(WORKERS)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = forkserver.popen(
        cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    for line in child.lines(proc, timeout=400):
        if line.rstrip().endswith("] Transform ..."):
            break
    else:
        _, err = child.finish(proc, timeout=60)
        pytest.fail(f"Transform never started: {err[-2000:]}")
    deadline = time.monotonic() + 120
    while len(_forked_workers(proc.pid)) < WORKERS:  # Transform's workers are up
        assert time.monotonic() < deadline, _descendants(proc.pid, _processes())
        time.sleep(0.2)
    tree = _descendants(proc.pid, _processes())
    assert len(tree) >= 1 + 2 * WORKERS, tree  # the zygote, the stand-ins, the workers
    if stop == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the run's whole group
    else:
        # One worker that will not notice its driver's end, as a busy or hung one might
        # not (a CI run saw one outlive its driver by over 120 s): stopped.
        os.kill(min(_forked_workers(proc.pid)), signal.SIGSTOP)
        proc.kill()  # the driver alone, as the kernel's OOM killer would
    _, err = child.finish(proc, timeout=120)
    if stop == "ctrl-c":
        assert proc.returncode == 130 and "interrupted during Transform" in err, err[-2000:]
    else:
        assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 60
    while _alive(tree) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _alive(tree), _alive(tree)
