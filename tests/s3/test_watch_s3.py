"""`tfxp watch` on a real S3 server (SeaweedFS on loopback): only completely
published spans (their `_PUBLISHED` marker written last) start a run, once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from e2e_support import write_sample

from pipeline.config import PROJECT_ROOT
from pipeline.datasets import dataset_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

TFXP = str(Path(sys.executable).parent / "tfxp")
BUCKET = "tfxp-watch"


def _tfxp(forkserver, args, env) -> subprocess.CompletedProcess:
    return forkserver.run(
        [TFXP, *args], env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900
    )


def test_watch_runs_each_published_span_of_a_bucket_once(seaweedfs, tmp_path, forkserver):
    write_sample(tmp_path / "local")
    env = seaweedfs.env()
    data = f"s3://{BUCKET}/taxi"
    up = _tfxp(forkserver, ["data", "upload", data, "--source-root", str(tmp_path / "local")], env)
    assert up.returncode == 0, up.stderr
    assert "taxi/span-1/_PUBLISHED" in seaweedfs.keys(BUCKET)
    # Span 2 is still being uploaded: its file is there, its marker is not.
    seaweedfs.client().put_object(Bucket=BUCKET, Key="taxi/span-2/data.csv", Body=b"a,b\n1,")
    state = tmp_path / "state"
    watch = [
        "watch",
        "--once",
        "--data-root",
        data,
        "--run-dir",
        f"s3://{BUCKET}/runs/taxi",
        "--state-dir",
        str(state),
        "--train-steps",
        "40",
        "--eval-steps",
        "2",
    ]
    first = _tfxp(forkserver, watch, env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "span 1: trained" in first.stdout
    assert "span 2" not in first.stdout
    again = _tfxp(forkserver, watch, env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "running the pipeline" not in again.stdout
    assert "nothing left to run" in again.stdout

    from metadata.store import StoreLocation, open_store
    from metadata.watch_records import handled_spans

    config = dataset_config("taxi").replace(data_root=data, run_dir=f"s3://{BUCKET}/runs/taxi")
    store = open_store(StoreLocation(sqlite_path=str(state / "metadata.sqlite")))
    assert {s: h.outcome for s, h in handled_spans(store, config).items()} == {1: "trained"}
    # The push made it champion: the pointer object names the pushed version.
    import json

    pointer = seaweedfs.client().get_object(Bucket=BUCKET, Key="runs/taxi/serving/champion.json")
    version = json.loads(pointer["Body"].read())["version"]
    assert f"runs/taxi/serving/{version}/saved_model.pb" in seaweedfs.keys(BUCKET)
