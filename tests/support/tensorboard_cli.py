"""`tfxp tensorboard` as a user starts it, for the tests that read what it serves:
started on a run, its address read from what it prints, stopped with SIGTERM (the
command's own exit), and TensorBoard checked gone with it."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator

import child  # tests/support/child.py: reads with a deadline

START_SECONDS = 240  # TensorBoard imports TensorFlow: tens of seconds on a busy machine


class Served:
    """What a running `tfxp tensorboard` printed, and its address."""

    def __init__(self, lines: list[str], address: str) -> None:
        self.lines, self.address = lines, address

    def json(self, path: str):
        """GET `path` (e.g. data/plugin/scalars/tags) from TensorBoard, as JSON."""
        import urllib.request

        with urllib.request.urlopen(self.address + path, timeout=30) as r:  # noqa: S310 - loopback
            return json.load(r)


@contextlib.contextmanager
def tfxp_tensorboard(run_dir: str, run_id: str) -> Iterator[Served]:
    command = [sys.executable, "-m", "tfxp.cli", "tensorboard", "--run-dir", run_dir]
    process = subprocess.Popen([*command, "--run-id", run_id], stdout=subprocess.PIPE, text=True)
    address = ""
    try:
        lines = []
        for line in child.lines(process, timeout=START_SECONDS):
            lines.append(line)
            if line.strip().startswith("open http"):
                break
        found = re.search(r"http://127\.0\.0\.1:\d+/", lines[-1] if lines else "")
        assert found, f"tfxp tensorboard printed no address: {lines}"
        address = found.group(0)
        yield Served(lines, address)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    import urllib.request

    try:
        urllib.request.urlopen(address, timeout=5).close()  # noqa: S310 - loopback
    except OSError:
        return  # TensorBoard stopped with its command
    raise AssertionError(f"TensorBoard still answers at {address} after its command ended")
