"""tfxp/ui/evaluation_charts.py: a regression model's charts from plots.json's numbers."""

from __future__ import annotations

from regression_pictures import REGRESSION_PICTURES

from tfxp.ui.evaluation_charts import evaluation_charts


def test_regression_charts_overlay_candidate_and_baseline():
    charts = {c["id"]: c for c in evaluation_charts(REGRESSION_PICTURES, None)}
    assert list(charts) == ["predicted-actual", "residuals"]
    models = REGRESSION_PICTURES["slices"]["overall"]["models"]
    diagonal, *lines = charts["predicted-actual"]["data"]
    # y = x over every model's smallest and largest mean.
    assert diagonal["x"] == diagonal["y"] == [14.0, 36.0]
    assert [t["name"] for t in lines] == ["candidate", "baseline"]
    for trace in lines:
        found = models[trace["name"]]["predicted_actual"]
        assert (trace["x"], trace["y"]) == (found["predicted"], found["actual"])
    bars = charts["residuals"]["data"]
    assert [t["name"] for t in bars] == ["candidate", "baseline"]
    assert bars[0]["x"] == [-1.5, -0.5, 0.5] and bars[1]["y"] == [2.0, 9.0, 7.0]
    assert charts["residuals"]["layout"]["barmode"] == "overlay"
    assert {c["file"] for c in charts.values()} == {"plots.json"}
    # Residuals beyond the bins (no width to draw) are counted in the plot's corner.
    (note,) = charts["residuals"]["layout"]["annotations"]
    assert note["text"] == "beyond the bins: candidate 0 below, 1 above; baseline 0 below, 1 above"


def test_residuals_all_within_the_bins_get_no_note():
    import copy

    pictures = copy.deepcopy(REGRESSION_PICTURES)
    for plots in pictures["slices"]["overall"]["models"].values():
        plots["residuals"]["above"] = 0.0
    charts = {c["id"]: c for c in evaluation_charts(pictures, None)}
    assert charts["residuals"]["layout"]["annotations"] == []


def test_the_trials_chart_shows_each_trials_last_loss():
    from tfxp.ui.views import trials_chart

    curves = {
        f"trial-{n}/{kind}": {"epoch_loss": [[0, 9.0], [1, float(n) + (kind == "train")]]}
        for n in (0, 2, 10)
        for kind in ("train", "validation")
    }
    chart = trials_chart(curves)
    assert chart is not None
    validation, train = chart["data"]
    assert validation["x"] == ["trial-0", "trial-2", "trial-10"]
    assert validation["y"] == [0.0, 2.0, 10.0] and train["y"] == [1.0, 3.0, 11.0]
    assert trials_chart({"train": {"epoch_loss": [[0, 1.0]]}}) is None
