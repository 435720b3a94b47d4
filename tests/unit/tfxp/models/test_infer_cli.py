"""`tfxp infer` fails before scoring, with one line saying what to do, when it cannot run."""

from __future__ import annotations

import pytest

from tfxp.cli import main


def _spans(root, *numbers: int) -> None:
    for n in numbers:
        (root / f"span-{n}").mkdir(parents=True)
        (root / f"span-{n}" / "rows.csv").write_text("a\n1\n")


def test_a_span_that_is_not_there_is_named_with_the_spans_that_are(tmp_path, capsys):
    _spans(tmp_path / "data", 1, 2)
    code = main(
        ["infer", "--data-root", str(tmp_path / "data"), "--run-dir", str(tmp_path), "--span", "9"]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "span 9 is not in" in err and "spans there: 1, 2" in err
    assert "Nothing was published." in err


def test_without_a_pipeline_store_it_says_to_run_the_pipeline(tmp_path, capsys):
    _spans(tmp_path / "data", 1)
    code = main(["infer", "--data-root", str(tmp_path / "data"), "--run-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 1 and "no ML Metadata store" in err and "tfxp run" in err
    assert not (tmp_path / "r" / "predictions").exists()


@pytest.mark.parametrize("model", ["newest", "-3"])
def test_model_must_be_blessed_or_a_version(tmp_path, capsys, model):
    from tfxp.models.infer import InferError, find_model

    class _NoModels:
        pipeline = "taxi"

        def models(self):
            return []

    with pytest.raises(InferError, match="'blessed' or a pushed version number"):
        find_model(_NoModels(), model)
    with pytest.raises(InferError, match="no pushed model version 12 .*newest versions: none"):
        find_model(_NoModels(), "12")
