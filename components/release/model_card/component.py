"""The ModelCard component: after the Pusher, a card for the evaluated model, beside the pushed version.

It reads the run's artifacts (Examples and their statistics, the schema, the
evaluation's per-slice metrics and rules, the blessing, the serving check,
the push) and the dataset file's words and hyperparameters (execution
parameters), renders components/release/model_card/card.py, and writes the card into
its own artifact (`card.html`, recorded in ML Metadata) and, when the model was
pushed, as `model_card.html` into the pushed version's folder.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

from absl import logging
from tfx import types
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, component_spec, standard_artifacts
from tfx.types.system_artifacts import Metrics as MetricsSystemType

from components.base import component
from components.release.model_card.card import CardData, render_card

CARD_FILE = "card.html"
# Written into the pushed version's folder, beside saved_model.pb.
PUSHED_CARD_FILE = "model_card.html"
SLICES_FILE = "slices.json"  # components/evaluation/slicing/evaluator.py writes it
PICTURES_FILE = "plots.json"  # components/evaluation/pictures.py writes it
TENSORBOARD_DIR = "tensorboard"  # in the model run: trainer/base.py's TrainingCurves
SERVING_CHECK_FILE = "result.json"  # components/release/serving_check/component.py
DATA_PROPERTIES = (
    "span",
    "version",
    "content_sha256",
    "input_fingerprint",
    "raw_files",
    "raw_bytes",
    "row_count",
    "input_base",
)


class ModelCardArtifact(types.Artifact):
    """A model card (card.html); custom property `pushed_card`: its copy beside the push."""

    TYPE_NAME = "tfxp.ModelCard"
    TYPE_ANNOTATION = MetricsSystemType


def _one(input_dict: dict[str, list[types.Artifact]], key: str) -> types.Artifact | None:
    found = input_dict.get(key) or []
    return found[0] if found else None


def _prop(artifact: types.Artifact | None, name: str) -> Any:
    """A custom property (or property) as a plain value. TFX's getter also reads the
    JSON struct form the Kubeflow V2 runtime stores custom properties in, where
    integers come back as floats."""
    if artifact is None:
        return None
    value = artifact.get_custom_property(name)
    if value is None:
        stored = artifact.mlmd_artifact.properties.get(name)
        kind = stored.WhichOneof("value") if stored is not None else None
        value = getattr(stored, kind) if kind else None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _read_json(path: str) -> dict[str, Any]:
    if not fileio.exists(path):
        return {}
    with fileio.open(path) as f:
        return json.load(f)


def _rows_per_split(statistics: types.Artifact | None) -> dict[str, int]:
    if statistics is None:
        return {}
    from tfx.components.statistics_gen import stats_artifact_utils

    rows = {}
    for split in artifact_utils.decode_split_names(statistics.split_names):
        view = stats_artifact_utils.load_statistics(statistics, split)
        rows[split] = int(view.proto().datasets[0].num_examples)
    return rows


def _schema_rows(schema: types.Artifact | None) -> list[tuple[str, str, str]]:
    if schema is None:
        return []
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    files = [f for f in fileio.listdir(schema.uri) if f.endswith(".pbtxt")]
    if not files:
        return []
    parsed = io_utils.parse_pbtxt_file(os.path.join(schema.uri, files[0]), schema_pb2.Schema())
    domains = {d.name: list(d.value) for d in parsed.string_domain}
    rows = []
    for feature in parsed.feature:
        kind = schema_pb2.FeatureType.Name(feature.type)
        notes = []
        if feature.HasField("presence") and feature.presence.min_fraction:
            notes.append(f"present in {feature.presence.min_fraction:.0%} or more")
        domain = domains.get(feature.domain) or list(feature.string_domain.value)
        if domain:
            notes.append(f"values: {', '.join(domain[:12])}{' ...' if len(domain) > 12 else ''}")
        for domain_name in ("int_domain", "float_domain"):
            bounds = getattr(feature, domain_name)
            if feature.HasField(domain_name) and (bounds.HasField("min") or bounds.HasField("max")):
                low = f"{bounds.min:g}" if bounds.HasField("min") else ""
                high = f"{bounds.max:g}" if bounds.HasField("max") else ""
                notes.append(f"{low}..{high}")
        rows.append((feature.name, kind, "; ".join(notes)))
    return rows


def _write_beside(pushed_to: str, html: str) -> str:
    """The card into the pushed version folder, whole or not at all (temporary name, rename)."""
    path = os.path.join(pushed_to, PUSHED_CARD_FILE)
    tmp = os.path.join(pushed_to, f".{PUSHED_CARD_FILE}.{uuid.uuid4().hex}")
    with fileio.open(tmp, "w") as f:
        f.write(html)
    fileio.rename(tmp, path, overwrite=True)
    return path


def _training_curves(model_run: types.Artifact | None) -> dict[str, Any]:
    """The Trainer's TensorBoard scalars ({run folder: {tag: [(epoch, value)]}})."""
    from runtime.training_curves import read_curves

    if model_run is None:
        return {}
    return read_curves(os.path.join(model_run.uri, TENSORBOARD_DIR))


def card_data(
    input_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any], run_id: str
) -> CardData:
    model = _one(input_dict, "model")
    examples = _one(input_dict, "examples")
    evaluation = _one(input_dict, "evaluation")
    blessing = _one(input_dict, "model_blessing")
    check = _one(input_dict, "infra_blessing")
    pushed = _one(input_dict, "pushed_model")
    blessed = _prop(blessing, "blessed")
    baseline_id = _prop(blessing, "baseline_model_id")
    pushed_to = _prop(pushed, "pushed_destination") if _prop(pushed, "pushed") == 1 else ""
    data = {k: _prop(examples, k) for k in DATA_PROPERTIES if _prop(examples, k) is not None}
    lineage = {
        "pipeline run": run_id,
        **{
            f"{key} artifact": a.id
            for key in (
                "examples",
                "statistics",
                "schema",
                "model",
                "evaluation",
                "model_blessing",
                "infra_blessing",
                "pushed_model",
            )
            if (a := _one(input_dict, key)) is not None and a.id
        },
        "model uri": model.uri if model else "",
    }
    return CardData(
        dataset=exec_properties.get("dataset", ""),
        description=exec_properties.get("description", ""),
        intended_use=exec_properties.get("intended_use", ""),
        limitations=exec_properties.get("limitations", ""),
        data=data,
        rows_per_split=_rows_per_split(_one(input_dict, "statistics")),
        schema=_schema_rows(_one(input_dict, "schema")),
        hyperparameters=json.loads(exec_properties.get("hyperparameters") or "{}"),
        slices=_read_json(os.path.join(evaluation.uri, SLICES_FILE)) if evaluation else {},
        pictures=_read_json(os.path.join(evaluation.uri, PICTURES_FILE)) if evaluation else {},
        curves=_training_curves(_one(input_dict, "model_run")),
        thresholds=json.loads(exec_properties.get("thresholds") or "{}"),
        blessed=None if blessed is None else blessed == 1,
        blessing_message=_prop(blessing, "blessing_message") or "",
        baseline=f"baseline model #{baseline_id} ({_prop(blessing, 'baseline_model')})"
        if baseline_id
        else "",
        serving_check=_read_json(os.path.join(check.uri, SERVING_CHECK_FILE)) if check else {},
        pushed_to=pushed_to or "",
        lineage=lineage,
    )


class Executor(component.Executor):
    def run(self, execution: component.Execution) -> None:
        card = execution.output("card")
        run_id = (self._context.pipeline_run_id if self._context else None) or ""
        data = card_data(execution.inputs, execution.properties, run_id)
        html = render_card(data)
        fileio.makedirs(card.uri)
        with fileio.open(os.path.join(card.uri, CARD_FILE), "w") as f:
            f.write(html)
        card.set_string_custom_property("card", os.path.join(card.uri, CARD_FILE))
        if data.pushed_to:
            path = _write_beside(data.pushed_to, html)
            card.set_string_custom_property("pushed_card", path)
            logging.info("Model card: %s", path)


class ModelCardSpec(component_spec.ComponentSpec):
    PARAMETERS = {
        name: component_spec.ExecutionParameter(type=str, optional=True)
        for name in (
            "dataset",
            "description",
            "intended_use",
            "limitations",
            "hyperparameters",
            "thresholds",
        )
    }
    INPUTS = {
        "model": component_spec.ChannelParameter(type=standard_artifacts.Model),
        # The Trainer's model-run folder: its TensorBoard logs (the training curves).
        "model_run": component_spec.ChannelParameter(
            type=standard_artifacts.ModelRun, optional=True
        ),
        "examples": component_spec.ChannelParameter(type=standard_artifacts.Examples),
        "statistics": component_spec.ChannelParameter(
            type=standard_artifacts.ExampleStatistics, optional=True
        ),
        "schema": component_spec.ChannelParameter(type=standard_artifacts.Schema, optional=True),
        "evaluation": component_spec.ChannelParameter(type=standard_artifacts.ModelEvaluation),
        "model_blessing": component_spec.ChannelParameter(type=standard_artifacts.ModelBlessing),
        "infra_blessing": component_spec.ChannelParameter(
            type=standard_artifacts.InfraBlessing, optional=True
        ),
        "pushed_model": component_spec.ChannelParameter(type=standard_artifacts.PushedModel),
    }
    OUTPUTS = {"card": component_spec.ChannelParameter(type=ModelCardArtifact)}


class ModelCard(component.Component):
    """Writes the model card (card.py) as an artifact and beside the pushed version."""

    SPEC_CLASS = ModelCardSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
