"""What both ExampleGens share: the content-fingerprinting driver, custom_config
packing, the input files a config resolves to, and the Examples' custom properties.
"""

from __future__ import annotations

import os
from typing import Any

from google.protobuf import any_pb2, json_format, struct_pb2
from tfx.components.example_gen import driver as example_gen_driver
from tfx.components.example_gen import utils as example_gen_utils
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from components.io.content_fingerprint import files_sha256

# Custom properties of the Examples artifact (besides TFX's span, version,
# input_fingerprint, split_names).
CONTENT_SHA256 = "content_sha256"
RAW_BYTES = "raw_bytes"
RAW_FILES = "raw_files"
INPUT_BASE = "input_base"
ROW_COUNT = "row_count"
TFRECORD_SHARDS = "tfrecord_shards"
# custom_config: the content SHA-256 a named data version must have (`tfxp run --data-version`).
EXPECTED_SHA256 = "expected_sha256"


def custom_struct(exec_properties: dict[str, Any]) -> dict[str, Any]:
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
    return json_format.MessageToDict(struct)


def packed_custom_config(options: dict[str, Any]) -> example_gen_pb2.CustomConfig:
    """`options` as ExampleGen's custom_config (a Struct in an Any); `custom_struct` reads it."""
    struct = struct_pb2.Struct()
    struct.update(options)
    packed = any_pb2.Any()
    packed.Pack(struct)
    return example_gen_pb2.CustomConfig(custom_config=packed)


def split_configs(
    exec_properties: dict[str, Any],
) -> tuple[example_gen_pb2.Input, example_gen_pb2.Output]:
    """ExampleGen's input and output configs, parsed from its exec properties."""
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config
    )
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config
    )
    return input_config, output_config


def resolved_files(exec_properties: dict[str, Any]) -> list[str]:
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config
    )
    base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
    files: set[str] = set()
    for split in input_config.splits:
        files.update(fileio.glob(os.path.join(base, split.pattern)))
    return sorted(files)


class ContentFingerprintDriver(example_gen_driver.FileBasedDriver):
    """TFX's span/version resolution, keyed by content, with an optional pinned version."""

    def resolve_exec_properties(self, exec_properties, pipeline_info, component_info):
        pinned = custom_struct(exec_properties).get("version")
        if pinned is not None:
            pinned = int(pinned)
            input_config = example_gen_pb2.Input()
            proto_utils.json_to_proto(
                exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config
            )
            for split in input_config.splits:
                if "{VERSION}" not in split.pattern:
                    raise ValueError(
                        f"a version is pinned but the pattern {split.pattern!r} has no {{VERSION}}"
                    )
                split.pattern = split.pattern.replace("{VERSION}", str(pinned))
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY] = proto_utils.proto_to_json(
                input_config
            )
        exec_properties = super().resolve_exec_properties(
            exec_properties, pipeline_info, component_info
        )
        if pinned is not None:
            exec_properties[example_gen_utils.VERSION_PROPERTY_NAME] = pinned
        base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        files = resolved_files(exec_properties)
        digest, nbytes = files_sha256(files, base)
        expected = custom_struct(exec_properties).get(EXPECTED_SHA256)
        if expected and digest != expected:
            raise ValueError(
                f"input {base} ({len(files)} file(s)) has content sha256 {digest[:12]}, not "
                f"{expected[:12]} as recorded for the data version this run asks for; the "
                "files changed since: nothing was ingested"
            )
        exec_properties[example_gen_utils.FINGERPRINT_PROPERTY_NAME] = (
            f"sha256:{digest} files:{len(files)} bytes:{nbytes}"
        )
        exec_properties[CONTENT_SHA256] = digest
        exec_properties[RAW_BYTES] = nbytes
        exec_properties[RAW_FILES] = len(files)
        return exec_properties

    def run(self, execution_info):
        result = super().run(execution_info)
        artifact = result.output_artifacts[standard_component_specs.EXAMPLES_KEY].artifacts[0]
        for key in (CONTENT_SHA256, RAW_BYTES, RAW_FILES):
            artifact.custom_properties[key].CopyFrom(result.exec_properties[key])
        artifact.custom_properties[INPUT_BASE].string_value = execution_info.exec_properties[
            standard_component_specs.INPUT_BASE_KEY
        ]
        return result


def example_gen_node(
    component_class: type,
    executor_class: type,
    component_id: str,
    options: dict[str, Any],
    **specs: Any,
):
    """A FileBasedExampleGen subclass with our executor, `options` as its custom_config,
    and `specs` (input_base, input_config, output_config, range_config) as given."""
    return component_class(
        **specs,
        custom_config=packed_custom_config(options),
        custom_executor_spec=executor_spec.BeamExecutorSpec(executor_class),
    ).with_id(component_id)
