"""scikit-learn's internals behind `model: gbt` (trainer/tabular/sklearn_trees.py): it has no
public export of HistGradientBoosting's fitted trees."""

from __future__ import annotations

from typing import Any

from compat import check_version, private_attribute

LIBRARY = "scikit-learn"
WRITTEN_FOR = "1.5.1"
check_version(LIBRARY, WRITTEN_FOR)

_ESTIMATOR = "sklearn.ensemble._hist_gradient_boosting.gradient_boosting.BaseHistGradientBoosting"
_PREDICTORS = private_attribute(
    LIBRARY,
    f"{_ESTIMATOR}._predictors",
    "the fitted trees (a TreePredictor per iteration and class) gbt exports to TensorFlow",
)
_BASELINE = private_attribute(LIBRARY, f"{_ESTIMATOR}._baseline_prediction", "the trees' intercept")


def fitted_trees(estimator: Any) -> tuple[list, Any]:
    """(predictors [iterations][trees per iteration], baseline prediction) of a fitted model."""
    return getattr(estimator, _PREDICTORS), getattr(estimator, _BASELINE)
