"""The one definition of the pipeline. Every runner (local, Airflow, Kubeflow) calls it."""

from __future__ import annotations

from typing import Any

import tensorflow_model_analysis as tfma
from tfx import v1 as tfx

from components.baseline_resolver import BaselineModelStrategy
from components.csv_example_gen import checked_csv_example_gen
from components.schema_importer import (
    CuratedSchemaImporter,
    file_sha256,
    load_schema,
    schema_column_types,
)
from pipeline.config import PipelineConfig
from pipeline.fingerprint import code_fingerprint

# Node ids, in run order. Tests and the run summary refer to components by these.
EXAMPLE_GEN = "CsvExampleGen"
STATISTICS_GEN = "StatisticsGen"
SCHEMA_IMPORTER = "CuratedSchemaImporter"
EXAMPLE_VALIDATOR = "ExampleValidator"
TRANSFORM = "Transform"
TRAINER = "Trainer"
BASELINE_RESOLVER = "baseline_model_resolver"
EVALUATOR = "Evaluator"
PUSHER = "Pusher"


def eval_config(config: PipelineConfig) -> tfma.EvalConfig:
    t = config.thresholds
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name="serving_default",
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
                    tfma.MetricConfig(class_name="AUC"),
                    tfma.MetricConfig(
                        class_name=t.metric,
                        threshold=tfma.MetricThreshold(
                            value_threshold=tfma.GenericValueThreshold(
                                lower_bound={"value": t.lower_bound}
                            ),
                            # Ignored on the first run, when no blessed baseline exists.
                            change_threshold=tfma.GenericChangeThreshold(
                                direction=tfma.MetricDirection.HIGHER_IS_BETTER,
                                absolute={"value": t.min_change},
                            ),
                        ),
                    ),
                ]
            )
        ],
    )


def create_pipeline(
    config: PipelineConfig, *, metadata_connection_config: Any | None = None
) -> tfx.dsl.Pipeline:
    """Builds the TFX pipeline for `config`.

    Args:
      config: what to run on, where to write, and how to train.
      metadata_connection_config: an ML Metadata `ConnectionConfig` (e.g.
        MySQL); by default SQLite at `config.metadata_path`. Orchestrators that
        bring their own store (Kubeflow) ignore it.
    """
    schema = load_schema(config.schema_file)

    example_gen = checked_csv_example_gen(
        input_base=config.data_root,
        columns=schema_column_types(schema),
        input_config=tfx.proto.Input(
            splits=[tfx.proto.Input.Split(name="single_split", pattern=config.span_pattern)]
        ),
        output_config=tfx.proto.Output(
            split_config=tfx.proto.SplitConfig(
                splits=[
                    tfx.proto.SplitConfig.Split(
                        name="train", hash_buckets=config.train_eval_hash_buckets[0]
                    ),
                    tfx.proto.SplitConfig.Split(
                        name="eval", hash_buckets=config.train_eval_hash_buckets[1]
                    ),
                ]
            )
        ),
    )
    schema_importer = CuratedSchemaImporter(
        schema_file=config.schema_file, content_sha256=file_sha256(config.schema_file)
    ).with_id(SCHEMA_IMPORTER)
    statistics_gen = tfx.components.StatisticsGen(
        examples=example_gen.outputs["examples"], schema=schema_importer.outputs["schema"]
    )
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_importer.outputs["schema"]
    )
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_importer.outputs["schema"],
        preprocessing_fn=config.preprocessing_fn,
        # Pre/post-transform statistics double Transform's cost; StatisticsGen
        # already covers the raw data.
        disable_statistics=True,
        force_tf_compat_v1=True,
        custom_config={"code_fingerprint": code_fingerprint(config.preprocessing_fn)},
    )
    trainer = tfx.components.Trainer(
        run_fn=config.run_fn,
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_importer.outputs["schema"],
        train_args=tfx.proto.TrainArgs(num_steps=config.train_steps),
        eval_args=tfx.proto.EvalArgs(num_steps=config.eval_steps),
        custom_config={
            "code_fingerprint": code_fingerprint(config.run_fn),
            "hyperparameters": dict(config.hyperparameters),
        },
    )
    baseline_resolver = tfx.dsl.Resolver(
        strategy_class=BaselineModelStrategy,
        candidate=trainer.outputs["model"],
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    ).with_id(BASELINE_RESOLVER)
    evaluator = tfx.components.Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=baseline_resolver.outputs["model"],
        eval_config=eval_config(config),
    )
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=config.serving_dir)
        ),
    )
    return tfx.dsl.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.pipeline_root,
        components=[
            example_gen,
            schema_importer,
            statistics_gen,
            example_validator,
            transform,
            trainer,
            baseline_resolver,
            evaluator,
            pusher,
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config
        or tfx.orchestration.metadata.sqlite_metadata_connection_config(config.metadata_path),
        beam_pipeline_args=list(config.beam_args),
    )
