"""Checks a SavedModel the way a model server uses it, in a process that knows nothing of the project.

`check_model` sends real rows (serialized tf.Examples without the label, as a
client sends them) through the model's serving signature in a fresh Python
process (child.py: TensorFlow, no project code on its path) and compares its
outputs with the reference: the same signature called in this process on the
same rows as the Evaluator sends them (with the label), which is how TFMA's
signature-based evaluation gets the predictions it scores. The verdict is one
of: passed, cannot load, needs project code, fails on requests, disagrees.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from absl import logging

PASSED = "passed"
CANNOT_LOAD = "cannot load"
NEEDS_PROJECT_CODE = "needs project code"
FAILS_ON_REQUESTS = "fails on requests"
DISAGREES = "disagrees"
TOLERANCE = 1e-6
# The project's top-level packages: none may be importable in the fresh process.
PROJECT_PACKAGES = ("trainer", "pipeline", "components", "tfxp", "kubeflow")
# TensorFlow ops that call back into the Python process that built the graph.
PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
CHILD = Path(__file__).with_name("child.py")
CHILD_TIMEOUT_SECONDS = 600


@dataclass
class CheckResult:
    verdict: str
    message: str
    rows: int = 0
    max_abs_diff: float | None = None
    load_seconds: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    python_ops: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def python_ops(model_dir: str) -> list[str]:
    """Ops of the SavedModel's graphs that run Python code of the exporting process."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    try:
        saved.ParseFromString(Path(model_dir, "saved_model.pb").read_bytes())
    except Exception as e:  # noqa: BLE001 - unreadable (e.g. a DecodeError): loading will say more
        logging.warning("cannot read %s/saved_model.pb: %s", model_dir, e)
        return []
    found = set()
    for meta in saved.meta_graphs:
        graph = meta.graph_def
        nodes = list(graph.node) + [n for fn in graph.library.function for n in fn.node_def]
        found |= {n.op for n in nodes if n.op in PYTHON_OPS}
    return sorted(found)


def without_feature(serialized: bytes, feature: str) -> bytes:
    """A serialized tf.Example without `feature` (the label: clients do not send it).

    A SequenceExample's context is its field 1, a `Features` as tf.Example's is, and
    the parsed message keeps the fields it does not know (the feature lists) when it
    is written back: the same edit drops a context feature of a SequenceExample."""
    import tensorflow as tf

    example = tf.train.Example.FromString(serialized)
    if feature in example.features.feature:
        del example.features.feature[feature]
    return example.SerializeToString()


def _input_name(signature: Any) -> str:
    names = list(signature.structured_input_signature[1])
    if len(names) != 1:
        raise ValueError(f"the signature takes {names}; the serving check sends one input")
    return names[0]


def reference_outputs(model_dir: str, signature_name: str, rows: list[bytes]) -> tuple[str, dict]:
    """(input name, output name -> array): the signature called in this process, as TFMA does."""
    import numpy as np
    import tensorflow as tf

    signature = tf.saved_model.load(model_dir).signatures[signature_name]
    name = _input_name(signature)
    outputs: dict[str, list] = {}
    for i in range(0, len(rows), 64):
        for key, value in signature(**{name: tf.constant(rows[i : i + 64])}).items():
            outputs.setdefault(key, []).append(value.numpy())
    return name, {k: np.concatenate(v) for k, v in outputs.items()}


def site_dirs() -> list[str]:
    """Where the installed packages are, without the project root the editable install adds."""
    project = str(Path(__file__).resolve().parents[2])
    dirs = [
        *site.getsitepackages(),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    ]
    seen: list[str] = []
    for d in dirs:
        if d and d not in seen and os.path.realpath(d) != os.path.realpath(project):
            seen.append(d)
    return seen


class Child:
    """child.py in a fresh interpreter, started before its request so TensorFlow's
    import there overlaps this process's reference work; `send` gives the request."""

    def __init__(self, out_dir: str, log_path: str) -> None:
        self.out_dir = out_dir
        self.log_path = log_path
        self.started_early = False  # by child_started_early, outside any check's folder
        start = {
            "site_dirs": site_dirs(),
            "project_packages": list(PROJECT_PACKAGES),
            "out_dir": out_dir,
        }
        start_path = os.path.join(out_dir, "start.json")
        Path(start_path).write_text(json.dumps(start))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        with open(log_path, "w") as log:
            self._process = subprocess.Popen(  # noqa: S603 - this interpreter, isolated, on the check's own child script
                [sys.executable, "-I", "-S", str(CHILD), start_path],
                cwd=out_dir,  # an empty folder: nothing importable by accident
                env=env,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def send(self, request: dict[str, Any]) -> dict[str, Any]:
        """The child's result.json for `request` (model_dir, signature, input_name, ...)."""
        try:
            self._process.communicate(json.dumps(request) + "\n", timeout=CHILD_TIMEOUT_SECONDS)
        except BrokenPipeError:  # it ended before reading (isolation or import failed)
            self._process.wait(timeout=CHILD_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.cancel()
            return {"stage": "crash", "error": f"no answer within {CHILD_TIMEOUT_SECONDS} s"}
        result_path = Path(self.out_dir, "result.json")
        if not result_path.exists():
            tail = Path(self.log_path).read_text(errors="replace")[-2000:]
            return {"stage": "crash", "error": f"the fresh process ended without a result:\n{tail}"}
        return json.loads(result_path.read_text())

    def cancel(self) -> None:
        """Ends the child without a request (this process could not make one)."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()

    def running(self) -> bool:
        return self._process.poll() is None


_early: Child | None = None
_early_lock = threading.Lock()


@contextlib.contextmanager
def child_started_early() -> Iterator[None]:
    """Within the block, one fresh process is already importing TensorFlow (seconds
    of one core, while a run's own start-up keeps only one busy); the first
    check_model in this process takes it. Ended with the block if no check took it.
    """
    global _early
    root = tempfile.mkdtemp(prefix="serving-check-")
    out_dir = os.path.join(root, "child")
    os.mkdir(out_dir)  # empty, as the child's working directory must be
    child = Child(out_dir, os.path.join(root, "child.log"))
    child.started_early = True
    with _early_lock:
        _early = child
    try:
        yield
    finally:
        with _early_lock:
            if _early is child:
                _early = None
        child.cancel()
        shutil.rmtree(root, ignore_errors=True)


def _fresh_child(work_dir: str) -> Child:
    """The child started early if one waits, else a new one in `work_dir`."""
    global _early
    with _early_lock:
        child, _early = _early, None
    if child is not None and child.running():
        return child
    out_dir = tempfile.mkdtemp(prefix="child-", dir=work_dir)
    return Child(out_dir, os.path.join(work_dir, "child.log"))


def _needs_project_code(error: str, ops: list[str]) -> bool:
    return bool(ops) or "No module named" in error or "pyfunc" in error.lower()


def _difference(served: Any, reference: Any) -> float:
    """Largest absolute difference; for text outputs 0 when all equal, else infinity."""
    import numpy as np

    if served.shape != reference.shape:
        return float("inf")
    if served.size == 0:
        return 0.0
    if served.dtype.kind in "OSU" or reference.dtype.kind in "OSU":
        return 0.0 if bool(np.all(served == reference)) else float("inf")
    return float(np.max(np.abs(served.astype(np.float64) - reference.astype(np.float64))))


def _last_line(error: str) -> str:
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else error


def _absolute(path: str) -> str:
    """A local path made absolute; a URI (s3://, gs://) as it is."""
    return path if "://" in path else os.path.abspath(path)


def _end_child(fresh, work_dir: str) -> None:
    fresh.cancel()  # a no-op once it answered; otherwise no child outlives the check
    if fresh.started_early:  # its files are in a temporary folder: keep them with the check's
        shutil.copyfile(fresh.log_path, os.path.join(work_dir, "child.log"))
        shutil.copytree(fresh.out_dir, os.path.join(work_dir, "child-started-early"))


def _latency(child: dict) -> dict[str, float]:
    """The child's latency figures, `batch_{1,64}_{p50,p99}` in milliseconds."""
    return {
        f"batch_{size}_{q}": child[f"batch_{size}"][f"{q}_ms"]
        for size in (1, 64)
        for q in ("p50", "p99")
    }


def check_model(
    model_dir: str,
    rows: list[bytes],
    *,
    signature: str,
    label_key: str,
    work_dir: str,
    latency_rows: int = 100,
) -> CheckResult:
    """The serving check of the SavedModel in `model_dir` on `rows` (serialized eval examples)."""
    import numpy as np
    import tensorflow as tf

    # The child runs in its own empty folder: paths it is given must not be relative.
    model_dir, work_dir = _absolute(model_dir), _absolute(work_dir)
    os.makedirs(work_dir, exist_ok=True)
    fresh = _fresh_child(work_dir)
    try:
        ops = python_ops(model_dir)
        try:
            input_name, reference = reference_outputs(model_dir, signature, rows)
        except Exception as e:  # noqa: BLE001 - not even this process can: no server will
            return CheckResult(CANNOT_LOAD, f"cannot load: {type(e).__name__}: {e}", python_ops=ops)
        examples = os.path.join(work_dir, "requests.tfrecord")
        with tf.io.TFRecordWriter(examples) as writer:
            for row in rows:
                writer.write(without_feature(row, label_key))
        child = fresh.send(
            {
                "model_dir": model_dir,
                "signature": signature,
                "input_name": input_name,
                "examples": examples,
                "latency_rows": min(latency_rows, len(rows)),
            }
        )
    finally:
        _end_child(fresh, work_dir)
    stage, error = child.get("stage"), child.get("error", "")
    common: dict[str, Any] = dict(rows=len(rows), python_ops=ops)
    if stage != "done":
        if _needs_project_code(error, ops):
            why = f"its graph calls Python ({', '.join(ops)})" if ops else _last_line(error)
            return CheckResult(NEEDS_PROJECT_CODE, f"needs project code: {why}", **common)
        verdict = FAILS_ON_REQUESTS if stage == "predict" else CANNOT_LOAD
        return CheckResult(verdict, f"{verdict} in a fresh process: {_last_line(error)}", **common)
    # Pickled object arrays: string outputs (class names); written by our own child.
    with np.load(os.path.join(fresh.out_dir, "outputs.npz"), allow_pickle=True) as npz:
        served = {k: npz[k] for k in npz.files}
    latency = _latency(child)
    common.update(load_seconds=child["load_seconds"], latency_ms=latency)
    if set(served) != set(reference):
        return CheckResult(
            DISAGREES,
            f"disagrees: outputs {sorted(served)} served, {sorted(reference)} evaluated",
            **common,
        )
    diff = max((_difference(served[k], reference[k]) for k in served), default=0.0)
    if not diff <= TOLERANCE:
        return CheckResult(
            DISAGREES,
            f"disagrees: outputs differ from the Evaluator's by up to {diff:.3g} "
            f"(allowed {TOLERANCE:g}) on {len(rows)} eval rows sent without {label_key!r}",
            max_abs_diff=diff,
            **common,
        )
    return CheckResult(
        PASSED,
        f"passed: {len(rows)} eval rows served as the Evaluator scored them (max difference "
        f"{diff:.3g}); load {child['load_seconds']:.2f}s, batch 1 p50 "
        f"{latency['batch_1_p50']:.2f} ms",
        max_abs_diff=diff,
        **common,
    )
