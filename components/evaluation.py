"""The Evaluator's extractors: TFMA's own, without per-example copies of features no metric reads.

TFMA computes metrics one example at a time. After the model's batched
predictions, its UnbatchExtractor splits every batch into one dict per example,
holding every key of the batch: the raw features and the transformed features
(17 of each on taxi, 784 pixels a digit) as well as the labels, predictions and
example weights the metrics read. Those three are keys of their own by then
(TFMA's extractors ran before the split). When nothing downstream reads the
features (slicing on the whole dataset only, no ranking query, no metric from
a module of its own), they are dropped from each batch before the split.

Measured on 100k taxi rows, candidate and baseline, in-process, alternating
runs: the Evaluator took 30.8 / 31.5 s with TFMA's extractors and 25.2 / 25.0 s
with these, with the same metrics.

TFX's Evaluator calls `custom_extractors` from its `module_path`
(pipeline/definition.py); the function must keep this name and signature.
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.extractors import unbatch_extractor

MODULE_PATH = __name__
DROP_FEATURES_STAGE = "DropUnreadFeatures"
FEATURE_KEYS = (tfma.constants.FEATURES_KEY, tfma.constants.TRANSFORMED_FEATURES_KEY)


def reads_features(eval_config: tfma.EvalConfig) -> bool:
    """Whether evaluating `eval_config` may read an example's features after the
    model's predictions: slicing by a feature, a ranking query, or a metric from a
    module of its own (which may read anything)."""
    if eval_config.cross_slicing_specs or any(
        s.feature_keys or s.feature_values or s.slice_keys_sql for s in eval_config.slicing_specs
    ):
        return True
    return any(
        spec.query_key or any(metric.module for metric in spec.metrics)
        for spec in eval_config.metrics_specs
    )


def _without_features(batch: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in batch.items() if key not in FEATURE_KEYS}


def custom_extractors(
    eval_shared_model: Any, eval_config: tfma.EvalConfig, tensor_adapter_config: Any
) -> list[tfma.extractors.Extractor]:
    """TFMA's default extractors for this evaluation, the features dropped before
    the per-example split when `reads_features(eval_config)` is false."""
    extractors = tfma.default_extractors(
        eval_shared_model=eval_shared_model,
        eval_config=eval_config,
        tensor_adapter_config=tensor_adapter_config,
    )
    if reads_features(eval_config):
        return extractors
    stages = [e.stage_name for e in extractors]
    if unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME not in stages:
        return extractors  # a TFMA without the split: nothing to save
    drop = tfma.extractors.Extractor(
        stage_name=DROP_FEATURES_STAGE,
        ptransform=beam.Map(_without_features).with_input_types(Any).with_output_types(Any),
    )
    extractors.insert(stages.index(unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME), drop)
    return extractors
