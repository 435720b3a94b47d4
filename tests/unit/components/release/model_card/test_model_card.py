"""components/release/model_card: the page from plain data, and properties in both stores' forms."""

from __future__ import annotations

from regression_pictures import REGRESSION_PICTURES

from components.release.model_card.card import CardData, render_card
from components.release.model_card.component import _prop

SLICES = {
    "rules": {
        "metric": "binary_accuracy",
        "by": [["payment_type"]],
        "min_examples": 50,
        "max_drop": 0.1,
    },
    "has_baseline": True,
    "metrics": {
        "overall": {
            "candidate": {"binary_accuracy": 0.8, "example_count": 1000.0, "fall_out": 0.1},
            "baseline": {"binary_accuracy": 0.7, "example_count": 1000.0},
        },
        "payment_type=Credit Card": {
            "candidate": {"binary_accuracy": 0.2, "example_count": 300.0, "fall_out": float("nan")},
            "baseline": {"binary_accuracy": 0.6, "example_count": 300.0},
        },
        "payment_type=<Dispute>": {
            "candidate": {"binary_accuracy": 1.0, "example_count": 3.0, "fall_out": 0.0},
            "baseline": {"binary_accuracy": 1.0, "example_count": 3.0},
        },
    },
    "failures": [{"slice": "payment_type=Credit Card"}],
}


def test_the_card_shows_every_slice_rule_and_verdict():
    html = render_card(
        CardData(
            dataset="taxi",
            intended_use="planning",
            limitations="cash tips are not recorded",
            slices=SLICES,
            thresholds={"metric": "BinaryAccuracy", "lower_bound": 0.6, "min_change": -1e-10},
            blessed=False,
            blessing_message="slice payment_type=Credit Card (300 examples): worse; overall: x",
            serving_check={
                "verdict": "passed",
                "message": "ok",
                "latency_ms": {"batch_1_p50": 1.5},
            },
        )
    )
    # Static pictures: no script at all, nothing fetched.
    assert "<script" not in html and "<svg" in html
    assert "class='slice-row fails' data-slice='payment_type=Credit Card'" in html
    assert "class='slice-row small' data-slice='payment_type=&lt;Dispute&gt;'" in html
    assert "<td class=num>0.2000</td>" in html and "<td class=num>n/a</td>" in html
    assert "<td class=num>300</td>" in html  # counts as whole numbers
    assert (
        "<li>slice payment_type=Credit Card (300 examples): worse</li><li>overall: x</li>" in html
    )
    assert "at most 0.1 worse than the baseline" in html
    assert "cash tips are not recorded" in html and "latency batch 1 p50 (ms)" in html


def test_properties_read_from_ml_metadata_and_from_the_kubeflow_runtime():
    from tfx.types import standard_artifacts

    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", 1)
    assert _prop(blessing, "blessed") == 1
    kfp = standard_artifacts.ModelBlessing()
    for name, value in (("blessed", 1.0), ("baseline_model_id", 7.0)):
        # A struct, as the Kubeflow V2 runtime stores custom properties.
        kfp.mlmd_artifact.custom_properties[name].struct_value.update({"__value__": value})
    assert _prop(kfp, "blessed") == 1 and isinstance(_prop(kfp, "baseline_model_id"), int)
    assert _prop(kfp, "missing") is None and _prop(None, "blessed") is None


PICTURES = {
    "slices": {
        "overall": {
            "models": {
                "candidate": {
                    "roc": {
                        "threshold": [0, 0.5, 1],
                        "fpr": [1, 0.2, 0],
                        "tpr": [1, 0.9, 0],
                        "auc": 0.85,
                    },
                    "pr": {
                        "threshold": [0, 0.5, 1],
                        "recall": [1, 0.9, 0],
                        "precision": [0.5, 0.8, 1],
                        "auc": 0.8,
                    },
                    "calibration": {
                        "lower": [0, 0.5],
                        "predicted": [0.2, 0.7],
                        "observed": [0.25, 0.65],
                        "count": [10, 12],
                    },
                },
                "baseline": {
                    "roc": {
                        "threshold": [0, 0.5, 1],
                        "fpr": [1, 0.3, 0],
                        "tpr": [1, 0.8, 0],
                        "auc": 0.75,
                    },
                },
            }
        }
    }
}


def test_the_card_draws_its_pictures_as_svg_without_script():
    """ROC (both models, AUC in the legend, the chance diagonal), PR, calibration, the
    slice bars (failing slice red) and the training curves, all static SVG."""
    import re

    curves = {
        "train": {
            "epoch_loss": [[0, 0.6], [1, 0.4]],
            "epoch_learning_rate": [[0, 0.003], [1, 0.003]],
        },
        "validation": {"epoch_loss": [[0, 0.65], [1, 0.5]]},
    }
    html = render_card(CardData(dataset="taxi", slices=SLICES, pictures=PICTURES, curves=curves))
    assert "<script" not in html
    ids = re.findall(r'<svg class="card-chart" id="([^"]+)"', html)
    assert ids == [
        "slice-chart-svg",
        "roc",
        "pr",
        "calibration",
        "curve-learning_rate",
        "curve-loss",
    ]
    roc = html[html.index('id="roc"') : html.index('id="pr"')]
    assert "candidate (AUC 0.850)" in roc and "baseline (AUC 0.750)" in roc
    assert roc.count('class="series"') == 2 and 'class="diagonal"' in roc
    bars = html[html.index('id="slice-chart-svg"') : html.index('id="roc"')]
    assert 'data-label="payment_type=Credit Card (300)" data-value="0.2" x=' in bars
    assert bars.count("#c0392b") >= 1  # the failing slice
    loss = html[html.index('id="curve-loss"') :]
    assert 'data-name="train"' in loss and 'data-name="validation"' in loss


def test_a_multiclass_card_draws_its_confusion_matrix():
    pictures = {
        "slices": {
            "overall": {
                "models": {
                    "": {"confusion": {"classes": [0, 1], "matrix": [[5.0, 1.0], [2.0, 7.0]]}}
                }
            }
        }
    }
    html = render_card(CardData(dataset="digits", pictures=pictures))
    assert 'id="confusion-model"' in html
    assert 'data-actual="1" data-predicted="0" data-value="2"' in html


def test_a_regression_card_draws_predicted_against_actual_and_residuals():
    """Both models overlaid on each: predicted against actual with y = x on one range,
    the residual histogram as each model's outline, in static SVG."""
    import re

    html = render_card(CardData(dataset="diabetes", pictures=REGRESSION_PICTURES))
    assert "<script" not in html
    ids = re.findall(r'<svg class="card-chart" id="([^"]+)"', html)
    assert ids == ["predicted-actual", "residuals"]
    scatter = html[html.index('id="predicted-actual"') : html.index('id="residuals"')]
    assert scatter.count('class="series"') == 2 and 'class="diagonal"' in scatter
    assert 'data-name="candidate"' in scatter and 'data-name="baseline"' in scatter
    residuals = html[html.index('id="residuals"') :]
    outline = re.search(r'data-name="candidate" points="([^"]+)"', residuals)
    assert outline and len(outline.group(1).split()) == 4 * 3  # up, across, down per bin
    # Residuals beyond the bins (no width to draw) are counted in the plot's corner.
    note = re.search(r'<text class="note"[^>]*>([^<]+)</text>', residuals)
    assert note and note.group(1) == (
        "beyond the bins: candidate 0 below, 1 above; baseline 0 below, 1 above"
    )
    assert 'class="note"' not in scatter
