"""The S3 relay's start-up read has a deadline: a child that never answers cannot hang a run."""

from __future__ import annotations

import subprocess
import sys

from tfxp.storage import s3_shim


def test_first_line_gives_up_at_the_deadline():
    silent = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert s3_shim._first_line(silent, timeout=1.0) == ""
        assert silent.poll() is None  # it gave up while the child still ran
    finally:
        silent.kill()
        silent.wait(timeout=30)


def test_first_line_reads_what_the_child_says():
    talker = subprocess.Popen(
        [sys.executable, "-c", "print('http://127.0.0.1:1', flush=True)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert s3_shim._first_line(talker, timeout=60) == "http://127.0.0.1:1"
    talker.wait(timeout=30)
