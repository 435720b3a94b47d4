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


def _numbers(value, path: str = "") -> dict[str, object]:
    """A metric or plot value as {path: number or text}: protos (TFMA's plots) field by
    field, every repeated entry by its index."""
    from google.protobuf import json_format, message

    if isinstance(value, message.Message):
        value = json_format.MessageToDict(value, preserving_proto_field_name=True)
    if isinstance(value, dict):
        found: dict[str, object] = {}
        for k, v in value.items():
            found.update(_numbers(v, f"{path}.{k}"))
        return found
    if isinstance(value, list):
        found = {}
        for i, v in enumerate(value):
            found.update(_numbers(v, f"{path}[{i}]"))
        return found
    return {path: value}


def assert_same_results(ours: dict, expected: dict, abs_tol: float = 1e-9) -> None:
    """Every metric and plot of `expected` in `ours`, numbers to `abs_tol` (plots field
    by field: the counts of every confusion matrix, the sums of every bucket)."""
    import pytest

    assert ours.keys() == expected.keys()
    for key, value in expected.items():
        theirs, mine = _numbers(value), _numbers(ours[key])
        assert mine.keys() == theirs.keys(), key
        for path, number in theirs.items():
            if isinstance(number, (int, float)) and not isinstance(number, bool):
                assert mine[path] == pytest.approx(number, abs=abs_tol, nan_ok=True), (key, path)
            else:
                assert mine[path] == number, (key, path)
