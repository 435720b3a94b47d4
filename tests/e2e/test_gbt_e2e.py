"""`model: gbt` through the whole pipeline: `tfxp init` -> `model: gbt` (+ a tuning search)
-> `tfxp run` -> `tfxp predict`, on a generated table with a string column and blank cells.

The trees serve through the tabular trainer's signatures: the Tuner's trials, the
Evaluator (fast path and TFMA alike), the serving check's fresh process, the model
card and `tfxp predict` take the SavedModel as they take the MLP's.
"""

from __future__ import annotations

import csv
import glob
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_tabular_e2e import dataset_path, tfxp

from metadata.summary import RunSummary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROWS = 900


def write_generated_table(path: Path) -> list[str]:
    """A binary table: 4 numbers (one with blanks), a string column that matters; its labels."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(ROWS, 4))
    colour = rng.choice(["red", "green", "blue"], ROWS)
    # An interaction and a threshold: what trees find easily.
    score = (x[:, 0] > 0.3) * 1.5 + x[:, 1] * x[:, 2] + (colour == "red") - 0.6
    label = np.where(score + rng.normal(scale=0.3, size=ROWS) > 0, "yes", "no")
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["a", "b", "c", "d", "colour", "bought"])
        for i in range(ROWS):
            cells = [f"{v:.5f}" for v in x[i]]
            if rng.random() < 0.1:
                cells[3] = ""
            writer.writerow([*cells, colour[i], label[i]])
    return list(label)


@dataclass
class GbtRun:
    labels: list[str]
    run: RunSummary
    config: object
    predictions: list[dict]
    requests: list[dict]
    predict_output: str


@pytest.fixture(scope="module")
def gbt_run(tmp_path_factory) -> GbtRun:
    from pipeline.datasets import dataset_config
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("gbt")
    home, data = tmp / "schema", tmp / "data"
    labels = write_generated_table(tmp / "shop.csv")
    code, _, err = tfxp(
        home, "init", "shop", "--csv", str(tmp / "shop.csv"), "--label", "bought",
        "--data-root", str(data),
    )  # fmt: skip
    assert code == 0, err
    dataset_file = home / "shop" / "dataset.yaml"
    raw = yaml.safe_load(dataset_file.read_text())
    raw.update(
        model="gbt",
        hyperparameters={"max_iter": 60},
        tuning={"max_trials": 2, "search_space": {"max_leaf_nodes": {"choices": [2, 15]}}},
    )
    dataset_file.write_text(yaml.safe_dump(raw))
    with dataset_path(home):
        config = dataset_config("shop").replace(run_dir=str(tmp / "run"))
    run = run_local(config, printer=lambda _: None)

    (span_file,) = (data / "span-1").glob("*.csv")
    with span_file.open() as f:
        requests = [{k: v for k, v in r.items() if k != "bought"} for r in csv.DictReader(f)][:40]
    with (tmp / "requests.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, list(requests[0]))
        writer.writeheader()
        writer.writerows(requests)
    out = tmp / "predictions.csv"
    code, predict_out, err = tfxp(
        home, "predict", "--dataset", "shop", "--run-dir", str(tmp / "run"),
        str(tmp / "requests.csv"), "-o", str(out),
    )  # fmt: skip
    assert code == 0, err
    with out.open() as f:
        predictions = list(csv.DictReader(f))
    return GbtRun(labels, run, config, predictions, requests, predict_out)


def test_the_gbt_model_is_tuned_blessed_checked_pushed_and_carded(gbt_run):
    run = gbt_run.run
    assert {"Tuner", "Trainer", "Evaluator", "ServingCheck", "Pusher", "ModelCard"} <= set(
        run.executed
    ), run.render()
    assert run.blessed and run.pushed, run.render()
    assert run.serving_check.startswith("passed"), run.serving_check
    _, counts = np.unique(gbt_run.labels, return_counts=True)
    majority = counts.max() / counts.sum()
    assert run.metrics["binary_accuracy"] > majority + 0.5 * (1 - majority), run.metrics
    log = Path(run.log_path).read_text()
    assert "gbt: 60 iterations on" in log  # the dataset file's max_iter reached the trees
    root = gbt_run.config.pipeline_root
    (trials,) = glob.glob(f"{root}/Tuner/tuner_results/*/tuner_results.json")
    scores = {t["max_leaf_nodes"]: t["score"] for t in json.loads(Path(trials).read_text())}
    # Stumps cannot express the interaction: the eval loss says so, and the best is kept.
    assert set(scores) == {2, 15} and scores[15] < scores[2], scores
    (best,) = glob.glob(f"{root}/Tuner/best_hyperparameters/*/best_hyperparameters.txt")
    assert json.loads(Path(best).read_text())["values"]["max_leaf_nodes"] == 15
    card = (Path(run.pushed_model) / "model_card.html").read_text()
    assert "max_leaf_nodes" in card or "max_iter" in card


def test_predict_scores_rows_without_the_label(gbt_run):
    rows = gbt_run.predictions
    assert len(rows) == 40 and "scored 40 rows" in gbt_run.predict_output
    assert {r["prediction"] for r in rows} <= {"yes", "no"}
    for r in rows:
        p_yes = float(r["probability_yes"])
        assert 0.0 <= p_yes <= 1.0
        assert r["prediction"] == ("yes" if p_yes >= 0.5 else "no")
    right = sum(r["prediction"] == y for r, y in zip(rows, gbt_run.labels, strict=False))
    assert right >= 30, right


def test_evaluation_takes_the_fast_path_and_equals_tfma(gbt_run, tmp_path, caplog):
    from evaluator_parity import assert_same_evaluation, fast_and_tfma
    from evaluator_runs import evaluator_inputs

    log = Path(gbt_run.run.log_path).read_text()
    assert "Evaluator: fast path" in log
    inputs, properties, _ = evaluator_inputs(gbt_run.config)
    values = assert_same_evaluation(*fast_and_tfma(inputs, properties, tmp_path, caplog))
    assert any('"binary_accuracy"' in k for _, k in values), values


def test_batch_inference_scores_as_predict_does(gbt_run, tmp_path):
    """`tfxp infer` (Beam, the pushed model) on the rows `tfxp predict` scored: the same answers."""
    from metadata.store import location_from
    from pipeline.config import InferenceOptions
    from tfxp.models.infer import run_infer

    span = tmp_path / "to_score" / "span-1"
    span.mkdir(parents=True)
    with (span / "part-00000.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, list(gbt_run.requests[0]))
        writer.writeheader()
        writer.writerows(gbt_run.requests)
    config = gbt_run.config.replace(
        inference=InferenceOptions(data_root=str(tmp_path / "to_score"))
    )
    with dataset_path(Path(gbt_run.config.run_dir).parent / "schema"):
        result = run_infer(
            config, location_from(default_run_dir=config.run_dir), span=1, printer=lambda _: None
        )
    with (Path(result.output) / "predictions.csv").open() as f:
        scored = list(csv.DictReader(f))
    assert [r["prediction"] for r in scored] == [r["prediction"] for r in gbt_run.predictions]
    assert [r["probability_yes"] for r in scored] == [
        r["probability_yes"] for r in gbt_run.predictions
    ]
