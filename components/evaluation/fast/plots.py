"""TFMA's plot combiners from whole columns (the pictures' numbers; docs/trust.md).

A binary model's plots (ConfusionMatrixPlot: ROC and precision-recall; CalibrationPlot)
are derived by TFMA from a calibration histogram, which `metrics` fills already. A
multiclass model's MultiClassConfusionMatrixPlot has a combiner of its own,
`_MultiClassConfusionMatrixCombiner`, filled here: per threshold, each example's
(actual class, argmax class) cell gains its weight, and an example whose top
prediction is at or below the threshold counts as "no class" (-1). The argmax is
numpy's (the first of tied classes), as TFMA's; once an example is "no class" it
stays so at the thresholds after (TFMA overwrites the predicted class in its loop).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tensorflow_model_analysis.metrics import metric_util
from tensorflow_model_analysis.metrics import multi_class_confusion_matrix_metrics as mcm

from compat import tfma as tfma_internals

MULTICLASS_CONFUSION = tfma_internals.MultiClassConfusionMatrixCombiner


def multiclass_refusal(combiner: Any) -> str | None:
    """Why `combiner` cannot be filled from columns, or None."""
    extract = combiner._extract_label_prediction_and_weight  # noqa: SLF001
    if extract is not metric_util.to_label_prediction_example_weight:
        return "a custom extraction"
    return None


def multiclass_confusion(combiner: Any, labels: np.ndarray, predictions: np.ndarray) -> dict:
    """`_MultiClassConfusionMatrixCombiner` over all examples at once: `labels` one
    class id per example, `predictions` (n, classes), every weight 1.0."""
    if predictions.ndim != 2 or predictions.shape[1] < 2:
        raise ValueError(
            "a multi-class confusion matrix needs one prediction per class, "
            f"not shape {predictions.shape}"
        )
    actual = labels.astype(np.int64)
    top = np.argmax(predictions, axis=1)
    top_score = predictions[np.arange(len(top)), top]
    dropped = np.zeros(len(top), bool)
    matrices = mcm.Matrices()
    for threshold in combiner._thresholds:  # noqa: SLF001
        dropped |= top_score <= threshold
        predicted = np.where(dropped, mcm.NO_PREDICTED_CLASS_ID, top)
        pairs, counts = np.unique(np.stack([actual, predicted], axis=1), axis=0, return_counts=True)
        matrices[threshold] = {
            mcm.MatrixEntryKey(int(a), int(p)): float(n)
            for (a, p), n in zip(pairs.tolist(), counts.tolist(), strict=True)
        }
    return combiner.extract_output(matrices)
