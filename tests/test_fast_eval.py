"""components.fast_eval: which evaluations the fast path takes, and its combiners on known columns."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow_model_analysis as tfma

from components.fast_eval import executor, metrics
from pipeline.datasets import dataset_config
from pipeline.definition import eval_config


def _unsliced_taxi():
    """Taxi without its slicing: the fast path covers the overall slice only."""
    return dataset_config("taxi").replace(slicing=None)


def _defaults(config: tfma.EvalConfig, baseline: bool = False) -> tfma.EvalConfig:
    # As TFX's Evaluator executor prepares it.
    return tfma.utils.update_eval_config_with_defaults(
        config, has_baseline=baseline, rubber_stamp=True
    )


@pytest.mark.parametrize("baseline", [False, True])
def test_taxi_evaluation_takes_the_fast_path(baseline):
    assert executor.fast_path_refusal(_defaults(eval_config(_unsliced_taxi()), baseline)) is None


def test_feature_slices_and_other_metrics_go_to_tfma():
    sliced = eval_config(_unsliced_taxi())
    sliced.slicing_specs.append(tfma.SlicingSpec(feature_keys=["trip_start_hour"]))
    assert "slicing" in executor.fast_path_refusal(_defaults(sliced))
    crossed = eval_config(_unsliced_taxi())
    crossed.cross_slicing_specs.append(tfma.CrossSlicingSpec())
    assert "cross slicing" in executor.fast_path_refusal(_defaults(crossed))
    intervals = eval_config(_unsliced_taxi())
    intervals.options.compute_confidence_intervals.value = True
    assert "confidence" in executor.fast_path_refusal(_defaults(intervals))
    unsliced_digits = dataset_config("digits").replace(slicing=None)
    digits = executor.fast_path_refusal(_defaults(eval_config(unsliced_digits)))
    assert digits is not None and "combiner" in digits


def test_combiners_from_columns_match_tfma_one_example_at_a_time():
    """The vectorised fill against TFMA's own combiners fed example by example."""
    config = _defaults(eval_config(_unsliced_taxi()))
    separated = metrics.computations(config)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500).astype(np.float64)
    predictions = np.clip(rng.random(500) + np.where(labels > 0, 0.2, -0.2), 0, 1)
    predictions[:3] = [0.5, 0.0, 1.0]  # on the threshold and both edges
    ours = metrics.sliced_results(separated, {"": metrics.Columns(labels, predictions)}, None)

    results = {}
    for c in separated.non_derived_computations:
        accumulator = c.combiner.create_accumulator()
        for label, prediction in zip(labels, predictions, strict=True):
            element = tfma.metrics.StandardMetricInputs(
                label=np.array([label]), prediction=np.array([prediction]), example_weight=None
            )
            accumulator = c.combiner.add_input(accumulator, element)
        results.update(c.combiner.extract_output(accumulator))
    for c in separated.derived_computations:
        results.update(c.result(results))
    expected = {k: v for k, v in results.items() if not k.name.startswith("_")}
    assert ours["metrics"][1].keys() == expected.keys()
    for key, value in expected.items():
        assert ours["metrics"][1][key] == pytest.approx(value, abs=1e-9), key


def test_labels_outside_zero_one_are_refused():
    separated = metrics.computations(_defaults(eval_config(_unsliced_taxi())))
    columns = metrics.Columns(np.array([0.0, 2.0]), np.array([0.1, 0.9]))
    with pytest.raises(metrics.Unsupported, match="labels outside"):
        metrics.sliced_results(separated, {"": columns}, None)


def test_fast_paths_run_only_where_beam_runs_here():
    from components.local_beam import runner_refusal

    in_process = ["--runner=FnApiRunner", "--setup_file=setup.py"]
    multi = [*in_process, "--direct_running_mode=multi_processing", "--direct_num_workers=0"]
    assert runner_refusal([], single_process=True) is None
    assert runner_refusal(in_process, single_process=True) is None
    assert runner_refusal(multi, single_process=False) is None
    assert "worker processes" in runner_refusal(multi, single_process=True)
    # A per-component override back to in-process (later flags win).
    assert runner_refusal([*multi, "--direct_running_mode=in_memory"], single_process=True) is None
    assert "DataflowRunner" in runner_refusal(["--runner=DataflowRunner"], single_process=False)


def test_the_own_extractors_module_is_named_as_the_evaluator_passes_it():
    from components import evaluation
    from components.fast_eval import executor

    assert executor.OWN_EXTRACTORS_MODULE == evaluation.MODULE_PATH
