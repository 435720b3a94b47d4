"""`python -m kubeflow run-local`: the compiled PipelineJob, run task by task as KFP would.

The DAG walk, the arguments of each task, the `ExecutorInput` and the
placeholder resolution (`{{$}}` and friends) are the KFP SDK's own
(`kfp.local`: `graph_utils`, `dag_orchestrator.make_task_arguments`,
`executor_input_utils`, `placeholder_utils`, `executor_output_utils`); each
container task's resolved `command + args` runs through a task handler from
`kubeflow.local.task_handler` (a subprocess in the image's environment, or the image
itself under Docker).

`kfp.local` runs pipelines written with the KFP DSL; a TFX-compiled spec
needs four things it does not do, done here and listed in docs/orchestrators.md:

1. `resolver` executors (TFX's Resolver nodes compile to ML Metadata queries):
   answered from a small artifact registry of earlier `run-local` runs under
   the same pipeline root (`<root>/.run-local/artifacts.jsonl`), standing for
   the cluster's ML Metadata; on a fresh root they resolve nothing, and the
   consumer gets an empty input list, as on an empty store.
2. `lifecycle.preCacheCheck` (TFX's ExampleGen driver: resolves the span and
   the input fingerprint): run before the executor, its output metadata
   merged into the task's output artifacts, as Vertex AI Pipelines does.
3. Artifact types and names: `kfp.local` hands artifacts downstream as
   `dsl.Artifact`, which keeps `schemaTitle` but not the `instanceSchema`
   TFX declares its types with (`title: tfx.Examples ...`); inputs get their
   declared type back from the consumer's `inputDefinitions`. Output
   artifacts get a run-unique name (the backend's are resource names), which
   TFX turns into the artifact ids the Evaluator's blessing refers to.
4. Task roots are `<root>/<run id>/<task name>` (kfp.local strips a `comp-`
   prefix that TFX's component names do not have).

No caching: every task runs every time.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format

if TYPE_CHECKING:
    from kubeflow.local.forked_tasks import ForkServer

from kubeflow.local.artifacts import ArtifactRegistry, artifact_entry, dsl_artifact, type_title
from kubeflow.local.job import LocalRun, LocalRunError, TaskRun, load_job, resolve_arguments

Printer = Callable[[str], None]


class _Run:
    def __init__(
        self,
        job: dict[str, Any],
        spec: Any,
        pipeline_root: str,
        arguments: dict[str, Any],
        handler_factory: Callable[..., Any],
        printer: Printer,
    ) -> None:
        from kfp.local import io, placeholder_utils

        self.job, self.spec = job, spec
        self.pipeline_root = pipeline_root
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S-%f")
        self.run_id = f"{spec.pipeline_info.name}-{stamp}"
        self.unique_id = placeholder_utils.make_random_id()
        self.handler_factory = handler_factory
        self.printer = printer
        self.registry = ArtifactRegistry(pipeline_root)
        self.io_store = io.IOStore()
        for k, v in arguments.items():
            self.io_store.put_parent_input(k, v)
        # Inputs whose producer resolved nothing: (task, output key).
        self.empty: set[tuple[str, str]] = set()

    def executor_spec(self, label: str) -> Any:
        from kfp.local import utils

        return utils.struct_to_executor_spec(
            self.spec.deployment_spec.fields["executors"].struct_value.fields[label].struct_value
        )

    def task_root(self, task: str) -> str:
        return os.path.join(self.pipeline_root, self.run_id, task)

    # -- inputs shared by every kind of task

    def _split_inputs(self, task_spec: Any, component_spec: Any) -> tuple[Any, Any, list[str]]:
        """Task inputs and component spec without the artifacts whose producer resolved nothing."""
        empty = [
            name
            for name, a in task_spec.inputs.artifacts.items()
            if a.HasField("task_output_artifact")
            and (a.task_output_artifact.producer_task, a.task_output_artifact.output_artifact_key)
            in self.empty
        ]
        inputs = copy.deepcopy(task_spec.inputs)
        component = copy.deepcopy(component_spec)
        for name in empty:
            del inputs.artifacts[name]
            del component.input_definitions.artifacts[name]
        return inputs, component, empty

    def _executor_input(self, task: str, task_spec: Any, component_spec: Any) -> Any:
        from kfp.local import dag_orchestrator, executor_input_utils
        from kfp.pipeline_spec import pipeline_spec_pb2

        inputs, component, empty = self._split_inputs(task_spec, component_spec)
        arguments = dag_orchestrator.make_task_arguments(inputs, self.io_store)
        executor_input = executor_input_utils.construct_executor_input(
            component_spec=component,
            arguments=arguments,
            task_root=self.task_root(task),
            block_input_artifact=False,
        )
        for name, definition in component_spec.input_definitions.artifacts.items():
            if name in empty:
                executor_input.inputs.artifacts[name].CopyFrom(pipeline_spec_pb2.ArtifactList())
                continue
            # dsl.Artifact kept schemaTitle only; TFX declares instanceSchema.
            for artifact in executor_input.inputs.artifacts[name].artifacts:
                artifact.type.CopyFrom(definition.artifact_type)
        for key, artifacts in executor_input.outputs.artifacts.items():
            for artifact in artifacts.artifacts:
                artifact.name = f"{self.run_id}.{task}.{key}"
        return executor_input

    # -- container tasks

    def _command(self, container_part: Any, executor_input: Any, component_spec: Any, task: str):
        from kfp.local import executor_input_utils, placeholder_utils

        return placeholder_utils.replace_placeholders(
            full_command=list(container_part.command) + list(container_part.args),
            executor_input_dict=executor_input_utils.executor_input_to_dict(
                executor_input=executor_input, component_spec=component_spec
            ),
            pipeline_resource_name=self.run_id,
            task_resource_name=task,
            pipeline_root=self.pipeline_root,
            unique_pipeline_id=self.unique_id,
        )

    def _run_command(self, image: str, command: list[str], record: TaskRun) -> bool:
        from kfp.local import status

        handler = self.handler_factory(
            image=image, full_command=command, pipeline_root=self.pipeline_root, log_path=record.log
        )
        ok = handler.run() == status.Status.SUCCESS
        record.returncode = getattr(handler, "returncode", None)
        return ok

    def run_container(self, task: str, task_spec: Any, component_spec: Any, executor: Any, record):
        from kfp.local import executor_output_utils

        executor_input = self._executor_input(task, task_spec, component_spec)
        os.makedirs(self.task_root(task), exist_ok=True)
        record.log = os.path.join(self.task_root(task), "task.log")
        record.executor_output = executor_input.outputs.output_file
        container = executor.container
        driver = container.lifecycle.pre_cache_check
        if driver.command:
            # TFX's ExampleGen driver: span, version, fingerprint, resolved pattern.
            command = self._command(driver, executor_input, component_spec, task)
            if not self._run_command(container.image, command, record):
                return False
            written = executor_output_utils.load_executor_output(record.executor_output)
            for key, artifacts in written.artifacts.items():
                if key in executor_input.outputs.artifacts and artifacts.artifacts:
                    target = executor_input.outputs.artifacts[key].artifacts[0]
                    target.metadata.update(
                        json_format.MessageToDict(artifacts.artifacts[0].metadata)
                    )
        command = self._command(container, executor_input, component_spec, task)
        if not self._run_command(container.image, command, record):
            return False
        # Parses the ExecutorOutput the task wrote (raises if it is not one).
        outputs = executor_output_utils.get_outputs_for_task(
            executor_input=executor_input, component_spec=component_spec
        )
        self._publish(task, component_spec, outputs, record)
        return True

    def _publish(self, task: str, component_spec: Any, outputs: dict, record: TaskRun) -> None:
        entries = []
        for key, value in outputs.items():
            definition = component_spec.output_definitions.artifacts.get(key)
            if definition is None:  # an output parameter
                self.io_store.put_task_output(task, key, value)
                continue
            title = type_title(definition.artifact_type)
            artifacts = value if isinstance(value, list) else [value]
            record.outputs[key] = [
                artifact_entry(a, title, self.run_id, task, key) for a in artifacts
            ]
            entries.extend(record.outputs[key])
            self.io_store.put_task_output(task, key, value)
        self.registry.record(entries)

    # -- resolver tasks

    def run_resolver(self, task: str, task_spec: Any, component_spec: Any, executor: Any, record):
        from kfp.local import executor_input_utils, placeholder_utils

        executor_input = self._executor_input(task, task_spec, component_spec)
        executor_input_dict = executor_input_utils.executor_input_to_dict(
            executor_input=executor_input, component_spec=component_spec
        )
        for key, query in executor.resolver.output_artifact_queries.items():
            found = None
            if "{{$" not in query.filter or all(
                a.artifacts for a in executor_input.inputs.artifacts.values()
            ):
                resolved = placeholder_utils.resolve_individual_placeholder(
                    query.filter,
                    executor_input_dict=executor_input_dict,
                    pipeline_resource_name=self.run_id,
                    task_resource_name=task,
                    pipeline_root=self.pipeline_root,
                    pipeline_job_id=self.unique_id,
                    pipeline_task_id=placeholder_utils.make_random_id(),
                )
                found = self.registry.latest(resolved)
            if found is None:
                self.empty.add((task, key))
                record.outputs[key] = []
            else:
                record.outputs[key] = [found]
                self.io_store.put_task_output(task, key, dsl_artifact(found))
        return True

    # -- importer tasks

    def run_importer(self, task: str, task_spec: Any, component_spec: Any, executor: Any, record):
        from kfp.local import dag_orchestrator, importer_handler, status

        outputs, task_status = importer_handler.run_importer(
            pipeline_resource_name=self.run_id,
            component_name=task,
            component_spec=component_spec,
            executor_spec=executor,
            arguments=dag_orchestrator.make_task_arguments(task_spec.inputs, self.io_store),
            pipeline_root=self.pipeline_root,
            unique_pipeline_id=self.unique_id,
        )
        if task_status != status.Status.SUCCESS:
            return False
        self._publish(task, component_spec, outputs, record)
        return True

    def run(self) -> LocalRun:
        from kfp.local import dag_orchestrator, graph_utils

        dag = self.spec.root.dag
        order = graph_utils.topological_sort_tasks(dag.tasks)[::-1]  # a stack: pop() order
        tasks: dict[str, TaskRun] = {}
        for name in order:
            component_spec = self.spec.components[dag.tasks[name].component_ref.name]
            executor = self.executor_spec(component_spec.executor_label)
            tasks[name] = TaskRun(name=name, kind=executor.WhichOneof("spec"))
        result = LocalRun(
            run_id=self.run_id,
            pipeline_name=self.spec.pipeline_info.name,
            pipeline_root=self.pipeline_root,
            arguments={},
            tasks=tasks,
        )
        runners = {
            "container": self.run_container,
            "resolver": self.run_resolver,
            "importer": self.run_importer,
        }
        for i, name in enumerate(order, 1):
            task_spec = dag.tasks[name]
            dag_orchestrator.validate_task_spec_not_loop_or_condition(task_spec=task_spec)
            component_spec = self.spec.components[task_spec.component_ref.name]
            if component_spec.WhichOneof("implementation") != "executor_label":
                raise LocalRunError(f"task {name}: nested DAGs are not supported locally")
            record = tasks[name]
            if record.kind not in runners:
                raise LocalRunError(f"task {name}: executor kind {record.kind!r} is not supported")
            executor = self.executor_spec(component_spec.executor_label)
            self.printer(f"[{i}/{len(order)}] {name} ...")
            start = time.monotonic()
            ok = runners[record.kind](name, task_spec, component_spec, executor, record)
            record.seconds = time.monotonic() - start
            if not ok:
                record.state = "failed"
                result.failed_task = name
                break
            record.state = "resolved" if record.kind == "resolver" else "complete"
        return result


RUNNERS = ("subprocess", "forked", "docker")


def default_handler_factory(
    runner: str = "subprocess", *, echo: bool = False, mounts=(), server: Any = None
):
    from kubeflow.local.task_handler import (
        DockerImageTaskHandler,
        ForkedTaskHandler,
        ImageEnvTaskHandler,
    )

    def make(**kwargs):
        if runner == "docker":
            return DockerImageTaskHandler(echo=echo, mounts={m: m for m in mounts}, **kwargs)
        if runner == "forked":
            return ForkedTaskHandler(echo=echo, server=server, **kwargs)
        return ImageEnvTaskHandler(echo=echo, **kwargs)

    return make


@contextlib.contextmanager
def task_server(runner: str, pipeline_root: str, shared: ForkServer | None = None):
    """The warm server `--runner forked` forks tasks from (None for the other runners):
    `shared` if the caller keeps one across jobs (see `run_local_job`), else a new one
    for this job, its log in the pipeline root, stopped at the end."""
    if runner != "forked":
        yield None
        return
    if shared is not None:  # the caller's: not ours to stop
        yield shared
        return
    from kubeflow.local.forked_tasks import ForkServer
    from kubeflow.local.task_handler import image_environment, image_workdir

    server = ForkServer(
        env=image_environment(),
        cwd=image_workdir(),
        log_path=os.path.join(pipeline_root, ".run-local", "fork-server.log"),
    )
    try:
        yield server
    finally:
        server.close()


def run_local_job(
    package: str,
    pipeline_root: str,
    *,
    arguments: Mapping[str, Any] | None = None,
    runner: str = "subprocess",
    echo: bool = False,
    printer: Printer = print,
    server: ForkServer | None = None,
) -> LocalRun:
    """Runs the compiled PipelineJob at `package` with its artifacts under `pipeline_root`.

    `server`: for `runner="forked"`, a task server the caller keeps across several jobs
    (from `task_server`; one import of TFX instead of one per job)."""
    job, spec = load_job(package)
    if "://" in pipeline_root:
        raise LocalRunError(
            f"pipeline root {pipeline_root!r}: run-local writes to a local folder; "
            "pass --pipeline-root DIR"
        )
    pipeline_root = os.path.abspath(pipeline_root)
    os.makedirs(pipeline_root, exist_ok=True)
    resolved = resolve_arguments(spec, arguments or {})
    mounts = [v for v in resolved.values() if isinstance(v, str) and os.path.isabs(v)]
    mounts = [m for m in mounts if Path(m).exists()]
    if runner not in RUNNERS:
        raise LocalRunError(f"runner {runner!r}: expected one of {', '.join(RUNNERS)}")
    with task_server(runner, pipeline_root, server) as tasks:
        factory = default_handler_factory(runner, echo=echo, mounts=mounts, server=tasks)
        result = _Run(job, spec, pipeline_root, resolved, factory, printer).run()
    result.arguments = resolved
    return result
