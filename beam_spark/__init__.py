"""Beam on Apache Spark, in Python: a Beam runner that hands Beam's own fused stages to Spark.

A library: it imports Beam, pyspark and `compat/` only (an import contract says so), so any
Beam Python pipeline can name it as its runner::

    python my_pipeline.py --runner=beam_spark.SparkRunner --spark_master=spark://127.0.0.1:7077
    python my_pipeline.py --runner=beam_spark.SparkRunner --spark_master=local[4]

or in code: ``beam.Pipeline(runner=beam_spark.SparkRunner(), options=...)``. The flags are
in `beam_spark.SparkRunnerOptions` (`--spark_master`, `--spark_app_name`,
`--spark_executor_memory`, `--spark_parallelism`, `--spark_task_max_failures`,
`--spark_python`, `--spark_conf KEY=VALUE`). docs/beam-on-spark.md has the design and limits.
"""

from beam_spark.options import SparkRunnerOptions
from beam_spark.runner import BeamSparkError, SparkRunner, SparkRunnerResult
from compat import beam as _beam_versions  # noqa: F401 - asserts the Beam version it was written for
from compat import pyspark as _pyspark_versions  # noqa: F401 - and pyspark's

__all__ = ["BeamSparkError", "SparkRunner", "SparkRunnerOptions", "SparkRunnerResult"]
