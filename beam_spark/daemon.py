"""PySpark's worker daemon with Beam already imported (`spark.python.daemon.module`).

PySpark forks every Python worker from one daemon per executor. Importing Beam's harness
takes seconds per fresh worker; imported once here, every fork starts with it. Further
modules to import first (a pipeline's heavy libraries) are named in the executor's
environment variable BEAM_SPARK_PRELOAD, comma-separated (`--spark_preload`).

It also keeps PySpark's per-task `importlib.invalidate_caches()` cheap. Python 3.11's
`zipimporter.invalidate_caches` re-reads its archive's whole directory, and a worker has a
dozen zip importers (pyspark.zip per imported subpackage, py4j, and spark-core's 5,000-entry
jar, all on the executor's PYTHONPATH): 0.2-0.4 s of every task, most of the Python time of
a small task (py-spy on TFDV's statistics on local[2]). Here an importer re-reads its archive
only when the file changed (its size or mtime), so a zip added or replaced by `addPyFile`
is still seen.

And it freezes its heap before the first fork (`gc.freeze()`): a reused PySpark worker runs
a full `gc.collect()` after every task, which with TensorFlow and the TFX libraries
imported walks millions of objects, seconds a task (py-spy: workers sat in daemon.py's
`gc.collect()` while the tasks waited). Frozen objects are never scanned, and a fork
shares their pages instead of copying them as a collection touches them.
"""

from __future__ import annotations

import gc
import importlib
import os
import zipimport
from typing import Any

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


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size


def reread_changed_archives_only() -> None:
    """Make `zipimporter.invalidate_caches` re-read an archive only when it changed."""
    original = zipimport.zipimporter.invalidate_caches
    if getattr(original, "beam_spark", False):
        return

    def invalidate_caches(self: Any) -> None:
        stamp = _stamp(self.archive)
        if stamp is not None and getattr(self, "_beam_spark_stamp", None) == stamp:
            return
        original(self)
        self._beam_spark_stamp = stamp

    invalidate_caches.beam_spark = True  # type: ignore[attr-defined]
    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]
    importlib.invalidate_caches()  # stamps every importer once, here, before any fork


def preload() -> None:
    extra = [m.strip() for m in os.environ.get(PRELOAD_VARIABLE, "").split(",") if m.strip()]
    for module in (*BEAM_MODULES, *extra):
        importlib.import_module(module)
    # The daemon's start and imports (`-m beam_spark.daemon` imports the package, so Beam,
    # first): every worker forked from here reports it once (beam_spark.harness.TaskTimes).
    from beam_spark.harness import DAEMON_PRELOAD_VARIABLE, process_age

    os.environ[DAEMON_PRELOAD_VARIABLE] = f"{process_age():.3f}"


def freeze_heap() -> None:
    """Everything imported so far becomes permanent: no worker's collection scans it."""
    gc.collect()
    gc.freeze()


if __name__ == "__main__":
    preload()
    reread_changed_archives_only()
    freeze_heap()
    from pyspark import daemon

    daemon.manager()
