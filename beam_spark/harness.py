"""Executor side: one bundle of a fused Beam stage inside Beam's own SDK harness, streamed.

A Spark task calls `run_stage` with its partition's iterator. The stage's bundle runs in
Beam's `SdkWorker` (the same in-process harness the FnApiRunner's `EmbeddedWorkerHandler`
drives) on a thread of its own, reading the partition through a data channel as it goes and
handing output chunks back through a bounded queue: neither the input nor the output of a
partition is ever held whole. Harnesses are cached per Python worker process and run, so a
DoFn's `setup` and `beam.utils.shared.Shared` objects live across the tasks of a run.

Each task also reports where its Python time went (`TaskTimes`, through an accumulator):
the worker process's start (fork to its first task), building the stage's harness (the
DoFns unpickled, which imports their libraries, and set up) and the bundles themselves.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from apache_beam.metrics.monitoring_infos import consolidate as consolidate_monitoring_infos
from apache_beam.portability.api import beam_fn_api_pb2, metrics_pb2
from apache_beam.runners.worker import data_plane, sdk_worker, statecache

from compat import beam as beam_internals

# Bounded chunks: the harness flushes an output stream past this many bytes, and the
# partition's input is cut into Data messages of about this size.
CHUNK_BYTES = 1 << 20
# How many output chunks may wait between the bundle's thread and Spark's writer.
QUEUE_CHUNKS = 8
# Markers around the failure text a task raises, so the driver can lift the DoFn's own
# traceback out of Spark's Java exception.
ERROR_START = "<<beam_spark-failure>>"
ERROR_END = "<</beam_spark-failure>>"


@dataclass(frozen=True)
class StagePlan:
    """What a task needs to run one fused stage: all picklable, shipped in the closure."""

    name: str
    descriptor: bytes  # a serialized ProcessBundleDescriptor, data ports already set
    inputs: tuple[str, ...]  # DATA_INPUT transform ids; records carry an index into this
    outputs: tuple[str, ...]  # DATA_OUTPUT transform ids; results carry an index into this
    # For an SDF checkpoint: the Process transform -> the DATA_INPUT that feeds it.
    residual_inputs: dict[str, str] = field(default_factory=dict)
    # The driver's source directories when the stage was planned. The executors' PYTHONPATH
    # was fixed when the context started; a context kept for the next pipeline of the
    # process predates a directory added since (TFX imports a module file by adding its
    # folder to sys.path), so the worker adds the missing ones before unpickling DoFns.
    pythonpath: tuple[str, ...] = ()


class TaskFailure(RuntimeError):
    """A bundle failed inside a Spark task; the message carries the stage and traceback."""


class _StreamingChannel(data_plane.DataChannel):
    """One bundle's data plane: input read lazily from the partition, output to a callback."""

    def __init__(self) -> None:
        self.source: Iterable[beam_fn_api_pb2.Elements.Data] = ()
        self.sink: Any = None

    def input_elements(self, instruction_id, expected_inputs, abort_callback=None):
        yield from self.source

    def output_stream(self, instruction_id, transform_id):
        sink = self.sink

        def emit(data: bytes) -> None:
            if data:
                sink(transform_id, data)

        return data_plane.SizeBasedBufferingClosableOutputStream(
            close_callback=emit, flush_callback=emit, size_flush_threshold=CHUNK_BYTES
        )

    def output_timer_stream(self, instruction_id, transform_id, timer_family_id):
        raise NotImplementedError("beam_spark does not run timers (batch, no user timers)")

    def close(self) -> None:
        pass


class _ChannelFactory(data_plane.DataChannelFactory):
    def __init__(self, channel: _StreamingChannel) -> None:
        self.channel = channel

    def create_data_channel(self, remote_grpc_port):
        return self.channel

    def create_data_channel_from_url(self, url):
        return self.channel

    def close(self) -> None:
        pass


@dataclass
class TaskTimes:
    """Where one task's Python time went, in seconds (summed per stage on the driver)."""

    worker_start: float = 0.0  # this Python worker's fork to its first task (once a worker)
    setup: float = 0.0  # the stage's harness built here: DoFns unpickled (imports), set up
    bundles: float = 0.0  # inside Beam's harness: the bundles of the partition
    cold: int = 0  # 1 when this task built the stage's harness, 0 when it found it cached
    pid: int = 0  # the Python worker, to count how many a stage used
    daemon: int = 0  # the daemon it forked from (one per executor)
    daemon_preload: float = 0.0  # that daemon's start and imports, before its first fork


# Set by beam_spark.daemon before its first fork, inherited by every worker.
DAEMON_PRELOAD_VARIABLE = "BEAM_SPARK_DAEMON_PRELOAD_S"
_FIRST_TASK = [True]  # per process: a forked worker starts with its own copy


def process_age() -> float:
    """Seconds since this process started (Linux /proc; 0 where it cannot be read)."""
    try:
        # Field 22 of stat (after the command's closing parenthesis: index 19) is the
        # start time in clock ticks since boot.
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(uptime - int(fields[19]) / ticks, 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0


def _task_times() -> TaskTimes:
    times = TaskTimes(pid=os.getpid(), daemon=os.getppid())
    if _FIRST_TASK[0]:
        _FIRST_TASK[0] = False
        times.worker_start = process_age()
        times.daemon_preload = float(os.environ.get(DAEMON_PRELOAD_VARIABLE, 0) or 0)
    return times


class _Harness:
    """Beam's SDK worker for one stage of one run, with the run's side inputs as state."""

    def __init__(self, plan: StagePlan, side_state: list[tuple[bytes, bytes]]) -> None:
        descriptor = beam_fn_api_pb2.ProcessBundleDescriptor.FromString(plan.descriptor)
        self.descriptor_id = descriptor.id
        state = beam_internals.StateServicer()
        for key, data in side_state:
            state.append_raw(beam_fn_api_pb2.StateKey.FromString(key), data)
        self.channel = _StreamingChannel()
        caching = sdk_worker.GlobalCachingStateHandler(
            statecache.StateCache(beam_internals.STATE_CACHE_SIZE_MB << 20), state
        )
        cache = sdk_worker.BundleProcessorCache(
            beam_internals.FNAPI_RUNNER_CAPABILITIES,
            beam_internals.SingletonStateHandlerFactory(caching),
            _ChannelFactory(self.channel),
            {descriptor.id: descriptor},
        )
        self.worker = sdk_worker.SdkWorker(cache)
        self.cache = cache
        self.bundles = 0
        # Build the bundle processor now (unpickling the DoFns imports their libraries;
        # their setup runs), so the task's timers tell it from the bundles themselves.
        cache.get("beam_spark-setup", descriptor.id)
        cache.release("beam_spark-setup")

    def close(self) -> None:
        self.cache.shutdown()


# (run id, stage name) -> harness, per Python worker process; a new run drops the old ones.
_HARNESSES: dict[tuple[str, str], _Harness] = {}
_HARNESS_LOCK = threading.Lock()


def _harness(run_id: str, plan: StagePlan, side_state: Any, times: TaskTimes) -> _Harness:
    with _HARNESS_LOCK:
        for key in [k for k in _HARNESSES if k[0] != run_id]:
            _HARNESSES.pop(key).close()
        found = _HARNESSES.get((run_id, plan.name))
        if found is None:
            start = time.perf_counter()
            sys.path.extend(p for p in plan.pythonpath if p not in sys.path)
            state = side_state.value if side_state is not None else []
            found = _HARNESSES[(run_id, plan.name)] = _Harness(plan, state)
            times.setup, times.cold = time.perf_counter() - start, 1
        return found


def _data_messages(
    plan: StagePlan, instruction: str, records: Iterator[tuple[int, bytes]]
) -> Iterator[beam_fn_api_pb2.Elements.Data]:
    """The partition's records as Data messages of at most about CHUNK_BYTES, then an end
    of stream for every input (also for an empty partition: the bundle waits for each)."""
    pending: list[bytes] = []
    size = 0
    current = -1
    for index, data in records:
        if index != current and pending:
            yield _data(plan, instruction, current, b"".join(pending))
            pending, size = [], 0
        current = index
        pending.append(data)
        size += len(data)
        if size >= CHUNK_BYTES:
            yield _data(plan, instruction, current, b"".join(pending))
            pending, size = [], 0
    if pending:
        yield _data(plan, instruction, current, b"".join(pending))
    for transform_id in plan.inputs:
        yield beam_fn_api_pb2.Elements.Data(
            instruction_id=instruction, transform_id=transform_id, is_last=True
        )


def _data(
    plan: StagePlan, instruction: str, index: int, data: bytes
) -> beam_fn_api_pb2.Elements.Data:
    return beam_fn_api_pb2.Elements.Data(
        instruction_id=instruction, transform_id=plan.inputs[index], data=data
    )


_DONE = object()


def run_stage(
    run_id: str,
    plan: StagePlan,
    side_state: Any,
    split: int,
    records: Iterator[tuple[int, bytes]],
    metrics: Any,
    timings: Any = None,
) -> Iterator[tuple[int, bytes]]:
    """Run the partition `records` ((input index, encoded elements)) as bundles of the stage;
    yield (output index, encoded elements) as the harness produces them. Metrics (and the
    task's `TaskTimes`) go to accumulators keyed by (stage, partition), so a retried or
    recomputed task replaces its own entry instead of adding to it."""
    times = _task_times()
    harness = _harness(run_id, plan, side_state, times)
    out: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_CHUNKS)
    index_of = {transform_id: i for i, transform_id in enumerate(plan.outputs)}
    infos: list[metrics_pb2.MonitoringInfo] = []

    def sink(transform_id: str, data: bytes) -> None:
        out.put((index_of[transform_id], data))

    def work() -> None:
        try:
            pending: Iterator[tuple[int, bytes]] | None = records
            start = time.perf_counter()
            while pending is not None:
                response = _one_bundle(harness, plan, split, pending, sink)
                infos.extend(response.monitoring_infos)
                pending = _residual_records(plan, response)
            times.bundles = time.perf_counter() - start
            out.put(_DONE)
        except BaseException:  # noqa: BLE001 - handed to the task's thread, raised there
            out.put(TaskFailure(_failure_text(plan, split, traceback.format_exc())))

    thread = threading.Thread(target=work, name=f"beam_spark {plan.name}", daemon=True)
    thread.start()
    while True:
        item = out.get()
        if item is _DONE:
            break
        if isinstance(item, TaskFailure):
            thread.join()
            raise item
        yield item
    thread.join()
    merged = consolidate_monitoring_infos(infos)
    metrics.add({(plan.name, split): [info.SerializeToString() for info in merged]})
    if timings is not None:
        timings.add({(plan.name, split): asdict(times)})


def _one_bundle(
    harness: _Harness,
    plan: StagePlan,
    split: int,
    records: Iterator[tuple[int, bytes]],
    sink: Any,
) -> beam_fn_api_pb2.ProcessBundleResponse:
    harness.bundles += 1
    instruction = f"spark-{split}-{harness.bundles}"
    harness.channel.source = _data_messages(plan, instruction, records)
    harness.channel.sink = sink
    request = beam_fn_api_pb2.InstructionRequest(
        instruction_id=instruction,
        process_bundle=beam_fn_api_pb2.ProcessBundleRequest(
            process_bundle_descriptor_id=harness.descriptor_id
        ),
    )
    response = harness.worker.do_instruction(request)
    if response.error:
        raise TaskFailure(response.error)
    if response.process_bundle.requires_finalization:
        finalized = harness.worker.do_instruction(
            beam_fn_api_pb2.InstructionRequest(
                instruction_id=f"{instruction}-finalize",
                finalize_bundle=beam_fn_api_pb2.FinalizeBundleRequest(instruction_id=instruction),
            )
        )
        if finalized.error:
            raise TaskFailure(finalized.error)
    return response.process_bundle


def _residual_records(
    plan: StagePlan, response: beam_fn_api_pb2.ProcessBundleResponse
) -> Iterator[tuple[int, bytes]] | None:
    """An SDF that checkpointed hands back residuals: honour them by running them as the
    next bundle of the same task (after the delay they ask for, capped at a second)."""
    if not response.residual_roots:
        return None
    records = []
    delay = 0.0
    for residual in response.residual_roots:
        application = residual.application
        read = plan.residual_inputs.get(application.transform_id)
        if read is None:
            raise TaskFailure(
                f"stage {plan.name!r}: transform {application.transform_id!r} returned a "
                "residual (an SDF checkpoint) but no data input feeds it; beam_spark honours "
                "checkpoints only of splittable DoFns read from a stage input"
            )
        records.append((plan.inputs.index(read), application.element))
        if residual.HasField("requested_time_delay"):
            delay = max(delay, residual.requested_time_delay.ToTimedelta().total_seconds())
    time.sleep(min(delay, 1.0))
    return iter(records)


_STEP = re.compile(r"\[while running '([^']+)'\]")


def _failure_text(plan: StagePlan, split: int, trace: str) -> str:
    """The step that failed, by the name the user gave it (Beam's harness appends it to the
    DoFn's error), else the fused stage; then the traceback."""
    steps = _STEP.findall(trace)
    where = f"Beam step {steps[-1]!r}" if steps else f"Beam stage {plan.name!r}"
    return f"{ERROR_START}{where} failed in Spark partition {split}:\n{trace}{ERROR_END}"
