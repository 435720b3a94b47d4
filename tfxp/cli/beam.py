"""`tfxp beam workers`: a pool of Beam SDK workers for `tfxp run --beam portable`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading


def cmd_workers(args: argparse.Namespace) -> int:
    from runtime.beam_workers import WorkerPool

    work_dir = args.work_dir or tempfile.mkdtemp(prefix="tfxp-beam-workers-")
    try:
        pool = WorkerPool(work_dir, host=args.host, port=args.port, warm=not args.fresh_workers)
    except OSError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(pool.address.rsplit(":", 1)[1])
        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"Beam SDK worker pool at {pool.address}", flush=True)
    print(f"  workers' packages, logs and records: {pool.work_dir}/", flush=True)
    print(
        f"  use: tfxp run --beam portable --job-endpoint HOST:PORT "
        f"--environment-config {pool.address}",
        flush=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    pool.stop()
    print("worker pool stopped", flush=True)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    beam = sub.add_parser("beam", help="Beam services for runs with separate workers")
    commands = beam.add_subparsers(dest="beam_command", required=True)
    workers = commands.add_parser(
        "workers",
        help="serve Beam SDK workers (separate processes that install the job's staged "
        "package) for --environment-type EXTERNAL",
    )
    workers.add_argument("--host", default="127.0.0.1", help="address to listen on")
    workers.add_argument(
        "--port", type=int, default=50000, help="port (default 50000; 0: any free one)"
    )
    workers.add_argument("--work-dir", help="workers' packages and logs (default: a temp dir)")
    workers.add_argument("--port-file", help="write the port here once listening")
    workers.add_argument(
        "--fresh-workers",
        action="store_true",
        help="start every SDK worker as a fresh interpreter, as a container's boot does "
        "(default: fork them from a process that imported Beam, TensorFlow and TFX once; "
        "~10 s of CPU less per worker)",
    )
    workers.set_defaults(func=cmd_workers)
