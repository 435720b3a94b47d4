"""A regression evaluation's plots.json numbers, candidate and baseline: what the model card
and the console draw (tests of both)."""

from __future__ import annotations

REGRESSION_PICTURES = {
    "slices": {
        "overall": {
            "models": {
                model: {
                    "predicted_actual": {
                        "lower": [10.0, 20.0, 30.0],
                        "predicted": [14.0 + shift, 25.0, 36.0 - shift],
                        "actual": [15.0, 24.0, 35.0],
                        "count": [5.0, 8.0, 3.0],
                    },
                    "residuals": {
                        "lower": [-2.0, -1.0, 0.0],
                        "upper": [-1.0, 0.0, 1.0],
                        "count": [2.0, 9.0, 5.0 + shift],
                        "below": 0.0,
                        "above": 1.0,
                    },
                }
                for model, shift in (("candidate", 0.0), ("baseline", 2.0))
            }
        }
    }
}
