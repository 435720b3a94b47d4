"""The serving check's fresh process: TensorFlow and the SavedModel, nothing of the project.

Run by components/release/serving_check/check.py as `python -I -S child.py START.json`:
-I ignores PYTHON* variables, the user's site and the working directory; -S
skips `site`, so no .pth file (the editable install's, which puts the project
on sys.path) is read. The installed packages' folders are appended to sys.path
by hand. This file imports nothing of the project, and first proves that it
cannot (`import trainer`, `import pipeline`, `import components` must fail).

START.json: site_dirs, project_packages, out_dir. The process is started before
the parent has its reference outputs, so TensorFlow's import (seconds) overlaps
that work; once TensorFlow is in, it reads the request, one JSON line on stdin:
model_dir, signature, input_name, examples (a TFRecord file of serialized
tf.Examples as a client sends them), latency_rows. An empty stdin (the parent
gave up) ends it. Writes out_dir/result.json and out_dir/outputs.npz.
"""

import importlib
import json
import os
import sys
import time
import traceback


def _percentile(values, q):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(q / 100 * (len(ordered) - 1)))))
    return ordered[index]


def _timings(call, batches):
    seconds = []
    for batch in batches:
        start = time.perf_counter()
        call(batch)
        seconds.append(time.perf_counter() - start)
    return {
        "p50_ms": 1000 * _percentile(seconds, 50),
        "p99_ms": 1000 * _percentile(seconds, 99),
        "requests": len(seconds),
    }


def _importable(packages):
    found = []
    for name in packages:
        try:
            importlib.import_module(name)
            found.append(name)
        except ImportError:
            pass
    return found


def main(start_path):
    with open(start_path) as f:
        request = json.load(f)
    result = {"stage": "start", "python": sys.executable}
    out_dir = request["out_dir"]

    def finish(**extra):
        result.update(extra)
        with open(os.path.join(out_dir, "result.json"), "w") as f:
            json.dump(result, f, indent=1)

    sys.path.extend(request["site_dirs"])
    leaked = _importable(request["project_packages"])
    result["project_importable"] = leaked
    if leaked:
        return finish(stage="isolation", error=f"project packages importable: {leaked}")
    try:
        import numpy as np
        import tensorflow as tf
    except Exception:  # noqa: BLE001 - whatever fails is the check's answer, reported to the parent
        return finish(stage="import", error=traceback.format_exc(limit=3))
    line = sys.stdin.readline()
    if not line.strip():
        return finish(stage="cancelled", error="no request: the parent gave up")
    request.update(json.loads(line))
    examples = [r.numpy() for r in tf.data.TFRecordDataset(request["examples"])]
    start = time.perf_counter()
    try:
        model = tf.saved_model.load(request["model_dir"])
        signature = model.signatures[request["signature"]]
    except Exception:  # noqa: BLE001 - whatever fails is the check's answer, reported to the parent
        return finish(stage="load", error=traceback.format_exc(limit=3))
    result["load_seconds"] = time.perf_counter() - start
    name = request["input_name"]

    def call(batch):
        return signature(**{name: tf.constant(batch)})

    try:
        outputs = {}
        for i in range(0, len(examples), 64):
            for key, value in call(examples[i : i + 64]).items():
                outputs.setdefault(key, []).append(value.numpy())
        np.savez(
            os.path.join(out_dir, "outputs.npz"),
            **{k: np.concatenate(v) for k, v in outputs.items()},
        )
        rows = examples[: request["latency_rows"]]
        call(rows[:1])  # the first call traces; it is not a served request's latency
        result["batch_1"] = _timings(call, [[r] for r in rows])
        repeats = max(5, request["latency_rows"] // 16)
        batch = (examples * (64 // max(1, len(examples)) + 1))[:64]
        result["batch_64"] = _timings(call, [batch] * repeats)
    except Exception:  # noqa: BLE001 - whatever fails is the check's answer, reported to the parent
        return finish(stage="predict", error=traceback.format_exc(limit=3))
    return finish(stage="done")


if __name__ == "__main__":
    main(sys.argv[1])
