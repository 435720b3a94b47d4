"""A compiled PipelineJob for `run-local`: loading it, its runtime arguments, and what a run of it gave."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


class LocalRunError(RuntimeError):
    """The local run cannot start or cannot go on; the message says why and what to do."""


@dataclass
class TaskRun:
    name: str
    kind: str  # container | resolver | importer
    state: str = "not run"  # complete | failed | resolved | not run
    seconds: float = 0.0
    # output key -> [{"name", "uri", "metadata", "type"}]
    outputs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    executor_output: str | None = None
    log: str | None = None
    returncode: int | None = None


@dataclass
class LocalRun:
    run_id: str
    pipeline_name: str
    pipeline_root: str
    arguments: dict[str, Any]
    tasks: dict[str, TaskRun]
    failed_task: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.failed_task is None

    @property
    def run_root(self) -> str:
        return os.path.join(self.pipeline_root, self.run_id)

    def output(self, task: str, key: str) -> dict[str, Any] | None:
        artifacts = self.tasks[task].outputs.get(key) or []
        return artifacts[0] if artifacts else None


# --- the job ----------------------------------------------------------------


def load_job(package: str) -> tuple[dict[str, Any], Any]:
    from kubeflow.compiler import KubeflowCompileError, load_pipeline_job

    try:
        return load_pipeline_job(package)
    except KubeflowCompileError as e:
        raise LocalRunError(str(e)) from None


def declared_parameters(spec: Any) -> dict[str, Any]:
    """Runtime parameters of the job: name -> ComponentInputsSpec.ParameterSpec."""
    return dict(spec.root.input_definitions.parameters)


def resolve_arguments(spec: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments as `kfp.Client.create_run_from_pipeline_package(arguments=...)` takes them.

    Unknown names are refused (the KFP API rejects them too); strings given for
    numeric or boolean parameters (from the command line) are converted.
    Parameters without an argument take the spec's default.
    """
    from kfp.local import dag_orchestrator
    from kfp.pipeline_spec import pipeline_spec_pb2

    types = pipeline_spec_pb2.ParameterType
    declared = declared_parameters(spec)
    unknown = sorted(set(arguments) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise LocalRunError(
            f"unknown runtime parameter(s) {', '.join(unknown)}; the spec declares: {known}"
        )
    converted: dict[str, Any] = {}
    for name, value in arguments.items():
        kind = declared[name].parameter_type
        try:
            if kind == types.NUMBER_INTEGER:
                value = int(value)
            elif kind == types.NUMBER_DOUBLE:
                value = float(value)
            elif kind == types.BOOLEAN and isinstance(value, str):
                value = {"true": True, "false": False}[value.lower()]
            elif kind == types.STRING:
                value = str(value)
        except (ValueError, KeyError):
            raise LocalRunError(
                f"runtime parameter {name}={value!r} is not a {types.ParameterTypeEnum.Name(kind)}"
            ) from None
        converted[name] = value
    return dag_orchestrator.join_user_inputs_and_defaults(
        dag_arguments=converted, dag_inputs_spec=spec.root.input_definitions
    )
