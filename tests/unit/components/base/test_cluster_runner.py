"""components.base.local_beam.cluster_runner: which Beam arguments name the project's Spark
runner, where a fast path's Beam form runs instead of TFX's pipeline."""

from __future__ import annotations

import pytest

from components.base.local_beam import cluster_runner, runner_refusal


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--runner=beam_spark.SparkRunner", "--spark_master=local[2]"], True),
        (["--runner=beam_spark.runner.SparkRunner"], True),
        # Beam's own SparkRunner submits to a job server: workers without the project.
        (["--runner=SparkRunner", "--spark_master_url=spark://h:7077"], False),
        (["--runner=PortableRunner"], False),
        ([], False),
        # The last --runner wins, as in Beam's own parsing.
        (["--runner=beam_spark.SparkRunner", "--runner=DirectRunner"], False),
        (["--runner=DirectRunner", "--runner=beam_spark.SparkRunner"], True),
    ],
)
def test_cluster_runner(args, expected):
    assert cluster_runner(args) is expected


def test_the_spark_runner_is_still_no_local_runner():
    """runner_refusal still names it: the executors ask cluster_runner first, and run
    their fast paths' Beam forms under it instead of computing in their own process."""
    assert "beam_spark.SparkRunner" in runner_refusal(
        ["--runner=beam_spark.SparkRunner"], single_process=False
    )
