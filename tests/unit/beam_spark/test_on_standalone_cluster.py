"""beam_spark on a real standalone Spark cluster (a master and two one-core workers on
loopback, tests/support/spark_cluster.py): the equality pipelines named by the runner's
dotted path and `--spark_master`, as any Beam program names it, and a subset of Beam's
own runner suite in a child pytest pointed at the cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
import spark_pipelines as sp
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from spark_pipelines import MASTER_VARIABLE

from beam_spark.cluster_api import master_json

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SUITE_SUBSET = [
    "test_group_by_key",
    "test_combine_per_key",
    "test_pardo_side_inputs",
    "test_multimap_side_input",
    "test_flatten_and_gbk",
    "test_reshuffle",
    "test_sdf",
    "test_read",
    "test_metrics",
    "test_error_traceback_includes_user_code",
]


def _fn_api_lines(out: Path) -> dict[str, dict[str, list[str]]]:
    for build in (sp.build_main, sp.build_read):
        with beam.Pipeline(runner=FnApiRunner()) as p:
            build(p, str(out))
    return {"main": sp.read_lines(str(out), "main"), "read": sp.read_lines(str(out), "read")}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_pipelines_on_the_cluster_equal_the_fn_api_runners(
    spark_cluster: Any, tmp_path: Path
) -> None:
    (tmp_path / "spark").mkdir()
    (tmp_path / "fn").mkdir()
    flags = [
        "--runner=beam_spark.SparkRunner",
        f"--spark_master={spark_cluster.master_url}",
        "--spark_app_name=beam_spark-cluster-test",
        "--spark_executor_memory=1g",
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT)]))
    done = subprocess.run(
        [sys.executable, str(HERE / "cluster_run.py"), str(tmp_path / "spark"), *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=800,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    costs = json.loads(done.stdout.strip().splitlines()[-1])
    expected = _fn_api_lines(tmp_path / "fn")
    assert sp.read_lines(str(tmp_path / "spark"), "main") == expected["main"]
    assert sp.read_lines(str(tmp_path / "spark"), "read") == expected["read"]
    for cost in costs:
        assert 1 <= cost["jobs"] < cost["fused_stages"], cost
    names = [app["name"] for app in master_json(spark_cluster.web_ui)["completedapps"]]
    assert names.count("beam_spark-cluster-test") == 2, names


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_beam_runner_suite_subset_on_the_cluster(spark_cluster: Any) -> None:
    env = dict(os.environ, **{MASTER_VARIABLE: spark_cluster.master_url})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:xdist",
            "-q",
            "-p",
            "no:cacheprovider",
            *(
                f"{HERE / 'test_beam_runner_suite.py'}::SparkRunnerSuite::{name}"
                for name in SUITE_SUBSET
            ),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=850,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    assert f"{len(SUITE_SUBSET)} passed" in done.stdout, done.stdout[-4000:]
