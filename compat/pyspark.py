"""PySpark's internals behind the Beam runner on Spark (beam_spark/)."""

from __future__ import annotations

from typing import Any

from compat import check_version, private_attribute

LIBRARY = "pyspark"
WRITTEN_FOR = "3.5.9"
check_version(LIBRARY, WRITTEN_FOR)

_ACTIVE_CONTEXT = private_attribute(
    LIBRARY,
    "pyspark.context.SparkContext._active_spark_context",
    "the SparkContext already running in this process, which the runner reuses",
)


def active_spark_context() -> Any:
    """The process's running SparkContext, or None (pyspark keeps it on the class)."""
    from pyspark import SparkContext

    return getattr(SparkContext, _ACTIVE_CONTEXT)
