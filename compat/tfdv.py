"""TFDV's internals behind the in-process StatisticsGen (components/fast/stats/)."""

from __future__ import annotations

from compat import check_version, private

LIBRARY = "tensorflow-data-validation"
WRITTEN_FOR = "1.16.1"
check_version(LIBRARY, WRITTEN_FOR)

DEFAULT_MG_SKETCH_SIZE = private(
    LIBRARY,
    "tensorflow_data_validation.statistics.stats_impl._DEFAULT_MG_SKETCH_SIZE",
    "up to this many distinct values TFDV's counts are exact",
)
