"""Shared pytest setup: quiet TensorFlow and Keras 2 (tf_keras) before any TF import.

Also keeps shared expensive fixtures computed once under pytest-xdist
(`make test` runs `-n auto --dist loadgroup`): every test that uses one of our
module- or session-scoped fixtures is put in an xdist group named after that
fixture's scope (its module, or the session fixture's name), so all of them run
on one worker and the fixture is built once, not once per worker. Nothing to
mark by hand: write a module/session fixture and its tests stay together.
- Groups that share a test are merged (a test using a session fixture and its
  module's fixture ties both to one worker), so no shared fixture is built twice.
- A parametrized module fixture is built once per parameter: each parameter's
  tests are a group of their own, and the parameters spread over the workers.
- Fixtures that only start a private server (`PER_WORKER`) are cheap enough to
  start once per worker and do not pin their tests together (the fork server
  below is one server for all workers, started by the xdist controller).
Slow tests are sent to the workers first (`make test` keeps this order with
--no-loadscope-reorder), so the many quick unit tests fill in at the end
instead of one long pipeline test starting last on one worker.
"""

import io
import logging
import os
import shlex
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
# The helpers the tests import as plain modules (servers, browser, child processes).
sys.path.insert(0, os.path.join(TESTS, "support"))
# Harnesses the benchmarks use too (a synthetic console store, TFX executors run on a
# run's inputs): they live with the benchmarks, which import no test code.
sys.path.insert(0, os.path.join(os.path.dirname(TESTS), "benchmarks", "support"))

# One definition for the whole session: a fixture imported into two test modules
# (or conftests) is two fixtures to pytest, and each would start its own server.
from seaweedfs_server import seaweedfs  # noqa: E402, F401 - after the path above
from serving_support import serving_run  # noqa: E402, F401
from spark_cluster import spark_cluster  # noqa: E402, F401

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

PER_WORKER = {"mariadb_server", "seaweedfs", "forkserver"}


def _shared_fixture_groups(item: pytest.Item) -> set[str]:
    groups = set()
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return groups
    # The parameters of module-wide fixtures (direct and through other fixtures): a
    # module fixture that depends on a parametrized one has an instance per parameter.
    params = getattr(getattr(item, "callspec", None), "params", {})
    shared = [
        f"{n}={params[n]}"
        for n in sorted(params)
        if n in info.name2fixturedefs and info.name2fixturedefs[n][-1].scope != "function"
    ]
    for name, defs in info.name2fixturedefs.items():
        fixturedef = defs[-1]
        if fixturedef.scope == "function" or name in PER_WORKER:
            continue
        source = getattr(fixturedef.func, "__code__", None)
        if source is None or not os.path.abspath(source.co_filename).startswith(TESTS):
            continue  # pytest's own and plugins' fixtures
        if fixturedef.scope == "session":
            groups.add(name)
        else:  # module / class / package: one instance per module (and parameter) at most
            module = item.nodeid.split("::")[0]
            # Parameters in parentheses: xdist's loadgroup ignores an "@group" that has
            # a "]" after it (it takes the "]" for the end of a parametrized test id), so
            # a bracketed group name would silently spread its tests over the workers.
            groups.add(f"{module}({','.join(shared)})" if shared else module)
    return groups


def _merged(groups: list[set[str]]) -> dict[str, str]:
    """Group name -> the name of its connected component (groups sharing a test are one)."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.setdefault(name, name) != name:
            name = parent[name]
        return name

    for names in groups:
        first, *rest = sorted(names)
        for other in rest:
            parent[root(other)] = root(first)
        root(first)
    members: dict[str, list[str]] = {}
    for name in parent:
        members.setdefault(root(name), []).append(name)
    return {name: "+".join(sorted(members[root(name)])) for name in parent}


@pytest.hookimpl(optionalhook=True)  # `-p no:xdist` still works
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers more than cores. The whole-pipeline tests spend part of
    their time waiting (on a child process's start-up, a server, a socket), and the
    extra workers fill it. Measured on the 2-core machine, busy cores on average
    over a whole `make test`: 1.75 with 2 workers, 1.71-1.83 with 3, 1.83 with 4."""
    return (os.cpu_count() or 1) + 2


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = [_shared_fixture_groups(item) for item in items]
    component = _merged([g for g in groups if g])
    for item, names in zip(items, groups, strict=True):
        if names and not item.get_closest_marker("xdist_group"):
            # No "]" or "@" in a group name: xdist would not see it as a group (see above).
            group = component[min(names)].translate(str.maketrans("[]@", "()_"))
            item.add_marker(pytest.mark.xdist_group(group))


def _group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return mark.args[0] if mark else None


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_slow_first(items: list[pytest.Item]) -> None:
    """After pytest's own reordering: slow tests (with their whole group) first, stable."""
    slow = {_group(i) for i in items if i.get_closest_marker("slow")}
    slow.discard(None)
    items.sort(key=lambda i: not (i.get_closest_marker("slow") or _group(i) in slow))


# What the fork server imports once: everything `local_runner.py` and `tfxp`
# import before they do any work (pipeline.definition pulls in TensorFlow, Beam,
# TFMA, tf.Transform and TFX's components).
FORKSERVER_PRELOAD = ("pipeline.definition", "tfxp.cli", "tfxp.local.runner")
# Under xdist, the controller starts one fork server for every worker (its
# import costs ~10 CPU-s once, not once per worker) and passes its address on.
FORKSERVER_ADDRESS = "TFXP_TEST_FORKSERVER"
_SHARED_FORKSERVER = pytest.StashKey[object]()


def _new_forkserver():
    from pipeline.config import PROJECT_ROOT
    from runtime.forkserver import ForkServer

    return ForkServer(FORKSERVER_PRELOAD, cwd=str(PROJECT_ROOT))


def pytest_configure(config: pytest.Config) -> None:
    # The xdist controller (workers have `workerinput`), before it starts the
    # workers, which inherit the environment. Started now, without waiting for
    # its imports; the workers' start waits for them.
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if not os.environ.get(FORKSERVER_ADDRESS):
        server = _new_forkserver()
        os.environ[FORKSERVER_ADDRESS] = server.address()
        config.stash[_SHARED_FORKSERVER] = server
    # The workers themselves are forked from it (tests/support/xdist_worker.py): four workers
    # importing TensorFlow while they collect cost ~45 CPU-s at the start of the run.
    if all(tx == "popen" for tx in config.option.tx):
        worker = shlex.join([sys.executable, os.path.join(TESTS, "support", "xdist_worker.py")])
        config.option.tx = [f"popen//python={worker}"] * len(config.option.tx)


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_SHARED_FORKSERVER, None)
    if server is not None:
        server.close()
        os.environ.pop(FORKSERVER_ADDRESS, None)


@pytest.fixture(scope="session")
def forkserver():
    """Python commands (`local_runner.py`, `tfxp ...`) forked from a process that
    imported the pipeline once (runtime/forkserver.py), for tests that need a runner in
    a process of its own (signals, exit codes, two at once) but not a fresh
    interpreter: a fresh one spends ~10 CPU-s importing before it does anything
    (`import pipeline.definition`, see runtime/forkserver.py). Under xdist, the
    controller's one server; otherwise one started on first use. Tests of a fresh
    interpreter itself (start-up, import side effects, entry points) use subprocess."""
    from runtime.forkserver import ForkServer

    address = os.environ.get(FORKSERVER_ADDRESS)
    server = ForkServer.attach(address) if address else _new_forkserver()
    yield server
    server.close()


class _SessionStderr(io.TextIOBase):
    """A stream for log handlers that cannot be closed under them: it writes to the
    session's stderr (pytest's capture, open until the session ends), or to the process's
    own if that one was closed. A handler holding a test's capture (capsys) instead writes
    to a closed file once that test ends, and every later log line then printed a
    "Logging error" traceback into the next tests' stderr."""

    def __init__(self, stream) -> None:
        super().__init__()
        self._stream = stream

    def _target(self):
        return sys.__stderr__ if getattr(self._stream, "closed", False) else self._stream

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()


_SESSION_STDERR = _SessionStderr(sys.stderr)
# The handler Beam's `logging.basicConfig()` would add inside whichever test first builds
# pipeline options (on a capture, if that test captures) is added now, on the session's stream.
logging.basicConfig(stream=_SESSION_STDERR)


def _plain_stream_handlers() -> list[logging.StreamHandler]:
    """absl's handler and the root's stream handlers (basicConfig's: Beam calls it), not files."""
    from absl import logging as absl_logging

    handlers = [*logging.root.handlers, absl_logging.get_absl_handler().python_handler]
    return [
        h
        for h in handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
    ]


def _absl_on_session_stderr() -> None:
    from absl import logging as absl_logging

    absl_logging.get_absl_handler().python_handler.stream = _SESSION_STDERR


_absl_on_session_stderr()


@pytest.fixture(autouse=True)
def _log_handler_streams_open():
    """Before each test, a stream handler left on a closed capture writes to the session's
    stderr again. Assigned, not `setStream`: that flushes the old, closed stream first."""
    for handler in _plain_stream_handlers():
        if getattr(handler.stream, "closed", False):
            handler.stream = _SESSION_STDERR
    yield
