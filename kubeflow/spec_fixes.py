"""What `kubeflow.compiler` adds to TFX's compiled spec, found by running it (`run-local`).

* Runtime parameters: the spec declares `data_root` (ExampleGen's input
  base), so a run can point at another data folder or bucket without
  recompiling, as `kfp.Client.create_run_from_pipeline_package(...,
  arguments={"data_root": ...})` passes it. TFX's V2 compiler accepts a
  RuntimeParameter only as a whole execution property; the train steps and
  the span live inside protos (TrainArgs, RangeConfig), which it cannot
  parameterise, so they stay compile-time flags.
* Task dependencies: TFX's two-step baseline resolver reads the blessing
  resolver's output, but the compiled task lists no `dependentTasks`; KFP
  orders tasks by `dependentTasks` (kfp.local too), so the model query could
  run before the blessing it reads exists. Every task now depends on the
  producer of each artifact it reads.
"""

from __future__ import annotations

from typing import Any

DATA_ROOT_PARAMETER = "data_root"


def declare_runtime_parameters(pipeline: Any, data_root: str) -> None:
    """ExampleGen's `input_base` becomes the runtime parameter `data_root` (default: `data_root`)."""
    from tfx.dsl.components.base import base_component
    from tfx.orchestration import data_types
    from tfx.types import standard_component_specs

    key = standard_component_specs.INPUT_BASE_KEY
    for node in pipeline.components:
        if isinstance(node, base_component.BaseComponent) and node.exec_properties.get(key) == (
            data_root
        ):
            node.exec_properties[key] = data_types.RuntimeParameter(
                name=DATA_ROOT_PARAMETER, ptype=str, default=data_root
            )


def add_missing_dependencies(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """Adds each artifact producer to its consumer's `dependentTasks`; returns what was added."""
    added: list[tuple[str, str]] = []
    for name, task in spec["root"]["dag"]["tasks"].items():
        needed = {
            a["taskOutputArtifact"]["producerTask"]
            for a in task.get("inputs", {}).get("artifacts", {}).values()
            if "taskOutputArtifact" in a
        }
        missing = sorted(needed - set(task.get("dependentTasks", [])))
        if missing:
            task["dependentTasks"] = sorted({*task.get("dependentTasks", []), *missing})
            added.extend((name, m) for m in missing)
    return added


def set_parameter_defaults(spec: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Writes each runtime parameter's default into the spec (TFX leaves it out).

    Without `defaultValue` a run created from the uploaded PipelineSpec must
    pass every parameter; with it (as the KFP DSL compiles defaults) they are
    optional, and `run-local` / kfp.local use the same default.
    """
    declared = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    for name, value in defaults.items():
        if name in declared:
            declared[name]["defaultValue"] = value
            declared[name]["isOptional"] = True


def custom_artifact_titles(pipeline: Any) -> dict[str, str]:
    """TYPE_NAME -> import path of each non-TFX artifact type the pipeline's nodes produce."""
    from tfx.orchestration.kubeflow.v2 import compiler_utils

    titles = {}
    for node in pipeline.components:
        for channel in node.outputs.values():
            cls = channel.type
            if compiler_utils.get_artifact_title(cls) == "tfx.Artifact":
                titles[cls.TYPE_NAME] = f"{cls.__module__}.{cls.__qualname__}"
    return titles


def retitle_custom_artifact_types(spec: dict[str, Any], titles: dict[str, str]) -> None:
    """Names each custom artifact type by its import path in the spec.

    TFX's V2 entrypoint finds a custom artifact's class by importing the
    type's schema title (`import_class_by_path`), so a title such as
    `tfxp.ValidationResult` fails every task that reads or writes one
    ("Could not import tfxp.ValidationResult"). The local runner's ML
    Metadata keeps the TYPE_NAME; only the compiled spec says the path.
    """
    for component in spec.get("components", {}).values():
        for side in ("inputDefinitions", "outputDefinitions"):
            for artifact in component.get(side, {}).get("artifacts", {}).values():
                schema = artifact.get("artifactType", {}).get("instanceSchema")
                if not schema:
                    continue
                for name, path in titles.items():
                    schema = schema.replace(f"title: {name}\n", f"title: {path}\n")
                artifact["artifactType"]["instanceSchema"] = schema
