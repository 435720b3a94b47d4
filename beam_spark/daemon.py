"""PySpark's worker daemon with Beam already imported (`spark.python.daemon.module`).

PySpark forks every Python worker from one daemon per executor. Importing Beam's harness
takes seconds per fresh worker; imported once here, every fork starts with it. Further
modules to import first (a pipeline's heavy libraries) are named in the executor's
environment variable BEAM_SPARK_PRELOAD, comma-separated (`--spark_preload`).
"""

from __future__ import annotations

import importlib
import os

PRELOAD_VARIABLE = "BEAM_SPARK_PRELOAD"
# The harness and what every stage's bundle processor needs; no threads start on import.
BEAM_MODULES = (
    "apache_beam",
    "apache_beam.runners.worker.sdk_worker",
    "apache_beam.runners.worker.bundle_processor",
    "apache_beam.runners.worker.operations",
    "beam_spark.harness",
    "beam_spark.shuffle",
)


def preload() -> None:
    extra = [m.strip() for m in os.environ.get(PRELOAD_VARIABLE, "").split(",") if m.strip()]
    for module in (*BEAM_MODULES, *extra):
        importlib.import_module(module)


if __name__ == "__main__":
    preload()
    from pyspark import daemon

    daemon.manager()
