"""The Spark cluster of this checkout: where `tfxp engine start` keeps it (runs/engine/),
and the master a `--beam spark` run uses when none is named.

At tfxp/'s root, beside preflight.py, because two command groups (`tfxp engine`,
`tfxp run`) and the Airflow DAG read it and none of tfxp's rooms owns the cluster.
"""

from __future__ import annotations

import os

from beam_spark import cluster
from pipeline.config import PROJECT_ROOT

ENGINE_DIR = str(PROJECT_ROOT / "runs" / "engine")
START_HINT = "start one with `tfxp engine start spark --workers 2`"


class EngineError(ValueError):
    """No usable cluster; the message says what to start or name instead."""


def running_cluster(directory: str | os.PathLike | None = None) -> cluster.Cluster:
    """The cluster `tfxp engine start` left running in `directory` (default ENGINE_DIR;
    EngineError if none is recorded, or its master is gone)."""
    directory = directory or ENGINE_DIR
    try:
        status = cluster.status(directory)
    except cluster.ClusterError as e:
        raise EngineError(str(e)) from None
    if status is None:
        raise EngineError(
            f"no Spark cluster is running from {directory}: {START_HINT}, or name a "
            "master with --spark-master spark://HOST:PORT"
        )
    if status.cluster.master not in status.running:
        raise EngineError(
            f"the Spark master {status.cluster.master_url} recorded in {directory} is not "
            f"running (pid {status.cluster.master.pid} is gone; its log: "
            f"{status.cluster.master.log}): `tfxp engine stop`, then {START_HINT}"
        )
    return status.cluster
