"""Per-slice blessing end to end: a model better overall but wrong for one group is not blessed.

Two runs on one store and the same data (the embedded sample), with taxi's
model made wrong on purpose for one payment type (slice_sabotage.py):

  run 1  wrong for Cash trips (two thirds of the rows): a poor model, blessed
         because the test's overall floor is 0 and there is no baseline yet
         (and, reading the label, blocked by the serving check: not pushed);
  run 2  wrong for Credit Card trips (a third): better overall than run 1's,
         so the overall change threshold passes, but worse on the Credit Card
         slice by far more than the allowed drop.

The test reads both models' numbers back from the evaluation and checks these
premises before the verdict, so it cannot pass on a scenario that did not happen.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import small_config, write_sample

from pipeline.config import EvalThresholds, PipelineConfig, SliceOptions
from tfxp.metadata.summary import RunSummary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CARD = "payment_type=Credit Card"
MAX_DROP = 0.1


@dataclass
class SliceRuns:
    config: PipelineConfig
    first: RunSummary
    second: RunSummary


def _wrong_for(payment_type: str) -> dict:
    return {"wrong_for": {"feature": "payment_type", "equals": payment_type}}


@pytest.fixture(scope="module")
def slice_runs(tmp_path_factory: pytest.TempPathFactory) -> SliceRuns:
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("slices")
    write_sample(tmp / "data")
    config = small_config(
        tmp,
        run_fn="slice_sabotage.run_fn",
        thresholds=EvalThresholds(lower_bound=0.0, extra_metrics=()),
        slicing=SliceOptions(
            by=(("payment_type",), ("trip_miles",)),
            buckets={"trip_miles": (1.0, 3.0, 10.0)},
            min_examples=50,
            max_drop=MAX_DROP,
        ),
    )
    # Run 1's model also leaks the label into its answers: blessed, then blocked by the
    # serving check (served without the label, it disagrees with what was evaluated).
    first = run_local(
        config.replace(hyperparameters={**_wrong_for("Cash"), "leaks_label": True}),
        printer=lambda _: None,
    )
    second = run_local(
        config.replace(hyperparameters=_wrong_for("Credit Card")), printer=lambda _: None
    )
    return SliceRuns(config, first, second)


def _slices(config: PipelineConfig, run: int) -> dict:
    """slices.json of the evaluation of run 0 (the first) or 1 (the second)."""
    from components.slicing.evaluator import SLICES_FILE

    found = sorted(
        Path(config.pipeline_root).glob(f"Evaluator/evaluation/*/{SLICES_FILE}"),
        key=lambda p: int(p.parent.name),
    )
    assert len(found) == 2, f"expected one evaluation per run: {found}"
    return json.loads(found[run].read_text())


def test_the_baseline_run_is_blessed(slice_runs):
    assert slice_runs.first.blessed is True
    first = _slices(slice_runs.config, 0)
    assert first["has_baseline"] is False
    cash = first["metrics"]["payment_type=Cash"][""]
    assert cash["binary_accuracy"] == 0.0 and cash["example_count"] >= 50  # wrong on purpose


def test_better_overall_but_worse_on_a_slice_is_not_blessed(slice_runs):
    second = _slices(slice_runs.config, 1)
    assert second["has_baseline"] is True
    overall = second["metrics"]["overall"]
    card = second["metrics"][CARD]
    # The premises: better overall, worse on the Credit Card slice by more than allowed.
    assert overall["candidate"]["binary_accuracy"] > overall["baseline"]["binary_accuracy"] + 0.2
    assert card["candidate"]["example_count"] >= 50
    candidate, baseline = card["candidate"]["binary_accuracy"], card["baseline"]["binary_accuracy"]
    assert candidate == 0.0 and baseline - candidate > MAX_DROP

    assert slice_runs.second.blessed is False
    assert slice_runs.second.pushed is False
    # Only the slice failed (the overall thresholds passed), and the message says
    # which slice and both numbers.
    message = slice_runs.second.blessing_message
    assert message and "overall" not in message
    assert f"slice {CARD} ({int(card['candidate']['example_count'])} examples)" in message
    assert f"binary_accuracy {candidate:.4f} against the baseline's {baseline:.4f}" in message
    rendered = slice_runs.second.render()
    assert "blessed: no" in rendered and f"slice {CARD}" in rendered


def test_every_slice_has_error_rates(slice_runs):
    metrics = _slices(slice_runs.config, 1)["metrics"]
    assert {"payment_type=Cash", CARD, "trip_miles_bucket=<1", "trip_miles_bucket=>=10"} <= set(
        metrics
    )
    for name, models in metrics.items():
        for model in ("candidate", "baseline"):
            assert {"fall_out", "miss_rate", "binary_accuracy", "example_count"} <= set(
                models[model]
            ), (name, model)


def test_the_serving_check_blocks_a_model_that_reads_the_label(slice_runs):
    """Run 1's model was blessed, but its answers lean on the label, which clients do not
    send: served without it, it disagrees with what the Evaluator scored; not pushed."""
    first = slice_runs.first
    assert first.blessed is True
    assert first.pushed is False
    assert first.serving_check.startswith("disagrees"), first.serving_check
    assert "without 'tips'" in first.serving_check
    assert "the serving check failed" in first.render()
