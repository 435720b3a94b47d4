"""TFX's internals behind the project's CSV ExampleGen (components/example_gen/)."""

from __future__ import annotations

from typing import Any

from compat import check_version, private, private_attribute

LIBRARY = "tfx"
WRITTEN_FOR = "1.16.0"
check_version(LIBRARY, WRITTEN_FOR)

_CSV = "tfx.components.example_gen.csv_example_gen.executor"

CsvLineBuffer = private(LIBRARY, f"{_CSV}._CsvLineBuffer", "TFX's multi-line CSV record buffer")
ParsedCsvToTfExample = private(LIBRARY, f"{_CSV}._ParsedCsvToTfExample", "TFX's own row encoder")
_MAKE_BEAM_PIPELINE = private_attribute(
    LIBRARY,
    "tfx.dsl.components.base.base_beam_executor.BaseBeamExecutor._make_beam_pipeline",
    "the Beam pipeline TFX's executor would run (its options and plugins)",
)


def make_beam_pipeline(executor: Any) -> Any:
    """A TFX Beam executor's own pipeline factory, bound to `executor`."""
    return getattr(executor, _MAKE_BEAM_PIPELINE)
