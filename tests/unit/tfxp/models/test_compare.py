"""`tfxp models compare` (tfxp/models/compare.py) on request logs written as `tfxp serve` writes them."""

from __future__ import annotations

import pytest
from serving_log_files import T0, served_records, write_log

from tfxp.cli import main
from tfxp.models import compare

ROWS = [{"trip_miles": float(i)} for i in range(4)]
IDS = ["a", "b", "c", "d"]
CHAMPION = [0.8, 0.3, 0.6, 0.1]  # classes 1 0 1 0
CHALLENGER = [0.7, 0.6, 0.4, 0.2]  # classes 1 1 0 0


def shadow_log(folder, champion=CHAMPION, challenger=CHALLENGER):
    served = served_records(ROWS, version=1, outputs=champion, ids=IDS)
    shadow = served_records(
        ROWS, version=2, label="challenger", role="shadow", outputs=challenger, ids=IDS
    )
    # Interleaved as a server writes them: each request's served then shadow record.
    return write_log(folder, [r for pair in zip(served, shadow, strict=True) for r in pair], T0)


def test_binary_agreement_is_the_share_of_equal_classes(tmp_path):
    shadow_log(tmp_path)
    result = compare.compare(str(tmp_path), "binary")
    [a] = result.agreements
    assert (a.served_version, a.shadow_version, a.pairs) == (1, 2, 4)
    assert a.agreement == 0.5
    assert a.mean_abs_diff == pytest.approx((0.1 + 0.3 + 0.2 + 0.1) / 4, abs=1e-6)
    assert result.counts == {"1 champion served": 4, "2 challenger shadow": 4}
    text = compare.render(result)
    assert "version 1 (served) vs 2 (shadow): 4 requests, same class 50.0%" in text


def test_labels_joined_by_request_id_give_each_version_its_accuracy(tmp_path):
    shadow_log(tmp_path / "log")
    labels = tmp_path / "labels.csv"
    labels.write_text("request_id,label\na,1\nb,1\nc,0\nd,0\nzz,1\n")
    result = compare.compare(str(tmp_path / "log"), "binary", labels_path=str(labels))
    by_version = {(m.version, m.role): m for m in result.metrics}
    assert by_version[(1, "served")].accuracy == 0.5
    assert by_version[(2, "shadow")].accuracy == 1.0
    assert by_version[(1, "served")].labelled == 4 and result.labels_matched == 8


def test_regression_mean_absolute_difference_and_errors(tmp_path):
    shadow_log(
        tmp_path / "log", champion=[10.0, 20.0, 30.0, 40.0], challenger=[12.0, 18.0, 30.0, 44.0]
    )
    labels = tmp_path / "y.csv"
    labels.write_text("id,y\na,11\nb,20\nc,33\nd,40\n")
    result = compare.compare(
        str(tmp_path / "log"),
        "regression",
        labels_path=str(labels),
        id_column="id",
        label_column="y",
    )
    [a] = result.agreements
    assert a.agreement is None and a.mean_abs_diff == pytest.approx(2.0)
    champion = next(m for m in result.metrics if m.version == 1)
    assert champion.mae == pytest.approx(1.0) and champion.rmse == pytest.approx(2.5**0.5)


def test_several_examples_of_one_request_pair_in_order(tmp_path):
    rows = [{"x": 1.0}, {"x": 2.0}]
    served = served_records(rows, version=1, outputs=[0.9, 0.1], ids=["r", "r"])
    shadow = served_records(rows, version=2, role="shadow", outputs=[0.8, 0.7], ids=["r", "r"])
    write_log(tmp_path, served + shadow, T0)
    [a] = compare.compare(str(tmp_path), "binary").agreements
    assert a.pairs == 2 and a.agreement == 0.5  # (0.9, 0.8) agree, (0.1, 0.7) do not


def test_multiclass_by_top_score_and_class_names_in_labels(tmp_path):
    from serving_log_files import example

    records = [
        example({}, request_id="a", version=1, role="served", output=[0.1, 0.7, 0.2]),
        example({}, request_id="a", version=2, role="shadow", output=[0.2, 0.3, 0.5]),
    ]
    write_log(tmp_path / "log", records, T0)
    labels = tmp_path / "l.csv"
    labels.write_text("request_id,label\na,cat\n")
    result = compare.compare(
        str(tmp_path / "log"), "multiclass", labels_path=str(labels), classes=["dog", "cat", "owl"]
    )
    assert result.agreements[0].agreement == 0.0
    assert {m.version: m.accuracy for m in result.metrics} == {1: 1.0, 2: 0.0}


def test_clear_errors(tmp_path):
    with pytest.raises(compare.CompareError, match=f"no request log at {tmp_path / 'none'}"):
        compare.compare(str(tmp_path / "none"), "binary")
    (tmp_path / "empty").mkdir()
    with pytest.raises(compare.CompareError, match="holds no published log file"):
        compare.compare(str(tmp_path / "empty"), "binary")
    write_log(tmp_path / "served-only", served_records(ROWS, ids=IDS), T0)
    with pytest.raises(compare.CompareError, match="no request .* was scored by two versions"):
        compare.compare(str(tmp_path / "served-only"), "binary")
    shadow_log(tmp_path / "log")
    no_id = tmp_path / "no_id.csv"
    no_id.write_text("id,label\na,1\n")
    with pytest.raises(
        compare.CompareError, match=r"no_id.csv: no column 'request_id' \(columns: id, label\)"
    ):
        compare.compare(str(tmp_path / "log"), "binary", labels_path=str(no_id))
    other = tmp_path / "other.csv"
    other.write_text("request_id,label\nx,1\ny,0\n")
    with pytest.raises(compare.CompareError, match="none of its 2 request ids is in the log"):
        compare.compare(str(tmp_path / "log"), "binary", labels_path=str(other))


def test_cli_prints_the_comparison_and_errors(tmp_path, capsys):
    shadow_log(tmp_path / "data" / "serving-log")
    labels = tmp_path / "labels.csv"
    labels.write_text("request_id,label\na,1\nb,1\nc,0\nd,0\n")
    flags = ["--data-root", str(tmp_path / "data")]
    assert main(["models", "compare", *flags, "--labels", str(labels)]) == 0
    out = capsys.readouterr().out
    assert "same class 50.0%" in out
    assert "version 2 (shadow): 4 labelled, accuracy 1.0000" in out
    assert main(["models", "compare", "--data-root", str(tmp_path / "nope")]) == 1
    assert "ERROR: no request log at" in capsys.readouterr().err
    assert main(["models", "compare", *flags, "--window", "never"]) == 1
    assert "--window: a duration" in capsys.readouterr().err
