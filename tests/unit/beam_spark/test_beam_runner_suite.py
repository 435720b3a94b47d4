"""Beam's own runner test suite (FnApiRunnerTest, from the installed Beam) on beam_spark.

Every case builds its pipeline through `create_pipeline`, so this subclass runs all of them
on Spark (local[2], one context for the session). Cases left out are listed in EXCLUDED
with the reason; each is a feature the runner refuses by design, not a wrong result.
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import fn_runner_test

from beam_spark import SparkRunner

EXCLUDED: dict[str, str] = {}


class SparkRunnerSuite(fn_runner_test.FnApiRunnerTest):
    sc: Any = None

    @pytest.fixture(autouse=True)
    def _spark(self, spark_local: Any) -> None:
        self.sc = spark_local

    def create_pipeline(self, is_drain: bool = False) -> beam.Pipeline:
        return beam.Pipeline(runner=SparkRunner(spark_context=self.sc))

    def setUp(self) -> None:
        reason = EXCLUDED.get(self._testMethodName)
        if reason:
            self.skipTest(reason)
