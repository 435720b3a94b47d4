"""components/release/model_card: the page from plain data, and properties in both stores' forms."""

from __future__ import annotations

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
    # plotly inlined, nothing fetched
    assert '<script type="text/javascript">' in html and "<script src" not in html
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
