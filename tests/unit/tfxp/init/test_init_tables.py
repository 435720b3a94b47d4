"""`tfxp init` on tables as they come: unlabelled rows, dates, ids, free text, imbalance
(tfxp/init/inference.py and what init writes from it)."""

from __future__ import annotations

import io
import uuid

import pytest
from test_dataset_init import _args, _csv, home  # noqa: F401 - the fixture

from pipeline.datasets import load_dataset_file
from tfxp.init import inference as ii
from tfxp.init.command import run_init
from tfxp.init.profile import InitError


def test_label_rows_drop_blanks_and_text_in_a_numeric_label():
    values = [f"{i}.5" for i in range(40)] + ["", None, " ", "n/a", "nan"]
    mask, blank, bad = ii.label_rows(values)
    assert (blank, bad) == (3, 2) and sum(mask) == 40
    # A text label: only blanks go; every other value is a class.
    mask, blank, bad = ii.label_rows(["yes", "no", "", "maybe"])
    assert (blank, bad, mask) == (1, 0, [True, True, False, True])


@pytest.mark.parametrize(
    "values, kind, expected",
    [
        (["2020-01-31", "1999-12-01"] * 10, "BYTES", ("date", "iso")),
        (
            ["2020-01-31T10:00:00Z", "2020-01-31 11:30", "2020-02-01T10:00:00+01:00"],
            "BYTES",
            ("timestamp", "iso"),
        ),
        (["31/01/2020", "01/02/2020"], "BYTES", ("date", "dmy")),
        (["01/31/2020", "02/01/2020"], "BYTES", ("date", "mdy")),
        (["01/31/2020 10:15", "02/01/2020 08:00"], "BYTES", ("timestamp", "mdy")),
        (["01/02/2020", "03/04/2020"], "BYTES", None),  # ambiguous
        (["red", "2020-01-01"], "BYTES", None),
    ],
)
def test_date_formats(values, kind, expected):
    found = ii.date_format("when", values, kind)
    assert (found and (found.treatment, found.format)) == (expected or None)


def test_unix_seconds_only_when_the_name_says_so():
    values = ["1700000000", "1600000000"]
    assert ii.date_format("created_ts", values, "INT").format == "unix_seconds"
    assert ii.date_format("unix_time", values, "INT").format == "unix_seconds"
    assert ii.date_format("population", values, "INT") is None
    assert ii.date_format("timestamp_hour", ["0", "23"], "INT") is None


def test_ids_by_share_and_by_look():
    near = [f"car {i % 30}" for i in range(40)]
    assert "30 distinct values in 40 rows" in ii.id_reason(near, 30, 40)
    assert ii.id_reason([f"c{i % 5}" for i in range(40)], 5, 40) is None
    uuids = [str(uuid.uuid4()) for _ in range(5)] * 8
    assert "UUIDs" in ii.id_reason(uuids, 5, 40)
    emails = [f"user{i % 4}@example.com" for i in range(40)]
    assert "e-mail" in ii.id_reason(emails, 4, 40)
    codes = [f"CUST-{1000 + i % 6}" for i in range(40)]
    assert "codes" in ii.id_reason(codes, 6, 40)


def test_keys_are_ids_before_they_are_text():
    from tfxp.init.profile import Column

    col = Column("ref", "ref", values=[str(uuid.uuid4()) for _ in range(40)], distinct=40)
    assert ii.table_treatment(col, 40)
    assert col.treatment == "excluded" and "UUIDs" in col.note


def test_free_text_needs_many_words():
    text = [f"the engine {i} runs well in cold weather" for i in range(30)]
    assert ii.is_text(text, 30)
    assert not ii.is_text([f"ford pinto {i}" for i in range(30)], 30)


def test_class_weights_only_when_imbalanced():
    assert ii.class_weights({"a": 50, "b": 50}) is None
    weights = ii.class_weights({"no": 95, "yes": 5})
    assert weights == {"no": round(100 / 190, 4), "yes": 10.0}


def _table(tmp_path, rows=60):
    lines = []
    for i in range(rows):
        label = "" if i % 20 == 3 else ("n/a" if i == 10 else f"{i * 1.5:.1f}")
        lines.append(
            f"{2000 + i % 20}-0{1 + i % 9}-1{i % 9},{i % 3},user{i}@mail.com,"
            f"{'word ' * (5 + i % 4)}end {i},{label}"
        )
    return _csv(tmp_path / "t.csv", "sold,size,email,notes,price", lines)


def test_init_drops_unlabelled_rows_and_writes_the_new_treatments(tmp_path, home):  # noqa: F811
    out = io.StringIO()
    path = _table(tmp_path)
    assert run_init(_args(tmp_path, "t", [path], "price"), out=out) == 0
    text = out.getvalue()
    assert "dropped 4 row(s) without a usable label (blank in 3, not a number in 1)" in text
    assert "dataset t: 56 rows" in text
    config = load_dataset_file(home / "t" / "dataset.yaml")
    features = config.tabular.features
    assert features["sold"] == {"treatment": "date", "format": "iso"}
    assert features["notes"] == {"treatment": "text"}
    assert "email" not in features
    assert config.tabular.unlabelled_rows == "drop"
    validation = (home / "t" / "validation.yaml").read_text()
    assert "sold: off" in validation and "notes: off" in validation
    schema = (home / "t" / "schema.pbtxt").read_text()
    assert "string_domain" not in schema  # new dates and words are expected
    # The span holds every row (ExampleGen drops the same ones on every run).
    (span,) = (tmp_path / "data" / "t" / "span-1").glob("*.csv")
    assert span.read_text() == path.read_text()


def test_data_add_takes_a_drop_with_unlabelled_rows(tmp_path, home, capsys):  # noqa: F811
    from tfxp.cli import main

    path = _table(tmp_path)
    assert run_init(_args(tmp_path, "t", [path], "price"), out=io.StringIO()) == 0
    # The same rows again ("n/a" and blank labels included): ExampleGen drops them.
    assert main(["data", "add", "t", str(path)]) == 0, capsys.readouterr().err
    assert (tmp_path / "data" / "t" / "span-2" / "t.csv").exists()


def test_keep_unlabelled_refuses_blank_labels(tmp_path, home):  # noqa: F811
    path = _table(tmp_path)
    with pytest.raises(InitError, match="blank in 3 of 60 rows"):
        run_init(_args(tmp_path, "t", [path], "price", keep_unlabelled=True), out=io.StringIO())
    assert not home.exists()


def test_imbalanced_label_gets_class_weights(tmp_path, home):  # noqa: F811
    rows = [f"{i % 7},{'rare' if i % 20 == 0 else 'common'}" for i in range(100)]
    path = _csv(tmp_path / "i.csv", "x,y", rows)
    out = io.StringIO()
    assert run_init(_args(tmp_path, "i", [path], "y"), out=out) == 0
    assert "imbalanced label" in out.getvalue()
    config = load_dataset_file(home / "i" / "dataset.yaml")
    assert config.tabular.class_weights == {"common": round(100 / 190, 4), "rare": 10.0}
    assert config.thresholds.metric == "BalancedAccuracy" and config.thresholds.per_class


def test_imbalanced_multiclass_label_gets_per_class_metrics_weights_and_balanced_accuracy(
    tmp_path,
    home,  # noqa: F811
):
    rows = [f"{i % 7},{'rare' if i % 20 == 0 else ['a', 'b'][i % 2]}" for i in range(100)]
    path = _csv(tmp_path / "m.csv", "x,y", rows)
    assert run_init(_args(tmp_path, "m", [path], "y"), out=io.StringIO()) == 0
    text = (home / "m" / "dataset.yaml").read_text()
    # Blessed on balanced accuracy (which class weights help), not accuracy (which they
    # lower): the weights are written, not suggested.
    assert "\nclass_weights: {" in text and "# class_weights" not in text
    config = load_dataset_file(home / "m" / "dataset.yaml")
    assert set(config.tabular.class_weights) == {"a", "b", "rare"}
    assert config.thresholds.metric == "BalancedAccuracy" and config.thresholds.per_class
    # Each class's recall and PR-AUC (one class against the rest) stay on the fast path.
    import tensorflow_model_analysis as tfma

    from components.evaluation.fast import executor
    from pipeline.eval_config import eval_config

    evaluation = eval_config(config)
    names = {m.class_name for spec in evaluation.metrics_specs for m in spec.metrics}
    assert {"Recall", "AUCPrecisionRecall"} <= names
    defaults = tfma.utils.update_eval_config_with_defaults(evaluation, rubber_stamp=True)
    assert executor.fast_path_refusal(defaults) is None
