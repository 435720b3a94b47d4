"""`python -m kubeflow run-local`: its flags, the run, and what it prints."""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

from kubeflow.local import job_runner
from kubeflow.local.job import LocalRun, LocalRunError, load_job

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
        choices=job_runner.RUNNERS,
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
    run = job_runner.run_local_job(
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
    if run.failed_task is not None:  # not run.succeeded
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
