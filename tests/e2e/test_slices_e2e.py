"""Per-slice blessing end to end: a model better overall but wrong for one group is not blessed.

Two runs on one store and the same data (the embedded sample), with taxi's
model made wrong on purpose for one payment type (slice_sabotage.py):

  run 1  wrong for Cash trips (two thirds of the rows): a poor model, blessed
         because the test's overall floor is 0 and there is no baseline yet
         (and, reading the label, blocked by the serving check: not pushed);
  run 2  wrong for Credit Card trips (a third): better overall than run 1's,
         so the overall change threshold passes, but worse on the Credit Card
         slice by far more than the allowed drop.

Both runs' Evaluators take the fast path (components/evaluation/fast). Run 2's
evaluation is then repeated on the same inputs, with and without the baseline,
as shipped, with TFMA thresholds on a slice and with TFMA's `min_slice_size`, by
the fast path and by TFX's
executor (TFMA): every metric of every slice, the validation result, the
blessing and its message must agree.

The test reads both models' numbers back from the evaluation and checks these
premises before the verdict, so it cannot pass on a scenario that did not happen.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import small_config, write_sample
from evaluator_parity import assert_same_evaluation, fast_and_tfma
from evaluator_runs import evaluator_inputs, validation_result

from metadata.summary import RunSummary
from pipeline.config import EvalThresholds, PipelineConfig, SliceOptions

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
    from components.evaluation.slicing.evaluator import SLICES_FILE

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


def test_both_runs_evaluate_by_slice_on_the_fast_path(slice_runs):
    logs = "".join(p.read_text() for p in (Path(slice_runs.config.run_dir) / "logs").glob("*.log"))
    assert logs.count("Evaluator: fast path") == 2, logs.count("Evaluator: TFMA path")


def _with_slice_thresholds(eval_config_json: str) -> str:
    """The eval config with TFMA thresholds on the payment type slices: binary accuracy of
    at least 0.5, and no lower than the baseline's by more than 0.1 (Credit Card fails)."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format

    config = json_format.Parse(eval_config_json, tfma.EvalConfig())
    [accuracy] = [m for m in config.metrics_specs[0].metrics if m.class_name == "BinaryAccuracy"]
    accuracy.per_slice_thresholds.add(
        slicing_specs=[tfma.SlicingSpec(feature_keys=["payment_type"])],
        threshold=tfma.MetricThreshold(
            value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.5}),
            change_threshold=tfma.GenericChangeThreshold(
                direction=tfma.MetricDirection.HIGHER_IS_BETTER, absolute={"value": -0.1}
            ),
        ),
    )
    return json_format.MessageToJson(config)


def _with_min_slice_size(eval_config_json: str) -> str:
    """The eval config with TFMA's min_slice_size above the smaller slices' sizes."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format

    config = json_format.Parse(eval_config_json, tfma.EvalConfig())
    config.options.min_slice_size.value = MIN_SLICE_SIZE
    return json_format.MessageToJson(config)


MIN_SLICE_SIZE = 200


@pytest.mark.parametrize("baseline", [False, True], ids=["first-run", "against-baseline"])
@pytest.mark.parametrize("change", ["as-shipped", "slice-thresholds", "min-slice-size"])
def test_fast_path_equals_tfma_on_every_slice(slice_runs, baseline, change, tmp_path, caplog):
    inputs, properties, _ = evaluator_inputs(slice_runs.config)  # run 2's Evaluator
    assert inputs.get("baseline_model"), "run 2 must evaluate against a baseline"
    if not baseline:
        inputs = {k: v for k, v in inputs.items() if k != "baseline_model"}
    if change == "slice-thresholds":
        properties["eval_config"] = _with_slice_thresholds(properties["eval_config"])
    if change == "min-slice-size":
        properties["eval_config"] = _with_min_slice_size(properties["eval_config"])
    ours, theirs = fast_and_tfma(inputs, properties, tmp_path, caplog)
    values = assert_same_evaluation(ours, theirs)
    assert len({slice_key for slice_key, _ in values}) >= 8  # overall, payment types, buckets
    assert any("fall_out" in k for _, k in values) and any("miss_rate" in k for _, k in values)
    ours_uri, ours_blessing = ours
    failing = {
        str(v.slice_key)
        for v in validation_result(ours_uri).metric_validations_per_slice
        if v.failures
    }
    if change == "min-slice-size":
        # TFMA's error record in place of a small slice's metrics (never the whole
        # split's), and TFMA's validator fails those slices: same on both paths.
        small = {k for k, v in values.items() if "lower than the minimum required" in str(v)}
        assert small and all(slice_key for slice_key, _ in small)
        assert failing == {slice_key for slice_key, _ in small}
        assert ours_blessing.get_int_custom_property("blessed") == 0
    elif change == "slice-thresholds":  # run 2's model is wrong on Credit Card trips
        assert ours_blessing.get_int_custom_property("blessed") == 0
        assert any("Credit Card" in k for k in failing), failing
    else:
        assert not failing
