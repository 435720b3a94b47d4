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
