"""Datasets are files: the loader of schema/<NAME>/dataset.yaml (pipeline/datasets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import (
    GENERIC_PREPROCESSING_FN,
    GENERIC_RUN_FN,
    PROJECT_ROOT,
    EvalThresholds,
    ImageOptions,
    PipelineConfig,
)
from pipeline.dataset_sections import DatasetFileError
from pipeline.datasets import DATASET_PATH_ENV, dataset_config, dataset_names, load_dataset_file

TABLE = """\
name: {name}
data_root: {root}
label: kind
task: multiclass
classes: [a, b, c]
features:
  size: {{treatment: zscore}}
  colour: vocabulary
  id: {{treatment: zscore}}
exclude: [id]
train_steps: 50
hyperparameters: {{batch_size: 8}}
"""


def _write(home: Path, name: str, text: str) -> Path:
    folder = home / name
    folder.mkdir(parents=True)
    (folder / "dataset.yaml").write_text(text)
    return folder / "dataset.yaml"


def test_taxi_values_come_from_its_dataset_file():
    taxi = dataset_config("taxi")
    assert (taxi.pipeline_name, taxi.label_key, taxi.transformed_label_key) == (
        "taxi",
        "tips",
        "tips_xf",
    )
    # Taxi plugs its own model code in by dotted path, the one documented way.
    assert taxi.preprocessing_fn == "trainer.taxi.preprocessing.preprocessing_fn"
    assert taxi.run_fn == "trainer.taxi.train.run_fn"
    assert taxi.data_root == str(PROJECT_ROOT / "data" / "taxi")
    assert taxi.schema_file == str(PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt")
    assert taxi.validation_file == str(PROJECT_ROOT / "schema" / "taxi" / "validation.yaml")
    assert taxi.run_dir == str(PROJECT_ROOT / "runs" / "taxi")
    assert (taxi.train_steps, taxi.eval_steps, taxi.tabular) == (200, 5, None)
    assert taxi.thresholds == EvalThresholds(
        metric="BinaryAccuracy", lower_bound=0.6, extra_metrics=("AUC",)
    )
    # Evaluation by slice and the model card's words are the dataset file's too.
    assert taxi.slicing.by == (("payment_type",), ("trip_miles",))
    assert taxi.slicing.buckets == {"trip_miles": (1.0, 3.0, 10.0)}
    assert (taxi.slicing.min_examples, taxi.slicing.max_drop) == (50, 0.1)
    assert taxi.intended_use and taxi.limitations and taxi.description


def test_pipeline_config_defaults_name_no_dataset():
    import dataclasses

    default = PipelineConfig()
    values = repr(dataclasses.asdict(default)).replace(str(PROJECT_ROOT), "<project>")
    assert "taxi" not in values.lower() and "digits" not in values.lower()
    assert (default.preprocessing_fn, default.run_fn) == (GENERIC_PREPROCESSING_FN, GENERIC_RUN_FN)


def test_digits_dataset_file_matches_its_former_config():
    digits = dataset_config("digits")
    assert digits.pipeline_name == "digits"
    assert digits.data_root == str(PROJECT_ROOT / "data" / "digits")
    assert digits.span_pattern == "span-{SPAN}/*/*"
    assert digits.serving_data == ""
    assert digits.preprocessing_fn == "trainer.image.preprocessing.preprocessing_fn"
    assert digits.run_fn == "trainer.image.train.run_fn"
    assert (digits.label_key, digits.transformed_label_key) == ("label", "label_xf")
    assert (digits.train_steps, digits.eval_steps) == (300, 2)
    assert digits.hyperparameters == {"flip": False}
    assert digits.thresholds == EvalThresholds(
        metric="SparseCategoricalAccuracy", lower_bound=0.9, extra_metrics=()
    )
    assert digits.image == ImageOptions(class_names=tuple(str(d) for d in range(10)))
    assert digits.eval_signature == "serving_examples"
    assert digits.tabular is None


def test_datasets_are_found_from_files(tmp_path, monkeypatch):
    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path))
    assert "mine" not in dataset_names()
    _write(tmp_path, "mine", TABLE.format(name="mine", root=tmp_path / "data"))
    assert {"taxi", "digits", "mine"} <= set(dataset_names())
    import pipeline.datasets

    assert "mine" in pipeline.datasets.DATASETS  # read on access, no restart
    config = dataset_config("mine")
    assert config.pipeline_name == "mine"
    assert config.data_root == str(tmp_path / "data")
    assert config.schema_file == str(tmp_path / "mine" / "schema.pbtxt")
    assert config.run_dir == str(PROJECT_ROOT / "runs" / "mine")
    assert (config.preprocessing_fn, config.run_fn) == (GENERIC_PREPROCESSING_FN, GENERIC_RUN_FN)
    assert (config.label_key, config.transformed_label_key) == ("kind", "kind_xf")
    assert config.train_steps == 50 and config.hyperparameters == {"batch_size": 8}
    assert config.thresholds.metric == "SparseCategoricalAccuracy"
    options = config.tabular.to_dict()
    assert options["classes"] == ["a", "b", "c"]
    # Excluded columns are not features; a bare string is a treatment.
    assert options["features"] == {
        "size": {"treatment": "zscore"},
        "colour": {"treatment": "vocabulary"},
    }


def test_regression_defaults_to_an_rmse_ceiling(tmp_path):
    path = _write(
        tmp_path,
        "prices",
        "label: price\ntask: regression\nfeatures: {rooms: zscore}\n"
        "evaluation: {upper_bound: 12.5}\n",
    )
    config = load_dataset_file(path)
    assert config.thresholds.metric == "RootMeanSquaredError"
    assert config.thresholds.upper_bound == 12.5 and config.thresholds.lower_bound is None
    from pipeline.eval_config import eval_config

    threshold = eval_config(config).metrics_specs[0].metrics[-1].threshold
    assert threshold.value_threshold.upper_bound.value == 12.5


@pytest.mark.parametrize(
    "text, message",
    [
        ("label: y\ntask: guess\nfeatures: {a: zscore}\n", "task must be one of"),
        ("label: y\ntask: binary\nfeatures: {a: zscore}\n", "needs `classes:`"),
        ("label: y\ntask: regression\nfeatures: {a: scale}\n", "treatment must be one of"),
        ("label: y\ntask: regression\nfeatures: {a: zscore}\nsteps: 3\n", "unknown key(s)"),
        ("task: regression\nfeatures: {a: zscore}\n", "`label:`"),
        ("name: other\nlabel: y\ntask: regression\nfeatures: {a: zscore}\n", "differs"),
        ("label: y\ntask: regression\nfeatures: {a: zscore}\ncsv_encoding: nope\n", "csv_encoding"),
        ("label: y\ntask: regression\nfeatures: {a: zscore}\ncsv_encoding: utf-16\n", "iconv"),
    ],
)
def test_bad_dataset_files_name_the_problem(tmp_path, text, message):
    path = _write(tmp_path, "bad", text)
    with pytest.raises(DatasetFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_dataset_file(path)


def test_csv_encoding_comes_from_the_dataset_file(tmp_path):
    path = _write(
        tmp_path,
        "latin",
        "label: y\ntask: regression\nfeatures: {a: zscore}\ncsv_encoding: latin-1\n",
    )
    assert load_dataset_file(path).csv_encoding == "latin-1"
    assert (
        load_dataset_file(
            _write(tmp_path, "plain", "label: y\ntask: regression\nfeatures: {a: zscore}\n")
        ).csv_encoding
        == "utf-8"
    )


def test_unknown_dataset_says_how_to_make_one():
    with pytest.raises(ValueError, match="tfxp init nope"):
        dataset_config("nope")


def test_serving_log_window_comes_from_the_dataset_file(tmp_path):
    from components.validation.serving_log import WindowOptions

    base = "label: y\ntask: regression\nfeatures: {a: zscore}\n"
    path = _write(tmp_path, "logged", base + "serving_log: {hours: 6, max_examples: 500}\n")
    assert load_dataset_file(path).serving_log_window == WindowOptions(6.0, 500)
    plain = load_dataset_file(_write(tmp_path, "plain", base))
    assert plain.serving_log_window == WindowOptions(24.0, 100_000)
    for i, (bad, message) in enumerate(
        (
            (
                "serving_log: 6\n",
                "serving_log: a mapping with hours, max_examples and/or min_examples",
            ),
            ("serving_log: {days: 1}\n", "serving_log: a mapping"),
            ("serving_log: {hours: 0}\n", "serving_log: hours: a number > 0, not 0"),
            ("serving_log: {max_examples: 2.5}\n", "max_examples: a whole number >= 1, not 2.5"),
        )
    ):
        with pytest.raises(DatasetFileError, match=message):
            load_dataset_file(_write(tmp_path / f"bad{i}", "bad", base + bad))
