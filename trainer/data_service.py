"""A tf.data service cluster: one dispatcher and N workers.

    python -m trainer.data_service --workers 2 [--port 5050]

starts a dispatcher and N workers in this process, prints the dispatcher's
address and serves until Ctrl-C. Give the address to the Trainer as the
`data_service_address` hyperparameter. On a cluster, start the dispatcher
alone (`--workers 0`) on one host and workers elsewhere with `--dispatcher
HOST:PORT --worker-host THIS_HOST` (see docs/trainer-input.md). Workers
must be able to read the files the Trainer's pipeline names.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import dataclass, field

import tensorflow as tf

from compat import tf as tf_internals
from trainer.ports import free_port

PROTOCOL = "grpc"


def strip_protocol(address: str) -> str:
    return address.split("://", 1)[1] if "://" in address else address


@dataclass
class Cluster:
    """Servers started in this process; `address` is what `distribute` takes."""

    address: str
    dispatcher: tf.data.experimental.service.DispatchServer | None = None
    workers: list[tf.data.experimental.service.WorkerServer] = field(default_factory=list)

    def stop(self) -> None:
        """Stops the workers, then the dispatcher (servers also stop at process exit)."""
        for worker in self.workers:
            tf_internals.stop_worker(worker)  # the public API has no stop, only join
        if self.dispatcher is not None:
            tf_internals.stop_dispatcher(self.dispatcher)
        self.workers = []
        self.dispatcher = None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_workers(
    dispatcher_address: str,
    num_workers: int,
    *,
    worker_host: str = "localhost",
    worker_port: int = 0,
) -> list[tf.data.experimental.service.WorkerServer]:
    """Starts `num_workers` workers registered with the dispatcher at `dispatcher_address`.

    `worker_host` is the name the workers advertise: the Trainer connects to
    the workers directly, so on a cluster it must resolve from the Trainer's
    host. `worker_port` 0 picks free ports; otherwise workers use consecutive
    ports from it.
    """
    workers = []
    for i in range(num_workers):
        port = worker_port + i if worker_port else free_port()
        config = tf.data.experimental.service.WorkerConfig(
            dispatcher_address=strip_protocol(dispatcher_address),
            worker_address=f"{worker_host}:{port}",
            port=port,
            protocol=PROTOCOL,
        )
        workers.append(tf.data.experimental.service.WorkerServer(config))
    return workers


def start_cluster(
    num_workers: int,
    *,
    port: int = 0,
    work_dir: str | None = None,
    worker_host: str = "localhost",
    worker_port: int = 0,
) -> Cluster:
    """Starts a dispatcher on `port` (0: a free one) and `num_workers` workers here.

    `work_dir` makes the dispatcher fault tolerant: it journals its state
    there and recovers it after a restart.
    """
    config = tf.data.experimental.service.DispatcherConfig(
        port=port or free_port(),
        protocol=PROTOCOL,
        work_dir=work_dir,
        fault_tolerant_mode=bool(work_dir),
    )
    dispatcher = tf.data.experimental.service.DispatchServer(config)
    address = dispatcher.target
    workers = start_workers(address, num_workers, worker_host=worker_host, worker_port=worker_port)
    return Cluster(address=address, dispatcher=dispatcher, workers=workers)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.data_service",
        description="Run a tf.data service dispatcher and workers until Ctrl-C.",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="workers to start here (0: dispatcher only)"
    )
    parser.add_argument("--port", type=int, default=0, help="dispatcher port (0: a free one)")
    parser.add_argument(
        "--dispatcher",
        metavar="HOST:PORT",
        help="join this existing dispatcher instead of starting one (workers only)",
    )
    parser.add_argument(
        "--worker-host",
        default="localhost",
        help="host name the workers advertise; must resolve from the Trainer's host",
    )
    parser.add_argument(
        "--worker-port", type=int, default=0, help="first worker port (0: free ports)"
    )
    parser.add_argument(
        "--work-dir", help="dispatcher journal directory: makes the dispatcher fault tolerant"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.workers < 0 or (args.dispatcher and args.workers == 0):
        print("--workers must be >= 0, and >= 1 with --dispatcher", file=sys.stderr)
        return 2
    if args.dispatcher:
        address = args.dispatcher
        cluster = Cluster(
            address=address,
            workers=start_workers(
                address,
                args.workers,
                worker_host=args.worker_host,
                worker_port=args.worker_port,
            ),
        )
    else:
        cluster = start_cluster(
            args.workers,
            port=args.port,
            work_dir=args.work_dir,
            worker_host=args.worker_host,
            worker_port=args.worker_port,
        )
        address = cluster.address
    ports = ", ".join(tf_internals.worker_address(w).rsplit(":", 1)[-1] for w in cluster.workers)
    role = "joined dispatcher" if args.dispatcher else "dispatcher"
    print(f"tf.data service {role} at {address}", flush=True)
    if cluster.workers:
        print(f"{len(cluster.workers)} worker(s) on {args.worker_host} ports {ports}", flush=True)
    print(
        f"Trainer hyperparameter: data_service_address={strip_protocol(address)!r}; Ctrl-C to stop",
        flush=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
    cluster.stop()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
