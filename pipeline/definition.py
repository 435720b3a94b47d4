"""The one definition of the pipeline. Every runner (local, Airflow, Kubeflow) calls it."""

from __future__ import annotations

import functools
from typing import Any

import tensorflow_model_analysis as tfma
from tfx.components import Evaluator, ExampleValidator, Pusher, StatisticsGen, Trainer, Transform
from tfx.dsl.components.base import executor_spec
from tfx.dsl.components.common.resolver import Resolver
from tfx.orchestration import metadata
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.proto import example_gen_pb2, pusher_pb2, range_config_pb2, trainer_pb2
from tfx.types import Channel, standard_artifacts

from components import atomic_pusher
from components.baseline_resolver import BaselineModelStrategy
from components.csv_example_gen import checked_csv_example_gen
from components.image_example_gen import image_example_gen
from components.schema_importer import (
    CuratedSchemaImporter,
    file_sha256,
    load_schema,
    schema_column_types,
)
from components.span_window import WINDOW_EXAMPLES_ID, SpanWindowExamples, SpanWindowStrategy
from components.validation_checks import load_settings
from components.validation_gate import (
    PreviousSpanStatisticsStrategy,
    ValidationGate,
    serving_data_sha256,
)
from pipeline.config import PipelineConfig
from pipeline.fingerprint import code_fingerprint
from pipeline.spans import input_pattern

# Node ids, in run order. Tests and the run summary refer to components by these.
EXAMPLE_GEN = "CsvExampleGen"
IMAGE_EXAMPLE_GEN = "ImageExampleGen"  # instead of EXAMPLE_GEN for image datasets
STATISTICS_GEN = "StatisticsGen"
SCHEMA_IMPORTER = "CuratedSchemaImporter"
EXAMPLE_VALIDATOR = "ExampleValidator"
# The drift baseline (previous span's statistics) and the gate that blocks Transform.
PREVIOUS_STATISTICS_RESOLVER = "previous_span_statistics_resolver"
VALIDATION_GATE = "ValidationGate"
TRANSFORM = "Transform"
TRAINER = "Trainer"
BASELINE_RESOLVER = "baseline_model_resolver"
# Only with a rolling window (config.window > 1): gathers the window's Examples.
SPAN_WINDOW_RESOLVER = "span_window_resolver"
SPAN_WINDOW_EXAMPLES = WINDOW_EXAMPLES_ID
EVALUATOR = "Evaluator"
PUSHER = "Pusher"


def example_gen_id(config: PipelineConfig) -> str:
    return IMAGE_EXAMPLE_GEN if config.example_gen == "image" else EXAMPLE_GEN


def _value_threshold(t) -> tfma.GenericValueThreshold:
    # A ceiling for error metrics (regression's RMSE), else a floor (accuracy, AUC).
    if t.upper_bound is not None:
        return tfma.GenericValueThreshold(upper_bound={"value": t.upper_bound})
    return tfma.GenericValueThreshold(lower_bound={"value": t.lower_bound})


def eval_config(config: PipelineConfig) -> tfma.EvalConfig:
    t = config.thresholds
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name=config.eval_signature,
                # Signature-based evaluation: TFMA loads the SavedModel's
                # signatures instead of rebuilding the Keras model layer by layer.
                model_type=tfma.constants.TF_GENERIC,
                label_key=config.transformed_label_key,
                preprocessing_function_names=["transform_features"],
            )
        ],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    *(tfma.MetricConfig(class_name=m) for m in t.extra_metrics),
                    tfma.MetricConfig(
                        class_name=t.metric,
                        threshold=tfma.MetricThreshold(
                            value_threshold=_value_threshold(t),
                            # Ignored on the first run, when no blessed baseline exists.
                            change_threshold=tfma.GenericChangeThreshold(
                                direction=tfma.MetricDirection.LOWER_IS_BETTER
                                if t.upper_bound is not None
                                else tfma.MetricDirection.HIGHER_IS_BETTER,
                                absolute={
                                    "value": -t.min_change
                                    if t.upper_bound is not None
                                    else t.min_change
                                },
                            ),
                        ),
                    ),
                ]
            )
        ],
    )


def create_pipeline(
    config: PipelineConfig, *, metadata_connection_config: Any | None = None
) -> tfx_pipeline.Pipeline:
    """Builds the TFX pipeline for `config`.

    Args:
      config: what to run on, where to write, and how to train.
      metadata_connection_config: an ML Metadata `ConnectionConfig` (e.g.
        MySQL); by default SQLite at `config.metadata_path`. Orchestrators that
        bring their own store (Kubeflow) ignore it.
    """
    schema = load_schema(config.schema_file)

    if config.example_gen not in ("csv", "image"):
        raise ValueError(f"example_gen must be 'csv' or 'image', not {config.example_gen!r}")
    if config.example_gen == "image" and config.image is None:
        raise ValueError("an image dataset needs `image` options (ImageOptions)")
    # The image options reach Transform and the Trainer through custom_config.
    image_config = {"image": config.image.to_dict()} if config.image else {}
    # So do a tabular dataset's feature treatments (the generic trainer, trainer/tabular).
    if config.tabular is not None:
        image_config["tabular"] = config.tabular.to_dict()
    make_example_gen = (
        functools.partial(
            image_example_gen,
            class_names=config.image.class_names,
            image_format=config.image.image_format,
            bad_images=config.image.bad_images,
            gzip_level=config.image.gzip_level,
        )
        if config.example_gen == "image"
        else functools.partial(
            checked_csv_example_gen,
            columns=schema_column_types(schema),
            csv_reader=config.csv_reader,
        )
    )
    example_gen = make_example_gen(
        input_base=config.data_root,
        input_config=example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name="single_split", pattern=input_pattern(config))]
        ),
        # Default (None): TFX's rolling range of one span, i.e. the latest span.
        range_config=(
            None
            if config.span is None
            else range_config_pb2.RangeConfig(
                static_range=range_config_pb2.StaticRange(
                    start_span_number=config.span, end_span_number=config.span
                )
            )
        ),
        version=config.version,
        num_shards=config.num_shards,
        output_config=example_gen_pb2.Output(
            split_config=example_gen_pb2.SplitConfig(
                splits=[
                    example_gen_pb2.SplitConfig.Split(
                        name="train", hash_buckets=config.train_eval_hash_buckets[0]
                    ),
                    example_gen_pb2.SplitConfig.Split(
                        name="eval", hash_buckets=config.train_eval_hash_buckets[1]
                    ),
                ]
            )
        ),
    )
    # What Transform (and so the Trainer) learns from: this run's span, or the
    # newest Examples of each span in the window. StatisticsGen, ExampleValidator
    # and the Evaluator look at this run's span only: the data that just arrived.
    training_examples = example_gen.outputs["examples"]
    window_nodes = []
    if config.window > 1:
        window_resolver = Resolver(
            strategy_class=SpanWindowStrategy,
            config={
                "num_spans": config.window,
                "end_span": -1 if config.span is None else config.span,
                "input_base": config.data_root,
            },
            # A free channel: every run's ExampleGen output, not only this run's.
            examples=Channel(
                type=standard_artifacts.Examples,
                producer_component_id=example_gen.id,
                output_key="examples",
            ),
        ).with_id(SPAN_WINDOW_RESOLVER)
        # After this run's ingestion, so the window includes it.
        window_resolver.add_upstream_node(example_gen)
        window_examples = SpanWindowExamples(examples=window_resolver.outputs["examples"]).with_id(
            SPAN_WINDOW_EXAMPLES
        )
        window_nodes = [window_resolver, window_examples]
        training_examples = window_examples.outputs["window"]
    schema_importer = CuratedSchemaImporter(
        schema_file=config.schema_file, content_sha256=file_sha256(config.schema_file)
    ).with_id(SCHEMA_IMPORTER)
    statistics_gen = StatisticsGen(
        examples=example_gen.outputs["examples"], schema=schema_importer.outputs["schema"]
    )
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_importer.outputs["schema"]
    )
    previous_statistics = Resolver(
        strategy_class=PreviousSpanStatisticsStrategy,
        config={"input_base": config.data_root},
        examples=example_gen.outputs["examples"],
        # A free channel: every run's StatisticsGen output, filtered to earlier spans.
        statistics=Channel(
            type=standard_artifacts.ExampleStatistics,
            producer_component_id=STATISTICS_GEN,
            output_key="statistics",
        ),
    ).with_id(PREVIOUS_STATISTICS_RESOLVER)
    validation_gate = ValidationGate(
        statistics=statistics_gen.outputs["statistics"],
        schema=schema_importer.outputs["schema"],
        baseline_statistics=previous_statistics.outputs["statistics"],
        examples=example_gen.outputs["examples"],
        baseline_examples=previous_statistics.outputs["examples"],
        settings=load_settings(config.validation_file).with_warn_only(config.warn_only),
        serving_data=config.serving_pattern,
        serving_sha256=serving_data_sha256(config.serving_pattern),
        report_dir=config.report_dir,
    ).with_id(VALIDATION_GATE)
    # After ExampleValidator too: its anomalies are recorded before a block ends the run.
    validation_gate.add_upstream_node(example_validator)
    transform = Transform(
        examples=training_examples,
        schema=schema_importer.outputs["schema"],
        preprocessing_fn=config.preprocessing_fn,
        # Pre/post-transform statistics double Transform's cost; StatisticsGen
        # already covers the raw data.
        disable_statistics=True,
        # No analyzer cache: it only pays off for incremental analysis over many
        # spans, and writing it costs Beam stages on every run.
        disable_analyzer_cache=True,
        force_tf_compat_v1=True,
        custom_config={
            "code_fingerprint": code_fingerprint(config.preprocessing_fn),
            **image_config,
        },
    )
    # Nothing trains on data the gate blocked: it raises, so Transform never starts.
    transform.add_upstream_node(validation_gate)
    trainer = Trainer(
        run_fn=config.run_fn,
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_importer.outputs["schema"],
        train_args=trainer_pb2.TrainArgs(num_steps=config.train_steps),
        eval_args=trainer_pb2.EvalArgs(num_steps=config.eval_steps),
        custom_config={
            "code_fingerprint": code_fingerprint(config.run_fn),
            "hyperparameters": dict(config.hyperparameters),
            **image_config,
        },
    )
    baseline_resolver = Resolver(
        strategy_class=BaselineModelStrategy,
        candidate=trainer.outputs["model"],
        model=Channel(type=standard_artifacts.Model),
        model_blessing=Channel(type=standard_artifacts.ModelBlessing),
    ).with_id(BASELINE_RESOLVER)
    evaluator = Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=baseline_resolver.outputs["model"],
        eval_config=eval_config(config),
    )
    pusher = Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=config.serving_dir)
        ),
        # Copy aside, then rename: servers never see a half-written version.
        custom_executor_spec=executor_spec.ExecutorClassSpec(atomic_pusher.Executor),
    )
    return tfx_pipeline.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.pipeline_root,
        components=[
            example_gen,
            *window_nodes,
            schema_importer,
            statistics_gen,
            example_validator,
            previous_statistics,
            validation_gate,
            transform,
            trainer,
            baseline_resolver,
            evaluator,
            pusher,
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config
        or metadata.sqlite_metadata_connection_config(config.metadata_path),
        beam_pipeline_args=list(config.beam_args),
    )
