"""The SparkContext of a pipeline run: made from the options, on loopback, quiet, and
stopped at the end; or the one already running in the process, reused when it matches."""

from __future__ import annotations

import atexit
import logging
import os
import re
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from beam_spark.options import SparkRunnerOptions
from compat import pyspark as pyspark_compat

_LOCAL = re.compile(r"^local\[(\d+|\*)\]$")
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
_LOGGER = logging.getLogger(__name__)


def master_url(options: SparkRunnerOptions) -> str:
    """`local[N]` gets Spark's retry count written in (`local[N,F]`): plain local mode never
    retries a failed task, and retries are part of what the runner promises."""
    master = options.spark_master
    found = _LOCAL.match(master)
    if found:
        return f"local[{found.group(1)},{options.spark_task_max_failures}]"
    return master


def executor_pythonpath() -> str:
    """The driver's own source directories (its sys.path minus the interpreter's and
    site-packages), so DoFns defined in the project's modules unpickle on executors."""
    skip = {
        Path(p).resolve()
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    }
    paths: list[str] = []
    for entry in sys.path:
        path = Path(entry or os.getcwd()).resolve()
        if not path.is_dir() or path in skip or "site-packages" in path.parts:
            continue
        if str(path) not in paths:
            paths.append(str(path))
    extra = os.environ.get("PYTHONPATH")
    if extra:
        paths.extend(p for p in extra.split(os.pathsep) if p and p not in paths)
    return os.pathsep.join(paths)


def spark_conf(options: SparkRunnerOptions) -> Any:
    from pyspark import SparkConf

    conf = SparkConf()
    conf.setMaster(master_url(options)).setAppName(options.spark_app_name)
    conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
    # The UI would bind every interface on port 4040 upward; opt in with --spark_conf.
    conf.set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
    # Quiet at WARN from the JVM's start (setLogLevel comes after Spark's start-up lines).
    conf.set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG_CONFIG}")
    conf.set("spark.task.maxFailures", str(options.spark_task_max_failures))
    conf.set("spark.executorEnv.PYTHONPATH", executor_pythonpath())
    # Python workers fork from a daemon that has Beam (and --spark_preload) imported.
    conf.set("spark.python.daemon.module", "beam_spark.daemon")
    if options.spark_preload:
        conf.set("spark.executorEnv.BEAM_SPARK_PRELOAD", options.spark_preload)
    if options.spark_executor_memory:
        conf.set("spark.executor.memory", options.spark_executor_memory)
    if options.spark_parallelism:
        conf.set("spark.default.parallelism", str(options.spark_parallelism))
    for item in options.spark_conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--spark_conf {item!r}: expected KEY=VALUE")
        conf.set(key.strip(), value.strip())
    return conf


# How often the driver's JVM (PySpark's gateway) is launched before its failure is raised.
GATEWAY_LAUNCHES = 2


def _started_context(conf: Any) -> Any:
    """A SparkContext on `conf`. A gateway JVM that exits before it gives PySpark its port
    is launched once more: seen once, silently, in the Spark e2e tests (a `tfxp run`
    forked from the test session), where the next launch of the same command worked.
    Whatever the JVM printed is on stderr above; a second failure is raised as PySpark
    raises it (so a missing Java still fails, after two launches)."""
    from pyspark import SparkContext
    from pyspark.errors import PySparkRuntimeError

    for launch in range(1, GATEWAY_LAUNCHES + 1):
        try:
            return SparkContext(conf=conf)
        except PySparkRuntimeError as error:
            if error.getErrorClass() != "JAVA_GATEWAY_EXITED" or launch == GATEWAY_LAUNCHES:
                raise
            _LOGGER.warning(
                "beam_spark: Spark's driver JVM exited before giving its port (launch %d of "
                "%d); launching it again",
                launch,
                GATEWAY_LAUNCHES,
            )
    raise AssertionError("unreachable")  # the loop returns or raises


@contextmanager
def spark_context(options: SparkRunnerOptions, given: Any = None) -> Iterator[Any]:
    """The context for one run. A context handed to the runner, or one already active in
    the process with the same master, is used and left running; otherwise one is made for
    this run and stopped when it ends."""
    active = given or pyspark_compat.active_spark_context()
    if active is not None:
        wanted = master_url(options)
        if options.spark_master not in (active.master, "local[2]") and wanted != active.master:
            raise ValueError(
                f"--spark_master={options.spark_master} but this process already runs a "
                f"SparkContext on {active.master}; stop it first or use that master"
            )
        yield active
        return
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if options.spark_python:
        os.environ["PYSPARK_PYTHON"] = options.spark_python
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    context = _started_context(spark_conf(options))
    context.setLogLevel("WARN")
    if options.spark_keep_context:
        # The next pipeline of this process finds it active (above) and runs on the same
        # executors, whose Python workers have their imports done; the process's exit
        # stops it.
        atexit.register(context.stop)
        yield context
        return
    try:
        yield context
    finally:
        context.stop()
