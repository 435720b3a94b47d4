"""TFMA's own metric computations run by hand: the reference the fast evaluator is held to."""

from __future__ import annotations

import numpy as np
import tensorflow_model_analysis as tfma


def tfma_one_at_a_time(separated, labels, predictions) -> dict:
    """TFMA's own combiners fed example by example, then its derived metrics."""
    results = {}
    for c in separated.non_derived_computations:
        if hasattr(c.combiner, "setup"):
            c.combiner.setup()
        accumulator = c.combiner.create_accumulator()
        for label, prediction in zip(labels, predictions, strict=True):
            element = tfma.metrics.StandardMetricInputs(
                label=np.array([label]), prediction=np.asarray(prediction), example_weight=None
            )
            accumulator = c.combiner.add_input(accumulator, element)
        results.update(c.combiner.extract_output(accumulator))
    for c in separated.derived_computations:
        results.update(c.result(results))
    return {k: v for k, v in results.items() if not k.name.startswith("_")}
