"""What every module of the fast Evaluator passes around: one model's labels and
predictions on some examples (a scored batch, or a slice's rows of it), and the
refusal that hands an evaluation to TFMA."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class Unsupported(Exception):
    """This evaluation needs something the fast path does not implement: use TFMA."""


@dataclass
class Columns:
    """One model's labels (one per example) and predictions (one per example, or one
    per class) on some evaluated examples, in float64, with the model's own dtypes
    (which Keras metrics compute in)."""

    labels: np.ndarray  # float64, shape (n,)
    predictions: np.ndarray  # float64, shape (n,) or (n, classes)
    label_dtype: np.dtype = np.dtype(np.float64)
    prediction_dtype: np.dtype = np.dtype(np.float64)


def subset(columns: Columns, rows: np.ndarray) -> Columns:
    """The columns of the examples at `rows` (one slice)."""
    return Columns(
        labels=columns.labels[rows],
        predictions=columns.predictions[rows],
        label_dtype=columns.label_dtype,
        prediction_dtype=columns.prediction_dtype,
    )
