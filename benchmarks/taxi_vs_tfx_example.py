"""Benchmark: our pipeline vs TFX's own Chicago taxi native-Keras example, on the same data.

What it measures, in one invocation:

* ours: ``local_runner.py --run-dir <workdir>/ours --json`` on the embedded taxi data
  (``data/taxi/span-1/data.csv``, byte-identical to the example's ``data/simple/data.csv``).
* the example: ``tfx/examples/chicago_taxi_pipeline/taxi_pipeline_native_keras.py`` as shipped
  in the installed TFX, with its module file ``taxi_utils_native_keras.py``, its data and its
  own settings (Beam args, 1000 train steps, ...), run under ``LocalDagRunner`` instead of the
  ``BeamDagRunner`` its ``__main__`` uses. It is the anchor: nothing about it is tuned.
* the example in-process, two ways: with ``beam_pipeline_args=[]`` (Beam's default runner),
  and with the FnApiRunner named as ours names it (``--runner=FnApiRunner`` plus an empty
  ``--requirements_file``: given any Beam argument, TFX builds an sdist of tfx per Beam
  component unless a dependency flag is among them). The shipped Beam arguments
  (``--direct_running_mode=multi_processing``, ``--direct_num_workers=0``) make TFX build an
  sdist of tfx per Beam component and start worker processes; ours runs Beam in-process, so
  the in-process runs are the like-for-like comparison, and the headline is the faster of
  the two (the example's best configuration). Beam's default DirectRunner first tries to
  download and start its Prism runner for every pipeline (~2 CPU-s each where that fails,
  as offline here), which naming the FnApiRunner skips.

Both examples must evaluate the same eval data as ours (the Evaluator's example_count is
printed for each and checked equal) and the training examples seen (steps x batch) are
printed for each side. The example is driven through its private names
(``_create_pipeline``, ``_pipeline_name``, ``_beam_pipeline_args``) and its run_fn's batch
size; if a TFX release changes them, the benchmark stops at once and says what changed.

Each run is a separate subprocess with fresh directories (so nothing is cached) and
``TF_CPP_MIN_LOG_LEVEL=3``. Timings are wall-clock seconds of the *whole process*, Python and
TensorFlow imports included: what a user waits for. Quality is the Evaluator's overall-slice
``binary_accuracy`` of each run, plus whether the Evaluator blessed the model.

Targets: ours/example-in-process wall time <= 0.40, and ours' binary_accuracy >= the example's.
This is a benchmark, not a test: a missed target is reported, not failed. The exit status is
non-zero only when a run fails (the tail of its log is printed).

Run it (from any folder; it takes a few minutes)::

    .venv/bin/python benchmarks/taxi_vs_tfx_example.py [--order example-first] [--json] [--keep]
        [--timeout SECONDS] [--check-example]

``--check-example`` only checks that the installed example still has the names this
benchmark drives (seconds; CI's smoke test runs it).

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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import last_json_object  # noqa: E402  (the sibling that keeps results)

WALL_RATIO_TARGET = 0.40
EXAMPLE_REL_DIR = Path("examples") / "chicago_taxi_pipeline"
EXAMPLE_PIPELINE = "taxi_pipeline_native_keras.py"
EXAMPLE_MODULE = "taxi_utils_native_keras.py"
LOG_TAIL_LINES = 40
RUN_TIMEOUT = 1800.0  # seconds per pipeline process; a hung run is killed and reported
# What this benchmark uses of the example's pipeline module and module file.
EXAMPLE_NAMES = ("_create_pipeline", "_pipeline_name", "_beam_pipeline_args")
EXAMPLE_BATCH = re.compile(
    r"_input_fn\(\s*fn_args\.train_files,\s*fn_args\.data_accessor,\s*tf_transform_output,"
    r"\s*(\d+)\s*\)"
)
# The example's configurations: as shipped; in-process with Beam's default runner;
# in-process with the FnApiRunner named (the dependency flag: see the module docstring).
ANCHORS = ("example", "example_inprocess", "example_fnapi")
IN_PROCESS_ANCHORS = ("example_inprocess", "example_fnapi")  # the headline: the faster
ANCHOR_LABELS = {
    "example": "example as shipped",
    "example_inprocess": "example in-process",
    "example_fnapi": "example in-process, FnApiRunner",
}


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


class PeakRss:
    """Samples the resident memory of a process tree; keeps each process's peak.

    Beam's multi-processing mode and TFX's workers are children of the pipeline process, so
    one figure for the parent would hide them: this keeps the peak of every process seen and
    of the whole tree at one instant.
    """

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        import threading

        self._pid, self._interval = pid, interval
        self.per_process: dict[int, int] = {}
        self.names: dict[int, str] = {}
        # The root process's RSS over time (epoch seconds, bytes): set against the run's log, it
        # says which component the driver's memory belongs to.
        self.root_timeline: list[tuple[float, int]] = []
        self.tree_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        try:
            root = psutil.Process(self._pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop.wait(self._interval):
            total = 0
            try:
                processes = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for proc in processes:
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                total += rss
                if proc.pid == self._pid:
                    self.root_timeline.append((time.time(), rss))
                self.per_process[proc.pid] = max(self.per_process.get(proc.pid, 0), rss)
                if proc.pid not in self.names:
                    self.names[proc.pid] = _process_name(proc)
            self.tree_peak = max(self.tree_peak, total)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join(timeout=5)
        mb = 1024 * 1024
        return {
            "peak_rss_mb_max_process": max(self.per_process.values(), default=0) / mb,
            "peak_rss_mb_tree": self.tree_peak / mb,
            "processes_seen": len(self.per_process),
            # Every process's own peak, largest first: which one holds memory as data grows.
            "peak_rss_mb_by_process": [
                {"pid": pid, "name": self.names.get(pid, "?"), "mb": round(rss / mb, 1)}
                for pid, rss in sorted(self.per_process.items(), key=lambda kv: -kv[1])
            ],
        }


_COMPONENT_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*Component (\S+) is (running|finished)\.$"
)


def driver_peaks(timeline: list[tuple[float, int]], run_logs: Path) -> dict[str, dict[str, float]]:
    """The driver's peak RSS (MB) while each component ran, and its rise, from the run's log.

    The log (tfxp/local/runner.py) stamps "Component X is running." and "... is finished." in
    local time; components that run in the driver's process show their own memory here.
    """
    logs = sorted(run_logs.glob("*.log"), key=lambda p: p.stat().st_mtime)
    if not logs or not timeline:
        return {}
    windows: dict[str, list[float]] = {}
    for line in logs[-1].read_text(errors="replace").splitlines():
        match = _COMPONENT_LINE.match(line)
        if match:
            stamp = time.mktime(time.strptime(match[1][:19], "%Y-%m-%d %H:%M:%S"))
            windows.setdefault(match[2], []).append(stamp + int(match[1][20:]) / 1000)
    mb = 1024 * 1024
    peaks = {}
    for node, stamps in windows.items():
        start, end = stamps[0], stamps[-1] if len(stamps) > 1 else float("inf")
        inside = [rss for t, rss in timeline if start <= t <= end]
        if inside:
            before = [rss for t, rss in timeline if t < start] or inside[:1]
            # The rise is what the component added: freed memory rarely leaves the process.
            peaks[node] = {
                "peak": round(max(inside) / mb, 1),
                "rise": round((max(inside) - before[-1]) / mb, 1),
            }
    return peaks


def _process_name(proc: Any) -> str:
    """A short name for a sampled process: the script or module it runs, else its executable."""
    import psutil

    try:
        argv = proc.cmdline()
    except psutil.Error:
        return "?"
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "-m" and i + 1 < len(argv):
            return argv[i + 1].rsplit(".", 1)[-1]
        if arg.endswith(".py"):
            return Path(arg).name
    return Path(argv[0]).name if argv else "?"


def _run_timed(
    name: str,
    cmd: list[str],
    cwd: Path,
    log_dir: Path,
    timeout: float = RUN_TIMEOUT,
    run_logs: Path | None = None,
) -> RunResult:
    """Runs `cmd` with stdout/stderr to log files; returns its whole-process wall time.

    A run still going after `timeout` seconds is killed and reported as failed (exit 124).
    The peak resident memory of every process in its tree is sampled (`PeakRss`).
    """
    stdout_log = log_dir / f"{name}.stdout.log"
    stderr_log = log_dir / f"{name}.stderr.log"
    print(f"[{name}] running: {' '.join(cmd)}", flush=True)
    print(f"[{name}]   cwd {cwd}", flush=True)
    print(f"[{name}]   logs {stdout_log}", flush=True)
    print(f"[{name}]        {stderr_log}", flush=True)
    with stdout_log.open("wb") as out, stderr_log.open("wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=_subprocess_env(), stdout=out, stderr=err, start_new_session=True
        )
        memory = PeakRss(proc.pid)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the whole tree: Beam workers too
            proc.wait()
            returncode = 124
            err.write(f"\nbenchmark: killed after {timeout:.0f} s (--timeout)\n".encode())
        wall = time.perf_counter() - started
        rss = memory.stop()
        if run_logs is not None:
            rss["peak_rss_mb_driver_by_component"] = driver_peaks(memory.root_timeline, run_logs)
    status = "ok" if returncode == 0 else f"FAILED (exit {returncode})"
    print(f"[{name}] {status} in {wall:.1f}s", flush=True)
    result = RunResult(name, wall, returncode, str(stdout_log), str(stderr_log))
    result.extra.update(rss)
    return result


def _tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    text = Path(path).read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def _print_failure(result: RunResult) -> None:
    print(f"\n{result.name} run failed (exit {result.returncode}).", file=sys.stderr)
    for log in (result.stdout_log, result.stderr_log):
        print(f"--- last {LOG_TAIL_LINES} lines of {log} ---", file=sys.stderr)
        print(_tail(log), file=sys.stderr)


def _fresh_dir(path: Path) -> Path:
    if path.exists():
        raise SystemExit(f"{path} already exists; runs need fresh directories (no caching)")
    path.mkdir(parents=True)
    return path


# --------------------------------------------------------------------------- our pipeline


def run_ours(
    workdir: Path,
    timeout: float = RUN_TIMEOUT,
    extra_args: tuple[str, ...] = (),
    hyperparameters: Any = None,
) -> RunResult:
    """Our pipeline in a subprocess; `extra_args` go to local_runner.py (e.g. --data-root).

    `hyperparameters`: the trainer's hyperparameters class, which knows its batch size
    (default: trainer.base.Hyperparameters, the tabular trainers').
    """
    run_dir = workdir / "ours"  # created by the pipeline itself; must not exist yet
    if run_dir.exists():
        raise SystemExit(f"{run_dir} already exists; runs need fresh directories (no caching)")
    cmd = [sys.executable, "local_runner.py", "--run-dir", str(run_dir), "--json", *extra_args]
    result = _run_timed("ours", cmd, REPO_ROOT, workdir, timeout, run_logs=run_dir / "logs")
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
    result.extra.update(
        run_id=summary.get("run_id"),
        pipeline_wall_seconds=summary.get("wall_seconds"),
        metrics=metrics,
        pushed_model=summary.get("pushed_model"),
    )
    with _quiet_tf():
        steps, custom = _trainer_settings(run_dir / "metadata.sqlite")
        if hyperparameters is None:
            from trainer.base import Hyperparameters

            hyperparameters = Hyperparameters
        batch = hyperparameters.from_custom_config(custom).batch_size
    result.extra.update(train_steps=steps, train_batch=batch)
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


def prepare_example(workdir: Path, data_files: list[Path] | None = None) -> None:
    """Copies the example's data and module file into a fresh `workdir` (outside the timing).

    `data_files` replace the example's own CSV (the scale benchmark's generated span); the
    example's CsvExampleGen reads every file in its data folder.
    """
    source = _tfx_dir() / EXAMPLE_REL_DIR
    paths = _example_paths(_fresh_dir(workdir))
    if data_files is None:
        shutil.copytree(source / "data" / "simple", paths["data_root"])
    else:
        paths["data_root"].mkdir(parents=True)
        for path in data_files:
            try:  # the same bytes without a copy; a copy across file systems
                os.link(path, paths["data_root"] / path.name)
            except OSError:
                shutil.copy2(path, paths["data_root"] / path.name)
    paths["module_file"].parent.mkdir()
    shutil.copy2(source / EXAMPLE_MODULE, paths["module_file"])


def missing_names(path: Path, names: tuple[str, ...]) -> list[str]:
    """Which of `names` the module at `path` does not define at top level (read, not imported)."""
    import ast

    tree = ast.parse(path.read_text())
    defined = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    } | {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return [name for name in names if name not in defined]


def check_example() -> int:
    """The example's training batch size; exits with a clear message if the example changed.

    Reads the installed files without importing TFX (seconds, not minutes).
    """
    folder = _tfx_dir() / EXAMPLE_REL_DIR
    pipeline_file, module_file = folder / EXAMPLE_PIPELINE, folder / EXAMPLE_MODULE
    for path in (pipeline_file, module_file, folder / "data" / "simple" / "data.csv"):
        if not path.is_file():
            raise SystemExit(f"TFX's taxi example changed: {path} is missing; update {__file__}")
    missing = missing_names(pipeline_file, EXAMPLE_NAMES)
    if missing:
        raise SystemExit(
            f"TFX's taxi example changed: {pipeline_file} no longer defines {missing}, which "
            f"this benchmark drives; update {__file__}"
        )
    batch = EXAMPLE_BATCH.search(module_file.read_text())
    if batch is None:
        raise SystemExit(
            f"TFX's taxi example changed: cannot find the training batch size "
            f"(`_input_fn(fn_args.train_files, ..., N)`) in {module_file}; update {__file__}"
        )
    return int(batch.group(1))


def _anchor_beam_args(anchor: str, example: Any, workdir: Path) -> list[str]:
    """The Beam arguments the example runs with as `anchor`."""
    if anchor == "example":
        return list(example._beam_pipeline_args)
    if anchor == "example_inprocess":
        return []  # Beam's default runner, no sdist, no worker processes
    if anchor == "example_fnapi":
        empty = workdir / "no-requirements.txt"
        empty.write_text("")
        return ["--runner=FnApiRunner", f"--requirements_file={empty}"]
    raise ValueError(f"unknown anchor {anchor!r}; one of {', '.join(ANCHORS)}")


def _drive_example(
    workdir: Path,
    anchor: str = "example",
    pipeline_file: Path | None = None,
    module_file: Path | None = None,
) -> int:
    """Subprocess body: the example's own pipeline, under LocalDagRunner.

    `pipeline_file` and `module_file` drive another TFX example with the same
    `_create_pipeline` arguments (the caller has checked it); default: the taxi example.
    """
    from absl import logging as absl_logging
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    if pipeline_file is None:
        check_example()
        pipeline_file = _tfx_dir() / EXAMPLE_REL_DIR / EXAMPLE_PIPELINE
    spec = importlib.util.spec_from_file_location(pipeline_file.stem, pipeline_file)
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
        module_file=str(module_file or paths["module_file"]),
        serving_model_dir=str(paths["serving_model_dir"]),
        metadata_path=str(paths["metadata_path"]),
        beam_pipeline_args=_anchor_beam_args(anchor, example, workdir),
    )
    LocalDagRunner().run(pipeline)
    return 0


def run_example(
    workdir: Path,
    timeout: float = RUN_TIMEOUT,
    anchor: str = "example",
    data_files: list[Path] | None = None,
) -> RunResult:
    if anchor not in ANCHORS:
        raise ValueError(f"unknown anchor {anchor!r}; one of {', '.join(ANCHORS)}")
    example_dir = workdir / anchor
    prepare_example(example_dir, data_files)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_run-example", str(example_dir)]
    cmd += ["--_anchor", anchor]
    return _run_timed(anchor, cmd, example_dir, workdir, timeout)


def _trainer_settings(metadata_path: Path) -> tuple[int | None, dict[str, Any]]:
    """(train steps, custom_config) of the Trainer execution recorded in a run's ML Metadata."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(metadata_path)
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    store = metadata_store.MetadataStore(config)
    for type_ in store.get_execution_types():
        if not type_.name.endswith("Trainer"):
            continue
        for execution in store.get_executions_by_type(type_.name):
            props = execution.custom_properties
            train_args = json.loads(props["train_args"].string_value or "{}")
            custom = json.loads(props["custom_config"].string_value or "null") or {}
            steps = train_args.get("num_steps", train_args.get("numSteps"))
            return (int(steps) if steps is not None else None), custom
    return None, {}


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
        steps, _ = _trainer_settings(_example_paths(workdir)["metadata_path"])
    result.extra.update(train_steps=steps, train_batch=check_example())


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
    if "example_count" not in result.extra.get("metrics", {}):
        # The example's eval config has no ExampleCount metric: count what its Evaluator
        # read, the eval split of its ExampleGen output.
        examples = [a for a in store.get_artifacts_by_type("Examples") if "ExampleGen/" in a.uri]
        if examples:
            import glob

            import tensorflow as tf

            eval_files = glob.glob(os.path.join(examples[0].uri, "Split-eval", "*"))
            count = sum(1 for _ in tf.data.TFRecordDataset(eval_files, compression_type="GZIP"))
            result.extra.setdefault("metrics", {})["example_count"] = float(count)
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


def _eval_count(result: RunResult) -> int | None:
    count = (result.extra.get("metrics") or {}).get("example_count")
    return int(count) if isinstance(count, int | float) else None


def _examples_seen(result: RunResult) -> int | None:
    steps, batch = result.extra.get("train_steps"), result.extra.get("train_batch")
    return steps * batch if steps and batch else None


def compare(ours: RunResult, anchors: dict[str, RunResult]) -> dict[str, Any]:
    """Ratios against each anchor (the faster in-process example is the headline), and the checks."""
    verdict: dict[str, Any] = {"wall_ratio_target": WALL_RATIO_TARGET}
    for name, anchor in anchors.items():
        ratio = ours.wall_seconds / anchor.wall_seconds if anchor.wall_seconds else None
        verdict[f"wall_ratio_vs_{name}"] = ratio
    in_process = [n for n in IN_PROCESS_ANCHORS if anchors.get(n) and anchors[n].wall_seconds]
    best = min(in_process, key=lambda n: anchors[n].wall_seconds) if in_process else None
    headline = verdict[f"wall_ratio_vs_{best}"] if best else None
    verdict["headline_anchor"] = best
    verdict["wall_ratio"] = headline
    verdict["wall_ratio_met"] = None if headline is None else headline <= WALL_RATIO_TARGET
    accuracies = [a.binary_accuracy for a in anchors.values() if a.binary_accuracy is not None]
    verdict["accuracy_met"] = (
        ours.binary_accuracy >= max(accuracies)
        if ours.binary_accuracy is not None and accuracies
        else None
    )
    counts = {name: _eval_count(r) for name, r in {"ours": ours, **anchors}.items()}
    verdict["eval_example_counts"] = counts
    verdict["eval_counts_equal"] = (
        len(set(counts.values())) == 1 if None not in counts.values() else None
    )
    verdict["training_examples_seen"] = {
        name: _examples_seen(r) for name, r in {"ours": ours, **anchors}.items()
    }
    return verdict


def render(
    ours: RunResult, anchors: dict[str, RunResult], verdict: dict[str, Any], order: str
) -> str:
    names = [n for n in ANCHORS if n in anchors]
    runs = [ours, *(anchors[n] for n in names)]
    counts = verdict["eval_example_counts"]

    def steps_x_batch(r: RunResult) -> str:
        n = _examples_seen(r)
        return (
            "n/a" if n is None else f"{r.extra['train_steps']} x {r.extra['train_batch']} = {n:,}"
        )

    def ratio(name: str) -> str:
        cell = _fmt(verdict[f"wall_ratio_vs_{name}"], 3)
        return cell + " (headline)" if name == verdict.get("headline_anchor") else cell

    rows = [
        ("", "ours", *(ANCHOR_LABELS[n] for n in names), "target", ""),
        ("wall seconds (whole process)", *(_fmt(r.wall_seconds, 1) for r in runs), "", ""),
        (
            "wall ratio ours / anchor",
            "",
            *(ratio(n) for n in names),
            f"<= {WALL_RATIO_TARGET:.2f} (faster in-process)",
            _verdict(verdict["wall_ratio_met"]),
        ),
        (
            "eval binary_accuracy",
            *(_fmt(r.binary_accuracy) for r in runs),
            "ours >= examples",
            _verdict(verdict["accuracy_met"]),
        ),
        (
            "eval examples (Evaluator)",
            *(str(counts[n]) if counts[n] is not None else "n/a" for n in ("ours", *names)),
            "equal",
            _verdict(verdict["eval_counts_equal"]),
        ),
        ("training examples seen", *(steps_x_batch(r) for r in runs), "", ""),
        (
            "peak RSS MB (largest process)",
            *(_fmt(r.extra.get("peak_rss_mb_max_process"), 0) for r in runs),
            "",
            "",
        ),
        ("blessed", *(_fmt(r.blessed) for r in runs), "", ""),
        ("pushed", *(_fmt(r.pushed) for r in runs), "", ""),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"\nResults (order: {order}; wall clock of whole subprocesses, imports included)"]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    if verdict["eval_counts_equal"] is False:
        lines.append("WARNING: the eval sets differ in size: accuracy is not like for like")
    for result in runs:
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
    parser.add_argument(
        "--timeout",
        type=float,
        default=RUN_TIMEOUT,
        help=f"seconds each pipeline process may take before it is killed (default {RUN_TIMEOUT:.0f})",
    )
    parser.add_argument(
        "--check-example",
        action="store_true",
        help="only check that TFX's installed example still has what this benchmark drives",
    )
    # Internal: the subprocess that runs TFX's example.
    parser.add_argument("--_run-example", dest="run_example", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_anchor", dest="anchor", default="example", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.run_example is not None:
        return _drive_example(args.run_example.resolve(), anchor=args.anchor)
    batch = check_example()  # before minutes of runs, not after
    if args.check_example:
        print(f"TFX's taxi example: {', '.join(EXAMPLE_NAMES)} present; training batch {batch}")
        return 0

    if args.workdir is not None:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        remove_after = False
    else:
        workdir = Path(tempfile.mkdtemp(prefix="taxi-vs-tfx-example-"))
        remove_after = not args.keep
    print(f"work dir: {workdir}", flush=True)
    for name in ("ours", *ANCHORS):
        if (workdir / name).exists():
            raise SystemExit(f"{workdir / name} already exists; runs need fresh directories")

    names = ["ours", *ANCHORS] if args.order == "ours-first" else [*ANCHORS, "ours"]
    results: dict[str, RunResult] = {}
    for name in names:
        if name == "ours":
            result = run_ours(workdir, args.timeout)
        else:
            result = run_example(workdir, args.timeout, anchor=name)
        results[name] = result
        if result.returncode != 0:
            _print_failure(result)
            print(f"work dir kept: {workdir}", file=sys.stderr)
            return 1

    ours = results["ours"]
    anchors = {name: results[name] for name in ANCHORS}
    for name, anchor in anchors.items():
        try:
            read_example_results(anchor, workdir / name)
        except Exception as e:  # keep the timings even if the example's outputs are unreadable
            print(f"warning: could not read {name}'s results: {e!r}", file=sys.stderr)
    verdict = compare(ours, anchors)
    print(render(ours, anchors, verdict, args.order))
    if args.json:
        payload = {
            "order": args.order,
            "workdir": str(workdir),
            "ours": asdict(ours),
            **{name: asdict(anchor) for name, anchor in anchors.items()},
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
