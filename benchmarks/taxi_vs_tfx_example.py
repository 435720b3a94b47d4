"""Benchmark: our pipeline vs TFX's own Chicago taxi native-Keras example, on the same data.

What it measures, in one invocation:

* ours: ``local_runner.py --run-dir <workdir>/ours --json`` on the embedded taxi data
  (``data/taxi/span-1/data.csv``, byte-identical to the example's ``data/simple/data.csv``).
* the example: ``tfx/examples/chicago_taxi_pipeline/taxi_pipeline_native_keras.py`` as shipped
  in the installed TFX, with its module file ``taxi_utils_native_keras.py``, its data and its
  own settings (Beam args, 1000 train steps, ...), run under ``LocalDagRunner`` instead of the
  ``BeamDagRunner`` its ``__main__`` uses. It is the anchor: nothing about it is tuned.

Each run is a separate subprocess with fresh directories (so nothing is cached) and
``TF_CPP_MIN_LOG_LEVEL=3``. Timings are wall-clock seconds of the *whole process*, Python and
TensorFlow imports included: what a user waits for. Quality is the Evaluator's overall-slice
``binary_accuracy`` of each run, plus whether the Evaluator blessed the model.

Targets: ours/example wall time <= 0.40, and ours' binary_accuracy >= the example's.
This is a benchmark, not a test: a missed target is reported, not failed. The exit status is
non-zero only when a run fails (the tail of its log is printed).

Run it (from any folder; it takes a few minutes)::

    .venv/bin/python benchmarks/taxi_vs_tfx_example.py [--order example-first] [--json] [--keep]

Timings on a shared machine are noisy; run it more than once before reading much into a few
seconds' difference.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
WALL_RATIO_TARGET = 0.40
EXAMPLE_REL_DIR = Path("examples") / "chicago_taxi_pipeline"
EXAMPLE_PIPELINE = "taxi_pipeline_native_keras.py"
EXAMPLE_MODULE = "taxi_utils_native_keras.py"
LOG_TAIL_LINES = 40


@dataclass
class RunResult:
    """One pipeline run, as measured from outside plus what its ML Metadata says."""

    name: str
    wall_seconds: float
    returncode: int
    stdout_log: str
    stderr_log: str
    binary_accuracy: float | None = None
    blessed: bool | None = None
    pushed: bool | None = None
    components: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- helpers


def _tfx_dir() -> Path:
    """The installed tfx package folder, found without importing tfx (keeps this process light)."""
    spec = importlib.util.find_spec("tfx")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("tfx is not installed in this Python; use the project's .venv/bin/python")
    return Path(next(iter(spec.submodule_search_locations)))


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return env


def _run_timed(name: str, cmd: list[str], cwd: Path, log_dir: Path) -> RunResult:
    """Runs `cmd` with stdout/stderr to log files; returns its whole-process wall time."""
    stdout_log = log_dir / f"{name}.stdout.log"
    stderr_log = log_dir / f"{name}.stderr.log"
    print(f"[{name}] running: {' '.join(cmd)}", flush=True)
    print(f"[{name}]   cwd {cwd}", flush=True)
    print(f"[{name}]   logs {stdout_log}", flush=True)
    print(f"[{name}]        {stderr_log}", flush=True)
    with stdout_log.open("wb") as out, stderr_log.open("wb") as err:
        started = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=cwd, env=_subprocess_env(), stdout=out, stderr=err, check=False
        )
        wall = time.perf_counter() - started
    status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
    print(f"[{name}] {status} in {wall:.1f}s", flush=True)
    return RunResult(name, wall, proc.returncode, str(stdout_log), str(stderr_log))


def _tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    text = Path(path).read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def _print_failure(result: RunResult) -> None:
    print(f"\n{result.name} run failed (exit {result.returncode}).", file=sys.stderr)
    for log in (result.stdout_log, result.stderr_log):
        print(f"--- last {LOG_TAIL_LINES} lines of {log} ---", file=sys.stderr)
        print(_tail(log), file=sys.stderr)


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last top-level JSON object in `text`: one starting with '{' at a line start."""
    decoder = json.JSONDecoder()
    for match in reversed(list(re.finditer(r"^\{", text, flags=re.MULTILINE))):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _fresh_dir(path: Path) -> Path:
    if path.exists():
        raise SystemExit(f"{path} already exists; runs need fresh directories (no caching)")
    path.mkdir(parents=True)
    return path


# --------------------------------------------------------------------------- our pipeline


def run_ours(workdir: Path) -> RunResult:
    run_dir = workdir / "ours"  # created by the pipeline itself; must not exist yet
    if run_dir.exists():
        raise SystemExit(f"{run_dir} already exists; runs need fresh directories (no caching)")
    cmd = [sys.executable, "local_runner.py", "--run-dir", str(run_dir), "--json"]
    result = _run_timed("ours", cmd, REPO_ROOT, workdir)
    if result.returncode != 0:
        return result
    summary = last_json_object(Path(result.stdout_log).read_text(errors="replace"))
    if summary is None:
        raise SystemExit(f"ours: no JSON summary found in {result.stdout_log}")
    metrics = summary.get("metrics") or {}
    accuracy = metrics.get("binary_accuracy")
    result.binary_accuracy = float(accuracy) if isinstance(accuracy, int | float) else None
    result.blessed = summary.get("blessed")
    result.pushed = summary.get("pushed")
    result.components = [
        {"node_id": c["node_id"], "state": c["state"], "seconds": c["seconds"]}
        for c in summary.get("components", [])
    ]
    result.extra = {
        "run_id": summary.get("run_id"),
        "pipeline_wall_seconds": summary.get("wall_seconds"),
        "metrics": metrics,
        "pushed_model": summary.get("pushed_model"),
    }
    return result


# --------------------------------------------------------------------------- TFX's example


def _example_paths(workdir: Path) -> dict[str, Path]:
    return {
        "data_root": workdir / "data" / "simple",
        # Its own folder: TFX packages every top-level .py next to the module file into a wheel.
        "module_file": workdir / "module" / EXAMPLE_MODULE,
        "pipeline_root": workdir / "pipeline_root",
        "serving_model_dir": workdir / "serving",
        "metadata_path": workdir / "metadata.db",
    }


def prepare_example(workdir: Path) -> None:
    """Copies the example's data and module file into a fresh `workdir` (outside the timing)."""
    source = _tfx_dir() / EXAMPLE_REL_DIR
    paths = _example_paths(_fresh_dir(workdir))
    shutil.copytree(source / "data" / "simple", paths["data_root"])
    paths["module_file"].parent.mkdir()
    shutil.copy2(source / EXAMPLE_MODULE, paths["module_file"])


def _drive_example(workdir: Path) -> int:
    """Subprocess body: the example's own pipeline, under LocalDagRunner."""
    import tfx
    from absl import logging as absl_logging
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    pipeline_file = Path(tfx.__file__).parent / EXAMPLE_REL_DIR / EXAMPLE_PIPELINE
    spec = importlib.util.spec_from_file_location("taxi_pipeline_native_keras", pipeline_file)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {pipeline_file}")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    absl_logging.set_verbosity(absl_logging.INFO)  # as the example's __main__ does
    paths = _example_paths(workdir)
    pipeline = example._create_pipeline(
        pipeline_name=example._pipeline_name,
        pipeline_root=str(paths["pipeline_root"]),
        data_root=str(paths["data_root"]),
        module_file=str(paths["module_file"]),
        serving_model_dir=str(paths["serving_model_dir"]),
        metadata_path=str(paths["metadata_path"]),
        beam_pipeline_args=example._beam_pipeline_args,
    )
    LocalDagRunner().run(pipeline)
    return 0


def run_example(workdir: Path) -> RunResult:
    example_dir = workdir / "example"
    prepare_example(example_dir)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_run-example", str(example_dir)]
    return _run_timed("example", cmd, example_dir, workdir)


@contextlib.contextmanager
def _quiet_tf() -> Iterator[None]:
    """Mutes TF/Beam import chatter while this process reads the example's outputs."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    root = logging.getLogger()
    saved_level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(saved_level)


def _custom_property(artifact: Any, key: str) -> Any:
    value = artifact.custom_properties.get(key)
    if value is None:
        return None
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def read_example_results(result: RunResult, workdir: Path) -> None:
    """Fills the example's accuracy, blessing and component times from its ML Metadata."""
    with _quiet_tf():
        _read_example_results(result, workdir)


def _read_example_results(result: RunResult, workdir: Path) -> None:
    import tensorflow_model_analysis as tfma
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(_example_paths(workdir)["metadata_path"])
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    store = metadata_store.MetadataStore(config)

    def latest(type_name: str) -> Any:
        artifacts = store.get_artifacts_by_type(type_name)
        return max(artifacts, key=lambda a: a.id) if artifacts else None

    evaluation = latest("ModelEvaluation")
    if evaluation is not None:
        eval_result = tfma.load_eval_result(evaluation.uri)
        metrics: dict[str, float] = {}
        for slice_key, per_output in eval_result.slicing_metrics:
            if slice_key != ():
                continue
            for per_sub_key in per_output.values():
                for named in per_sub_key.values():
                    for name, value in named.items():
                        if "doubleValue" in value:
                            metrics[name] = float(value["doubleValue"])
        result.binary_accuracy = metrics.get("binary_accuracy")
        result.extra["metrics"] = metrics
    blessing = latest("ModelBlessing")
    if blessing is not None:
        result.blessed = bool(_custom_property(blessing, "blessed"))
    pushed = latest("PushedModel")
    if pushed is not None:
        result.pushed = bool(_custom_property(pushed, "pushed"))

    states = {v: k for k, v in metadata_store_pb2.Execution.State.items()}
    node_type = store.get_context_type("node")
    node_type_id = node_type.id if node_type is not None else None
    for execution in sorted(store.get_executions(), key=lambda e: e.id):
        node = next(
            (
                c.name.split(".", 1)[-1]
                for c in store.get_contexts_by_execution(execution.id)
                if c.type_id == node_type_id
            ),
            "?",
        )
        millis = execution.last_update_time_since_epoch - execution.create_time_since_epoch
        result.components.append(
            {
                "node_id": node,
                "state": states.get(execution.last_known_state, "UNKNOWN"),
                "seconds": max(0.0, millis / 1000),
            }
        )


# --------------------------------------------------------------------------- report


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "MISSED")


def _fmt(value: float | bool | None, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.{digits}f}"


def compare(ours: RunResult, example: RunResult) -> dict[str, Any]:
    ratio = ours.wall_seconds / example.wall_seconds if example.wall_seconds else None
    accuracy_ok = (
        ours.binary_accuracy >= example.binary_accuracy
        if ours.binary_accuracy is not None and example.binary_accuracy is not None
        else None
    )
    return {
        "wall_ratio": ratio,
        "wall_ratio_target": WALL_RATIO_TARGET,
        "wall_ratio_met": None if ratio is None else ratio <= WALL_RATIO_TARGET,
        "accuracy_met": accuracy_ok,
    }


def render(ours: RunResult, example: RunResult, verdict: dict[str, Any], order: str) -> str:
    rows = [
        ("", "ours", "TFX example", "target", ""),
        (
            "wall seconds (whole process)",
            _fmt(ours.wall_seconds, 1),
            _fmt(example.wall_seconds, 1),
            "",
            "",
        ),
        (
            "wall ratio ours / example",
            _fmt(verdict["wall_ratio"], 3),
            "",
            f"<= {WALL_RATIO_TARGET:.2f}",
            _verdict(verdict["wall_ratio_met"]),
        ),
        (
            "eval binary_accuracy",
            _fmt(ours.binary_accuracy),
            _fmt(example.binary_accuracy),
            "ours >= example",
            _verdict(verdict["accuracy_met"]),
        ),
        ("blessed", _fmt(ours.blessed), _fmt(example.blessed), "", ""),
        ("pushed", _fmt(ours.pushed), _fmt(example.pushed), "", ""),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"\nResults (order: {order}; wall clock of whole subprocesses, imports included)"]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for result in (ours, example):
        lines.append(f"\nper-component seconds, {result.name} (from its ML Metadata):")
        width = max((len(c["node_id"]) for c in result.components), default=10)
        for c in result.components:
            lines.append(f"  {c['node_id']:<{width}}  {c['state'].lower():<9} {c['seconds']:6.1f}s")
        if result.name == "ours" and result.extra.get("pipeline_wall_seconds") is not None:
            in_process = result.extra["pipeline_wall_seconds"]
            lines.append(f"  (LocalDagRunner run inside the process: {in_process:.1f}s)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Wall time and accuracy of our pipeline vs TFX's Chicago taxi example."
    )
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, runs)")
    parser.add_argument(
        "--order",
        choices=("ours-first", "example-first"),
        default="ours-first",
        help="which pipeline runs first (default: ours-first)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where runs and logs go (default: a new temp dir); its ours/ and example/ must "
        "not exist yet. A given --workdir is never deleted.",
    )
    # Internal: the subprocess that runs TFX's example.
    parser.add_argument("--_run-example", dest="run_example", type=Path, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.run_example is not None:
        return _drive_example(args.run_example.resolve())

    if args.workdir is not None:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        remove_after = False
    else:
        workdir = Path(tempfile.mkdtemp(prefix="taxi-vs-tfx-example-"))
        remove_after = not args.keep
    print(f"work dir: {workdir}", flush=True)
    for name in ("ours", "example"):
        if (workdir / name).exists():
            raise SystemExit(f"{workdir / name} already exists; runs need fresh directories")

    runners = {"ours": run_ours, "example": run_example}
    names = ["ours", "example"] if args.order == "ours-first" else ["example", "ours"]
    results: dict[str, RunResult] = {}
    for name in names:
        result = runners[name](workdir)
        results[name] = result
        if result.returncode != 0:
            _print_failure(result)
            print(f"work dir kept: {workdir}", file=sys.stderr)
            return 1

    ours, example = results["ours"], results["example"]
    try:
        read_example_results(example, workdir / "example")
    except Exception as e:  # keep the timings even if the example's outputs are unreadable
        print(f"warning: could not read the example's results: {e!r}", file=sys.stderr)
    verdict = compare(ours, example)
    print(render(ours, example, verdict, args.order))
    if args.json:
        payload = {
            "order": args.order,
            "workdir": str(workdir),
            "ours": asdict(ours),
            "example": asdict(example),
            **verdict,
        }
        print(json.dumps(payload, indent=2, sort_keys=True))

    if remove_after:
        shutil.rmtree(workdir, ignore_errors=True)
        print(f"\nwork dir removed (use --keep to keep it): {workdir}")
    else:
        print(f"\nwork dir kept: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
