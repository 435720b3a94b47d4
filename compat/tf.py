"""TensorFlow's internals behind the tf.data service cluster (trainer/data_service.py): its
servers have `join` but no public `stop`, and a worker does not say which port it took."""

from __future__ import annotations

from typing import Any

from compat import check_version, private_attribute

LIBRARY = "tensorflow"
WRITTEN_FOR = "2.16.2"
check_version(LIBRARY, WRITTEN_FOR)

_SERVICE = "tensorflow.python.data.experimental.service.server_lib"
_DISPATCHER_STOP = private_attribute(
    LIBRARY, f"{_SERVICE}.DispatchServer._stop", "stops a dispatcher started in this process"
)
_WORKER_STOP = private_attribute(
    LIBRARY, f"{_SERVICE}.WorkerServer._stop", "stops a worker started in this process"
)
_WORKER_ADDRESS = private_attribute(
    LIBRARY, f"{_SERVICE}.WorkerServer._address", "the worker's host:port (its port is picked)"
)


def stop_dispatcher(dispatcher: Any) -> None:
    """Stops a tf.data service DispatchServer of this process."""
    getattr(dispatcher, _DISPATCHER_STOP)()


def stop_worker(worker: Any) -> None:
    """Stops a tf.data service WorkerServer of this process."""
    getattr(worker, _WORKER_STOP)()


def worker_address(worker: Any) -> str:
    """The host:port a tf.data service WorkerServer listens on."""
    return str(getattr(worker, _WORKER_ADDRESS))
