"""The interpreter pytest-xdist starts its workers with (tests/conftest.py).

execnet starts a worker as `PYTHON -u -c BOOTSTRAP` and talks to it over its
stdin and stdout. With PYTHON = `python tests/support/xdist_worker.py`, this small
process forks the worker from the session's fork server (which imported
TensorFlow and the pipeline once) and stands in for it: the worker gets this
process's stdin, stdout and stderr, and its exit status and the signals sent
here go through. Each worker then collects without ~10 s of CPU of imports.
"""

from __future__ import annotations

import os
import sys

from runtime.forkserver import ForkServer

# The interpreter options execnet passes, as the environment the fork server takes.
OPTIONS = {"-u": "PYTHONUNBUFFERED", "-B": "PYTHONDONTWRITEBYTECODE"}


def main(argv: list[str]) -> None:
    env = dict(os.environ)
    while argv and argv[0] in OPTIONS:
        env[OPTIONS[argv.pop(0)]] = "1"
    ForkServer.attach(os.environ["TFXP_TEST_FORKSERVER"]).exec([sys.executable, *argv], env=env)


if __name__ == "__main__":
    main(sys.argv[1:])
