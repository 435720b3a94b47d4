"""`SparkRunner`: Beam's FnApiRunner planning, with every fused stage run as Spark tasks.

The driver turns the topologically sorted stages into a lazy graph of RDDs: a stage is a
`mapPartitionsWithIndex` over the union of its inputs, running each partition as one bundle
in Beam's harness (beam_spark/harness.py). A materialized PCollection between stages is a
narrow dependency, so Spark pipelines consecutive stages inside one task and one job;
GroupByKey and Reshuffle are Spark shuffles inside the same job. Only side inputs need
their PCollection on the driver (collected, laid out as Beam's state, broadcast), so a Spark
job ends where a side input is read and one last job runs whatever no side input waits for.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import Counter
from typing import Any, Literal

from apache_beam.metrics.execution import MetricsContainer
from apache_beam.metrics.metricbase import MetricName
from apache_beam.options import pipeline_options
from apache_beam.options.pipeline_options import GoogleCloudOptions
from apache_beam.pipeline import Pipeline
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2, metrics_pb2
from apache_beam.runners import runner
from apache_beam.runners.portability.fn_api_runner import translations
from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner, RunnerResult

from beam_spark import harness, metrics, planning, timings
from beam_spark.context import spark_context
from beam_spark.graph import StageGraph
from beam_spark.options import SparkRunnerOptions
from compat.beam import FnApiRunnerExecutionContext, WorkerHandlerManager

_LOGGER = logging.getLogger(__name__)


class BeamSparkError(RuntimeError):
    """A pipeline failed on Spark; the message names the stage and carries the DoFn's own
    Python traceback, lifted out of Spark's Java exception."""


class SparkRunnerResult(RunnerResult):
    """Beam's result, plus what the run cost in Spark jobs, stages and tasks."""

    def __init__(
        self, monitoring_infos_by_stage: dict, spark: dict[str, int], times: dict[str, Any]
    ) -> None:
        super().__init__(runner.PipelineState.DONE, monitoring_infos_by_stage)
        self.spark = spark
        # Where the executors' Python time went (beam_spark/timings.py's summary).
        self.timings = times


class SparkRunner(FnApiRunner):
    """Runs a Beam pipeline on Apache Spark: `--runner=beam_spark.SparkRunner
    --spark_master=spark://HOST:PORT` (or `local[N]`)."""

    def __init__(self, spark_context: Any = None, is_drain: bool = False) -> None:
        super().__init__(is_drain=is_drain)
        self._spark_context = spark_context
        self._spark_options = SparkRunnerOptions()
        self._label = "beam_spark"

    @staticmethod
    def supported_requirements() -> tuple[str, ...]:
        # No user state or timers: Spark tasks hold no per-key state between bundles.
        return (
            common_urns.requirements.REQUIRES_BUNDLE_FINALIZATION.urn,
            common_urns.requirements.REQUIRES_SPLITTABLE_DOFN.urn,
        )

    def run_pipeline(
        self, pipeline: Pipeline, options: pipeline_options.PipelineOptions
    ) -> RunnerResult:
        self._spark_options = options.view_as(SparkRunnerOptions)
        self._label = job_label(options)
        return super().run_pipeline(pipeline, options)

    def create_stages(
        self, pipeline_proto: beam_runner_api_pb2.Pipeline
    ) -> tuple[translations.TransformContext, list[translations.Stage]]:
        import copy

        return planning.create_stages(
            copy.deepcopy(pipeline_proto),
            use_state_iterables=self._use_state_iterables,
            is_drain=self._is_drain,
        )

    def run_stages(
        self, stage_context: translations.TransformContext, stages: list[translations.Stage]
    ) -> RunnerResult:
        _check_stages(stages)
        manager = WorkerHandlerManager(stage_context.components.environments, self._provision_info)
        context = FnApiRunnerExecutionContext(
            stages,
            manager,
            stage_context.components,
            stage_context.safe_coders,
            stage_context.data_channel_coders,
            1,
        )
        try:
            with spark_context(self._spark_options, self._spark_context) as sc:
                return self._run_on_spark(sc, context, stages)
        finally:
            manager.close_all()

    def _run_on_spark(
        self, sc: Any, context: Any, stages: list[translations.Stage]
    ) -> SparkRunnerResult:
        run_id = uuid.uuid4().hex
        started = time.time()
        # The job group names the pipeline (a TFX component's executor), so one application
        # shared by a run's components still tells their jobs apart.
        sc.setJobGroup(run_id, self._label)
        graph = StageGraph(sc, context, stages, run_id, self._spark_options.spark_parallelism)
        try:
            with _lifted_failures():
                graph.build()
                graph.run_terminals()
            infos = _metrics_by_stage(graph.metrics.value, len(stages), type(self))
            spark = {"fused_stages": len(stages), **graph.spark_counts()}
            times = timings.summarize(graph.timings.value)
        finally:
            graph.release()
        total = times["total"]
        _LOGGER.info(
            "beam_spark %s: %d fused stages ran as %d Spark jobs, %d Spark stages, %d tasks; "
            "Python: workers' start %.1f s, harness setup %.1f s, bundles %.1f s",
            self._label,
            len(stages),
            spark["jobs"],
            spark["stages"],
            spark["tasks"],
            total["worker_start"],
            total["setup"],
            total["bundles"],
        )
        if self._spark_options.spark_timings:
            timings.write(
                self._spark_options.spark_timings,
                {
                    "job_group": run_id,
                    "label": self._label,
                    "app_id": sc.applicationId,
                    "start": started,
                    "end": time.time(),
                    "spark": spark,
                    **times,
                },
            )
        return SparkRunnerResult(infos, spark, times)


_TFX_EXECUTOR_LABEL = "tfx_executor="


def job_label(options: pipeline_options.PipelineOptions) -> str:
    """What the run's Spark jobs are described as: Beam's `--job_name`, else the TFX
    executor that made the pipeline (TFX labels its Beam pipelines with it), else the
    application's name."""
    cloud = options.view_as(GoogleCloudOptions)
    if cloud.job_name:
        return str(cloud.job_name)
    for label in cloud.labels or []:
        if label.startswith(_TFX_EXECUTOR_LABEL):
            return label[len(_TFX_EXECUTOR_LABEL) :]
    return str(options.view_as(SparkRunnerOptions).spark_app_name)


def _check_stages(stages: list[translations.Stage]) -> None:
    """Refuse, before anything runs, what a Spark task cannot do: user timers."""
    for stage in stages:
        for transform in stage.transforms:
            if transform.spec.urn in translations.PAR_DO_URNS:
                payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
                if payload.timer_family_specs or payload.state_specs:
                    raise NotImplementedError(
                        f"beam_spark: {transform.unique_name!r} uses user state or timers, "
                        "which this runner does not support (batch, stateless DoFns only)"
                    )


def _metrics_by_stage(
    by_partition: dict[tuple[str, int], list[bytes]], stage_count: int, runner_type: type
) -> dict[str, Any]:
    by_stage: dict[str, list[metrics_pb2.MonitoringInfo]] = {}
    for (stage, _), infos in sorted(by_partition.items()):
        by_stage.setdefault(stage, []).extend(
            metrics_pb2.MonitoringInfo.FromString(info) for info in infos
        )
    merged: dict[str, Any] = {stage: metrics.merge(infos) for stage, infos in by_stage.items()}
    # As the FnApiRunner does: the whole pipeline's own metrics under ''.
    pipeline_metrics = MetricsContainer("")
    pipeline_metrics.get_counter(
        MetricName(
            str(runner_type),
            FnApiRunner.NUM_FUSED_STAGES_COUNTER,
            urn="internal:" + FnApiRunner.NUM_FUSED_STAGES_COUNTER,
        )
    ).update(stage_count)
    merged[""] = list(pipeline_metrics.to_runner_api_monitoring_infos("").values())
    return merged


_FAILURE = re.compile(
    re.escape(harness.ERROR_START) + r"(.*?)" + re.escape(harness.ERROR_END), re.DOTALL
)


class _lifted_failures:
    """Turn Spark's Java exception for a failed task into the task's own Python failure."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, tb: Any) -> Literal[False]:
        if error is None or isinstance(error, BeamSparkError):
            return False
        found = _FAILURE.findall(str(error))
        if found:
            attempts = Counter(found)
            text = found[-1].replace("\\n", "\n")
            raise BeamSparkError(
                f"{text.rstrip()}\n(Spark gave up after {sum(attempts.values())} failed "
                "attempt(s) of this task)"
            ) from None
        return False
