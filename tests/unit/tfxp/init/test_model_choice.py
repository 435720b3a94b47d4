"""`tfxp init` picks the model by table size and says why (tfxp/init/model_choice.py)."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from pipeline.config import GENERIC_RUN_FN
from pipeline.datasets import DATASET_PATH_ENV, load_dataset_file
from pipeline.models import GBT_RUN_FN
from tfxp.init.command import run_init
from tfxp.init.dataset_file import train_steps
from tfxp.init.model_choice import (
    GBT_MIN_ROWS,
    GBT_MIN_ROWS_IMBALANCED,
    MLP_BATCH_SIZE,
    SMALL_TABLE_BATCH_SIZE,
    choose_model,
    mlp_batch_size,
)


def _init(tmp_path: Path, rows: int) -> tuple[str, Path]:
    path = tmp_path / f"t{rows}.csv"
    lines = [
        f"{i * 0.5:.1f},{['red', 'blue'][i % 2]},{['yes', 'no'][i % 3 == 0]}" for i in range(rows)
    ]
    path.write_text("size,colour,bought\n" + "\n".join(lines) + "\n")
    args = argparse.Namespace(
        name=f"t{rows}", csv=[str(path)], label="bought", data_root=str(tmp_path / "data" / f"t{rows}"),
        task=None, exclude=None, link=False, force=False,
    )  # fmt: skip
    out = io.StringIO()
    assert run_init(args, out=out) == 0
    return out.getvalue(), tmp_path / "schema" / f"t{rows}" / "dataset.yaml"


@pytest.mark.parametrize(
    "rows, model, run_fn",
    [(GBT_MIN_ROWS - 1, "mlp", GENERIC_RUN_FN), (GBT_MIN_ROWS, "gbt", GBT_RUN_FN)],
)
def test_init_writes_the_model_for_the_table_size_and_says_why(
    tmp_path, monkeypatch, rows, model, run_fn
):
    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path / "schema"))
    out, dataset_file = _init(tmp_path, rows)
    assert f"model: {model} ({rows} rows" in out
    text = dataset_file.read_text()
    assert f"\nmodel: {model}\n" in text and choose_model(rows)[1] in text
    # The file loads as written: the hyperparameters are the chosen model's.
    config = load_dataset_file(dataset_file)
    assert config.run_fn == run_fn
    assert ("hidden_units" in config.hyperparameters) == (model == "mlp")
    assert ("max_iter" in config.hyperparameters) == (model == "gbt")


def test_a_small_table_trains_the_mlp_on_smaller_batches(tmp_path, monkeypatch):
    """Below GBT_MIN_ROWS rows the MLP's batches are halved and its steps doubled (the
    same passes over the data): benchmarks/tabular_quality.py's small tables."""
    assert mlp_batch_size(GBT_MIN_ROWS - 1) == SMALL_TABLE_BATCH_SIZE < MLP_BATCH_SIZE
    assert mlp_batch_size(GBT_MIN_ROWS) == MLP_BATCH_SIZE
    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path / "schema"))
    rows = 400
    _, dataset_file = _init(tmp_path, rows)
    config = load_dataset_file(dataset_file)
    assert config.hyperparameters["batch_size"] == SMALL_TABLE_BATCH_SIZE
    assert config.train_steps == train_steps(rows, SMALL_TABLE_BATCH_SIZE)
    assert config.train_steps > train_steps(rows, MLP_BATCH_SIZE)


def test_a_text_feature_keeps_the_mlp_whatever_the_size():
    model, reason = choose_model(10 * GBT_MIN_ROWS, ["zscore", "text"])
    assert model == "mlp" and "text feature" in reason
    assert choose_model(10 * GBT_MIN_ROWS, ["zscore", "vocabulary"])[0] == "gbt"


def test_a_small_imbalanced_binary_label_keeps_the_mlp():
    model, reason = choose_model(2 * GBT_MIN_ROWS, ["zscore"], imbalanced=True)
    assert model == "mlp" and "imbalanced" in reason
    assert choose_model(2 * GBT_MIN_ROWS, ["zscore"])[0] == "gbt"
    assert choose_model(GBT_MIN_ROWS_IMBALANCED, ["zscore"], imbalanced=True)[0] == "gbt"


def test_a_gbt_dataset_compiles_for_kubeflow_with_the_trees_trainer(tmp_path, monkeypatch):
    import json

    from kubeflow.compiler import compile_pipeline
    from kubeflow.config import KubeflowConfig

    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path / "schema"))
    _, dataset_file = _init(tmp_path, GBT_MIN_ROWS)
    dataset_file.write_text(
        dataset_file.read_text()
        + "tuning:\n  max_trials: 2\n  search_space: {max_leaf_nodes: {choices: [8, 31]}}\n"
    )
    job = compile_pipeline(
        KubeflowConfig(
            image="registry.example.com/ml/tfx-pipeline:t",
            pipeline_root="gs://example-bucket/tfx/t",
            dataset=f"t{GBT_MIN_ROWS}",
        )
    )
    text = json.dumps(job)
    assert "trainer.tabular.gbt.run_fn" in text and "trainer.tabular.gbt.tuner_fn" in text
    assert "trainer.tabular.preprocessing.preprocessing_fn" in text
