"""One local Spark context for the runner's unit tests (session-wide: starting Spark and
its Python workers costs seconds; the runner reuses a context it is handed)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark_local() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkContext
    from spark_pipelines import MASTER_VARIABLE

    from beam_spark.context import spark_conf
    from beam_spark.options import SparkRunnerOptions

    # test_on_standalone_cluster.py runs some of these tests again in a child pytest with
    # a real cluster's master here.
    master = os.environ.get(MASTER_VARIABLE, "local[2]")
    options = SparkRunnerOptions([f"--spark_master={master}", "--spark_app_name=beam_spark-tests"])
    context = SparkContext(conf=spark_conf(options))
    context.setLogLevel("ERROR")
    yield context
    context.stop()


def pytest_configure(config: pytest.Config) -> None:
    # Beam's runner test suite marks some cases with its own mark; --strict-markers wants it known.
    config.addinivalue_line("markers", "it_validatesrunner: Beam's ValidatesRunner cases")
