"""Beam's multi-process SDK workers, forked from a process that imported their libraries once.

Under multi-process Beam (`--beam multi-process`, and `auto` on large spans)
the FnApiRunner starts every SDK worker as a fresh
`python -m apache_beam.runners.worker.sdk_worker_main`: two per Beam
component on two cores, six a taxi run. Each imports TensorFlow and its
component's library before its first bundle: 6.0-6.3 user-s plus ~1 sys-s
each (`/usr/bin/time python -c 'import apache_beam.runners.worker.sdk_worker_main,
tensorflow_model_analysis'`, likewise TFDV and `tensorflow_transform.beam`),
~40 CPU-s a run, paid while the component waits for its workers.

`warm_workers` starts one zygote (runtime/forkserver.py) when the local run
begins, which imports those libraries while ExampleGen runs, and for the
run's duration has the FnApiRunner start its workers as
`python -m tfxp.local.warm_workers ZYGOTE`: a stand-in (~0.1 s to start) that
forks the worker from the zygote with the stand-in's own standard streams
and environment (Beam's control and logging addresses), passes the signals
it gets on, and exits with the worker's status (`ForkServer.exec`). Beam
sees the same subprocess it started before. Measured on a 1M-row taxi span,
`local_runner.py --data-root <span> --json` with and without `--fresh-workers`,
back to back: 120.5 s against 161.9 s (StatisticsGen 16.0 / 25.2 s, Transform
38.9 / 55.9, Evaluator 47.3 / 65.1).

A partial run (ExampleGen alone, as a window's older spans are ingested) may
start no worker at all (the Arrow ingest stays in-process), so there the zygote
starts with the first worker instead. If it cannot start (its imports fail; its
log is the run's), every worker starts fresh, and the run's log says why
(`FRESH_WARNING`): slower, not broken. Workers end with the zygote, and the
zygote with the run, however the run ends (a SIGKILLed driver included).

The hook is Beam's registry of worker handlers by environment URN
(`WorkerHandler.register_environment`): the subprocess environment's entry is
wrapped for the run and restored after. Only the FnApiRunner's own worker
command is replaced; any other command line a pipeline names runs as given.
The trade is the fork server's: a module the zygote imported read its
environment variables then (the run's, as the workers' would be), and a worker
does not re-import it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import threading
from collections.abc import Iterator, Sequence

from pipeline.beam import runs_multi_process
from runtime.beam_speedups import PLUGIN
from runtime.beam_workers import WORKER_PRELOAD
from runtime.forkserver import ForkServer, ForkServerError

# What the FnApiRunner runs per SDK worker under multi_processing (fn_runner.py).
BEAM_WORKER_MODULE = "apache_beam.runners.worker.sdk_worker_main"
# The zygote's imports: the worker's own, and the plugin every local worker
# imports first (--beam_plugins; this machine's checkout, as the driver's).
PRELOAD = (*WORKER_PRELOAD, PLUGIN)
# Said (in the run's log) for each worker that starts fresh because the zygote failed.
FRESH_WARNING = "Beam SDK worker starts fresh: "


def fn_runner_command() -> str:
    """The shell command the FnApiRunner starts each multi-process SDK worker with."""
    return f"{sys.executable} -m {BEAM_WORKER_MODULE}"


def stand_in_command(zygote_address: str) -> str:
    """The shell command that starts a worker forked from the zygote at `zygote_address`."""
    return " ".join(shlex.quote(a) for a in (sys.executable, "-m", __name__, zygote_address))


@contextlib.contextmanager
def warm_workers(
    beam_args: Sequence[str], log_path: str, enabled: bool = True, start_now: bool = True
) -> Iterator[ForkServer | None]:
    """Within the block, multi-process Beam's SDK workers fork from a zygote (its
    output appends to `log_path`), which the block gets. The zygote starts now, or
    with the first worker unless `start_now` (a run that may start no workers, e.g.
    ExampleGen alone, whose Arrow ingest stays in-process). Nothing changes for
    other Beam modes, or when not `enabled` (the block gets None)."""
    if not enabled or not runs_multi_process(beam_args):
        yield None
        return
    from apache_beam.portability import python_urns

    from compat import beam as beam_internals

    # Workers end with the zygote, which ends with the run (its stdin is the driver's
    # pipe): Beam's own workers only stop once they notice their gRPC channels are
    # gone, and in one CI run a worker outlived its SIGKILLed driver by over 120 s.
    zygote = ForkServer(PRELOAD, log_path=log_path, kill_children_on_exit=True)
    if start_now:
        zygote.start()  # imports while the run compiles and ingests; forks wait for it
    registry = beam_internals.registered_environments  # Beam's hook
    urn = python_urns.SUBPROCESS_SDK
    beams_own = registry[urn]
    default = fn_runner_command().encode()
    starting = threading.Lock()  # Beam may start several workers at once

    def handler(command_line: bytes, *rest: object) -> object:
        if command_line == default:
            try:
                with starting:
                    command_line = stand_in_command(zygote.address()).encode()
            except ForkServerError as e:  # it died already: as in main(), start fresh
                # Where the workers' own output goes (the run's log), as main() says it;
                # not through logging, whose configuration other code may have changed.
                print(f"WARNING: {FRESH_WARNING}{e}", file=sys.stderr, flush=True)
        return beams_own[0](command_line, *rest)

    registry[urn] = (handler, beams_own[1])
    try:
        yield zygote
    finally:
        registry[urn] = beams_own
        zygote.close()


def main(argv: Sequence[str]) -> None:
    """The stand-in: `python -m tfxp.local.warm_workers ZYGOTE` becomes Beam's SDK worker,
    forked from the zygote, or started fresh (with a warning) if the zygote failed."""
    if len(argv) != 1:
        sys.exit("usage: python -m tfxp.local.warm_workers ZYGOTE_ADDRESS (started by Beam)")
    worker = [sys.executable, "-m", BEAM_WORKER_MODULE]
    try:
        zygote = ForkServer.attach(argv[0])
        zygote.wait_ready()  # the zygote may still be importing: forks wait for it
    except ForkServerError as e:
        # A run goes on without it, at the cost of the imports this module saves.
        print(f"WARNING: {FRESH_WARNING}{e}", file=sys.stderr, flush=True)
        os.execv(sys.executable, worker)  # noqa: S606 - becomes this interpreter's Beam worker, argv built here
    print(f"Beam SDK worker: forked from the zygote {argv[0]}", file=sys.stderr, flush=True)
    try:
        zygote.exec(worker)
    except ForkServerError as e:  # it ended mid-run, and the kernel ended the worker with it
        sys.exit(f"Beam SDK worker: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
