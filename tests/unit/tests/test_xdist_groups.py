"""The conftest's xdist grouping: a shared fixture is built once, not once per worker.

Runs a small suite of its own under `-n 2 --dist loadgroup` (as `make test` does)
with this project's conftest, and counts how often each fixture instance is built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

SUITE = """
import os, time, pytest

pytestmark = pytest.mark.slow
LOG = os.environ["BUILD_LOG"]

def _built(name):
    with open(LOG, "a") as f:
        f.write(f"{name} {os.getpid()}\\n")
    time.sleep(0.3)  # long enough for both workers to be asking for work

@pytest.fixture(scope="module", params=["a", "b", "c", "d"])
def runs(request):
    _built(f"runs[{request.param}]")
    return request.param

@pytest.fixture(scope="module")
def second(runs):
    _built(f"second[{runs}]")
    return runs * 2

@pytest.fixture(scope="session")
def shared():
    _built("shared")

def test_1(runs): pass
def test_2(runs): pass
def test_3(runs): pass
def test_4(runs, request): request.getfixturevalue("second")
def test_5(shared): pass
def test_6(shared): pass
def test_7(shared): pass
def test_plain(): time.sleep(0.1)
"""


@pytest.mark.timeout(300)
def test_each_shared_fixture_instance_is_built_once_across_two_workers(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    # The conftest with what it imports (the workers' interpreter, the S3 fixture).
    tests = Path(__file__).resolve().parents[2]
    shutil.copy(tests / "conftest.py", suite / "conftest.py")
    (suite / "support").mkdir()  # the conftest finds its helpers there, as in tests/
    for helper in (tests / "support").glob("*.py"):  # the conftest imports several of them
        shutil.copy(helper, suite / "support" / helper.name)
    (suite / "test_shared.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    log = tmp_path / "built.log"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "--no-loadscope-reorder", "-p", "no:cacheprovider", "-p", "no:randomly", str(suite)],
        cwd=tmp_path, env={**os.environ, "BUILD_LOG": str(log)},
        capture_output=True, text=True, timeout=240,  # a hang guard: two workers import the conftest's helpers on a busy machine
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = log.read_text().split()
    builds = Counter(lines[::2])
    assert len({pid for pid in lines[1::2]}) == 2, "the suite ran on one worker only"
    expected = {f"runs[{p}]" for p in "abcd"} | {f"second[{p}]" for p in "abcd"} | {"shared"}
    assert set(builds) == expected
    assert all(n == 1 for n in builds.values()), builds
