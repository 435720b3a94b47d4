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
