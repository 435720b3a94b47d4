"""An imbalanced binary label (the rare class ~7% of rows), `tfxp init` -> `tfxp run`:
init writes class weights and a balanced-accuracy blessing, the Evaluator reports each
class's recall and the precision-recall AUC, on its fast path, equal to TFMA's."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROWS = 700


def write_fraud(path: Path, seed: int = 5) -> list[str]:
    rng = np.random.default_rng(seed)
    labels = []
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["amount", "hour", "channel", "fraud"])
        for _ in range(ROWS):
            amount = rng.lognormal(3, 1)
            hour = int(rng.integers(0, 24))
            channel = str(rng.choice(["web", "shop", "phone"]))
            score = 0.02 * amount + (2.5 if hour < 5 else 0) + (1.0 if channel == "phone" else 0)
            fraud = "yes" if score + rng.normal(0, 0.5) > 3.6 else "no"
            labels.append(fraud)
            writer.writerow([f"{amount:.2f}", hour, channel, fraud])
    return labels


@pytest.fixture(scope="module")
def fraud(tmp_path_factory):
    from test_tabular_e2e import dataset_path, tfxp

    from pipeline.datasets import dataset_config
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("fraud")
    home = tmp / "schema"
    labels = write_fraud(tmp / "fraud.csv")
    code, out, err = tfxp(
        home, "init", "fraud", "--csv", str(tmp / "fraud.csv"), "--label", "fraud",
        "--data-root", str(tmp / "data"),
    )  # fmt: skip
    assert code == 0, err
    with dataset_path(home):
        config = dataset_config("fraud").replace(run_dir=str(tmp / "run"))
    return labels, out, config, run_local(config, printer=lambda _: None)


def test_init_weights_the_rare_class_and_blesses_on_balanced_accuracy(fraud):
    labels, out, config, _ = fraud
    share = labels.count("yes") / len(labels)
    assert 0.03 < share < 0.1, share
    assert "imbalanced label" in out
    weights = config.tabular.class_weights
    assert weights["yes"] > 4 * weights["no"]
    assert config.thresholds.metric == "BalancedAccuracy" and config.thresholds.per_class


def test_the_model_is_blessed_and_finds_the_rare_class(fraud):
    _, _, _, summary = fraud
    assert summary.blessed, summary.render()
    metrics = summary.metrics
    assert metrics["balanced_accuracy"] > 0.75, metrics
    # Both classes' recall and the precision-recall AUC are reported.
    assert metrics["recall"] > 0.6 and metrics["specificity"] > 0.6, metrics
    assert 0 < metrics["auc_precision_recall"] <= 1


def test_per_class_metrics_take_the_fast_path_and_equal_tfma(fraud, tmp_path, caplog):
    from evaluator_parity import assert_same_evaluation, fast_and_tfma
    from evaluator_runs import evaluator_inputs

    _, _, config, _ = fraud
    logs = "".join(p.read_text() for p in (Path(config.run_dir) / "logs").glob("*.log"))
    assert "Evaluator: fast path" in logs and "Evaluator: TFMA path" not in logs
    inputs, properties, _ = evaluator_inputs(config)
    inputs = {k: v for k, v in inputs.items() if k != "baseline_model"}
    values = assert_same_evaluation(*fast_and_tfma(inputs, properties, tmp_path, caplog))
    names = {name for _, name in values}
    for metric in ("balanced_accuracy", "recall", "specificity", "auc_precision_recall"):
        assert any(f'"{metric}"' in k for k in names), (metric, names)
