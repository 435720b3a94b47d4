"""tfx_bsl's internals behind Transform's layout source (components/fast/transform/)."""

from __future__ import annotations

from typing import Any

from compat import check_version, private_attribute

LIBRARY = "tfx-bsl"
WRITTEN_FOR = "1.16.1"
check_version(LIBRARY, WRITTEN_FOR)

_RECORD = "tfx_bsl.tfxio.tf_example_record._TFExampleRecordBase"
_PARSER_CONFIG = private_attribute(
    LIBRARY, f"{_RECORD}._GetTfExampleParserConfig", "the parsing spec of its TensorFlowDataset"
)
_SCHEMA = private_attribute(LIBRARY, f"{_RECORD}._schema", "a projection's schema")


def tf_example_parser_config(tfxio: Any) -> tuple[dict, dict]:
    """(parsing spec, feature -> tensor name) of a TFExampleRecord."""
    return getattr(tfxio, _PARSER_CONFIG)()


def schema_of(tfxio: Any) -> Any:
    """The schema a (projected) TFXIO was made with."""
    return getattr(tfxio, _SCHEMA)
