"""CsvExampleGen with input checks: TFX's CSV executor behind `csv_checks`.

The component is TFX's FileBasedExampleGen, so spans, versions, input/output
configs, splits and fingerprints behave exactly as in CsvExampleGen. Only the
executor differs: before converting a split's files it checks them against the
curated schema's columns and types and fails with file, line and column.
"""

from __future__ import annotations

import os
from typing import Any

import apache_beam as beam
from google.protobuf import any_pb2, json_format, struct_pb2
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs

from components import csv_checks

COMPONENT_ID = "CsvExampleGen"


def _columns_from_custom_config(exec_properties: dict[str, Any]) -> dict[str, str]:
    raw = exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY)
    if not raw:
        return {}
    config = example_gen_pb2.CustomConfig()
    if isinstance(raw, str):
        json_format.Parse(raw, config)
    else:
        config.CopyFrom(raw)
    struct = struct_pb2.Struct()
    if not config.custom_config.Unpack(struct):
        return {}
    if "columns" not in struct:
        return {}
    return {k: str(v) for k, v in struct["columns"].items()}


@beam.ptransform_fn
def _CheckedCsvToExample(  # noqa: N802 - Beam PTransform naming
    pipeline: beam.Pipeline, exec_properties: dict[str, Any], split_pattern: str
) -> beam.PCollection:
    pattern = os.path.join(exec_properties[standard_component_specs.INPUT_BASE_KEY], split_pattern)
    files = sorted(fileio.glob(pattern))
    if not files:
        raise csv_checks.CsvInputError(f"no CSV files match {pattern}")
    columns = _columns_from_custom_config(exec_properties)
    if columns:
        csv_checks.check_csv_files(files, columns)
    return pipeline | "CsvToExample" >> csv_executor._CsvToExample(exec_properties, split_pattern)


class Executor(csv_executor.Executor):
    """TFX's CSV ExampleGen executor with schema checks first."""

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 - TFX API
        return _CheckedCsvToExample


def checked_csv_example_gen(
    input_base: str,
    columns: dict[str, str],
    input_config: example_gen_pb2.Input | None = None,
    output_config: example_gen_pb2.Output | None = None,
    range_config: Any = None,
) -> FileBasedExampleGen:
    """A CSV ExampleGen whose input is checked against `columns` (name -> schema type)."""
    struct = struct_pb2.Struct()
    struct.update({"columns": columns})
    packed = any_pb2.Any()
    packed.Pack(struct)
    return FileBasedExampleGen(
        input_base=input_base,
        input_config=input_config,
        output_config=output_config,
        range_config=range_config,
        custom_config=example_gen_pb2.CustomConfig(custom_config=packed),
        custom_executor_spec=executor_spec.BeamExecutorSpec(Executor),
    ).with_id(COMPONENT_ID)
