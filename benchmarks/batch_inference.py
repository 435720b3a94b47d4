"""Batch inference throughput: `tfxp infer` against `tfxp predict` and TFX's BulkInferrer.

    .venv/bin/python benchmarks/batch_inference.py [--rows 100000] [--run-dir DIR] [--json]

One invocation, the same model and the same generated rows (`python -m
data.generate`, taxi-like) for all three, each in a fresh subprocess:
  - ours:    `tfxp infer`'s run_infer: CSV span -> predictions.csv + .tfrecord.gz,
             recorded in ML Metadata (a copy of the run's store);
  - predict: `tfxp predict`'s predict_csv on the same CSV file, with --output;
  - TFX:     tfx.components.BulkInferrer's executor (`Executor().Do`) on the
             same rows as a GZIP TFRecord split of tf.Examples (encoded before
             the clock starts: the anchor gets ingestion for free), with the
             project's in-process Beam runner, writing its PredictionLogs.
Reported per tool: work seconds and CPU seconds (timed inside the child,
after imports; CPU time is the steadier figure on a shared machine), rows/s
and rows per CPU-second, the child's wall seconds (start-up included) and peak
RSS (`getrusage(RUSAGE_CHILDREN).ru_maxrss` of a wrapper per child), and the
ratios of ours to each anchor. `--repeat N` runs N interleaved rounds and
keeps each tool's fastest.

The model: the pushed taxi model of `--run-dir` (a finished `tfxp run`), or of
a small pipeline run (3,000 rows, 40 steps) made first in a temp folder.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
EMBEDDED_CSV = ROOT / "data" / "taxi" / "span-1" / "data.csv"

_WRAPPER = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], timeout=7200); "
    "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(r.returncode)"
)

_PRELUDE = """
import json, sys, time
sys.path.insert(0, {root!r})
from pipeline.config import InferenceOptions
from pipeline.datasets import dataset_config
config = dataset_config("taxi").replace(
    run_dir={run!r}, inference=InferenceOptions(data_root={data!r}))
"""

INFER_CHILD = """
from tfxp.models.infer import run_infer
from metadata.store import location_from
location = location_from(default_run_dir={store!r})
started, cpu = time.perf_counter(), time.process_time()
result = run_infer(config, location, span=1, output={out!r}, printer=lambda _: None)
took, cpu = time.perf_counter() - started, time.process_time() - cpu
print("RESULT " + json.dumps({{"seconds": took, "cpu_seconds": cpu,
                               "rows": result.report.rows_scored,
                               "model_dir": result.model_dir}}))
"""

PREDICT_CHILD = """
from tfxp.models.predict import predict_csv
started, cpu = time.perf_counter(), time.process_time()
result = predict_csv(config, {csv!r}, output={out!r}, model_dir={model!r})
took, cpu = time.perf_counter() - started, time.process_time() - cpu
print("RESULT " + json.dumps({{"seconds": took, "cpu_seconds": cpu,
                               "rows": len(result.probabilities)}}))
"""

BULK_CHILD = """
from tfx.components.bulk_inferrer import executor
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import bulk_inferrer_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils
from pipeline.config import LOCAL_BEAM_ARGS
examples = standard_artifacts.Examples()
examples.uri = {examples!r}
examples.split_names = '["eval"]'
model = standard_artifacts.Model()
model.uri = {model_uri!r}
result = standard_artifacts.InferenceResult()
result.uri = {out!r}
context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=list(LOCAL_BEAM_ARGS),
    tmp_dir={tmp!r})
started, cpu = time.perf_counter(), time.process_time()
executor.Executor(context).Do(
    {{"examples": [examples], "model": [model]}},
    {{"inference_result": [result]}},
    {{"model_spec": proto_utils.proto_to_json(bulk_inferrer_pb2.ModelSpec()),
      "data_spec": proto_utils.proto_to_json(bulk_inferrer_pb2.DataSpec())}})
took, cpu = time.perf_counter() - started, time.process_time() - cpu
print("RESULT " + json.dumps({{"seconds": took, "cpu_seconds": cpu}}))
"""

TRAIN_CHILD = """
from tfxp.local.runner import run_local
summary = run_local(config.replace(data_root={train!r}, train_steps=40, eval_steps=2),
                    printer=lambda _: None)
assert summary.pushed, "the benchmark's model was not pushed"
print("RESULT " + json.dumps({{"seconds": summary.wall_seconds}}))
"""


def _child(code: str) -> tuple[dict, float, int]:
    """Runs a child script; returns (its RESULT, wall seconds, peak RSS MB)."""
    started = time.perf_counter()
    proc = subprocess.run(
        [PY, "-c", _WRAPPER, PY, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        cwd=ROOT,
        timeout=7300,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"benchmark child failed:\n{proc.stderr[-3000:]}")
    rss = [x for x in proc.stderr.splitlines() if x.startswith("MAXRSS ")][-1]
    result = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[7:])
    return result, wall, int(rss.split()[1]) // 1024


def _model_uri(run_dir: str) -> str:
    """The Trainer's Model artifact of the pushed model (what BulkInferrer takes)."""
    sys.path.insert(0, str(ROOT))
    from metadata.lineage import Lineage
    from metadata.store import location_from, open_store

    lineage = Lineage(open_store(location_from(default_run_dir=run_dir)), "taxi")
    return lineage.resolve_model("pushed").uri


def _tfrecords(csv_path: Path, split_dir: Path) -> None:
    """The CSV's rows as tf.Examples in one GZIP TFRecord file: BulkInferrer's input."""
    sys.path.insert(0, str(ROOT))
    import tensorflow as tf

    from components.batch_inference.serving import RowEncoder, csv_rows
    from components.validation.schema_importer import load_schema, schema_column_types

    types = schema_column_types(load_schema(str(ROOT / "schema" / "taxi" / "schema.pbtxt")))
    header, rows, _ = csv_rows(str(csv_path))
    encode = RowEncoder(header, types)
    split_dir.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(split_dir / "data.tfrecord.gz"), options="GZIP") as w:
        for _, row in rows:
            w.write(encode(row))


def _train(tmp: Path) -> str:
    train = tmp / "train"
    (train / "span-1").mkdir(parents=True)
    with EMBEDDED_CSV.open() as src, (train / "span-1" / "data.csv").open("w") as dst:
        dst.writelines(itertools.islice(src, 3001))
    run = tmp / "run"
    code = _PRELUDE.format(root=str(ROOT), run=str(run), data=str(tmp))
    _child(code + TRAIN_CHILD.format(train=str(train)))
    return str(run)


def bench(rows: int, run_dir: str | None, tmp: Path, repeat: int = 1) -> dict:
    run = run_dir or _train(tmp)
    data = tmp / "to_score"
    subprocess.run(
        [PY, "-m", "data.generate", str(data / "span-1"), "--rows", str(rows), "--seed", "3"],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    [csv_path] = sorted((data / "span-1").glob("*.csv"))
    _tfrecords(csv_path, tmp / "examples" / "Split-eval")
    prelude = _PRELUDE.format(root=str(ROOT), run=run, data=str(data))
    # `tfxp infer` records its scoring: into a copy of the store, not the run's own.
    store = tmp / "store"
    store.mkdir()
    shutil.copy2(Path(run) / "metadata.sqlite", store / "metadata.sqlite")
    model_uri = _model_uri(run)
    model_dir = str(Path(model_uri) / "Format-Serving")  # the pushed model's own SavedModel
    children = {
        "ours": lambda i: prelude + INFER_CHILD.format(store=str(store), out=str(tmp / f"ours{i}")),
        "predict": lambda i: (
            prelude
            + PREDICT_CHILD.format(csv=str(csv_path), out=str(tmp / f"p{i}.csv"), model=model_dir)
        ),
        "tfx_bulk_inferrer": lambda i: (
            prelude
            + BULK_CHILD.format(
                examples=str(tmp / "examples"),
                model_uri=model_uri,
                out=str(tmp / f"bulk{i}"),
                tmp=str(tmp / "beam-tmp"),
            )
        ),
    }
    # Interleaved rounds, the best of each tool kept: the machine may be shared, and
    # a busy moment then costs one round of one tool, not the comparison.
    out: dict[str, dict] = {}
    for i in range(repeat):
        for name, code in children.items():
            result, wall, rss = _child(code(i))
            rows_done = result.get("rows", rows)
            assert rows_done == rows, (name, rows_done, rows)
            entry = {
                "seconds": round(result["seconds"], 2),
                "cpu_seconds": round(result["cpu_seconds"], 2),
                "wall": round(wall, 1),
                "peak_rss_mb": rss,
                "rows_per_s": round(rows / result["seconds"]),
                "rows_per_cpu_s": round(rows / result["cpu_seconds"]),
            }
            best = out.get(name)
            if best is None or entry["seconds"] < best["seconds"]:
                out[name] = entry
    return {
        "rows": rows,
        "repeat": repeat,
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "results": out,
        "ours_vs_predict": round(out["ours"]["rows_per_s"] / out["predict"]["rows_per_s"], 2),
        "ours_vs_bulk_inferrer": round(
            out["ours"]["rows_per_s"] / out["tfx_bulk_inferrer"]["rows_per_s"], 2
        ),
        "ours_vs_predict_cpu": round(
            out["ours"]["rows_per_cpu_s"] / out["predict"]["rows_per_cpu_s"], 2
        ),
        "ours_vs_bulk_inferrer_cpu": round(
            out["ours"]["rows_per_cpu_s"] / out["tfx_bulk_inferrer"]["rows_per_cpu_s"], 2
        ),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--run-dir", help="a taxi run dir with a pushed model (default: train one)")
    p.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the best is kept")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-infer-") as tmp:
        result = bench(args.rows, args.run_dir, Path(tmp), max(1, args.repeat))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['rows']:,} generated taxi rows, {result['cpus']} cores "
        f"(load average {result['load_average_1min']} at the end)"
    )
    for name, r in result["results"].items():
        print(
            f"  {name:<18} {r['seconds']:8.2f}s work  {r['rows_per_s']:>9,} rows/s  "
            f"{r['rows_per_cpu_s']:>9,} rows/CPU-s  (process {r['wall']}s, peak RSS "
            f"{r['peak_rss_mb']} MB)"
        )
    print(
        f"ours / tfxp predict:      {result['ours_vs_predict']}x rows/s, "
        f"{result['ours_vs_predict_cpu']}x rows/CPU-s"
    )
    print(
        f"ours / TFX BulkInferrer:  {result['ours_vs_bulk_inferrer']}x rows/s, "
        f"{result['ours_vs_bulk_inferrer_cpu']}x rows/CPU-s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
