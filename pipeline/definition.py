"""The one definition of the pipeline. Every runner (local, Airflow, Kubeflow) calls it
with a run plan (pipeline/plan.py): the graph is built from the plan's facts, with no
I/O here (no folder listed, no file read or hashed, no directory made)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from ml_metadata.proto import metadata_store_pb2
from tfx.components import ExampleValidator, StatisticsGen, Trainer, Transform
from tfx.dsl.components.base import executor_spec
from tfx.dsl.components.common.resolver import Resolver
from tfx.dsl.input_resolution.strategies.latest_artifact_strategy import LatestArtifactStrategy
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import (
    LatestBlessedModelStrategy,
)
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.proto import example_gen_pb2, range_config_pb2, trainer_pb2
from tfx.types import Channel, standard_artifacts

from components.example_gen.csv_example_gen import checked_csv_example_gen
from components.example_gen.image_example_gen import image_example_gen
from components.example_gen.sequence_example_gen import sequence_example_gen
from components.fast.stats import executor as fast_statistics
from components.fast.transform import executor as fast_transform
from components.resolvers.baseline import BaselineModelStrategy
from components.resolvers.previous_span_statistics import PreviousSpanStatisticsStrategy
from components.resolvers.span_window import SpanWindowExamples, SpanWindowStrategy
from components.tuner.component import Tuner
from components.validation.gate import ValidationGate
from components.validation.schema_importer import (
    CuratedSchemaImporter,
    schema_column_types,
    schema_nan_free_columns,
    sequence_column_types,
)
from pipeline import release
from pipeline.beam import in_process_override
from pipeline.config import PipelineConfig, serving_log_dir
from pipeline.node_ids import (
    BASELINE_RESOLVER,
    PREVIOUS_STATISTICS_RESOLVER,
    SCHEMA_IMPORTER,
    SPAN_WINDOW_EXAMPLES,
    SPAN_WINDOW_RESOLVER,
    STATISTICS_GEN,
    TUNER,
    VALIDATION_GATE,
)
from pipeline.plan import RunPlan, tuner_fn_path

# Orchestrators the definition wires for. TFX's Kubeflow V2 compiler turns
# resolvers into ML Metadata queries and knows only TFX's stock strategies, so
# on Kubeflow the two resolvers below are the stock ones under the same node ids.
LOCAL = "local"
AIRFLOW = "airflow"
KUBEFLOW = "kubeflow"
ORCHESTRATORS = (LOCAL, AIRFLOW, KUBEFLOW)


def create_pipeline(
    plan: RunPlan,
    *,
    metadata_connection_config: Any | None = None,
    orchestrator: str = LOCAL,
) -> tfx_pipeline.Pipeline:
    """Builds the TFX pipeline `plan` decided (`plan_run`, pipeline/plan.py).

    Args:
      plan: the run's config and the facts read for it (schema, data layout, ...).
      metadata_connection_config: an ML Metadata `ConnectionConfig` (e.g.
        MySQL); by default SQLite at `config.metadata_path`. Orchestrators that
        bring their own store (Kubeflow) ignore it.
      orchestrator: "local" or "airflow" (Python resolvers), or "kubeflow"
        (TFX's stock resolvers, which the KFP v2 compiler can express).
    """
    if orchestrator not in ORCHESTRATORS:
        raise ValueError(f"orchestrator must be one of {ORCHESTRATORS}, not {orchestrator!r}")
    config = plan.config
    example_gen = _example_gen(plan)
    window_nodes, training_examples = _span_window(config, example_gen, orchestrator)
    schema_importer, statistics_gen, example_validator, previous_statistics, validation_gate = (
        _data_checks(plan, example_gen, orchestrator)
    )
    transform, tuner, trainer = _training(plan, training_examples, schema_importer)
    # Nothing trains on data the gate blocked: it raises, so Transform never starts.
    transform.add_upstream_node(validation_gate)
    baseline = _baseline_resolver(trainer, orchestrator)
    evaluator, serving_check, pusher = release.nodes(config, example_gen, trainer, baseline)
    model_card = release.model_card(
        config,
        example_gen=example_gen,
        statistics_gen=statistics_gen,
        schema_importer=schema_importer,
        trainer=trainer,
        evaluator=evaluator,
        serving_check=serving_check,
        pusher=pusher,
    )
    batch_inference = release.batch_inference(plan, trainer, evaluator)
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
            *tuner,
            trainer,
            baseline,
            evaluator,
            *([serving_check] if serving_check else []),
            pusher,
            model_card,
            *batch_inference,
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config
        or sqlite_connection_config(config.metadata_path),
        beam_pipeline_args=list(config.beam_args),
    )


def _data_checks(plan: RunPlan, example_gen: Any, orchestrator: str) -> tuple[Any, ...]:
    """The curated schema, statistics, TFDV's anomalies and the validation gate over
    the new span (against the previous span's statistics and the serving logs)."""
    config = plan.config
    schema_importer = CuratedSchemaImporter(
        schema_file=config.schema_file, content_sha256=plan.schema_sha256
    ).with_id(SCHEMA_IMPORTER)
    statistics_gen = StatisticsGen(
        examples=example_gen.outputs["examples"], schema=schema_importer.outputs["schema"]
    )
    # TFDV's statistics in one in-process pass when they are exact (as a Beam pipeline of
    # the same per-batch work under the Spark runner), else TFX's Beam executor
    # (components/fast/stats/executor.py).
    statistics_gen.executor_spec = executor_spec.BeamExecutorSpec(fast_statistics.Executor)
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_importer.outputs["schema"]
    )
    previous_statistics, validation_gate = _validation(
        plan, example_gen, schema_importer, statistics_gen, orchestrator
    )
    # After ExampleValidator too: its anomalies are recorded before a block ends the run.
    validation_gate.add_upstream_node(example_validator)
    return schema_importer, statistics_gen, example_validator, previous_statistics, validation_gate


def sqlite_connection_config(path: str) -> metadata_store_pb2.ConnectionConfig:
    """TFX's SQLite connection config for `path`, without the folder TFX's helper makes
    while the pipeline is built (the pre-run check makes it; Kubeflow never reads it)."""
    connection = metadata_store_pb2.ConnectionConfig()
    connection.sqlite.filename_uri = path
    connection.sqlite.connection_mode = (
        metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    )
    return connection


def _date_formats(config: PipelineConfig) -> dict[str, str]:
    """Date and timestamp features -> their format, for the gate's format check."""
    features = config.tabular.features if config.tabular is not None else {}
    return {n: str(f["format"]) for n, f in features.items() if f.get("format")}


def _unlabelled_label(config: PipelineConfig) -> str:
    """The label column whose blank or unparseable rows ExampleGen drops (generic tables
    with `unlabelled_rows: drop`), or "" to keep every row."""
    tabular = config.tabular
    return config.label_key if tabular is not None and tabular.unlabelled_rows == "drop" else ""


def _example_gen(plan: RunPlan):
    """The dataset's ExampleGen (CSV, image class folders or event tables) for the
    span(s) the plan took."""
    config, schema = plan.config, plan.schema
    if config.example_gen not in ("csv", "image", "sequence"):
        raise ValueError(
            f"example_gen must be 'csv', 'image' or 'sequence', not {config.example_gen!r}"
        )
    image = config.image
    if config.example_gen == "image" and image is None:
        raise ValueError("an image dataset needs `image` options (ImageOptions)")
    if config.example_gen == "sequence" and config.sequence is None:
        raise ValueError("a sequence dataset needs `sequence` options (SequenceOptions)")
    make_example_gen = _sequence_example_gen(config, schema) or (
        functools.partial(
            image_example_gen,
            class_names=image.class_names,
            image_format=image.image_format,
            on_bad_image=image.on_bad_image,
            shard_mb=image.shard_mb,
            gzip_level=image.gzip_level,
        )
        if image is not None and config.example_gen == "image"
        else functools.partial(
            checked_csv_example_gen,
            columns=schema_column_types(schema),
            csv_reader=config.csv_reader,
            encoding=config.csv_encoding,
            nan_free=schema_nan_free_columns(schema),
            drop_unlabelled=_unlabelled_label(config),
        )
    )
    train, eval_ = config.train_eval_hash_buckets
    example_gen = make_example_gen(
        input_base=config.data_root,
        input_config=example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name="single_split", pattern=plan.input_pattern)]
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
        expected_sha256=config.data_sha256,
        num_shards=config.num_shards,
        output_config=example_gen_pb2.Output(
            split_config=example_gen_pb2.SplitConfig(
                splits=[
                    example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=train),
                    example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=eval_),
                ]
            )
        ),
    )
    if config.example_gen == "csv" and config.csv_reader == "arrow":
        # Threaded on its own: faster in this process than in Beam's workers.
        override = in_process_override(config.beam_args)
        if override:
            example_gen.with_beam_pipeline_args(list(override))
    return example_gen


def _sequence_example_gen(config: PipelineConfig, schema: Any):
    """The SequenceExampleGen's maker for an event table, else None."""
    if config.example_gen != "sequence":
        return None
    sequence = config.sequence
    columns = sequence_column_types(schema)
    # The order column is read, not stored: numbers, or timestamps parsed from text.
    columns[sequence.order_by] = "BYTES" if sequence.order_format == "timestamp" else "FLOAT"
    return functools.partial(
        sequence_example_gen,
        sequence=sequence.to_dict(),
        columns=columns,
        encoding=config.csv_encoding,
    )


def _span_window(config: PipelineConfig, example_gen, orchestrator: str) -> tuple[list, Any]:
    """(extra nodes, what Transform learns from): this run's span, or with a window
    (config.window > 1) the newest Examples of each span in it. StatisticsGen,
    ExampleValidator and the Evaluator look at this run's span only: the data
    that just arrived."""
    if config.window <= 1:
        return [], example_gen.outputs["examples"]
    if orchestrator == KUBEFLOW:
        raise ValueError(
            f"a rolling window (window={config.window}) needs the span_window resolver, a "
            "custom strategy the Kubeflow V2 compiler cannot express; compile with window=1"
        )
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
    return [window_resolver, window_examples], window_examples.outputs["window"]


def _validation(plan: RunPlan, example_gen, schema_importer, statistics_gen, orchestrator):
    """(the drift baseline resolver, the gate). Locally the baseline is the previous
    span's statistics (PreviousSpanStatisticsStrategy, Python over ML Metadata).
    On Kubeflow it is TFX's LatestArtifactStrategy over StatisticsGen's output,
    resolved before this run's StatisticsGen: the statistics of the previous
    run's span (every scheduled run ingests the newest span), reported without
    a span number."""
    config = plan.config
    if orchestrator == KUBEFLOW:
        previous_statistics = Resolver(
            strategy_class=LatestArtifactStrategy,
            statistics=Channel(type=standard_artifacts.ExampleStatistics),
        ).with_id(PREVIOUS_STATISTICS_RESOLVER)
        # "Latest" must be found before this run's statistics exist.
        statistics_gen.add_upstream_node(previous_statistics)
        baseline_examples = None
    else:
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
        baseline_examples = previous_statistics.outputs["examples"]
    validation_gate = ValidationGate(
        statistics=statistics_gen.outputs["statistics"],
        schema=schema_importer.outputs["schema"],
        baseline_statistics=previous_statistics.outputs["statistics"],
        examples=example_gen.outputs["examples"],
        baseline_examples=baseline_examples,
        settings=dataclasses.replace(plan.settings, date_formats=_date_formats(config)),
        serving_data=config.serving_pattern,
        serving_sha256=plan.serving_sha256,
        serving_log=serving_log_dir(config),
        serving_log_window=config.serving_log_window,
        log_policy=config.request_log.to_json() if config.request_log else "",
        report_dir=config.report_dir,
    ).with_id(VALIDATION_GATE)
    return previous_statistics, validation_gate


def _training(plan: RunPlan, training_examples, schema_importer):
    """Transform, the Tuner (with `tuning:`) and Trainer, keyed for the cache by their code's fingerprints."""
    config = plan.config
    # The image options reach Transform and the Trainer through custom_config.
    image_config = {"image": config.image.to_dict()} if config.image else {}
    # So do a tabular dataset's feature treatments (the generic trainer, trainer/tabular).
    if config.tabular is not None:
        image_config["tabular"] = config.tabular.to_dict()
    # And an event table's columns and model (the sequence trainer, trainer/sequence).
    if config.sequence is not None:
        image_config["sequence"] = config.sequence.to_dict()
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
            "code_fingerprint": plan.fingerprints[config.preprocessing_fn],
            **image_config,
        },
    )
    # TFX's analysis, then the transformed examples written in this process when
    # that gives TFX's output, else TFX's executor (components/fast/transform/).
    transform.executor_spec = executor_spec.BeamExecutorSpec(fast_transform.Executor)
    tuner = _tuner(plan, transform, schema_importer, image_config)
    trainer = _trainer_class(config)(
        run_fn=config.run_fn,
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_importer.outputs["schema"],
        # With a Tuner, its best trial's values replace the fixed ones
        # (Hyperparameters.from_fn_args in trainer/base.py).
        hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None,
        train_args=trainer_pb2.TrainArgs(num_steps=config.train_steps),
        eval_args=trainer_pb2.EvalArgs(num_steps=config.eval_steps),
        custom_config={
            "code_fingerprint": plan.fingerprints[config.run_fn],
            "hyperparameters": dict(config.hyperparameters),
            **image_config,
            **(config.trainer_cluster or {}),
        },
    )
    return transform, [tuner] if tuner else [], trainer


def _tuner(plan: RunPlan, transform, schema_importer, extra_config: dict):
    """TFX's Tuner on the transformed data, or None without `tuning:` in the dataset file.

    Its exec properties hold the search space, budgets and code fingerprint, so
    TFX caches it while data, transform and search space are unchanged (the plan has
    checked that the trainer defines its tuner_fn)."""
    config = plan.config
    if config.tuning is None:
        return None
    tuning = config.tuning
    tuner_fn = tuner_fn_path(config.run_fn)
    return Tuner(
        tuner_fn=tuner_fn,
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_importer.outputs["schema"],
        train_args=trainer_pb2.TrainArgs(num_steps=tuning.trial_steps or config.train_steps),
        eval_args=trainer_pb2.EvalArgs(num_steps=config.eval_steps),
        custom_config={
            "code_fingerprint": plan.fingerprints[tuner_fn],
            # Parallel trials' worker processes build their search with it.
            "tuner_fn": tuner_fn,
            "hyperparameters": dict(config.hyperparameters),
            "tuning": tuning.to_dict(),
            **extra_config,
        },
    ).with_id(TUNER)


def _trainer_class(config: PipelineConfig) -> type:
    """TFX's Trainer, or with a `trainer_cluster` its Vertex AI Trainer: the
    same run_fn on the replicas of a custom training job (multi-worker)."""
    if not config.trainer_cluster:
        return Trainer
    from tfx.extensions.google_cloud_ai_platform.trainer.component import (
        Trainer as VertexTrainer,
    )

    return VertexTrainer


def _baseline_resolver(trainer, orchestrator: str):
    """The Evaluator's baseline. Locally: the latest blessed model other than the
    candidate, resolved after the Trainer (an unchanged rerun stays cached).
    On Kubeflow, TFX's LatestBlessedModelStrategy (the V2 compiler accepts no
    custom strategy): the candidate has no blessing while it runs, so "latest
    blessed" is the previous blessed model, the same comparison; only the
    cache saving on unchanged reruns is lost there."""
    if orchestrator == KUBEFLOW:
        return Resolver(
            strategy_class=LatestBlessedModelStrategy,
            model=Channel(type=standard_artifacts.Model),
            model_blessing=Channel(type=standard_artifacts.ModelBlessing),
        ).with_id(BASELINE_RESOLVER)
    return Resolver(
        strategy_class=BaselineModelStrategy,
        candidate=trainer.outputs["model"],
        model=Channel(type=standard_artifacts.Model),
        model_blessing=Channel(type=standard_artifacts.ModelBlessing),
    ).with_id(BASELINE_RESOLVER)
