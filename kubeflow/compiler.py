"""Compiles the one pipeline definition to a KFP v2 PipelineJob with TFX's KubeflowV2DagRunner.

The definition is built for Kubeflow (`create_pipeline(..., orchestrator="kubeflow")`):
its two resolvers are TFX's stock strategies there, the only ones the V2
compiler turns into ML Metadata queries (see `pipeline/definition.py`). What
is left here, without touching the graph or patching TFX:

* ML Metadata. The definition defaults to SQLite under the run dir, and
  `sqlite_metadata_connection_config` *creates that directory* while the
  pipeline is built: with a gs:// root that is a call to Google's API at
  compile time (offline: "Could not resolve host: www.googleapis.com"). On
  Kubeflow the cluster's own ML Metadata is used and the pipeline's connection
  config is never read, so we pass an in-memory placeholder instead.
  (The runner's other compile-time probe, `fileio.exists(pipeline_root)`, runs
  only for components given a `module_file`; ours name code by import path.)
* Paths. The run plan reads the schema and looks at the data folder, so it is
  made from this machine's copies and the spec then names the image's paths.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from kubeflow.config import KubeflowConfig, KubeflowConfigError, memory_gb
from kubeflow.spec_fixes import (
    DATA_ROOT_PARAMETER,
    add_missing_dependencies,
    custom_artifact_titles,
    declare_runtime_parameters,
    retitle_custom_artifact_types,
    set_parameter_defaults,
)
from tfxp.preflight import PreflightError, preflight


class KubeflowCompileError(RuntimeError):
    """The pipeline cannot be expressed as a KFP v2 spec; the message says why."""


def _placeholder_metadata_config() -> Any:
    from ml_metadata.proto import metadata_store_pb2

    # Never used: KFP tasks record to the cluster's ML Metadata.
    return metadata_store_pb2.ConnectionConfig(
        fake_database=metadata_store_pb2.FakeDatabaseConfig()
    )


def _retarget_paths(pipeline: Any, moves: dict[str, str]) -> None:
    """Points every exec property naming a host path at the same file in the image."""
    for node in pipeline.components:
        for key, value in list(node.exec_properties.items()):
            if isinstance(value, str) and value in moves:
                node.exec_properties[key] = moves[value]


def build_pipeline(config: KubeflowConfig) -> Any:
    """Calls the one pipeline definition with this deployment's config, lowered for KFP.

    The plan (pipeline/plan.py) reads the schema (column types, content hash)
    and looks at the data folder (its spans, their layout), so it is made from
    this machine's copies of files that are baked into the image; the spec then
    names the image's paths. The schema task re-checks the hash in the pod, so
    an image older than the compiled spec fails loudly rather than silently.
    """
    from pipeline.config import serving_log_dir
    from pipeline.definition import KUBEFLOW, create_pipeline

    config.validate()
    # The same pre-run check as every runner, which plans the run, on what the image
    # bakes in (schema, data layout, validation settings); not this machine's
    # directories or buckets.
    try:
        plan = preflight(config.pipeline_config(), storage=False, local_dirs=False)
    except PreflightError as e:
        raise KubeflowConfigError(str(e)) from None
    pipeline_config = plan.config
    try:
        pipeline = create_pipeline(
            plan,
            metadata_connection_config=_placeholder_metadata_config(),
            orchestrator=KUBEFLOW,
        )
    except ValueError as e:  # e.g. a rolling window: not expressible on KFP
        raise KubeflowCompileError(str(e)) from None
    moves = {
        pipeline_config.data_root: config.container_data_root,
        pipeline_config.schema_file: config.container_schema_file,
    }
    serving = pipeline_config.serving_pattern
    if serving.startswith(pipeline_config.data_root + os.sep):
        # The serving requests ship inside the data folder: data/<dataset>/serving/.
        moves[serving] = config.container_data_root + serving[len(pipeline_config.data_root) :]
    # The request log sits in the data folder too (pipeline.config.serving_log_dir).
    log_dir = serving_log_dir(pipeline_config)
    moves[log_dir] = (
        config.container_data_root.rstrip("/")
        + log_dir[len(pipeline_config.data_root.rstrip("/")) :]
    )
    _retarget_paths(pipeline, moves)
    # Issue 17: `data_root` is a runtime parameter of the job (kubeflow/spec_fixes.py).
    declare_runtime_parameters(pipeline, config.container_data_root)
    return pipeline


def _task_executor_labels(spec: dict[str, Any]) -> dict[str, str]:
    components = spec.get("components", {})
    return {
        task: components[body["componentRef"]["name"]]["executorLabel"]
        for task, body in spec["root"]["dag"]["tasks"].items()
    }


def _apply_resources(spec: dict[str, Any], config: KubeflowConfig) -> None:
    """Sets per-component CPU/memory limits on the compiled containers.

    TFX can carry a ResourceSpec as a component's platform_config, but its V2
    compiler drops it for FileBasedExampleGen; setting it on the compiled spec
    treats every component alike. Both the numeric fields and the string
    fields KFP >= 2.2 prefers are set.
    """
    labels = _task_executor_labels(spec)
    executors = spec["deploymentSpec"]["executors"]
    for component, res in config.resources.items():
        if component not in labels:
            raise KubeflowConfigError(
                f"resources for unknown component {component!r}; components: "
                f"{', '.join(sorted(t for t in labels if 'container' in executors[labels[t]]))}"
            )
        container = executors[labels[component]].get("container")
        if container is None:
            raise KubeflowConfigError(f"{component!r} runs no container; it takes no resources")
        resources: dict[str, Any] = {}
        if res.cpu is not None:
            resources["cpuLimit"] = res.cpu
            resources["resourceCpuLimit"] = f"{res.cpu:g}"
        if res.memory is not None:
            resources["memoryLimit"] = memory_gb(res.memory)
            resources["resourceMemoryLimit"] = res.memory
        if resources:
            container["resources"] = resources


def compile_pipeline(config: KubeflowConfig) -> dict[str, Any]:
    """The PipelineJob (as a JSON dict) for `config`; writes nothing."""
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

    pipeline = build_pipeline(config)
    runner = v2.KubeflowV2DagRunner(
        config=v2.KubeflowV2DagRunnerConfig(
            default_image=config.image,
            use_pipeline_spec_2_1=True,
        ),
    )
    try:
        job = runner.run(pipeline, write_out=False)
    except (TypeError, ValueError, NotImplementedError) as e:
        raise KubeflowCompileError(f"the KFP v2 compiler rejected the pipeline: {e}") from e
    spec = job["pipelineSpec"]
    # Issue 17, see kubeflow/spec_fixes.py: what TFX leaves out or names unimportably.
    add_missing_dependencies(spec)
    retitle_custom_artifact_types(spec, custom_artifact_titles(pipeline))
    set_parameter_defaults(spec, {DATA_ROOT_PARAMETER: config.container_data_root})
    _apply_resources(spec, config)
    # Lets a bare PipelineSpec (what `deploy` uploads) carry the root too.
    spec["defaultPipelineRoot"] = config.pipeline_root
    parse_pipeline_spec(spec)  # the result must be a valid PipelineSpec
    return job


def write_pipeline_job(job: dict[str, Any], path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(job, f, indent=2, sort_keys=True)
        f.write("\n")
    return path


def parse_pipeline_spec(spec: dict[str, Any]) -> Any:
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    try:
        return json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())
    except json_format.ParseError as e:
        raise KubeflowCompileError(f"not a KFP PipelineSpec: {e}") from e


def load_pipeline_job(path: str) -> tuple[dict[str, Any], Any]:
    """Reads a compiled file: (PipelineJob dict, parsed PipelineSpec proto)."""
    try:
        with open(path) as f:
            job = json.load(f)
    except FileNotFoundError:
        raise KubeflowCompileError(
            f"{path} does not exist: run `python -m kubeflow compile` first"
        ) from None
    except json.JSONDecodeError as e:
        raise KubeflowCompileError(f"{path} is not JSON ({e}); recompile it") from None
    if not isinstance(job, dict) or "pipelineSpec" not in job:
        raise KubeflowCompileError(
            f"{path} is not a compiled PipelineJob (no 'pipelineSpec'); recompile it"
        )
    return job, parse_pipeline_spec(job["pipelineSpec"])


_SHA256 = re.compile(r"\b[0-9a-f]{64}\b")


def summarize(job: dict[str, Any]) -> dict[str, Any]:
    """A machine-independent summary of a compiled job, for golden-file comparison.

    Keeps the graph (tasks, dependencies, inputs), each container's image,
    command, args and resources, and every constant parameter; drops what
    varies by machine, date or code edit: SDK version, telemetry labels,
    content hashes (code fingerprints, schema hash) and the build timestamp.
    """
    spec = job["pipelineSpec"]
    labels = _task_executor_labels(spec)
    executors = spec["deploymentSpec"]["executors"]
    tasks = {}
    for name, task in sorted(spec["root"]["dag"]["tasks"].items()):
        executor = executors[labels[name]]
        params = {
            k: v.get("runtimeValue", v)
            for k, v in task.get("inputs", {}).get("parameters", {}).items()
        }
        artifacts = {
            k: "{producerTask}.{outputArtifactKey}".format(**v["taskOutputArtifact"])
            for k, v in task.get("inputs", {}).get("artifacts", {}).items()
        }
        entry: dict[str, Any] = {
            "dependentTasks": sorted(task.get("dependentTasks", [])),
            "inputArtifacts": artifacts,
            "parameters": params,
            "caching": task.get("cachingOptions", {}).get("enableCache", False),
        }
        if "container" in executor:
            c = executor["container"]
            entry["container"] = {
                "image": c.get("image"),
                "command": c.get("command", []),
                "args": c.get("args", []),
                "resources": c.get("resources", {}),
                "driver": c.get("lifecycle", {}).get("preCacheCheck", {}),
            }
        else:
            entry["executor"] = executor
        tasks[name] = entry
    summary = {
        "displayName": job.get("displayName"),
        "pipelineName": spec["pipelineInfo"]["name"],
        "schemaVersion": spec.get("schemaVersion"),
        "defaultPipelineRoot": spec.get("defaultPipelineRoot"),
        "runtimeConfig": job.get("runtimeConfig", {}),
        # The job's runtime parameters (issue 17: data_root).
        "runtimeParameters": spec["root"].get("inputDefinitions", {}).get("parameters", {}),
        "tasks": tasks,
    }
    text = json.dumps(summary, sort_keys=True)
    return json.loads(_SHA256.sub("<sha256>", text))
