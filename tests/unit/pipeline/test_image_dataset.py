"""The digits dataset is a config and a schema: same definition, image ExampleGen, its own metric."""

from __future__ import annotations

import json
import logging

import pytest
import tensorflow_model_analysis as tfma

from components.example_gen.image_example_gen import COMPONENT_ID, ImageExampleGen
from components.validation.schema_importer import load_schema
from pipeline import definition as d
from pipeline import node_ids
from pipeline.config import PROJECT_ROOT, PipelineConfig
from pipeline.datasets import DATASETS
from pipeline.eval_config import eval_config
from pipeline.plan import plan_run
from pipeline.spans import SpanError, select_spans
from tfxp.models.predict import PredictError, predict_csv


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> tuple[PipelineConfig, dict]:
    config = DATASETS["digits"].replace(run_dir=str(tmp_path_factory.mktemp("run")))
    return config, {c.id: c for c in d.create_pipeline(plan_run(config)).components}


def _custom(component) -> dict:
    raw = component.exec_properties["custom_config"]
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def test_digits_uses_the_image_example_gen(digits):
    _, components = digits
    assert node_ids.EXAMPLE_GEN not in components
    gen = components[node_ids.IMAGE_EXAMPLE_GEN]
    assert isinstance(gen, ImageExampleGen) and gen.id == COMPONENT_ID
    assert set(components) - {node_ids.IMAGE_EXAMPLE_GEN} == {
        node_ids.STATISTICS_GEN,
        node_ids.SCHEMA_IMPORTER,
        node_ids.EXAMPLE_VALIDATOR,
        node_ids.PREVIOUS_STATISTICS_RESOLVER,
        node_ids.VALIDATION_GATE,
        node_ids.TRANSFORM,
        node_ids.TRAINER,
        node_ids.BASELINE_RESOLVER,
        node_ids.EVALUATOR,
        node_ids.SERVING_CHECK,
        node_ids.PUSHER,
        node_ids.MODEL_CARD,
    }
    assert "span-{SPAN}/*/*" in gen.exec_properties["input_config"]


def test_digits_gate_uses_its_thresholds_and_no_serving_data(digits):
    _, components = digits
    gate = components[node_ids.VALIDATION_GATE]
    # Not taxi's serving CSVs, nor data/digits/serving/*.csv: none, said explicitly.
    assert gate.exec_properties["serving_data"] == ""
    assert gate.exec_properties["serving_sha256"] == ""
    settings = json.loads(gate.exec_properties["settings"])
    assert settings["drift"]["features"] == {"image": None}
    assert "drift:height" in settings["warn_only"]


def test_image_options_reach_transform_and_trainer(digits):
    config, components = digits
    for node in (node_ids.TRANSFORM, node_ids.TRAINER):
        image = _custom(components[node])["image"]
        assert image["class_names"] == [str(i) for i in range(10)]
        assert (image["height"], image["width"], image["channels"]) == (8, 8, 1)
    assert _custom(components[node_ids.TRAINER])["hyperparameters"] == {"flip": False}


def test_eval_config_thresholds_sparse_accuracy_on_example_signature(digits):
    config, _ = digits
    ec = eval_config(config)
    assert ec.model_specs[0].signature_name == "serving_examples"
    assert ec.model_specs[0].label_key == "label_xf"
    metrics = {m.class_name: m for m in ec.metrics_specs[0].metrics}
    assert set(metrics) == {"ExampleCount", "SparseCategoricalAccuracy"}
    # With slices (by label), the overall thresholds hold for the whole split only.
    (per_slice,) = metrics["SparseCategoricalAccuracy"].per_slice_thresholds
    assert list(per_slice.slicing_specs) == [tfma.SlicingSpec()]
    t = per_slice.threshold
    assert t.value_threshold.lower_bound.value == 0.9
    assert t.change_threshold.direction == tfma.MetricDirection.HIGHER_IS_BETTER
    assert [list(s.feature_keys) for s in ec.slicing_specs] == [[], ["label"]]
    # Each class's false positive and negative rates, one class against the rest.
    (rates, plots) = ec.metrics_specs[1:]
    assert [m.class_name for m in plots.metrics] == ["MultiClassConfusionMatrixPlot"]
    assert {m.class_name for m in rates.metrics} == {"FallOut", "MissRate"}
    assert list(rates.binarize.class_ids.values) == list(range(10))


def test_taxi_keeps_its_binary_metrics():
    ec = eval_config(DATASETS["taxi"])
    assert ec.model_specs[0].signature_name == "serving_default"
    assert {m.class_name for m in ec.metrics_specs[0].metrics} == {
        "ExampleCount",
        "AUC",
        "BinaryAccuracy",
    }


def test_schema_describes_the_image_features():
    schema = load_schema(DATASETS["digits"].schema_file)
    features = {f.name: f for f in schema.feature}
    assert set(features) == {"image", "label", "height", "width", "channels", "format"}
    assert (features["label"].int_domain.min, features["label"].int_domain.max) == (0, 9)
    assert features["channels"].int_domain.max == 4


def test_spans_of_image_folders(tmp_path):
    (spans,) = [select_spans(DATASETS["digits"])]
    assert [s.span for s in spans] == [1]
    assert len(spans[0].files) == 1797
    (tmp_path / "span-1" / "3").mkdir(parents=True)
    with pytest.raises(SpanError, match=r"no \*/\* files"):
        select_spans(DATASETS["digits"].replace(data_root=str(tmp_path)))


def test_image_options_are_required():
    config = DATASETS["digits"].replace(image=None)
    with pytest.raises(ValueError, match="ImageOptions"):
        d.create_pipeline(plan_run(config))


def test_predict_says_how_to_serve_images(tmp_path):
    with pytest.raises(PredictError, match="image_bytes"):
        predict_csv(DATASETS["digits"], str(tmp_path / "x.csv"))


def test_on_bad_image_and_shard_mb_from_the_dataset_file(tmp_path, caplog):
    from pipeline.dataset_sections import DatasetFileError
    from pipeline.datasets import load_dataset_file

    source = (PROJECT_ROOT / "schema" / "digits" / "dataset.yaml").read_text()

    def load(extra: str):
        (tmp_path / "digits").mkdir(exist_ok=True)
        path = tmp_path / "digits" / "dataset.yaml"
        path.write_text(source.replace("image:\n", f"image:\n{extra}", 1))
        return load_dataset_file(path)

    assert DATASETS["digits"].image.on_bad_image == "skip"
    config = load("  on_bad_image: fail\n  shard_mb: 256\n")
    assert (config.image.on_bad_image, config.image.shard_mb) == ("fail", 256)
    # On the loader's own logger: an earlier test in the worker may leave the root
    # logger at ERROR (kubeflow's command does), which would hide the warning.
    with caplog.at_level(logging.WARNING, logger="pipeline.datasets"):
        assert load("  bad_images: fail\n").image.on_bad_image == "fail"  # the earlier key
    assert "image.bad_images is now image.on_bad_image" in caplog.text
    with pytest.raises(DatasetFileError, match="on_bad_image is skip or fail"):
        load("  on_bad_image: ignore\n")
    with pytest.raises(DatasetFileError, match="shard_mb"):
        load("  shard_mb: 0\n")
