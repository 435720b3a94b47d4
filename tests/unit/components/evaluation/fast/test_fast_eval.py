"""components.evaluation.fast: which evaluations the fast path takes, and its combiners on known columns."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfma_reference import assert_same_results, tfma_one_at_a_time

from components.evaluation.fast import executor, metrics
from components.evaluation.fast.columns import Columns, Unsupported
from components.evaluation.regression_plots import with_label_ranges
from pipeline.datasets import dataset_config
from pipeline.eval_config import eval_config


def _unsliced_taxi():
    """Taxi without its slicing: the whole split only."""
    return dataset_config("taxi").replace(slicing=None)


def _defaults(config: tfma.EvalConfig, baseline: bool = False) -> tfma.EvalConfig:
    # As TFX's Evaluator executor prepares it.
    return tfma.utils.update_eval_config_with_defaults(
        config, has_baseline=baseline, rubber_stamp=True
    )


TAXI_BUCKETS = {"trip_miles": (1.0, 3.0, 10.0)}


@pytest.mark.parametrize("baseline", [False, True])
@pytest.mark.parametrize("sliced", [False, True])
def test_taxi_evaluation_takes_the_fast_path(baseline, sliced):
    config = dataset_config("taxi") if sliced else _unsliced_taxi()
    refusal = executor.fast_path_refusal(_defaults(eval_config(config), baseline), TAXI_BUCKETS)
    assert refusal is None


def test_slicing_the_fast_path_does_not_compute_goes_to_tfma():
    for spec, words in [
        (tfma.SlicingSpec(feature_values={"payment_type": "Cash"}), "feature values"),
        (tfma.SlicingSpec(slice_keys_sql="SELECT STRUCT(a) FROM example"), "SQL"),
        (tfma.SlicingSpec(feature_keys=["fare", "fare"]), "twice"),
        (tfma.SlicingSpec(feature_keys=["fare_bucket"]), "without buckets"),
    ]:
        config = eval_config(_unsliced_taxi())
        config.slicing_specs.append(spec)
        assert words in executor.fast_path_refusal(_defaults(config), TAXI_BUCKETS)
    small = eval_config(dataset_config("taxi"))
    small.options.min_slice_size.value = 50  # TFMA's filter runs on the fast path too
    assert executor.fast_path_refusal(_defaults(small), TAXI_BUCKETS) is None


def test_other_metrics_and_options_go_to_tfma():
    crossed = eval_config(_unsliced_taxi())
    crossed.cross_slicing_specs.append(tfma.CrossSlicingSpec())
    assert "cross slicing" in executor.fast_path_refusal(_defaults(crossed))
    intervals = eval_config(_unsliced_taxi())
    intervals.options.compute_confidence_intervals.value = True
    assert "confidence" in executor.fast_path_refusal(_defaults(intervals))
    top_k = eval_config(dataset_config("digits"))
    binarized = next(spec for spec in top_k.metrics_specs if spec.HasField("binarize"))
    binarized.binarize.CopyFrom(tfma.BinarizationOptions(top_k_list={"values": [2]}))
    assert "top-k" in executor.fast_path_refusal(_defaults(top_k))


@pytest.mark.parametrize("baseline", [False, True])
@pytest.mark.parametrize("sliced", [False, True])
def test_digits_evaluation_takes_the_fast_path(baseline, sliced):
    config = dataset_config("digits")
    config = config if sliced else config.replace(slicing=None)
    assert executor.fast_path_refusal(_defaults(eval_config(config), baseline)) is None


def test_combiners_from_columns_match_tfma_one_example_at_a_time():
    """The vectorised fill against TFMA's own combiners fed example by example."""
    config = _defaults(eval_config(_unsliced_taxi()))
    separated = metrics.computations(config)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500).astype(np.float64)
    predictions = np.clip(rng.random(500) + np.where(labels > 0, 0.2, -0.2), 0, 1)
    predictions[:3] = [0.5, 0.0, 1.0]  # on the threshold and both edges
    ours = metrics.sliced_results(separated, {"": Columns(labels, predictions)}, None)
    expected = tfma_one_at_a_time(separated, labels, predictions)
    plots = {k for k in expected if isinstance(k, tfma.metrics.PlotKey)}
    assert {k.name for k in plots} == {"confusion_matrix_plot", "calibration_plot"}
    assert ours["plots"][1].keys() == plots
    assert_same_results({**ours["metrics"][1], **ours["plots"][1]}, expected)


def _ours_and_tfma(config, labels: np.ndarray, predictions: np.ndarray) -> tuple[dict, dict]:
    """The fast path's overall metrics (float64 columns, the inputs' dtypes recorded) and
    TFMA's own combiners' on the same float32 labels and predictions."""
    columns = Columns(
        labels.astype(np.float64),
        predictions.astype(np.float64),
        label_dtype=labels.dtype,
        prediction_dtype=predictions.dtype,
    )
    ours = metrics.sliced_results(metrics.computations(config), {"": columns}, None)
    metric_keys = ours["metrics"][1].keys()
    expected = tfma_one_at_a_time(metrics.computations(config), labels, predictions)
    assert_same_results({**ours["metrics"][1], **ours["plots"][1]}, expected, abs_tol=1e-6)
    return ours["metrics"][1], {k: v for k, v in expected.items() if k in metric_keys}


def test_multiclass_combiners_match_tfma_one_example_at_a_time():
    """Digits' metrics (a Keras SparseCategoricalAccuracy; fall-out and miss rate per
    class, binarized by class_id) from columns, against TFMA's combiners fed example by
    example, over more examples than one of TFMA's Keras batches."""
    config = _defaults(eval_config(dataset_config("digits")))
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 10, 2300)
    scores = rng.random((2300, 10)).astype(np.float32)
    scores[np.arange(2300), labels] += rng.random(2300).astype(np.float32)  # mostly right
    predictions = (scores / scores.sum(axis=1, keepdims=True)).astype(np.float32)
    predictions[:2] = 0.1  # all classes tied (argmax: the first)
    ours, expected = _ours_and_tfma(config, labels, predictions)
    assert ours.keys() == expected.keys()
    assert {k.name for k in ours} == {
        "example_count",
        "sparse_categorical_accuracy",
        "fall_out",
        "miss_rate",
    }
    assert len(ours) == 2 + 2 * 10  # a fall-out and miss rate per class
    for key, value in expected.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key


def test_multiclass_confusion_matrix_plot_matches_tfma_at_thresholds():
    """Digits' confusion matrix plot (argmax, ties to the first class) and the same plot
    at thresholds, where a top score at or below the threshold is "no class" (-1):
    cell by cell against TFMA's combiner fed example by example."""
    config = eval_config(dataset_config("digits"))
    # TFMA keys the matrices by name alone: one multi-class plot per config.
    (plot_spec,) = (s for s in config.metrics_specs if "Plot" in s.metrics[0].class_name)
    plot_spec.metrics.add(
        class_name="MultiClassConfusionMatrixPlot",
        config='"thresholds": [0.125, 0.15, 0.3], "name": "at_thresholds"',
    )
    del plot_spec.metrics[0]
    config = _defaults(config)
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 10, 700)
    scores = rng.random((700, 10)).astype(np.float32)
    scores[np.arange(700), labels] += rng.random(700).astype(np.float32) * 2
    predictions = (scores / scores.sum(axis=1, keepdims=True)).astype(np.float32)
    predictions[:2] = 0.1  # tied: class 0, and under every threshold
    predictions[2] = [0.125] * 8 + [0.0, 0.0]  # at the first threshold exactly (float32)
    ours = metrics.sliced_results(
        metrics.computations(config),
        {"": Columns(labels.astype(np.float64), predictions.astype(np.float64))},
        None,
    )["plots"][1]
    assert {k.name for k in ours} == {"at_thresholds"}
    (at_thresholds,) = ours.values()
    assert [m.threshold for m in at_thresholds.matrices] == [0.125, 0.15, 0.3]
    no_class = [
        sum(e.num_weighted_examples for e in m.entries if e.predicted_class_id == -1)
        for m in at_thresholds.matrices
    ]
    assert no_class[0] > 0 and no_class == sorted(no_class)  # some dropped, more as it rises
    expected = tfma_one_at_a_time(metrics.computations(config), labels, predictions)
    assert_same_results(ours, {k: v for k, v in expected.items() if k in ours})


def _regression_config(labels: np.ndarray) -> tfma.EvalConfig:
    """Taxi's config made a regression's (RMSE ceiling, MAE and MSE), its plots ranged
    by `labels` as the Evaluator ranges them from the eval split."""
    from pipeline.config import EvalThresholds

    thresholds = EvalThresholds(
        metric="RootMeanSquaredError",
        lower_bound=None,
        upper_bound=100.0,
        extra_metrics=("MeanAbsoluteError", "MeanSquaredError"),
    )
    config = eval_config(_unsliced_taxi().replace(thresholds=thresholds))
    ranged = with_label_ranges(json_format.MessageToJson(config), labels)
    return _defaults(json_format.Parse(ranged, tfma.EvalConfig()))


def _regression_rows(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    labels = (rng.random(n) * 300).astype(np.float32)
    predictions = (labels + rng.normal(0, 40, n)).astype(np.float32)
    return labels, predictions


def test_regression_metrics_match_tfma_one_example_at_a_time():
    """RMSE (a Keras metric) and TFMA's MeanAbsoluteError and MeanSquaredError from
    float32 columns, against TFMA's combiners fed example by example."""
    labels, predictions = _regression_rows(2300)
    config = _regression_config(labels)
    ours, expected = _ours_and_tfma(config, labels, predictions)
    assert {k.name for k in ours} == {
        "example_count",
        "root_mean_squared_error",
        "mean_absolute_error",
        "mean_squared_error",
    }
    assert ours.keys() == expected.keys()
    for key, value in expected.items():
        assert ours[key] == pytest.approx(value, rel=1e-9), key


def test_regression_plots_match_tfma_and_numpy():
    """Predicted against actual (TFMA's CalibrationPlot over the labels' range) and the
    residual histogram, from columns, against TFMA's combiners fed example by example
    (to 1e-6, `_ours_and_tfma`); the residual counts also against numpy's histogram of
    label - prediction over the same bins (TFMA has no residual histogram of its own)."""
    labels, predictions = _regression_rows(1500)
    predictions[:2] = labels[:2] + [2000.0, -2000.0]  # beyond the bins: the end buckets
    config = _regression_config(labels)
    _ours_and_tfma(config, labels, predictions)
    columns = Columns(labels.astype(np.float64), predictions.astype(np.float64))
    plots = metrics.sliced_results(metrics.computations(config), {"": columns}, None)["plots"][1]
    by_name = {k.name: v for k, v in plots.items()}
    assert set(by_name) == {"calibration_plot", "residual_histogram"}
    calibration = by_name["calibration_plot"].buckets
    assert sum(b.num_weighted_examples.value for b in calibration) == 1500
    # Ranged by the labels: the buckets between the smallest and the largest.
    assert calibration[1].lower_threshold_inclusive == pytest.approx(labels.min())
    assert calibration[-1].lower_threshold_inclusive == pytest.approx(labels.max())
    residuals = by_name["residual_histogram"].buckets
    assert len(residuals) == 77 + 2  # 2 * sqrt(1500) bins, and one beyond either end
    edges = [b.lower_threshold_inclusive for b in residuals[1:]]  # the last: the top's end
    assert edges[0] == pytest.approx(-4 * labels.astype(np.float64).std())
    counts = [b.num_weighted_examples.value for b in residuals]
    difference = labels.astype(np.float64) - predictions.astype(np.float64)
    expected, _ = np.histogram(difference, bins=np.array(edges))
    assert counts[1:-1] == pytest.approx(expected.tolist(), abs=1e-6)
    assert (counts[0], counts[-1]) == (1, 1)
    assert sum(counts) == 1500


def test_a_binary_metric_of_a_multiclass_model_without_class_id_is_refused():
    """TFMA would flatten the classes into examples of their own (a micro average)."""
    separated = metrics.computations(_defaults(eval_config(_unsliced_taxi())))
    columns = Columns(np.array([0.0, 1.0]), np.array([[0.9, 0.1], [0.2, 0.8]]))
    with pytest.raises(Unsupported, match="without a class_id"):
        metrics.sliced_results(separated, {"": columns}, None)


def test_the_prediction_output_is_tfmas_choice():
    from components.evaluation.fast import scoring

    digits = {"class": None, "probabilities": None}  # the image model's outputs
    assert scoring.prediction_output(digits, "") == "probabilities"
    assert scoring.prediction_output(digits, "class") == "class"
    assert scoring.prediction_output({"logits": None, "scores": None}, "") == "scores"
    assert scoring.prediction_output({"anything": None}, "") == "anything"
    with pytest.raises(Unsupported, match="none of TFMA's common"):
        scoring.prediction_output({"class": None, "score": None}, "")
    with pytest.raises(Unsupported, match="no prediction output 'x'"):
        scoring.prediction_output(digits, "x")


def test_labels_outside_zero_one_are_refused():
    separated = metrics.computations(_defaults(eval_config(_unsliced_taxi())))
    columns = Columns(np.array([0.0, 2.0]), np.array([0.1, 0.9]))
    with pytest.raises(Unsupported, match="labels outside"):
        metrics.sliced_results(separated, {"": columns}, None)


def test_fast_paths_run_only_where_beam_runs_here():
    from components.base.local_beam import runner_refusal

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
    from components.evaluation import extractors as evaluation
    from components.evaluation.fast import executor

    assert executor.OWN_EXTRACTORS_MODULE == evaluation.MODULE_PATH


def _example(**features) -> bytes:
    import tensorflow as tf

    kinds = {bytes: "bytes_list", float: "float_list", int: "int64_list"}
    proto = tf.train.Example()
    for name, values in features.items():
        feature = proto.features.feature[name]
        if values:
            getattr(feature, kinds[type(values[0])]).value.extend(values)
    return proto.SerializeToString()


def _tfma_slice_rows(examples: list[bytes], config: tfma.EvalConfig, buckets) -> dict:
    """Slice key -> rows, by TFMA's own decoding, per-example split and slicer, with the
    project's bucket feature (components/evaluation/extractors.py), one example at a time."""
    from tensorflow_model_analysis.slicer import slicer_lib
    from tensorflow_model_analysis.utils import util
    from tfx_bsl.coders import example_coder

    from components.evaluation.extractors import add_buckets

    specs = [slicer_lib.SingleSliceSpec(spec=s) for s in config.slicing_specs]
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(examples)
    found: dict[tuple, list[int]] = {}
    per_example = util.split_extracts({"features": util.record_batch_to_tensor_values(batch)})
    for row, extracts in enumerate(per_example):
        features = add_buckets(extracts, buckets)["features"]
        for key in set(slicer_lib.get_slices_for_features_dicts([], features, specs)):
            found.setdefault(key, []).append(row)
    return found


def slicing_examples(n: int = 300) -> list[bytes]:
    """Examples with missing, absent and repeated values of the slicing features."""
    rng = np.random.default_rng(1)
    examples = []
    for i in range(n):
        kind = i % 7
        payment = [] if kind == 0 else [b"Cash"] if kind < 4 else [b"Card", b"Cash", b"Card"]
        miles = [] if kind == 1 else [float(rng.choice([0.5, 1.0, 2.5, 3.0, 12.25]))]
        if kind == 5:
            miles = [20.0, 0.5]  # the bucket is the first value's
        hour = [int(rng.integers(0, 3))] if kind != 2 else [1, 2]
        features = {"payment_type": payment, "trip_miles": miles, "hour": hour}
        if kind == 6:
            features.pop("payment_type")  # absent, not empty
        examples.append(_example(**features))
    return examples


# Single, bucketed, multi-valued and crossed slicing, for slicing_examples.
SLICING_SPECS = [
    tfma.SlicingSpec(),
    tfma.SlicingSpec(feature_keys=["payment_type"]),
    tfma.SlicingSpec(feature_keys=["trip_miles_bucket"]),
    tfma.SlicingSpec(feature_keys=["trip_miles"]),
    tfma.SlicingSpec(feature_keys=["payment_type", "hour"]),
    tfma.SlicingSpec(feature_keys=["trip_miles_bucket", "payment_type", "hour"]),
]


def test_slice_keys_match_tfmas_slicer_with_missing_and_multiple_values():
    import tensorflow as tf

    from components.evaluation.fast import slices

    examples = slicing_examples()
    config = tfma.EvalConfig(slicing_specs=SLICING_SPECS)
    expected = _tfma_slice_rows(examples, config, TAXI_BUCKETS)
    features = slices.SliceFeatures(config, TAXI_BUCKETS)
    for start in range(0, len(examples), 128):  # batches that split the kinds unevenly
        features.add(tf.constant(examples[start : start + 128]))
    ours = features.slices()
    assert ours.keys() == expected.keys()
    assert (("trip_miles_bucket", "missing"),) in ours and (
        ("hour", 2),
        ("payment_type", "Card"),
    ) in ours
    for key, rows in expected.items():
        assert ours[key].tolist() == rows, key
        assert [type(v) for _, v in key] == [type(v) for _, v in next(k for k in ours if k == key)]


def test_a_slicing_feature_of_two_types_goes_to_tfma():
    import tensorflow as tf

    from components.evaluation.fast import slices

    config = tfma.EvalConfig(slicing_specs=[tfma.SlicingSpec(feature_keys=["hour"])])
    features = slices.SliceFeatures(config, {})
    features.add(tf.constant([_example(hour=[1]), _example(hour=[])]))
    with pytest.raises(Unsupported, match="several types"):
        features.add(tf.constant([_example(hour=[1.5])]))  # decoded as ints after the first batch
