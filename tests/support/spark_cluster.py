"""A standalone Spark cluster for tests (session fixture `spark_cluster`): a master and two
workers of one core each, on loopback, started by `beam_spark.cluster` as `tfxp engine
start` starts one, and stopped at the session's end.

Java comes from `scripts/java.sh install` when it is missing (as root; otherwise the
test fails saying what to run). tests/conftest.py registers the fixture once for every
test; the tests that use it share one xdist worker (its group), so one cluster serves
them all. A test that harms its cluster (kills a worker) starts its own with
`running_spark_cluster`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import system_packages

from beam_spark import cluster

WORKERS = 2
# What Spark's workers offer executors; the runner asks for less (its executor memory).
WORKER_MEMORY = "2g"


def ensure_java() -> None:
    try:
        cluster.find_java()
        installed = True
    except cluster.ClusterError:
        installed = False
    system_packages.ensure_installed(installed, "java.sh", cluster.JAVA_PACKAGE)


@contextlib.contextmanager
def running_spark_cluster(directory: Path, workers: int = WORKERS) -> Iterator[cluster.Cluster]:
    """A cluster of `workers` one-core workers in `directory`, stopped on exit."""
    ensure_java()
    try:
        started = cluster.start(directory, workers, cores=1, memory=WORKER_MEMORY)
    except cluster.ClusterError as e:
        pytest.fail(f"the Spark cluster did not start: {e}", pytrace=False)
    try:
        yield started
    finally:
        cluster.stop(directory)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.Cluster]:
    directory = tmp_path_factory.mktemp("spark-cluster")
    with running_spark_cluster(directory) as started:
        yield started
