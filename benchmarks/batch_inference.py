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
Reported per tool: work seconds (timed inside the child, after imports),
rows/s, the child's wall seconds (start-up included) and peak RSS
(`getrusage(RUSAGE_CHILDREN).ru_maxrss` of a wrapper per child), and the
ratios of ours to each anchor.

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
from tfxp.infer import run_infer
from tfxp.metadata.store import location_from
location = location_from(default_run_dir={store!r})
started = time.perf_counter()
result = run_infer(config, location, span=1, output={out!r}, printer=lambda _: None)
took = time.perf_counter() - started
print("RESULT " + json.dumps({{"seconds": took, "rows": result.report.rows_scored,
                               "model_dir": result.model_dir}}))
"""

PREDICT_CHILD = """
from tfxp.predict import predict_csv
started = time.perf_counter()
result = predict_csv(config, {csv!r}, output={out!r}, model_dir={model!r})
took = time.perf_counter() - started
print("RESULT " + json.dumps({{"seconds": took, "rows": len(result.probabilities)}}))
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
started = time.perf_counter()
executor.Executor(context).Do(
    {{"examples": [examples], "model": [model]}},
    {{"inference_result": [result]}},
    {{"model_spec": proto_utils.proto_to_json(bulk_inferrer_pb2.ModelSpec()),
      "data_spec": proto_utils.proto_to_json(bulk_inferrer_pb2.DataSpec())}})
took = time.perf_counter() - started
print("RESULT " + json.dumps({{"seconds": took}}))
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
    from tfxp.metadata.lineage import Lineage
    from tfxp.metadata.store import location_from, open_store

    lineage = Lineage(open_store(location_from(default_run_dir=run_dir)), "taxi")
    return lineage.resolve_model("pushed").uri


def _tfrecords(csv_path: Path, split_dir: Path) -> None:
    """The CSV's rows as tf.Examples in one GZIP TFRecord file: BulkInferrer's input."""
    sys.path.insert(0, str(ROOT))
    import tensorflow as tf

    from components.batch_inference.serving import RowEncoder, csv_rows
    from components.schema_importer import load_schema, schema_column_types

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


def bench(rows: int, run_dir: str | None, tmp: Path) -> dict:
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
    out = {}
    ours, wall, rss = _child(prelude + INFER_CHILD.format(store=str(store), out=str(tmp / "ours")))
    out["ours"] = {"seconds": ours["seconds"], "wall": wall, "peak_rss_mb": rss}
    predict, wall, rss = _child(
        prelude
        + PREDICT_CHILD.format(csv=str(csv_path), out=str(tmp / "p.csv"), model=ours["model_dir"])
    )
    out["predict"] = {"seconds": predict["seconds"], "wall": wall, "peak_rss_mb": rss}
    bulk, wall, rss = _child(
        prelude
        + BULK_CHILD.format(
            examples=str(tmp / "examples"),
            model_uri=_model_uri(run),
            out=str(tmp / "bulk"),
            tmp=str(tmp / "beam-tmp"),
        )
    )
    out["tfx_bulk_inferrer"] = {"seconds": bulk["seconds"], "wall": wall, "peak_rss_mb": rss}
    for r in out.values():
        r["rows_per_s"] = round(rows / r["seconds"])
        r["seconds"], r["wall"] = round(r["seconds"], 2), round(r["wall"], 1)
    assert ours["rows"] == predict["rows"] == rows, (ours["rows"], predict["rows"], rows)
    return {
        "rows": rows,
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "results": out,
        "ours_vs_predict": round(out["ours"]["rows_per_s"] / out["predict"]["rows_per_s"], 2),
        "ours_vs_bulk_inferrer": round(
            out["ours"]["rows_per_s"] / out["tfx_bulk_inferrer"]["rows_per_s"], 2
        ),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--run-dir", help="a taxi run dir with a pushed model (default: train one)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-infer-") as tmp:
        result = bench(args.rows, args.run_dir, Path(tmp))
    result["command"] = " ".join(["benchmarks/batch_inference.py", *sys.argv[1:]])
    result["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result["commit"] = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
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
            f"(process {r['wall']}s, peak RSS {r['peak_rss_mb']} MB)"
        )
    print(f"ours / tfxp predict:      {result['ours_vs_predict']}x rows/s")
    print(f"ours / TFX BulkInferrer:  {result['ours_vs_bulk_inferrer']}x rows/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
