"""The driver's graph of RDDs for one run: one RDD per fused stage, wired by Beam's buffers.

Each stage RDD yields (output index, encoded chunk) records. A stage that reads a buffer:
- `impulse`: one partition holding Beam's impulse element;
- `materialize:` (a PCollection): its producers' records, a narrow dependency;
- `group:` (a GroupByKey): its producers' elements keyed by encoded key, through
  `repartitionAndSortWithinPartitions`, grouped a key at a time;
- `reshuffle:` (a Reshuffle or an SDF's split restrictions): single elements dealt round
  robin over the partitions.
A stage RDD read more than once (two consumers, or a consumer and a side input) is
persisted, so its DoFns run once per partition.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from functools import partial
from typing import Any

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.common import ENCODED_IMPULSE_VALUE
from apache_beam.runners.portability.fn_api_runner import translations
from apache_beam.runners.worker import bundle_processor
from pyspark import AccumulatorParam, StorageLevel

from beam_spark import harness, shuffle
from beam_spark.context import executor_pythonpath
from beam_spark.planning import RESHUFFLE_KIND
from compat.beam import ListBuffer


class ReplaceByKey(AccumulatorParam):
    """Metrics per (stage, partition), merged by replacing: a task Spark re-runs (a retry,
    a speculative copy, a recomputed partition) reports its partition again, not twice."""

    def zero(self, value: Any) -> dict:
        return {}

    def addInPlace(self, first: dict, second: dict) -> dict:
        first.update(second)
        return first


class _StateRecorder:
    """Stands in for Beam's StateServicer while side inputs are laid out, keeping the
    (state key, bytes) pairs to broadcast."""

    def __init__(self) -> None:
        self.entries: list[tuple[bytes, bytes]] = []

    def append_raw(self, state_key: Any, data: bytes) -> None:
        self.entries.append((state_key.SerializeToString(), data))


def _tagged(index: int, record: tuple[int, bytes]) -> bool:
    return record[0] == index


def _payload(record: tuple[int, bytes]) -> bytes:
    return record[1]


def _as_input(index: int, chunk: bytes) -> tuple[int, bytes]:
    return index, chunk


def _identity(key: int) -> int:
    return key


def _stage_task(
    run_id: str,
    plan: harness.StagePlan,
    side: Any,
    metrics: Any,
    timings: Any,
    split: int,
    records: Any,
) -> Any:
    return harness.run_stage(run_id, plan, side, split, records, metrics, timings)


class StageGraph:
    """Builds the RDD of every stage, runs the side-input and final jobs, keeps counts."""

    def __init__(
        self, sc: Any, context: Any, stages: list[translations.Stage], run_id: str, parallelism: Any
    ) -> None:
        self.sc = sc
        self.context = context
        self.stages = stages
        self.run_id = run_id
        self.partitions = parallelism or sc.defaultParallelism
        self.metrics = sc.accumulator({}, ReplaceByKey())
        self.timings = sc.accumulator({}, ReplaceByKey())  # harness.TaskTimes by partition
        # Buffer ids must be read before setup() rewrites the data ports' payloads.
        self.inputs: dict[str, list[tuple[str, bytes, str]]] = {}
        self.outputs: dict[str, list[tuple[str, bytes, str]]] = {}
        self.producers: dict[bytes, list[tuple[str, int]]] = defaultdict(list)
        for stage in stages:
            self.inputs[stage.name] = [
                (t.unique_name, t.spec.payload, translations.only_element(t.outputs.values()))
                for t in stage.transforms
                if t.spec.urn == bundle_processor.DATA_INPUT_URN
            ]
            self.outputs[stage.name] = [
                (t.unique_name, t.spec.payload, translations.only_element(t.inputs.values()))
                for t in stage.transforms
                if t.spec.urn == bundle_processor.DATA_OUTPUT_URN
            ]
            for index, (_, buffer_id, _) in enumerate(self.outputs[stage.name]):
                self.producers[buffer_id].append((stage.name, index))
        self.uses = self._count_uses()
        self.pythonpath = tuple(p for p in executor_pythonpath().split(os.pathsep) if p)
        context.setup()
        self.rdds: dict[str, Any] = {}
        self.side_chunks: dict[bytes, list[bytes]] = {}
        self.persisted: list[Any] = []
        self.broadcasts: list[Any] = []

    def _count_uses(self) -> Counter[str]:
        uses: Counter[str] = Counter()
        side_buffers = set()
        for stage in self.stages:
            for _, buffer_id, _ in self.inputs[stage.name]:
                for producer, _ in self.producers.get(buffer_id, []):
                    uses[producer] += 1
            for pcoll in stage.side_inputs():
                side_buffers.add(translations.create_buffer_id(pcoll))
        for buffer_id in side_buffers:
            for producer, _ in self.producers.get(buffer_id, []):
                uses[producer] += 1
        return uses

    def build(self) -> None:
        for stage in self.stages:
            side = self._side_state(stage)
            plan = self._plan(stage)
            source = self._input_rdd(stage)
            rdd = source.mapPartitionsWithIndex(
                partial(_stage_task, self.run_id, plan, side, self.metrics, self.timings)
            ).setName(stage.name)
            if self.uses[stage.name] > 1:
                rdd.persist(StorageLevel.MEMORY_AND_DISK)
                self.persisted.append(rdd)
            self.rdds[stage.name] = rdd

    def run_terminals(self) -> None:
        """One job for every stage whose output nothing reads (sinks, the last stages)."""
        terminals = [self.rdds[s.name] for s in self.stages if self.uses[s.name] == 0]
        if terminals:
            self.sc.setJobDescription(f"beam_spark: {len(terminals)} final stage(s)")
            self.sc.union(terminals).count()

    def spark_counts(self) -> dict[str, int]:
        tracker = self.sc.statusTracker()
        jobs = tracker.getJobIdsForGroup(self.run_id)
        stage_ids: set[int] = set()
        for job in jobs:
            info = tracker.getJobInfo(job)
            if info is not None:
                stage_ids.update(info.stageIds)
        tasks = 0
        for stage_id in stage_ids:
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                tasks += info.numCompletedTasks
        return {"jobs": len(jobs), "stages": len(stage_ids), "tasks": tasks}

    def release(self) -> None:
        # Blocking: a context stopped with removals still in flight fails them, and the
        # driver then prints a RejectedExecutionException per request.
        for rdd in self.persisted:
            rdd.unpersist(blocking=True)
        for broadcast in self.broadcasts:
            broadcast.unpersist(blocking=True)

    def _plan(self, stage: translations.Stage) -> harness.StagePlan:
        manager = self.context.bundle_manager_for(stage)
        descriptor = manager.process_bundle_descriptor
        residual_inputs = {}
        for transform in stage.transforms:
            urn = common_urns.sdf_components.PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS.urn
            if transform.spec.urn == urn:
                payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
                tag = translations.only_element(
                    t for t in transform.inputs if t not in payload.side_inputs
                )
                residual_inputs[transform.unique_name] = manager.input_for(
                    transform.unique_name, tag
                )
        return harness.StagePlan(
            name=stage.name,
            descriptor=descriptor.SerializeToString(),
            inputs=tuple(name for name, _, _ in self.inputs[stage.name]),
            outputs=tuple(name for name, _, _ in self.outputs[stage.name]),
            residual_inputs=residual_inputs,
            pythonpath=self.pythonpath,
        )

    def _produced(self, buffer_id: bytes) -> Any:
        """The chunks every producer wrote to a buffer, as one RDD."""
        parts = [
            self.rdds[stage].filter(partial(_tagged, index)).map(_payload)
            for stage, index in self.producers.get(buffer_id, [])
        ]
        if not parts:
            return self.sc.emptyRDD()
        return parts[0] if len(parts) == 1 else self.sc.union(parts)

    def _input_rdd(self, stage: translations.Stage) -> Any:
        parts = []
        for index, (_, buffer_id, pcoll) in enumerate(self.inputs[stage.name]):
            if buffer_id == translations.IMPULSE_BUFFER:
                parts.append(self.sc.parallelize([(index, ENCODED_IMPULSE_VALUE)], 1))
                continue
            kind, _ = translations.split_buffer_id(buffer_id)
            if kind == "materialize":
                parts.append(self._produced(buffer_id).map(partial(_as_input, index)))
            elif kind == "group":
                coders = self._group_coders(buffer_id)
                parts.append(
                    self._produced(buffer_id)
                    .flatMap(partial(shuffle.keyed_elements, coders))
                    .repartitionAndSortWithinPartitions(self.partitions, shuffle.key_partition)
                    .mapPartitions(partial(shuffle.grouped_chunks, coders, index))
                )
            elif kind == RESHUFFLE_KIND:
                write_pcoll = self._written_pcoll(buffer_id)
                parts.append(
                    self._produced(buffer_id)
                    .mapPartitionsWithIndex(
                        partial(
                            shuffle.spread_elements,
                            self._channel_coder(write_pcoll),
                            self._channel_coder(pcoll),
                        )
                    )
                    .partitionBy(self.partitions, _identity)
                    .values()
                    .mapPartitions(partial(shuffle.rechunk, index))
                )
            else:
                raise NotImplementedError(f"beam_spark: stage {stage.name!r} reads {buffer_id!r}")
        source = parts[0] if len(parts) == 1 else self.sc.union(parts) if parts else None
        if source is None or source.getNumPartitions() == 0:
            # A stage runs at least one bundle, as under the FnApiRunner.
            empty = self.sc.parallelize([], 1)
            source = empty if source is None else self.sc.union([source, empty])
        return source

    def _written_pcoll(self, buffer_id: bytes) -> str:
        for stage, index in self.producers[buffer_id]:
            return self.outputs[stage][index][2]
        raise KeyError(buffer_id)

    def _channel_coder(self, pcoll: str) -> Any:
        coder_id = self.context.data_channel_coders[pcoll]
        return self.context.pipeline_context.coders[
            self.context.safe_coders.get(coder_id, coder_id)
        ]

    def _group_coders(self, buffer_id: bytes) -> shuffle.GroupCoders:
        """The coders and windowing Beam's GroupingBuffer would use for this GroupByKey."""
        _, transform_id = translations.split_buffer_id(buffer_id)
        context = self.context
        transform = context.pipeline_components.transforms[transform_id]
        input_pcoll = translations.only_element(list(transform.inputs.values()))
        output_pcoll = translations.only_element(list(transform.outputs.values()))
        strategy = context.pipeline_components.pcollections[input_pcoll].windowing_strategy_id
        proto = context.pipeline_components.windowing_strategies[strategy]
        if (
            context.safe_windowing_strategies[strategy] != strategy
            and proto.merge_status == beam_runner_api_pb2.MergeStatus.NEEDS_MERGE
        ):
            raise NotImplementedError(
                f"beam_spark: {transform.unique_name!r} groups by a custom merging window "
                f"function ({proto.window_fn.urn}); only Beam's own window functions "
                "(global, fixed, sliding, sessions) group on Spark"
            )
        return shuffle.GroupCoders(
            pre=context.pipeline_context.coders[
                context.safe_coders[context.data_channel_coders[input_pcoll]]
            ],
            post=context.pipeline_context.coders[
                context.safe_coders[context.data_channel_coders[output_pcoll]]
            ],
            windowing=context.pipeline_context.windowing_strategies[
                context.safe_windowing_strategies[strategy]
            ],
        )

    def _side_state(self, stage: translations.Stage) -> Any:
        """Collect the stage's side inputs on the driver (one job for all still missing),
        lay them out as Beam's runner does, and broadcast them."""
        wanted: dict[tuple[str, str], tuple[bytes, Any]] = {}
        for transform in stage.transforms:
            if transform.spec.urn not in translations.PAR_DO_URNS:
                continue
            payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
            for tag, spec in payload.side_inputs.items():
                buffer_id = translations.create_buffer_id(transform.inputs[tag])
                wanted[(transform.unique_name, tag)] = (buffer_id, spec.access_pattern)
        if not wanted:
            return None
        missing = sorted({b for b, _ in wanted.values()} - set(self.side_chunks))
        if missing:
            self.sc.setJobDescription(f"beam_spark: side inputs of {stage.name}")
            tagged = self.sc.union(
                [self._produced(b).map(partial(_as_input, i)) for i, b in enumerate(missing)]
            ).collect()
            for buffer_id in missing:
                self.side_chunks[buffer_id] = []
            for i, chunk in tagged:
                self.side_chunks[missing[i]].append(chunk)
        for buffer_id, _ in wanted.values():
            _, pcoll = translations.split_buffer_id(buffer_id)
            buffer = ListBuffer(coder_impl=self._channel_coder(pcoll).get_impl())
            for chunk in self.side_chunks[buffer_id]:
                buffer.append(chunk)
            self.context.pcoll_buffers[buffer_id] = buffer
        recorder = _StateRecorder()
        manager = self.context.worker_handler_manager
        real, manager.state_servicer = manager.state_servicer, recorder
        try:
            self.context.commit_side_inputs_to_state(wanted)
        finally:
            manager.state_servicer = real
        broadcast = self.sc.broadcast(recorder.entries)
        self.broadcasts.append(broadcast)
        return broadcast
