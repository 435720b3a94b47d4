"""components/release/serving_check: a fresh process without the project loads and queries a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import serving_check_models as models

from components.release.serving_check import check


def _check(tmp_path: Path, kind: str, **kwargs) -> check.CheckResult:
    model = models.save(str(tmp_path / kind), kind)
    return check.check_model(
        model,
        models.rows(),
        signature="serving_default",
        label_key="label",
        work_dir=str(tmp_path / f"work-{kind}"),
        latency_rows=10,
        **kwargs,
    )


pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # a TensorFlow process per check


def test_a_model_a_server_can_run_passes_with_its_figures(tmp_path):
    import pipeline  # noqa: F401 - importable here, in the test's process
    import trainer  # noqa: F401

    result = _check(tmp_path, "good")
    assert result.verdict == check.PASSED, result.message
    assert result.rows == 20 and result.max_abs_diff == 0.0
    assert result.load_seconds > 0
    assert set(result.latency_ms) == {
        "batch_1_p50",
        "batch_1_p99",
        "batch_64_p50",
        "batch_64_p99",
    }
    assert 0 < result.latency_ms["batch_1_p50"] <= result.latency_ms["batch_1_p99"]
    # The fresh process could not import the project (importable in this one).
    (result_file,) = (tmp_path / "work-good").glob("child-*/result.json")
    child = json.loads(result_file.read_text())
    assert child["stage"] == "done"
    assert child["project_importable"] == []  # it tried trainer, pipeline, components, ...
    assert {"trainer", "pipeline"} <= set(check.PROJECT_PACKAGES)


def test_relative_model_and_work_folders_are_found_by_the_fresh_process(tmp_path, monkeypatch):
    # `tfxp run --run-dir runs/x`: the child runs in its own folder, not in the run's cwd.
    models.save(str(tmp_path / "good"), "good")
    monkeypatch.chdir(tmp_path)
    result = check.check_model(
        "good",
        models.rows(),
        signature="serving_default",
        label_key="label",
        work_dir="work-relative",
        latency_rows=10,
    )
    assert result.verdict == check.PASSED, result.message


def test_a_model_calling_python_needs_project_code(tmp_path):
    result = _check(tmp_path, "python")
    assert result.verdict == check.NEEDS_PROJECT_CODE
    assert "EagerPyFunc" in result.message and result.message.startswith("needs project code")


def test_a_model_reading_the_label_disagrees(tmp_path):
    result = _check(tmp_path, "label")
    assert result.verdict == check.DISAGREES
    assert "without 'label'" in result.message and result.max_abs_diff == pytest.approx(1.0)


def test_a_model_that_does_not_load(tmp_path):
    model = Path(models.save(str(tmp_path / "broken"), "good"))
    (model / "saved_model.pb").write_bytes(b"not a SavedModel")
    result = check.check_model(
        str(model),
        models.rows(),
        signature="serving_default",
        label_key="label",
        work_dir=str(tmp_path / "work"),
    )
    assert result.verdict == check.CANNOT_LOAD
    assert result.message.startswith("cannot load")


def test_a_child_started_early_serves_the_first_check_and_no_other(tmp_path):
    with check.child_started_early():
        early = check._early
        assert early is not None and early.running()
        first = _check(tmp_path, "good")
        assert check._early is None  # taken
        second = _check(tmp_path, "label")  # a fresh process of its own
    assert first.verdict == check.PASSED, first.message
    assert second.verdict == check.DISAGREES
    assert not early.running()
    # The early child's files are kept in the check's work folder, as a fresh one's are.
    result = json.loads((tmp_path / "work-good/child-started-early/result.json").read_text())
    assert result["stage"] == "done" and result["project_importable"] == []
    assert (tmp_path / "work-good/child.log").exists()
    assert list((tmp_path / "work-label").glob("child-*/result.json"))
    assert not Path(early.out_dir).exists()  # its temporary folder is gone


def test_an_unused_early_child_ends_with_its_block():
    with check.child_started_early():
        early = check._early
    assert check._early is None
    assert not early.running() and not Path(early.out_dir).exists()


def test_the_label_leaves_a_sequence_example_and_its_feature_lists_stay():
    import tensorflow as tf

    from components.release.serving_check.check import without_feature

    record = tf.train.SequenceExample()
    record.context.feature["converted"].int64_list.value.append(1)
    record.context.feature["device"].bytes_list.value.append(b"phone")
    steps = record.feature_lists.feature_list["amount"]
    for value in (1.5, 2.5):
        steps.feature.add().float_list.value.append(value)
    sent = tf.train.SequenceExample.FromString(
        without_feature(record.SerializeToString(), "converted")
    )
    assert set(sent.context.feature) == {"device"}
    assert sent.feature_lists == record.feature_lists
