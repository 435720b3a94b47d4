"""What a trained model passes before it is pushed, as pipeline nodes: the Evaluator
(TFMA config from pipeline/eval_config.py, per-slice rules), the ServingCheck, the
Pusher, the ModelCard, and the in-pipeline batch inference of the newest span."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tfx.proto import pusher_pb2

from components.batch_inference.component import BatchInference
from components.evaluation import extractors as evaluation
from components.evaluation.slicing.evaluator import Evaluator as SlicedEvaluator
from components.release import atomic_pusher
from components.release.model_card.component import ModelCard
from components.release.serving_check.component import ServingCheck
from components.validation.schema_importer import schema_column_types, schema_nan_free_columns
from pipeline.config import PipelineConfig
from pipeline.eval_config import eval_config, slice_rules
from pipeline.node_ids import BATCH_INFERENCE, MODEL_CARD, SERVING_CHECK
from pipeline.plan import RunPlan


def nodes(config: PipelineConfig, example_gen, trainer, baseline_resolver) -> tuple:
    """(Evaluator, ServingCheck or None, Pusher): what a model passes before it is pushed."""
    # TFX's Evaluator, with slicing by bucket and the per-slice blessing rules.
    evaluator = SlicedEvaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=baseline_resolver.outputs["model"],
        eval_config=eval_config(config),
        slice_rules=slice_rules(config),
        label_feature=config.label_key,
        # TFMA's extractors, minus per-example copies of features no metric reads.
        module_path=evaluation.MODULE_PATH,
    )
    # A server that knows nothing of this project must load the model and answer
    # as the Evaluator scored it, or nothing is pushed.
    serving_check = (
        ServingCheck(
            model=trainer.outputs["model"],
            examples=example_gen.outputs["examples"],
            model_blessing=evaluator.outputs["blessing"],
            signature=config.eval_signature,
            label_key=config.label_key,
            rows=config.serving_check_rows,
        ).with_id(SERVING_CHECK)
        if config.serving_check_rows
        else None
    )
    # Copy aside, then rename: servers never see a half-written version.
    pusher = atomic_pusher.Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        infra_blessing=serving_check.outputs["blessing"] if serving_check else None,
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=config.serving_dir)
        ),
    )
    return evaluator, serving_check, pusher


def model_card(config: PipelineConfig, **nodes: Any) -> ModelCard:
    """The model card of the evaluated model, written beside the pushed version."""
    t = config.thresholds
    return ModelCard(
        model=nodes["trainer"].outputs["model"],
        model_run=nodes["trainer"].outputs["model_run"],
        examples=nodes["example_gen"].outputs["examples"],
        statistics=nodes["statistics_gen"].outputs["statistics"],
        schema=nodes["schema_importer"].outputs["schema"],
        evaluation=nodes["evaluator"].outputs["evaluation"],
        model_blessing=nodes["evaluator"].outputs["blessing"],
        infra_blessing=nodes["serving_check"].outputs["blessing"]
        if nodes["serving_check"]
        else None,
        pushed_model=nodes["pusher"].outputs["pushed_model"],
        dataset=config.pipeline_name,
        description=config.description,
        intended_use=config.intended_use,
        limitations=config.limitations,
        hyperparameters=json.dumps(
            {
                "train_steps": config.train_steps,
                "eval_steps": config.eval_steps,
                "run_fn": config.run_fn,
                "preprocessing_fn": config.preprocessing_fn,
                **config.hyperparameters,
            },
            sort_keys=True,
            default=str,
        ),
        thresholds=json.dumps(dataclasses.asdict(t), sort_keys=True),
    ).with_id(MODEL_CARD)


def batch_inference(plan: RunPlan, trainer, evaluator) -> list:
    """With `batch_inference.in_pipeline`, the step scoring the newest span of the inference
    data root (the plan found it) with this run's model when it is blessed; else nothing."""
    config, schema, span = plan.config, plan.schema, plan.inference
    if span is None:
        return []
    return [
        BatchInference(
            model=trainer.outputs["model"],
            model_blessing=evaluator.outputs["blessing"],
            data_root=span.root,
            span=span.span,
            files=list(span.files),
            content_sha256=span.content_sha256,
            columns=schema_column_types(schema),
            label_key=config.label_key,
            key_columns=config.inference.key_columns,
            nan_free=tuple(schema_nan_free_columns(schema)),
            encoding=config.csv_encoding,
            tabular=(
                {"task": config.tabular.task, "classes": list(config.tabular.classes)}
                if config.tabular is not None
                else None
            ),
            batch_size=config.inference.batch_size,
            log_policy=config.request_log.to_json() if config.request_log else "",
        ).with_id(BATCH_INFERENCE)
    ]
