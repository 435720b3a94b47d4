"""The layout decoder makes the very record batches tfx_bsl's decoder makes from the ingest's examples."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pytest
import tensorflow as tf
from tfx.types import standard_artifacts
from tfx_bsl.coders import example_coder

from components.example_gen import arrow_csv
from components.example_gen import layout as example_layout
from components.validation.schema_importer import load_schema, schema_column_types
from pipeline.config import PROJECT_ROOT

EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"


@pytest.fixture(scope="module")
def columns() -> dict[str, str]:
    return schema_column_types(load_schema(str(PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt")))


UNTYPED = "pickup_census_tract"  # no value in the whole sample: untyped `Feature()`s


def _records(
    tmp_path: Path, columns: dict[str, str], rows: int, untyped: bool = False
) -> list[bytes]:
    """The ingest's examples of the embedded sample, with a missing cell in every column in turn
    and NaN, negative and long values (and with one column empty throughout: `untyped`)."""
    with EMBEDDED_CSV.open() as src:
        lines = list(itertools.islice(src, rows + 1))
    header = lines[0].rstrip("\n").split(",")
    out = [lines[0]]
    for i, line in enumerate(lines[1:]):
        fields = line.rstrip("\n").split(",")
        fields[i % len(header)] = ""
        if i % 7 == 0:
            fields[header.index("company")] = "é" * (100 + i)
        if i % 11 == 0:
            fields[header.index("fare")] = "nan"
        if i % 13 == 0:
            fields[header.index("trip_seconds")] = "-5"
        if untyped:
            fields[header.index(UNTYPED)] = ""
        out.append(",".join(fields) + "\n")
    path = tmp_path / "data.csv"
    path.write_text("".join(out))
    batch = arrow_csv.parse_block(path.read_bytes().split(b"\n", 1)[1], header, columns, str(path))
    return arrow_csv.encode_batch(batch, columns, {UNTYPED} if untyped else ())


def _layout(columns: dict[str, str], untyped: bool) -> example_layout.Layout:
    return example_layout.Layout(columns, frozenset({UNTYPED} if untyped else ()))


def _write(path: Path, records: list[bytes]) -> str:
    with tf.io.TFRecordWriter(str(path), tf.io.TFRecordOptions(compression_type="GZIP")) as w:
        for record in records:
            w.write(record)
    return str(path)


def _bits(column: pa.Array) -> tuple:
    """A list column as comparable bits: NaN equals NaN (Arrow's `equals` says it does not)."""
    if pa.types.is_null(column.type) or column.null_count == len(column):
        return str(column.type), len(column), column.null_count
    values = column.values
    if pa.types.is_floating(values.type):
        values = values.view(pa.int32())
    return column.offsets.to_pylist(), column.null_count, values.to_pylist()


@pytest.mark.parametrize("untyped", [False, True], ids=["typed", "an-untyped-column"])
def test_batches_equal_tfx_bsl_decoder(tmp_path, columns, untyped):
    records = _records(tmp_path, columns, 700, untyped)
    files = [_write(tmp_path / "a.gz", records[:300]), _write(tmp_path / "b.gz", records[300:])]
    decoder = example_layout.RecordBatchDecoder(_layout(columns, untyped))
    ours = list(decoder.batches(files, "GZIP", batch_size=256))
    reference = example_coder.ExamplesToRecordBatchDecoder()
    expected = [reference.DecodeBatch(records[i : i + 256]) for i in range(0, len(records), 256)]
    assert [b.num_rows for b in ours] == [256, 256, 188]
    for got, want in zip(ours, expected, strict=True):
        assert got.schema.equals(want.schema)
        for name in want.schema.names:
            assert _bits(got.column(name)) == _bits(want.column(name)), name
    # Missing cells are empty lists, as tfx_bsl reads the ingest's examples.
    assert any(len(v) == 0 for v in ours[0].column("fare").to_pylist())


def test_off_layout_example_is_an_error_not_a_guess(tmp_path, columns):
    example = tf.train.Example()
    example.features.feature["fare"].int64_list.value.append(3)  # declared FLOAT
    path = _write(tmp_path / "bad.gz", [example.SerializeToString()])
    with pytest.raises(tf.errors.InvalidArgumentError, match="fare"):
        decoder = example_layout.RecordBatchDecoder(example_layout.Layout(columns))
        list(decoder.batches([path], "GZIP", batch_size=8))


def test_layout_round_trips_through_the_artifact(columns):
    artifact = standard_artifacts.Examples()
    assert example_layout.layout_of(artifact) is None
    example_layout.set_layout(artifact, columns, [UNTYPED])
    assert example_layout.layout_of(artifact) == example_layout.Layout(
        columns, frozenset([UNTYPED])
    )
    with pytest.raises(ValueError, match="DOUBLE"):
        example_layout.set_layout(artifact, {"x": "DOUBLE"})
    with pytest.raises(ValueError, match="not columns"):
        example_layout.set_layout(artifact, columns, ["nope"])


@pytest.mark.parametrize("untyped", [False, True], ids=["typed", "an-untyped-column"])
def test_analysis_source_equals_tfx_bsl_decoder_with_the_schema(tmp_path, columns, untyped):
    """What Transform's analysis reads through the layout source: the schema's columns, in
    its order and types, as tfx_bsl's decoder makes them with the schema."""
    from components.fast.transform.source import LayoutTFExampleRecord, _DecodePieces
    from components.io.pieces import Piece

    schema = load_schema(str(PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt"))
    records = _records(tmp_path, columns, 500, untyped)
    path = _write(tmp_path / "a.gz", records)
    layout = _layout(columns, untyped)
    assert LayoutTFExampleRecord.covers(schema, layout) is None
    tfxio = LayoutTFExampleRecord([path], schema, layout)
    names = tfxio.ArrowSchema().names
    decode = _DecodePieces(layout, tfxio.ArrowSchema())
    ours = list(decode.process(Piece((path,), "GZIP", batch_size=1000)))
    want = example_coder.ExamplesToRecordBatchDecoder(schema.SerializeToString()).DecodeBatch(
        records
    )
    assert len(ours) == 1 and ours[0].schema.equals(want.schema)
    for name in names:
        assert _bits(ours[0].column(name)) == _bits(want.column(name)), name
    # Three pieces of batches of 100 (as on a cluster): together the same rows.
    cut = [decode.process(Piece((path,), "GZIP", i, 3, batch_size=100)) for i in range(3)]
    rows = [row for piece in cut for batch in piece for row in batch.to_pylist()]
    assert sorted(map(repr, rows)) == sorted(map(repr, ours[0].to_pylist()))
    projected = tfxio.Project(["fare", "company"])
    assert isinstance(projected.projected, LayoutTFExampleRecord)  # what BeamSource reads
    assert sorted(projected.ArrowSchema().names) == ["company", "fare"]


def test_analysis_source_refuses_what_the_layout_does_not_promise(columns):
    from components.fast.transform.source import LayoutTFExampleRecord

    schema = load_schema(str(PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt"))
    without_fare = {k: v for k, v in columns.items() if k != "fare"}
    assert "fare" in LayoutTFExampleRecord.covers(schema, example_layout.Layout(without_fare))
    retyped = example_layout.Layout({**columns, "fare": "INT"})
    assert "types" in LayoutTFExampleRecord.covers(schema, retyped)


def test_evaluator_slices_by_the_layout_equal_tfx_bsl_decoding(tmp_path, columns):
    """The Evaluator's slice keys from the layout decoder equal those from tfx_bsl's."""
    import tensorflow_model_analysis as tfma

    from components.evaluation.fast import slices

    records = _records(tmp_path, columns, 600, untyped=True)
    config = tfma.EvalConfig(
        slicing_specs=[
            tfma.SlicingSpec(feature_keys=["payment_type"]),
            tfma.SlicingSpec(feature_keys=["company", "trip_start_hour"]),
            tfma.SlicingSpec(feature_keys=["trip_miles_bucket"]),
            tfma.SlicingSpec(feature_keys=[UNTYPED]),
        ]
    )
    buckets = {"trip_miles": (1.0, 5.0)}
    found = []
    for layout in (None, _layout(columns, untyped=True)):
        features = slices.SliceFeatures(config, buckets, layout)
        for start in range(0, len(records), 128):
            features.add(tf.constant(records[start : start + 128]))
        found.append({k: v.tolist() for k, v in features.slices().items()})
    assert found[0] == found[1]
    assert len(found[0]) > 10
