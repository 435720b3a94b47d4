"""The Evaluator's executor: the fast path when it covers the evaluation, else TFX's own.

`Do` reads the eval config as TFX's executor does (defaults for a first run or a
baseline run, rubber stamp), then asks whether the fast path covers it: slicing by
features (single, crossed, bucketed: `slices`), no confidence intervals,
signature-based models taking serialized examples, and metrics whose combiners
`metrics.SUPPORTED_COMBINERS` fills (the binary confusion-matrix family: AUC,
accuracy, precision, recall, fall-out, miss rate ..., also per class of a multi-class
model; Keras metrics by name such as SparseCategoricalAccuracy and RMSE; mean
absolute and squared error; example count). Anything else — SQL or fixed-value
slicing, a custom eval shared model or extractors of a module's own, a Keras model's
compiled metrics, top-k or micro-averaged metrics, labels outside [0, 1] for a
binary metric — runs TFX's executor unchanged. Which path ran is logged.

The fast path writes its results through TFMA's own writers (metrics, plots,
attributions, validations, eval_config.json: the same files `tfma.load_metrics` and
`tfma.load_validation_result` read), validates with TFMA's own `validate_metrics`,
and blesses exactly as TFX's executor does.

The examples are scored and accumulated piece by piece (components/evaluation/fast/
pieces.py), the pieces merged in order. Under the project's Spark runner
(`--runner=beam_spark.SparkRunner`, `tfxp run --beam spark`) the pieces are scored and
accumulated in Spark tasks (components/evaluation/fast/on_cluster.py) and merged in one;
this executor then finishes and writes as in process. Under any other remote runner
TFX's executor runs.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
import tensorflow_model_analysis as tfma
from absl import logging
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from tensorflow_model_analysis.evaluators import metrics_validator
from tensorflow_model_analysis.slicer import slicer_lib
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.components.util import udf_utils
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils, path_utils, proto_utils

from components.base.local_beam import cluster_runner, runner_refusal
from components.evaluation.fast import metrics, on_cluster, scoring, slices
from components.evaluation.fast.accumulators import SliceAccumulators
from components.evaluation.fast.columns import Columns, Unsupported
from components.evaluation.fast.pieces import Found, add_batch, file_found, merged
from components.example_gen.layout import layout_of
from components.io.pieces import example_files, pieces

FAST, TFMA = "fast", "tfma"
# The project's own extractors module (components/evaluation/extractors.py: TFMA's extractors
# minus unread features, plus slice buckets; no overall metric changes). Named, not
# imported: the sliced Evaluator's executor builds on this one, and that module
# imports the slicing rules (tests/unit/components/evaluation/fast/test_fast_eval.py checks the name).
OWN_EXTRACTORS_MODULE = "components.evaluation.extractors"


def fast_path_refusal(
    eval_config: tfma.EvalConfig, buckets: dict[str, tuple[float, ...]] | None = None
) -> str | None:
    """Why the fast path cannot evaluate `eval_config` (defaults applied), or None.
    `buckets`: the numeric features the project's extractors slice by bucket."""
    refusal = slices.slicing_refusal(eval_config, buckets or {})
    if refusal:
        return refusal
    options = eval_config.options
    if options.compute_confidence_intervals.value:
        return "confidence intervals"
    for spec in eval_config.model_specs:
        if spec.model_type != tfma.constants.TF_GENERIC:
            return (
                f"model type {spec.model_type or 'unset'!r} (only tf_generic: no compiled metrics)"
            )
    try:
        metrics.computations(eval_config)
    except Unsupported as unsupported:
        return str(unsupported)
    return None


def _module_refusal(exec_properties: dict[str, Any]) -> str | None:
    """The Evaluator's module may only be components.evaluation.extractors (extractors that drop
    unread features, which change no metric)."""
    module_path, extra = udf_utils.decode_user_module_key(
        exec_properties.get(standard_component_specs.MODULE_PATH_KEY) or ""
    )
    if extra or exec_properties.get(standard_component_specs.MODULE_FILE_KEY):
        return "a module file or extra packages"
    if module_path not in (None, "", OWN_EXTRACTORS_MODULE):
        return f"the module {module_path!r}"
    return None


class Executor(tfx_evaluator.Executor):
    """TFX's Evaluator executor with the fast path in front of it."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # TFX's name
        started = time.perf_counter()
        # On the project's Spark runner the fast path runs as a Beam pipeline there.
        on_spark = cluster_runner(self._beam_pipeline_args)
        refusal = (
            (None if on_spark else runner_refusal(self._beam_pipeline_args, single_process=False))
            or _module_refusal(exec_properties)
            or _inputs_refusal(input_dict, exec_properties)
        )
        eval_config = None
        buckets = self._buckets(exec_properties)
        if refusal is None:
            eval_config = _eval_config(input_dict, exec_properties)
            refusal = fast_path_refusal(eval_config, buckets)
        if refusal is None:
            try:
                self._fast(input_dict, output_dict, exec_properties, eval_config, buckets, on_spark)
            except Unsupported as unsupported:
                refusal = str(unsupported)
            else:
                logging.info(
                    "Evaluator: fast path%s, %.1f s",
                    " (its Beam pipeline on the cluster)" if on_spark else "",
                    time.perf_counter() - started,
                )
                return
        logging.info("Evaluator: TFMA path (fast path does not cover: %s)", refusal)
        super().Do(input_dict, output_dict, exec_properties)

    def slice_buckets(self, exec_properties) -> dict[str, tuple[float, ...]]:
        """Numeric features the project's extractors slice by bucket (the sliced
        Evaluator's executor names them; none here)."""
        del exec_properties
        return {}

    def _buckets(self, exec_properties) -> dict[str, tuple[float, ...]]:
        """The bucketed features, when the project's extractors (which add them) run."""
        module_path, _ = udf_utils.decode_user_module_key(
            exec_properties.get(standard_component_specs.MODULE_PATH_KEY)
        )
        own = module_path == OWN_EXTRACTORS_MODULE
        return dict(self.slice_buckets(exec_properties)) if own else {}

    def _fast(
        self, input_dict, output_dict, exec_properties, eval_config, buckets, on_spark: bool
    ) -> None:
        output_uri = artifact_utils.get_single_uri(
            output_dict[standard_component_specs.EVALUATION_KEY]
        )
        scorers, shared_models, model_paths = [], [], []
        for spec in eval_config.model_specs:
            key = (
                standard_component_specs.BASELINE_MODEL_KEY
                if spec.is_baseline
                else standard_component_specs.MODEL_KEY
            )
            artifact = artifact_utils.get_single_instance(input_dict[key])
            path = path_utils.serving_model_path(
                artifact.uri, path_utils.is_old_model_artifact(artifact)
            )
            # Loaded here on the cluster too: what the fast path refuses is found first.
            scorers.append(scoring.ModelScorer(spec, path))
            model_paths.append(path)
            shared_models.append(
                tfma.default_eval_shared_model(
                    eval_saved_model_path=path, model_name=spec.name, eval_config=eval_config
                )
            )
        splits = json_utils.loads(
            exec_properties.get(standard_component_specs.EXAMPLE_SPLITS_KEY, "null")
        ) or ["eval"]
        examples = input_dict[standard_component_specs.EXAMPLES_KEY]
        uris = [u for split in splits for u in artifact_utils.get_split_uris(examples, split)]
        files, compression = example_files(uris, Unsupported)
        layout = layout_of(examples[0]) if len(examples) == 1 else None
        features = slices.SliceFeatures(eval_config, buckets, layout)
        split_pieces = pieces(files, compression)
        if on_spark:
            found = on_cluster.evaluate_pieces(
                self._make_beam_pipeline(),
                split_pieces,
                eval_config,
                model_paths,
                buckets,
                layout,
                self._get_tmp_dir(),
            )
        else:
            computations = metrics.computations(eval_config)
            found = merged(
                each
                for _, file_pieces in itertools.groupby(split_pieces, key=lambda p: p.files)
                for each in file_found(scorers, features, computations, list(file_pieces))
            )
        transformed = features.names & found.transformed
        if transformed:
            # TFMA's slicer reads a transformed feature before the raw one of that name.
            raise Unsupported(f"slicing by transformed features {sorted(transformed)}")
        evaluated = finish(eval_config, found.slices, features.ordered)
        write_results(output_uri, eval_config, shared_models, evaluated)
        _bless(input_dict, output_dict, exec_properties, eval_config, output_uri)


def _inputs_refusal(input_dict, exec_properties) -> str | None:
    if not exec_properties.get(standard_component_specs.EVAL_CONFIG_KEY):
        return "no eval_config (the legacy feature_slicing_spec)"
    if standard_component_specs.MODEL_KEY not in input_dict:
        return "no model (predictions read from the examples)"
    if input_dict.get(standard_component_specs.SCHEMA_KEY):
        return "a schema (TFMA then reads Arrow batches)"
    if udf_utils.try_get_fn(exec_properties=exec_properties, fn_name="custom_eval_shared_model"):
        return "a custom eval shared model"
    return None


def _eval_config(input_dict, exec_properties) -> tfma.EvalConfig:
    """The eval config with defaults, as TFX's executor prepares it."""
    eval_config = tfma.EvalConfig()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.EVAL_CONFIG_KEY], eval_config
    )
    has_baseline = bool(input_dict.get(standard_component_specs.BASELINE_MODEL_KEY))
    eval_config = tfma.utils.update_eval_config_with_defaults(
        eval_config, has_baseline=has_baseline, rubber_stamp=True
    )
    tfma.utils.verify_eval_config(eval_config)
    return eval_config


@dataclass
class Evaluated:
    """Every slice's (slice_key, metrics, plots and attributions) and its example count."""

    sliced: list[tuple[tuple, dict]]
    counts: dict[tuple, int]


def evaluate(
    eval_config,
    batches: Iterable[tuple[dict[str, Columns], dict[tuple, np.ndarray]]],
    ordered: Callable[[Iterable[tuple]], list[tuple]] = sorted,
) -> Evaluated:
    """TFMA's metrics of every slice, its combiners fed one batch at a time. Each of
    `batches` is every model's columns on some examples and their slices (slice key ->
    the rows of the batch in that slice); only the slices' accumulators outlive a
    batch. `ordered` puts the slice keys in the order they are written."""
    computations = metrics.computations(eval_config)
    found = Found()
    for batch in batches:
        add_batch(found, computations, batch)
    return finish(eval_config, found.slices, ordered)


def finish(
    eval_config,
    found: dict[tuple, SliceAccumulators],
    ordered: Callable[[Iterable[tuple]], list[tuple]] = sorted,
) -> Evaluated:
    """Every slice's metrics from its accumulators, the slices in `ordered` order."""
    if not found:
        raise Unsupported("no example in any slice")
    computations = metrics.computations(eval_config)
    baseline = tfma.utils.get_baseline_model_spec(eval_config)
    baseline_name = baseline.name if baseline else None
    keys = ordered(found)
    sliced = [metrics.finish(computations, found[k].results(), baseline_name, k) for k in keys]
    return Evaluated(sliced, {key: found[key].examples for key in keys})


def write_results(output_uri: str, eval_config, shared_models: list, evaluated: Evaluated) -> None:
    """Metrics, plots, attributions, validations and the config through TFMA's own
    transforms and writers: small slices dropped (FilterOutSlices), metrics split from
    plots, each slice validated by metrics_validator, then written."""
    eval_shared_model = shared_models[0] if len(shared_models) == 1 else shared_models
    writers = tfma.default_writers(
        output_path=output_uri, eval_shared_model=eval_shared_model, eval_config=eval_config
    )
    min_slice_size = eval_config.options.min_slice_size.value
    # A local in-memory pipeline: a record per slice, no worker processes to start.
    with beam.Pipeline(runner=FnApiRunner()) as pipeline:
        sliced = pipeline | "CreateSlices" >> beam.Create(evaluated.sliced)
        if min_slice_size > 1:
            counts = pipeline | "CreateCounts" >> beam.Create(list(evaluated.counts.items()))
            sliced = sliced | "FilterSmallSlices" >> slicer_lib.FilterOutSlices(
                counts, min_slice_size
            )
        evaluation = {
            key: sliced | f"Filter{key}" >> beam.Map(lambda s, k=key: metrics.split_by_kind(s)[k])
            for key in ("metrics", "plots", "attributions")
        }
        evaluation[tfma.constants.VALIDATIONS_KEY] = evaluation[
            "metrics"
        ] | "ValidateMetrics" >> beam.Map(metrics_validator.validate_metrics, eval_config)
        for writer in writers:
            _ = evaluation | writer.stage_name >> writer.ptransform


def _bless(input_dict, output_dict, exec_properties, eval_config, output_uri: str) -> None:
    """TFX's executor's blessing, verbatim in effect (tfx/components/evaluator/executor.py)."""
    constants = tfx_evaluator.constants
    if not tfma.metrics.metric_thresholds_from_metrics_specs(
        eval_config.metrics_specs, eval_config=eval_config
    ):
        logging.info("No threshold configured, will not validate model.")
        return
    model = input_dict[standard_component_specs.MODEL_KEY][0]
    blessing = artifact_utils.get_single_instance(
        output_dict[standard_component_specs.BLESSING_KEY]
    )
    blessing.set_string_custom_property(
        constants.ARTIFACT_PROPERTY_CURRENT_MODEL_URI_KEY, model.uri
    )
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY, model.id)
    if input_dict.get(standard_component_specs.BASELINE_MODEL_KEY):
        baseline = input_dict[standard_component_specs.BASELINE_MODEL_KEY][0]
        blessing.set_string_custom_property(
            constants.ARTIFACT_PROPERTY_BASELINE_MODEL_URI_KEY, baseline.uri
        )
        blessing.set_int_custom_property(
            constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY, baseline.id
        )
    if "current_component_id" in exec_properties:
        blessing.set_string_custom_property("component_id", exec_properties["current_component_id"])
    ok = tfma.load_validation_result(output_uri).validation_ok
    name = constants.BLESSED_FILE_NAME if ok else constants.NOT_BLESSED_FILE_NAME
    io_utils.write_string_file(os.path.join(blessing.uri, name), "")
    blessing.set_int_custom_property(
        constants.ARTIFACT_PROPERTY_BLESSED_KEY,
        constants.BLESSED_VALUE if ok else constants.NOT_BLESSED_VALUE,
    )
    logging.info("Blessing result %s written to %s.", ok, blessing.uri)
