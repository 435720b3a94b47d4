"""Shared pytest setup: quiet TensorFlow and Keras 2 (tf_keras) before any TF import.

Also keeps shared expensive fixtures computed once under pytest-xdist
(`make test` runs `-n 2 --dist loadgroup`): every test that uses one of our
module- or session-scoped fixtures is put in an xdist group named after that
fixture's scope (its module, or the session fixture's name), so all of them run
on one worker and the fixture is built once, not once per worker. Nothing to
mark by hand: write a module/session fixture and its tests stay together.
Fixtures that only start a private server (`PER_WORKER`) are cheap enough to
start once per worker and do not pin their tests together.
"""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

TESTS = os.path.dirname(os.path.abspath(__file__))
PER_WORKER = {"mariadb_server", "seaweedfs"}


def _shared_fixture_groups(item: pytest.Item) -> set[str]:
    groups = set()
    info = getattr(item, "_fixtureinfo", None)
    for name, defs in info.name2fixturedefs.items() if info else ():
        fixturedef = defs[-1]
        if fixturedef.scope == "function" or name in PER_WORKER:
            continue
        source = getattr(fixturedef.func, "__code__", None)
        if source is None or not os.path.abspath(source.co_filename).startswith(TESTS):
            continue  # pytest's own and plugins' fixtures
        if fixturedef.scope == "session":
            groups.add(name)
        else:  # module / class / package: one instance per module at most
            groups.add(item.nodeid.split("::")[0])
    return groups


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        groups = _shared_fixture_groups(item)
        if groups and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group("+".join(sorted(groups))))
