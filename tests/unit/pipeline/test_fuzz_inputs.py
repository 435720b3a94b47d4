"""Bad input, fuzzed (hypothesis): every input passes or is refused with the project's own
error naming the file (and line and column, or key); never a traceback, never a
half-written span.

Targets: the CSV checks and the Arrow CSV reader (random bytes, truncated quoting, mixed
newlines, huge fields, NULs), publishing a span (`tfxp data add`'s all-or-nothing),
the dataset-file loader (random YAML, wrong types, unknown keys) and `tfxp init`'s
type inference. Bounded: a fixed number of examples each, derandomized (the same inputs
in every CI run); inputs that once crashed are kept as @example regression cases.
"""

from __future__ import annotations

import os
import shutil
import string
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from components.example_gen import arrow_csv
from components.example_gen.csv_checks import BYTES, FLOAT, INT, CsvInputError, check_csv_files

# CI: a fixed number of derandomized examples. A longer random search, to look for new
# crashing inputs: TFXP_FUZZ_EXAMPLES=5000 pytest tests/unit/pipeline/test_fuzz_inputs.py
_EXAMPLES = os.environ.get("TFXP_FUZZ_EXAMPLES")
FUZZ = settings(
    max_examples=int(_EXAMPLES or 150),
    deadline=None,
    derandomize=not _EXAMPLES,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
COLUMNS = {"a": INT, "b": FLOAT, "c": BYTES}

# Pieces CSV files break on: quotes, separators, newlines of every kind, NULs, long runs.
_PIECES = st.sampled_from(
    ['"', '""', ",", "\n", "\r\n", "\r", "\x00", "1", "-2.5", "nan", "inf", "x", " ", "é", "\ufeff"]
)
_CELL_TEXT = st.lists(_PIECES, max_size=12).map("".join) | st.text(max_size=20)


def _tmp() -> Path:
    return Path(tempfile.mkdtemp(prefix="fuzz-"))


@st.composite
def csv_bytes(draw) -> bytes:
    """A header (usually the right one) and rows of hostile cells, or raw random bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    header = draw(st.sampled_from(["a,b,c", "a,b", "c,b,a", "a,b,c,d", '"a",b,c', ""]))
    rows = draw(st.lists(st.lists(_CELL_TEXT, min_size=0, max_size=4), max_size=8))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = header + newline + newline.join(",".join(r) for r in rows)
    if draw(st.booleans()):
        text += "," + "y" * draw(st.sampled_from([10, 70_000]))  # a huge last field
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]  # truncated anywhere, quotes too
    return data


@FUZZ
@given(data=csv_bytes())
@example(data=b'a,b,c\n1,2,"x\n')  # an unclosed quote at the end
@example(data=b"a,b,c\r1,2,x\r\n3,\x00,y")  # mixed newlines and a NUL in a number
@example(data=b"\x1f\x8b\x08\x00")  # gzip bytes
def test_csv_checks_pass_or_name_the_file_and_line(data):
    folder = _tmp()
    try:
        path = folder / "drop.csv"
        path.write_bytes(data)
        try:
            rows = check_csv_files([str(path)], COLUMNS)
        except CsvInputError as e:
            assert str(path) in str(e)
            return
        assert rows >= 1
        _arrow_reads_or_refuses(path)
    finally:
        shutil.rmtree(folder)


def _arrow_reads_or_refuses(path: Path) -> None:
    """What the checks accept, the Arrow reader reads or declines with ArrowCsvError (the
    executor then uses TFX's reader): never another exception."""
    try:
        header = arrow_csv.read_header(str(path))
        start = arrow_csv.data_start(str(path))
        block = path.read_bytes()[start:]
        arrow_csv.parse_block(block, header, COLUMNS, str(path))
    except arrow_csv.ArrowCsvError as e:
        assert str(path) in str(e) or "columns without a schema type" in str(e)


@FUZZ
@given(data=csv_bytes())
def test_a_span_is_published_whole_or_not_at_all(data):
    from pipeline.spans import SpanError
    from tfxp.datasets.publish import copy_files, publish_span

    folder = _tmp()
    try:
        src = folder / "drop.csv"
        src.write_bytes(data)
        root = folder / "data"
        try:
            span = publish_span(root, lambda d: copy_files([src], d), columns=COLUMNS)
        except (CsvInputError, SpanError) as e:
            assert "drop.csv" in str(e) or "header" in str(e) or "no .csv" in str(e)
            assert [p.name for p in root.iterdir()] == []  # nothing half-written left
            return
        assert (span.path / "drop.csv").read_bytes() == data
    finally:
        shutil.rmtree(folder)


# --- the dataset-file loader -------------------------------------------------------

VALID = {
    "name": "fz",
    "label": "y",
    "task": "binary",
    "classes": ["no", "yes"],
    "features": {"a": {"treatment": "zscore"}, "d": {"treatment": "date", "format": "iso"}},
    "train_steps": 10,
}
_SCALARS = st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats() | st.text(max_size=8)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _load(text: str):
    from pipeline.dataset_sections import DatasetFileError
    from pipeline.datasets import load_dataset_file

    folder = _tmp() / "fz"
    folder.mkdir()
    try:
        path = folder / "dataset.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            return load_dataset_file(path), None
        except DatasetFileError as e:
            assert str(path) in str(e)
            return None, str(e)
    finally:
        shutil.rmtree(folder.parent)


def _known_keys() -> list[str]:
    from pipeline.dataset_sections import FEATURE_KEYS as _FEATURE_KEYS
    from pipeline.datasets import _KEYS

    return sorted(_KEYS) + [f"features.d.{k}" for k in sorted(_FEATURE_KEYS)]


@FUZZ
@given(
    key=st.sampled_from(_known_keys()) | st.text(string.ascii_lowercase, min_size=1, max_size=6),
    value=_VALUES,
)
# Once tracebacks (TypeError/ValueError from inside the loader), now refused by key:
@example(key="train_steps", value="abc")
@example(key="eval_steps", value=None)
@example(key="hyperparameters", value=[1])
@example(key="classes", value=5)
@example(key="classes", value=[[1], [2]])
@example(key="evaluation", value={"min_change": "x"})
@example(key="evaluation", value={"extra_metrics": 5})
@example(key="features.d.max_tokens", value=True)
@example(key="features.d.format", value=["iso"])
@example(key="kind", value="image")
@example(key="class_weights", value={"no": 0, "yes": "x"})
def test_dataset_file_with_a_wrong_value_is_refused_naming_the_key(key, value):
    doc = yaml.safe_load(yaml.safe_dump(VALID))
    if key.startswith("features.d."):
        doc["features"]["d"][key.removeprefix("features.d.")] = value
    else:
        doc[key] = value
    config, error = _load(yaml.safe_dump(doc, allow_unicode=True))
    if error:
        assert key.split(".")[-1] in error or "image" in error, error


def test_the_valid_file_loads():
    config, error = _load(yaml.safe_dump(VALID))
    assert config is not None, error
    assert config.tabular.features["d"] == {"treatment": "date", "format": "iso"}


@FUZZ
@given(text=st.text(max_size=200) | st.sampled_from(["{", "- a", ": :", "a: [1,", "\t"]))
def test_random_yaml_is_refused_naming_the_file(text):
    config, error = _load(text)
    assert config is None and error  # not a dataset file


# --- `tfxp init`'s inference ---------------------------------------------------------

_INIT_CELLS = st.one_of(
    st.just(""),
    st.integers(-1000, 1000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.dates().map(str),
    st.datetimes().map(lambda d: d.isoformat()),
    st.dates().map(lambda d: d.strftime("%d/%m/%Y")),
    st.uuids().map(str),
    st.text(string.ascii_letters + " ,\"'\n", max_size=30),
    st.text(max_size=10),
)


@FUZZ
@given(
    columns=st.integers(1, 4),
    rows=st.lists(st.lists(_INIT_CELLS, min_size=5, max_size=5), min_size=0, max_size=40),
)
def test_init_inference_infers_or_refuses(columns, rows):
    import csv

    from tfxp.init.profile import InitError, check_files, infer

    folder = _tmp()
    try:
        path = folder / "t.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow([f"col{i}" for i in range(columns)] + ["label"])
            writer.writerows(r[: columns + 1] for r in rows)
        try:
            files, header = check_files([str(path)])
            inferred, _ = infer("fz", files, header, "label")
        except InitError as e:
            assert str(e)
            return
        assert inferred.rows >= 10 and inferred.features
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("value", ["2020-02-30", "00/00/2020", "99999999999999999999"])
def test_init_does_not_trip_on_impossible_dates(tmp_path, value):
    from tfxp.init.profile import check_files, infer

    rows = [f"{value if i % 2 else '2020-01-01'},{i % 3}" for i in range(30)]
    path = tmp_path / "t.csv"
    path.write_text("when,label\n" + "\n".join(rows) + "\n")
    files, header = check_files([str(path)])
    inferred, _ = infer("fz", files, header, "label")
    assert inferred.rows == 30
