"""Apache Beam's internals behind the project's Beam speed-ups, worker pool and TFRecord writing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compat import check_version, private, private_attribute, resolve

LIBRARY = "apache-beam"
WRITTEN_FOR = "2.72.0"
check_version(LIBRARY, WRITTEN_FOR)

TFRecordUtil = private(
    LIBRARY, "apache_beam.io.tfrecordio._TFRecordUtil", "Beam's TFRecord framing (image ingest)"
)
_FIND_SUBMODULES = "apache_beam.internal.cloudpickle.cloudpickle._find_imported_submodules"
private(LIBRARY, _FIND_SUBMODULES, "replaced by an indexed scan (runtime/beam_speedups.py)")
registered_environments: dict = private(
    LIBRARY,
    "apache_beam.runners.portability.fn_api_runner.worker_handlers.WorkerHandler"
    "._registered_environments",
    "where the local run hooks its warm SDK workers in",
)
_WORKER_PROCESSES = private_attribute(
    LIBRARY,
    "apache_beam.runners.worker.worker_pool_main.BeamFnExternalWorkerPoolServicer"
    "._worker_processes",
    "the pool's worker processes, ended when the pool stops",
)


def find_imported_submodules() -> Callable[..., Any]:
    return resolve(_FIND_SUBMODULES)


def set_find_imported_submodules(function: Callable[..., Any]) -> None:
    from apache_beam.internal.cloudpickle import cloudpickle

    setattr(cloudpickle, _FIND_SUBMODULES.rsplit(".", 1)[1], function)


def worker_processes(servicer: Any) -> dict:
    return getattr(servicer, _WORKER_PROCESSES)


# The Beam runner on Spark (beam_spark/) drives the FnApiRunner's planning and Beam's SDK
# harness directly: these internals are what it is built on.
_FN_API = "apache_beam.runners.portability.fn_api_runner"
FnApiRunnerExecutionContext = private(
    LIBRARY,
    f"{_FN_API}.execution.FnApiRunnerExecutionContext",
    "beam_spark: stage descriptors, coders and side-input layout of a planned pipeline",
)
GroupingBuffer = private(
    LIBRARY,
    f"{_FN_API}.execution.GroupingBuffer",
    "beam_spark: groups one key's values after Spark's shuffle, windows as Beam does",
)
ListBuffer = private(
    LIBRARY, f"{_FN_API}.execution.ListBuffer", "beam_spark: a side input's collected chunks"
)
WorkerHandlerManager = private(
    LIBRARY,
    f"{_FN_API}.worker_handlers.WorkerHandlerManager",
    "beam_spark: its state_servicer receives the side-input layout the runner broadcasts",
)
StateServicer = private(
    LIBRARY,
    f"{_FN_API}.worker_handlers.StateServicer",
    "beam_spark: side inputs as state, in each executor's harness",
)
SingletonStateHandlerFactory = private(
    LIBRARY,
    f"{_FN_API}.worker_handlers.SingletonStateHandlerFactory",
    "beam_spark: hands the executor's harness its state",
)
FNAPI_RUNNER_CAPABILITIES = private(
    LIBRARY,
    f"{_FN_API}.worker_handlers.FNAPI_RUNNER_CAPABILITIES",
    "beam_spark: what the in-process harness may assume of its runner",
)
STATE_CACHE_SIZE_MB = private(
    LIBRARY,
    f"{_FN_API}.worker_handlers.STATE_CACHE_SIZE_MB",
    "beam_spark: the harness's state cache, sized as the FnApiRunner sizes it",
)
