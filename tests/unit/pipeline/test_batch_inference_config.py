"""Batch inference settings: the dataset file's `batch_inference:` mapping, the span it scores,
and the pipeline's BatchInference step (present only when asked for, keyed by the data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import InferenceOptions, PipelineConfig
from pipeline.dataset_sections import DatasetFileError
from pipeline.datasets import dataset_config, load_dataset_file
from pipeline.node_ids import BATCH_INFERENCE, PUSHER
from pipeline.plan import plan_run
from pipeline.spans import SpanError, inference_span

TABLE = """\
name: shop
label: kind
task: binary
classes: ['no', 'yes']
features:
  size: zscore
"""


def _dataset(tmp_path: Path, extra: str) -> Path:
    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "dataset.yaml").write_text(TABLE + extra)
    return folder / "dataset.yaml"


def test_without_the_key_nothing_changes(tmp_path):
    config = load_dataset_file(_dataset(tmp_path, ""))
    assert config.inference == InferenceOptions()
    assert config.inference_data_root == config.data_root


def test_the_key_is_read(tmp_path):
    extra = (
        "batch_inference:\n  data_root: /data/shop-unlabelled\n"
        "  key_columns: [order_id, store]\n  in_pipeline: true\n  batch_size: 256\n"
    )
    config = load_dataset_file(_dataset(tmp_path, extra))
    assert config.inference == InferenceOptions(
        data_root="/data/shop-unlabelled",
        key_columns=("order_id", "store"),
        in_pipeline=True,
        batch_size=256,
    )
    assert config.inference_data_root == "/data/shop-unlabelled"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ("batch_inference:\n  keys: [a]\n", "unknown key(s) ['keys']"),
        ("batch_inference:\n  key_columns: order_id\n", "batch_inference.key_columns"),
        ("batch_inference:\n  key_columns: [a, a]\n", "names a column twice"),
        ("batch_inference:\n  key_columns: [line]\n", "clash with the output's own"),
        ("batch_inference:\n  in_pipeline: yes please\n", "batch_inference.in_pipeline"),
        ("batch_inference:\n  batch_size: 0\n", "batch_inference.batch_size"),
        ("batch_inference:\n  batch_size: 12.5\n", "batch_inference.batch_size"),
        ("batch_inference:\n  data_root: ''\n", "batch_inference.data_root"),
        ("batch_inference: [a]\n", "batch_inference: expected a mapping"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(tmp_path, extra, named):
    path = _dataset(tmp_path, extra)
    with pytest.raises(DatasetFileError) as e:
        load_dataset_file(path)
    assert named in str(e.value) and str(path) in str(e.value)


def _spans(root: Path, *numbers: int) -> None:
    for n in numbers:
        (root / f"span-{n}").mkdir(parents=True)
        (root / f"span-{n}" / "rows.csv").write_text("a\n1\n")


def test_the_newest_span_or_the_one_asked_for(tmp_path):
    _spans(tmp_path, 2, 10, 3)
    (tmp_path / "span-11").mkdir()  # no files yet: not a span to score
    config = PipelineConfig(inference=InferenceOptions(data_root=str(tmp_path)))
    assert inference_span(config).span == 10
    assert inference_span(config, 3).span == 3
    with pytest.raises(SpanError, match="span 4 is not in .*spans there: 2, 3, 10"):
        inference_span(config, 4)
    with pytest.raises(SpanError, match="no span-<N>/ folder"):
        inference_span(PipelineConfig(inference=InferenceOptions(data_root=str(tmp_path / "x"))))


def test_pipeline_step_only_when_asked_for_keyed_by_the_span_content(tmp_path):
    from pipeline.definition import create_pipeline

    _spans(tmp_path / "unlabelled", 5)
    base = dataset_config("taxi").replace(run_dir=str(tmp_path / "run"))
    assert BATCH_INFERENCE not in {c.id for c in create_pipeline(plan_run(base)).components}
    asked = base.replace(
        inference=InferenceOptions(
            data_root=str(tmp_path / "unlabelled"), key_columns=("trip_id",), in_pipeline=True
        )
    )
    components = {c.id: c for c in create_pipeline(plan_run(asked)).components}
    step = components[BATCH_INFERENCE]
    assert step.exec_properties["span"] == 5
    assert json.loads(step.exec_properties["key_columns"]) == ["trip_id"]
    assert json.loads(step.exec_properties["files"]) == ["span-5/rows.csv"]
    assert set(step.inputs) == {"model", "model_blessing"}
    assert PUSHER in components  # the push does not wait for the scoring, nor the reverse
    key = step.exec_properties["content_sha256"]
    (tmp_path / "unlabelled" / "span-5" / "rows.csv").write_text("a\n2\n")
    changed = {c.id: c for c in create_pipeline(plan_run(asked)).components}[BATCH_INFERENCE]
    assert changed.exec_properties["content_sha256"] != key
