"""`--spark_master` and the other flags of the Spark runner, as Beam pipeline options."""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions


class SparkRunnerOptions(PipelineOptions):
    """Where and how `beam_spark.SparkRunner` runs a pipeline."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("beam_spark")
        group.add_argument(
            "--spark_master",
            default="local[2]",
            help="Spark master URL: spark://HOST:PORT for a standalone cluster, local[N] "
            "for N threads in this process (default local[2]).",
        )
        group.add_argument(
            "--spark_app_name", default="beam_spark", help="Application name on the cluster."
        )
        group.add_argument(
            "--spark_executor_memory",
            default=None,
            help="Memory per executor, e.g. 2g (Spark's spark.executor.memory).",
        )
        group.add_argument(
            "--spark_parallelism",
            type=int,
            default=None,
            help="Partitions of every shuffle (GroupByKey, Reshuffle, SDF splits); "
            "default: Spark's defaultParallelism (the cluster's total cores).",
        )
        group.add_argument(
            "--spark_task_max_failures",
            type=int,
            default=4,
            help="Attempts per Spark task before the run fails (also under local[N]).",
        )
        group.add_argument(
            "--spark_python",
            default=None,
            help="Python interpreter on the executors (PYSPARK_PYTHON); default: the "
            "driver's own interpreter, or $PYSPARK_PYTHON when set.",
        )
        group.add_argument(
            "--spark_preload",
            default=None,
            metavar="MODULE,MODULE",
            help="Modules every Python worker imports before forking (e.g. "
            "tensorflow_data_validation), beside Beam's harness which it always imports.",
        )
        group.add_argument(
            "--spark_keep_context",
            action="store_true",
            help="Keep the SparkContext this run made running when the pipeline ends, for "
            "the next pipeline of the same process (one application, warm executors and "
            "Python workers); it stops when the process exits.",
        )
        group.add_argument(
            "--spark_timings",
            default=None,
            metavar="PATH",
            help="Append one JSON line per pipeline run to PATH: the run's Spark job group, "
            "start and end, and the harness's timers per stage (Python worker start, "
            "harness setup, time in Beam's bundles).",
        )
        group.add_argument(
            "--spark_conf",
            action="append",
            default=None,
            metavar="KEY=VALUE",
            help="Any further Spark setting, repeatable (e.g. spark.archives=env.tar.gz#env).",
        )
