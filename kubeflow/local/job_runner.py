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
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from google.protobuf import json_format

if TYPE_CHECKING:
    from kubeflow.local.forked_tasks import ForkServer

Printer = Callable[[str], None]
REGISTRY = os.path.join(".run-local", "artifacts.jsonl")


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


# --- the artifact registry: the harness's stand-in for ML Metadata -----------


def _type_title(artifact_type: Any) -> str:
    if artifact_type.schema_title:
        return artifact_type.schema_title
    if artifact_type.instance_schema:
        return yaml.safe_load(artifact_type.instance_schema).get("title", "")
    return ""


class ArtifactRegistry:
    """Every output artifact of earlier completed tasks under one pipeline root, oldest first."""

    def __init__(self, pipeline_root: str) -> None:
        self.path = os.path.join(pipeline_root, REGISTRY)

    def entries(self) -> list[dict[str, Any]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def record(self, entries: list[dict[str, Any]]) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "a") as f:
            for entry in entries:
                f.write(json.dumps(entry, sort_keys=True) + "\n")

    _CLAUSE = re.compile(
        r'^(?:schema_title="(?P<title>[^"]*)"'
        r"|state=(?P<state>\w+)"
        r'|name="(?P<name>[^"]*)"'
        r"|metadata\.(?P<key>\w+)\.(?P<kind>number_value|string_value)=(?P<value>.+))$"
    )

    def latest(self, query: str) -> dict[str, Any] | None:
        """The newest artifact matching a TFX resolver's filter (the forms TFX 1.16 compiles)."""
        tests = []
        for clause in (c.strip() for c in query.split(" AND ")):
            m = self._CLAUSE.match(clause)
            if not m:
                raise LocalRunError(f"resolver filter clause {clause!r} is not supported locally")
            if m["title"] is not None:
                tests.append(lambda e, t=m["title"]: e["type"] == t)
            elif m["state"] is not None:
                tests.append(lambda e, s=m["state"]: s == "LIVE")
            elif m["name"] is not None:
                tests.append(lambda e, n=m["name"]: e["name"] == n)
            else:
                raw = m["value"].strip('"')
                want = float(raw) if m["kind"] == "number_value" else raw
                tests.append(lambda e, k=m["key"], w=want: e["metadata"].get(k) == w)
        matching = [e for e in self.entries() if all(t(e) for t in tests)]
        return matching[-1] if matching else None


# --- one task ----------------------------------------------------------------


def _artifact_entry(artifact: Any, title: str, run_id: str, task: str, key: str) -> dict:
    return {
        "name": artifact.name,
        "uri": artifact.uri,
        "metadata": dict(artifact.metadata),
        "type": title,
        "run_id": run_id,
        "task": task,
        "key": key,
    }


def _dsl_artifact(entry: dict[str, Any]) -> Any:
    from kfp import dsl

    return dsl.Artifact(name=entry["name"], uri=entry["uri"], metadata=entry["metadata"])


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
            title = _type_title(definition.artifact_type)
            artifacts = value if isinstance(value, list) else [value]
            record.outputs[key] = [
                _artifact_entry(a, title, self.run_id, task, key) for a in artifacts
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
                self.io_store.put_task_output(task, key, _dsl_artifact(found))
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


# --- the command ---------------------------------------------------------------


def add_arguments(p: Any) -> None:
    p.add_argument(
        "--package",
        default="build/kubeflow/taxi_pipeline.json",
        help="compiled PipelineJob (default: build/kubeflow/taxi_pipeline.json)",
    )
    p.add_argument(
        "--pipeline-root",
        help="local folder for the run's artifacts (default: the spec's pipeline root, if local)",
    )
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="runtime parameter, repeatable, as kfp.Client(...).create_run_from_pipeline_package"
        "(arguments=...) passes it, e.g. --arg data_root=/data/taxi",
    )
    p.add_argument(
        "--runner",
        choices=RUNNERS,
        default="subprocess",
        help="subprocess: each task a fresh interpreter in the image's environment reproduced "
        "from this checkout (default); forked: the same, forked from a process that imported "
        "TFX once (~10 s less per task, for iterating; not a fresh interpreter); docker: each "
        "task in the spec's image (needs a Docker engine)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="stream every task's log")


def _summary_lines(run: LocalRun) -> list[str]:
    lines = [f"run {run.run_id} of pipeline {run.pipeline_name!r}"]
    for task in run.tasks.values():
        found = ""
        if task.kind == "resolver" and task.state == "resolved":
            found = "  " + ", ".join(
                f"{k}: {'found' if v else 'nothing'}" for k, v in task.outputs.items()
            )
        took = f"{task.seconds:6.1f}s" if task.state in ("complete", "failed") else ""
        lines.append(f"  {task.name:48} {task.state:9} {took}{found}".rstrip())
    return lines


_RUNNER_WORDS = {
    "subprocess": "tasks as subprocesses in the image environment",
    "forked": "tasks forked from a warm process in the image environment",
    "docker": "the image, under Docker",
}


def cmd_run_local(args: Any) -> int:
    job, spec = load_job(args.package)
    root = args.pipeline_root or spec.default_pipeline_root
    if not root or "://" in root:
        raise LocalRunError(
            f"{args.package} was compiled for pipeline root {root!r}, which run-local cannot "
            "write: recompile with a local folder (`python -m kubeflow compile --pipeline-root "
            "DIR ...`; the Pusher and the gate's reports write below it) and pass the same "
            "--pipeline-root here"
        )
    arguments = {}
    for item in args.arg:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise LocalRunError(f"--arg {item!r}: expected NAME=VALUE such as data_root=/data")
        arguments[name] = value
    print(f"running {args.package} with KFP's local orchestration ({_RUNNER_WORDS[args.runner]})")
    run = run_local_job(
        args.package,
        root,
        arguments=arguments,
        runner=args.runner,
        echo=args.verbose,
        printer=print,
    )
    for line in _summary_lines(run):
        print(line)
    print(f"arguments: {json.dumps(run.arguments, sort_keys=True)}")
    print(f"artifacts: {run.run_root}")
    if not run.succeeded:
        task = run.tasks[run.failed_task]
        tail = _log_tail(task.log)
        print(f"error: task {task.name} exited {task.returncode}; log: {task.log}")
        for line in tail:
            print(f"  {line}")
        return 1
    pushed = _pushed_destination(run)
    if pushed:
        print(f"pushed model: {pushed}")
    return 0


def _log_tail(path: str | None, lines: int = 8) -> list[str]:
    if not path or not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        text = [line.rstrip() for line in f if not re.match(r"^[IWD]\d{4} ", line)]
    return text[-lines:]


def _pushed_destination(run: LocalRun) -> str | None:
    for task in run.tasks.values():
        for artifact in task.outputs.get("pushed_model", []):
            if artifact["metadata"].get("pushed"):
                return artifact["metadata"].get("pushed_destination")
    return None
