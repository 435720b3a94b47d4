"""The Trainer's run_fn on N local worker processes, each with its own TF_CONFIG on loopback.

What Vertex AI or a Kubeflow TFJob does on a cluster, done here: every worker
runs TFX's Trainer executor, and so the run_fn, with the same arguments; only
TF_CONFIG's task index differs. `python -m tfxp.local.workers SPEC.json` is
one worker (the child).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config import PipelineConfig
from trainer.ports import free_ports

TRANSFORM = "Transform"


class WorkersError(RuntimeError):
    """Multi-worker training could not start or did not finish; the message says why."""


@dataclass(frozen=True)
class TrainerArgs:
    """The Trainer's inputs and outputs (artifact folders) and settings, as JSON for the workers.

    Each worker runs TFX's Trainer executor (GenericExecutor) on them, as a
    Vertex AI replica does (`tfx.scripts.run_executor`), so the run_fn gets
    the FnArgs the Trainer would give it.
    """

    run_fn: str
    examples: str  # transformed Examples: Split-train/, Split-eval/
    transform_graph: str
    model: str
    model_run: str
    train_steps: int
    eval_steps: int
    custom_config: dict[str, Any] = field(default_factory=dict)

    @property
    def serving_model_dir(self) -> str:
        return os.path.join(self.model, "Format-Serving")  # TFX's path_utils layout

    @property
    def model_run_dir(self) -> str:
        return self.model_run


def tf_config(ports: list[int], index: int) -> dict[str, Any]:
    """TF_CONFIG of worker `index` in a loopback cluster on `ports` (worker 0 is the chief)."""
    return {
        "cluster": {"worker": [f"localhost:{port}" for port in ports]},
        "task": {"type": "worker", "index": index},
    }


def _latest(folder: Path) -> Path:
    runs = [p for p in folder.glob("*") if p.name.isdigit()] if folder.is_dir() else []
    if not runs:
        raise WorkersError(f"no Transform output in {folder}: run the pipeline first (`tfxp run`)")
    return max(runs, key=lambda p: int(p.name))


def trainer_args(config: PipelineConfig, out_dir: Path) -> TrainerArgs:
    """The Trainer's arguments for the newest Transform output of `config`'s local run."""
    root = Path(config.pipeline_root) / TRANSFORM
    image = {"image": config.image.to_dict()} if config.image else {}
    tabular = {"tabular": config.tabular.to_dict()} if config.tabular is not None else {}
    return TrainerArgs(
        run_fn=config.run_fn,
        examples=str(_latest(root / "transformed_examples")),
        transform_graph=str(_latest(root / "transform_graph")),
        model=str(out_dir / "model"),
        model_run=str(out_dir / "model_run"),
        train_steps=config.train_steps,
        eval_steps=config.eval_steps,
        custom_config={"hyperparameters": dict(config.hyperparameters), **image, **tabular},
    )


@dataclass(frozen=True)
class WorkerResult:
    index: int
    returncode: int | None  # None: killed at the deadline
    log: Path


def launch(
    args: TrainerArgs,
    workers: int,
    out_dir: Path,
    timeout_s: float,
    popen: Callable[..., Any] = subprocess.Popen,
) -> list[WorkerResult]:
    """Runs `workers` processes of the run_fn and waits for all, at most `timeout_s`.

    Each worker's output goes to `out_dir/logs/worker-<i>.log`. A worker that
    fails or outlives the deadline has the others stopped too: the survivors
    would wait forever for it at the next all-reduce. `popen` starts each
    worker (`subprocess.Popen`: a fresh interpreter; the tests pass a fork
    server's, runtime/forkserver.py, to skip each worker's ~10 s of imports).
    """
    if workers < 1:
        raise WorkersError(f"workers must be >= 1, got {workers}")
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    spec = out_dir / "trainer_args.json"
    spec.write_text(json.dumps(asdict(args), indent=2))
    ports = free_ports(workers)
    procs = []
    for i in range(workers):
        env = {**os.environ, "TF_CONFIG": json.dumps(tf_config(ports, i))} if workers > 1 else None
        log = out_dir / "logs" / f"worker-{i}.log"
        with log.open("w") as out:
            cmd = [sys.executable, "-m", "tfxp.local.workers", str(spec)]
            procs.append((i, log, popen(cmd, env=env, stdout=out, stderr=out)))
    return _wait(procs, time.monotonic() + timeout_s)


def _wait(procs: list, deadline: float) -> list[WorkerResult]:
    codes: dict[int, int | None] = {}
    while len(codes) < len(procs) and time.monotonic() < deadline:
        for i, _, proc in procs:
            if i not in codes and proc.poll() is not None:
                codes[i] = proc.returncode
        if any(code != 0 for code in codes.values()):
            break
        time.sleep(0.5)
    for i, _, proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        codes.setdefault(i, proc.returncode if i in codes else None)
    return [WorkerResult(i, codes[i], log) for i, log, _ in procs]


def _run_worker(spec_path: str) -> None:
    from absl import logging
    from tfx.components.trainer.executor import GenericExecutor
    from tfx.types import artifact_utils, standard_artifacts

    logging.set_verbosity(logging.INFO)  # the run_fn's progress, into the worker's log
    args = TrainerArgs(**json.loads(Path(spec_path).read_text()))

    def artifact(kind: type, uri: str):
        made = kind()
        made.uri = uri
        return made

    examples = artifact(standard_artifacts.Examples, args.examples)
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    GenericExecutor().Do(
        {
            "examples": [examples],
            "transform_graph": [artifact(standard_artifacts.TransformGraph, args.transform_graph)],
        },
        {
            "model": [artifact(standard_artifacts.Model, args.model)],
            "model_run": [artifact(standard_artifacts.ModelRun, args.model_run)],
        },
        {
            "run_fn": args.run_fn,
            "train_args": json.dumps({"num_steps": args.train_steps}),
            "eval_args": json.dumps({"num_steps": args.eval_steps}),
            "custom_config": json.dumps(args.custom_config),
        },
    )


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    _run_worker(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # TF's teardown adds seconds and noise
