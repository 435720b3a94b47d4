"""Where the Beam components (ExampleGen, StatisticsGen, Transform, Evaluator) run.

A Beam mode and its options -> the `beam_pipeline_args` TFX hands every Beam
component. Pure: no Beam import, nothing started, nothing built; the one
place `tfxp run`, the Airflow DAG and the Kubeflow compile get these from.

Modes:
- auto (`tfxp run`'s default): in-process, or multi-process from
  AUTO_MULTI_PROCESS_BYTES of input on (auto_mode).
- in-process: Beam's FnApiRunner in the component's own process (named:
  Beam's DirectRunner would first try to download and run its Prism runner,
  pipeline/config.py LOCAL_RUNNER_ARG).
- multi-process: the FnApiRunner with one SDK worker subprocess per core.
- portable: Beam's PortableRunner against a job service (`--job_endpoint`),
  whose SDK workers are separate processes (`--environment_type=EXTERNAL`: a
  worker pool at `--environment_config`); the project reaches them as the
  package `--setup_file` builds, not through the driver's sys.path.
- spark: the project's own Beam runner on Apache Spark (`beam_spark.SparkRunner`):
  each fused stage of the pipeline runs as Spark tasks on the cluster at
  `--spark_master` (spark://HOST:PORT, e.g. the one `tfxp engine start` runs, or
  local[N]); the executors run Beam's SDK harness in their Python workers.
- flink / spark-job-server: Beam's official route, the same portable submission
  to a Flink or Spark job server (`--job_endpoint`), or, without one, Beam's
  FlinkRunner/SparkRunner start its Java job server for `--flink_master` /
  `--spark_master_url`. Untested here: the Maven proxy this project is built
  behind serves none of Beam's job-server jars (org.apache.beam:beam-runners-*).
- dataflow: DataflowRunner on Google Cloud (needs --project, --region and a
  gs:// temp location).

Given any dependency flag (--setup_file, --extra_package, --sdk_container_image,
...), TFX does not package itself for remote workers (tfx/utils/dependency_utils.py),
so every mode but in-process carries one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.config import LOCAL_RUNNER_ARG, SETUP_FILE
from runtime.beam_workers import WORKER_PRELOAD

BEAM_MODES = (
    "in-process",
    "multi-process",
    "spark",
    "portable",
    "flink",
    "spark-job-server",
    "dataflow",
)
# The modes whose Beam work runs outside this machine's processes.
REMOTE_MODES = ("spark", "portable", "flink", "spark-job-server", "dataflow")
# Beam's portable job-server modes (a job service, SDK workers it starts).
JOB_SERVER_MODES = ("portable", "flink", "spark-job-server")
# The project's Spark runner, by the dotted name Beam's --runner resolves.
SPARK_RUNNER = "beam_spark.SparkRunner"
_SPARK_MASTER_RE = re.compile(
    r"^(spark://[^\s/]+:\d+(,[^\s/]+:\d+)*|local(\[(\d+|\*)(,\d+)?\])?|yarn|k8s://\S+)$"
)
# `tfxp run`'s default: a mode chosen for the size of the run's input (auto_mode).
AUTO = "auto"
# From this much raw input on, `auto` runs Beam multi-process (one SDK worker per
# core). Worker processes cost more than they save on small spans and pay back on
# large ones: TFX's taxi example, multi-process against in-process on 2 cores
# (benchmarks/scale.py), is slower at 100k rows (13 MB: StatisticsGen 25 vs 12 s,
# Transform 70 vs 57 s) and faster at 1M rows (130 MB: 54 vs 71, 166 vs 246,
# Evaluator 146 vs 265 s). Ours, with workers forked from a zygote
# (tfxp/local/warm_workers.py), at 100k rows: 37.8 / 40.1 s multi-process against
# 41.5 / 39.6 s in-process, alternating runs, with 30% more CPU: no gain to pick it.
AUTO_MULTI_PROCESS_BYTES = 64 * 2**20
_MULTI_PROCESS_ARG = "--direct_running_mode=multi_processing"
# Appended to one component's arguments (later flags win) to run it in the
# driver's process while the others run multi-process (in_process_override).
IN_PROCESS_OVERRIDE = ("--direct_running_mode=in_memory", "--direct_num_workers=1")
# How the SDK workers of a portable job are started (Beam's PortableOptions).
ENVIRONMENT_TYPES = ("EXTERNAL", "DOCKER", "PROCESS", "LOOPBACK")
_MASTER_FLAG = {"flink": "--flink_master", "spark-job-server": "--spark_master_url"}
_RUNNER = {
    "portable": "PortableRunner",
    "flink": "FlinkRunner",
    # Beam's own SparkRunner (apache_beam.runners.portability.spark_runner): a job server.
    "spark-job-server": "SparkRunner",
    "dataflow": "DataflowRunner",
}


class BeamConfigError(ValueError):
    """Beam options a mode cannot run with; the message names the option and the fix."""


@dataclass(frozen=True)
class BeamOptions:
    """A Beam mode and what it needs; `extra_args` (raw Beam flags) come last and win."""

    mode: str = "in-process"
    # portable/flink/spark-job-server: the job service, HOST:PORT.
    job_endpoint: str | None = None
    # spark: the cluster's master, spark://HOST:PORT (or local[N]).
    spark_master: str | None = None
    # spark: the memory of each executor (Spark's spark.executor.memory, e.g. 2g); None:
    # Spark's default. A standalone worker offering less never starts the executor.
    spark_executor_memory: str | None = None
    # How the job service starts SDK workers: EXTERNAL (a worker pool at
    # environment_config, HOST:PORT), DOCKER (environment_config: the image),
    # PROCESS (environment_config: JSON with "command") or LOOPBACK (in the driver).
    environment_type: str | None = None
    environment_config: str | None = None
    # dataflow: gs://... (staging goes to <temp>/staging); others: optional.
    temp_location: str | None = None
    # An image with the project installed: workers need no --setup_file package.
    sdk_container_image: str | None = None
    setup_file: str = SETUP_FILE
    # multi-process: SDK worker subprocesses (0: one per core).
    num_workers: int = 0
    # Modules each remote SDK worker imports before any work (Beam's
    # --beam_plugins), e.g. one that registers TensorFlow's s3:// filesystem.
    plugins: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()

    def flags(self) -> set[str]:
        """The flag names the user passed raw (`--project` of `--project=p`)."""
        return {a.split("=", 1)[0] for a in self.extra_args}


def auto_mode(input_bytes: int | None, cores: int) -> str:
    """The mode `auto` picks for a run over `input_bytes` of raw data (None: not
    known, e.g. in object storage) on a machine with `cores` cores."""
    if input_bytes is None or cores < 2:
        return "in-process"  # one core: worker processes only add start-up
    return "multi-process" if input_bytes >= AUTO_MULTI_PROCESS_BYTES else "in-process"


def beam_args(options: BeamOptions) -> tuple[str, ...]:
    """The Beam pipeline arguments of `options` (BeamConfigError for what is missing)."""
    check(options)
    mode = options.mode
    if mode == "in-process":
        # The dependency flag only tells TFX not to build its own sdist (config.py).
        return (LOCAL_RUNNER_ARG, *_dependency_args(options), *options.extra_args)
    if mode == "multi-process":
        # The FnApiRunner's subprocesses share this machine's packages and stage
        # nothing; --setup_file only tells TFX not to build its own sdist.
        args = [
            LOCAL_RUNNER_ARG,
            _MULTI_PROCESS_ARG,
            f"--direct_num_workers={options.num_workers}",
            f"--setup_file={options.setup_file}",
        ]
    elif mode == "dataflow":
        args = _dataflow_args(options)
    elif mode == "spark":
        args = _spark_args(options)
    else:
        args = _portable_args(options)
    args += [f"--beam_plugins={p}" for p in options.plugins]
    return (*args, *options.extra_args)


def runs_multi_process(args: Sequence[str]) -> bool:
    """Whether `args` run Beam's SDK workers as subprocesses of this machine's components."""
    return _MULTI_PROCESS_ARG in args


def in_process_override(args: Sequence[str]) -> tuple[str, ...]:
    """The arguments that keep the Arrow CSV ingest in-process where `args` run
    Beam multi-process on this machine; () for every other mode.

    The ingest spreads its own work over threads (pyarrow's parser, a GZIP
    writer per shard), so worker processes only add their start-up, each of
    which imports TensorFlow: CsvExampleGen on a 1M-row span took 5.7 s
    in-process against 13.6 s multi-process, back to back, identical shards
    (docs/beyond-one-machine.md). Remote runners
    (portable, Flink, Spark, Dataflow) keep it on their workers, where the data is.
    """
    return IN_PROCESS_OVERRIDE if runs_multi_process(args) else ()


def _spark_args(options: BeamOptions) -> list[str]:
    # The executors import the project from the driver's checkout (the runner puts its
    # source directories on their PYTHONPATH); --setup_file only tells TFX not to
    # build its own sdist.
    args = [f"--runner={SPARK_RUNNER}", f"--spark_master={options.spark_master}"]
    # Every executor's Python workers fork from a daemon that has imported TensorFlow and
    # the components' libraries once; a fresh worker otherwise imports them when it
    # unpickles its stage's DoFns (~6 CPU-s each, per worker, per component).
    args.append(f"--spark_preload={','.join(WORKER_PRELOAD)}")
    # The components of a run execute in one process (LocalDagRunner): they share one
    # Spark application, whose executors and warm Python workers outlive each component.
    args.append("--spark_keep_context")
    if options.spark_executor_memory:
        args.append(f"--spark_executor_memory={options.spark_executor_memory}")
    return [*args, *_dependency_args(options)]


def _dependency_args(options: BeamOptions) -> list[str]:
    # An image that has the project needs no package; otherwise Beam builds and
    # stages the sdist of setup_file, and each worker installs it.
    if options.sdk_container_image:
        return [f"--sdk_container_image={options.sdk_container_image}"]
    return [f"--setup_file={options.setup_file}"]


def _portable_args(options: BeamOptions) -> list[str]:
    args = [f"--runner={_RUNNER[options.mode]}"]
    if options.job_endpoint:
        args.append(f"--job_endpoint={options.job_endpoint}")
    environment = (options.environment_type or "EXTERNAL").upper()
    args.append(f"--environment_type={environment}")
    config = options.environment_config
    if environment == "DOCKER" and not config:
        config = options.sdk_container_image
    if config:
        args.append(f"--environment_config={config}")
    if options.temp_location:
        args.append(f"--temp_location={options.temp_location}")
    return args + _dependency_args(options)


def _dataflow_args(options: BeamOptions) -> list[str]:
    temp = (options.temp_location or "").rstrip("/")
    return [
        "--runner=DataflowRunner",
        f"--temp_location={temp}",
        f"--staging_location={temp}/staging",
        *_dependency_args(options),
    ]


def check(options: BeamOptions) -> None:
    """Raises BeamConfigError naming the missing or wrong option and how to give it."""
    mode = options.mode
    if mode not in BEAM_MODES:
        raise BeamConfigError(f"unknown Beam mode {mode!r}; choose one of {', '.join(BEAM_MODES)}")
    given = options.flags()
    if mode in JOB_SERVER_MODES:
        _check_portable(options, given)
    if mode == "spark" and not options.spark_master:
        raise BeamConfigError(
            "the 'spark' Beam mode needs a Spark master: --spark-master spark://HOST:PORT "
            "(or local[N]); `tfxp engine start spark --workers 2` starts a cluster here"
        )
    if mode == "spark" and not _SPARK_MASTER_RE.match(options.spark_master or ""):
        raise BeamConfigError(
            f"Spark master {options.spark_master!r} is not a master URL: spark://HOST:PORT, "
            "local[N], yarn or k8s://HOST:PORT"
        )
    if mode == "dataflow":
        missing = [f for f in ("--project", "--region") if f not in given]
        if missing:
            example = " ".join(f"--beam-arg={f}=..." for f in missing)
            raise BeamConfigError(
                f"the 'dataflow' Beam mode needs {', '.join(missing)}: add {example}"
            )
        if not (options.temp_location or "").startswith("gs://"):
            raise BeamConfigError(
                "the 'dataflow' Beam mode needs a Cloud Storage temp location: "
                f"--temp-location gs://BUCKET/tmp (got {options.temp_location or 'none'})"
            )
    if mode == "multi-process" and options.num_workers < 0:
        raise BeamConfigError(
            f"Beam workers must be 0 (one per core) or more, got {options.num_workers}"
        )


def _check_portable(options: BeamOptions, given: set[str]) -> None:
    mode = options.mode
    if not options.job_endpoint and mode == "portable":
        raise BeamConfigError(
            "the 'portable' Beam mode needs a job service: --job-endpoint HOST:PORT (see docs/beyond-one-machine.md, "
            "'Beam with separate workers', for starting one)"
        )
    if not options.job_endpoint and mode in _MASTER_FLAG and _MASTER_FLAG[mode] not in given:
        flag = _MASTER_FLAG[mode]
        raise BeamConfigError(
            f"the {mode!r} Beam mode needs a job server (--job-endpoint HOST:PORT) or a "
            f"cluster to start one for: add --beam-arg={flag}=HOST:PORT"
        )
    environment = (options.environment_type or "EXTERNAL").upper()
    if environment not in ENVIRONMENT_TYPES:
        raise BeamConfigError(
            f"unknown environment type {options.environment_type!r}; choose one of "
            f"{', '.join(ENVIRONMENT_TYPES)}"
        )
    if environment == "EXTERNAL" and not options.environment_config:
        raise BeamConfigError(
            "environment type EXTERNAL needs the SDK worker pool's address: "
            "--environment-config HOST:PORT (`tfxp beam workers` starts one)"
        )
    if environment == "DOCKER" and not (options.environment_config or options.sdk_container_image):
        raise BeamConfigError(
            "environment type DOCKER needs the SDK container image: --environment-config IMAGE"
        )
