"""components.validation.schema_importer: the curated schema, parsed and keyed by content."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from tensorflow_metadata.proto.v0 import schema_pb2

from components.validation.schema_importer import file_sha256, load_schema
from trainer.taxi import features as f

SCHEMA_FILE = Path(__file__).resolve().parents[4] / "schema" / "taxi" / "schema.pbtxt"


def test_load_curated_schema():
    schema = load_schema(str(SCHEMA_FILE))
    assert isinstance(schema, schema_pb2.Schema)
    by_name = {feat.name: feat for feat in schema.feature}
    raw_keys = {
        *f.DENSE_FLOAT_FEATURE_KEYS,
        *f.BUCKET_FEATURE_KEYS,
        *f.VOCAB_FEATURE_KEYS,
        *f.CATEGORICAL_FEATURE_MAX,
        f.LABEL_KEY,
        f.FARE_KEY,
    }
    assert raw_keys <= set(by_name)
    assert by_name["fare"].type == schema_pb2.FLOAT
    assert by_name["company"].type == schema_pb2.BYTES
    assert by_name["trip_start_hour"].type == schema_pb2.INT
    assert by_name["trip_start_hour"].int_domain.max == 23
    payment = {d.name: d for d in schema.string_domain}["payment_type"]
    assert "Credit Card" in payment.value


def test_categorical_bounds_match_the_schema_domains():
    # features.CATEGORICAL_FEATURE_MAX is the exclusive upper bound of each int domain.
    by_name = {feat.name: feat for feat in load_schema(str(SCHEMA_FILE)).feature}
    for key, upper in f.CATEGORICAL_FEATURE_MAX.items():
        assert by_name[key].int_domain.max + 1 == upper, key


def test_broken_schema_error_names_the_file(tmp_path):
    broken = tmp_path / "broken_schema.pbtxt"
    broken.write_text('feature {\n  name: "fare"\n  type: FLOAT\n')  # unclosed brace
    with pytest.raises(ValueError, match="broken_schema.pbtxt") as info:
        load_schema(str(broken))
    assert str(broken) in str(info.value)
    assert "not a valid schema.pbtxt" in str(info.value)


def test_unknown_field_is_rejected_with_the_file_name(tmp_path):
    broken = tmp_path / "typo.pbtxt"
    broken.write_text('feature { name: "fare" typ: FLOAT }\n')
    with pytest.raises(ValueError, match="typo.pbtxt"):
        load_schema(str(broken))


def test_file_sha256_matches_hashlib(tmp_path):
    assert file_sha256(str(SCHEMA_FILE)) == hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest()
    data = tmp_path / "bytes.bin"
    payload = bytes(range(256)) * 3 + b"\r\n\x00"
    data.write_bytes(payload)
    assert file_sha256(str(data)) == hashlib.sha256(payload).hexdigest()
    data.write_bytes(payload + b" ")
    assert file_sha256(str(data)) == hashlib.sha256(payload + b" ").hexdigest()


def test_importer_creates_its_output_folder(tmp_path):
    """As under KFP (run-local), the output artifact's folder need not exist yet."""
    from tfx.types import standard_artifacts

    from components.validation.schema_importer import (
        SCHEMA_FILE_NAME,
        CuratedSchemaImporter,
        file_sha256,
    )
    from pipeline.datasets import dataset_config

    schema_file = dataset_config("taxi").schema_file
    schema = standard_artifacts.Schema()
    schema.uri = str(tmp_path / "run" / "CuratedSchemaImporter" / "schema")
    executor = CuratedSchemaImporter.EXECUTOR_SPEC.executor_class()
    executor.Do(
        {},
        {"schema": [schema]},
        {"schema_file": schema_file, "content_sha256": file_sha256(schema_file)},
    )
    assert (Path(schema.uri) / SCHEMA_FILE_NAME).is_file()
