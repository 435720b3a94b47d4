"""The tests' assertions that the Evaluator's fast path and TFMA agree on the same inputs.

Runs come from benchmarks/support/evaluator_runs.py (shared with the benchmarks).
"""

from __future__ import annotations

from pathlib import Path

from evaluator_runs import file_names, metric_values, plot_values, run_executor, validation_result


def fast_and_tfma(inputs, properties, out: Path, caplog) -> tuple[tuple, tuple]:
    """The sliced Evaluator's executor (which must take the fast path) and its TFMA-only
    twin on the same inputs: ((uri, blessing), (uri, blessing))."""
    import logging

    from components.evaluation.slicing import evaluator as sliced

    with caplog.at_level(logging.INFO):
        ours = run_executor(sliced.Executor, inputs, properties, out / "o")
        assert "Evaluator: fast path" in caplog.text
        theirs = run_executor(sliced.TfmaExecutor, inputs, properties, out / "t")
        assert (
            "Evaluator: TFMA path (fast path does not cover: the fast path is turned off"
            in caplog.text
        )
    return ours, theirs


def assert_same_evaluation(ours: tuple, theirs: tuple) -> dict:
    """Every metric and plot of every slice to 1e-6 (TFMA's error records verbatim; a
    plot's every count and sum), the same validation result, blessing, blessing message
    and files. Returns our metrics."""
    import pytest

    from components.evaluation.slicing import evaluator as sliced

    (ours_uri, ours_blessing), (tfma_uri, tfma_blessing) = ours, theirs
    values, expected = metric_values(ours_uri), metric_values(tfma_uri)
    assert values.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, float):
            assert values[key] == pytest.approx(value, abs=1e-6, nan_ok=True), key
        else:
            assert values[key] == value, key
    # Regression too: predicted against actual and the residual histogram.
    plots, expected_plots = plot_values(ours_uri), plot_values(tfma_uri)
    assert plots.keys() == expected_plots.keys()
    for key, value in expected_plots.items():
        if isinstance(value, (int, float)):
            # Sums of predictions: each a float32 the model computed in the path's own
            # batches (TFMA sizes its by time), which can differ in the last bit; at a
            # regression's scale (a prediction of 150: an ulp is 1.5e-5) that is
            # relative. Counts and label sums stay to 1e-6.
            rel = 1e-6 if key[2].endswith("totalWeightedRefinedPrediction") else None
            assert plots[key] == pytest.approx(value, rel=rel, abs=1e-6, nan_ok=True), key
        else:
            assert plots[key] == value, key
    assert str(validation_result(ours_uri)) == str(validation_result(tfma_uri))
    for name in ("blessed", sliced.MESSAGE_PROPERTY):
        assert ours_blessing.get_custom_property(name) == tfma_blessing.get_custom_property(name)
    assert file_names(ours_blessing.uri) == file_names(tfma_blessing.uri)
    assert file_names(ours_uri) == file_names(tfma_uri)
    return values
