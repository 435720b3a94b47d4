"""The whole pipeline on a real S3 server (SeaweedFS on loopback), as a user runs it.

Everything goes through the `tfxp` command in a subprocess, so the exit status
is what a user or a scheduler sees, with tensorflow-io loaded (its S3 plugin
aborts the interpreter at teardown; `tfxp` must still exit 0 on success and
non-zero on failure).

- `tfxp data upload` puts the embedded sample into a new bucket as span 1.
- `tfxp run` with data, pipeline root and serving dir in that bucket, with the
  server stopped during Transform: the run fails (non-zero exit), no artifact
  of the failed component is LIVE in ML Metadata and nothing is pushed.
- The same command after a restart completes (exit 0), reusing what finished
  before; ML Metadata (local SQLite) records s3:// URIs; a blessed model is
  pushed complete (PUSH_COMPLETE marker, no hidden leftovers).
- Missing bucket, wrong credentials, unreachable endpoint: exit 1 with one
  clear line, before any component runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import child
import pytest
from e2e_support import write_sample

from pipeline.config import PROJECT_ROOT

# The first test of a module also pays for its module fixture's whole runs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

TFXP = str(Path(sys.executable).parent / "tfxp")
STEPS = ["--train-steps", "40", "--eval-steps", "2"]


def _run(args, env, timeout=900, via=subprocess) -> subprocess.CompletedProcess:
    """`tfxp ARGS`, in a fresh interpreter or (`via=forkserver`) forked from the
    session's fork server (tests/conftest.py): a process of its own either way."""
    return via.run(
        [TFXP, *args], env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout
    )


def _store(state_dir: Path):
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = str(state_dir / "metadata.sqlite")
    cfg.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(cfg)


@dataclass
class BucketRuns:
    tmp: Path
    env: dict[str, str]
    upload: subprocess.CompletedProcess
    interrupted_code: int
    interrupted_output: str
    serving_keys_after_failure: list[str]
    run: subprocess.CompletedProcess  # the same command after the restart


@pytest.fixture(scope="module")
def bucket_runs(seaweedfs, tmp_path_factory, forkserver) -> BucketRuns:
    """Upload; a run whose store goes away during Transform; the same run after a restart.

    One store, one data drop, two runs: the failure and the recovery are what a
    user would see, and the completed rerun is the whole-pipeline-on-S3 run the
    other tests assert on (its upstream components come from the cache).
    """
    tmp = tmp_path_factory.mktemp("s3run")
    write_sample(tmp / "local")
    env = seaweedfs.env()
    upload = _run(
        ["data", "upload", "s3://tfxp-e2e/main/taxi", "--source-root", str(tmp / "local")],
        env,
        via=forkserver,
    )
    run_args = [
        "run",
        "--data-root",
        "s3://tfxp-e2e/main/taxi",
        "--run-dir",
        "s3://tfxp-e2e/runs/taxi",
        "--state-dir",
        str(tmp / "state"),
        "--json",
        "--lakefs",  # the data root is s3://REPO/BRANCH/...: record them
        *STEPS,
    ]
    proc = forkserver.popen(
        [TFXP, *run_args],
        env={**env, "PYTHONUNBUFFERED": "1"},
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    try:
        for line in child.lines(proc, timeout=900):
            seen.append(line)
            if re.match(r"\[\d+/\d+\] Transform \.\.\.", line):
                seaweedfs.stop()
                break
        out, err = child.finish(proc, timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        if not seaweedfs.running():
            seaweedfs.start()
    serving_keys = seaweedfs.keys("tfxp-e2e", "runs/taxi/serving/")
    run = _run(run_args, env, via=forkserver)
    return BucketRuns(
        tmp, env, upload, proc.returncode, "".join(seen) + out + err, serving_keys, run
    )


def test_upload_creates_the_bucket_and_span_1(bucket_runs, seaweedfs):
    tmp, upload = bucket_runs.tmp, bucket_runs.upload
    assert upload.returncode == 0, upload.stderr
    assert "created bucket tfxp-e2e" in upload.stdout
    assert "s3://tfxp-e2e/main/taxi/span-1/data.csv" in upload.stdout
    body = seaweedfs.client().get_object(Bucket="tfxp-e2e", Key="main/taxi/span-1/data.csv")["Body"]
    assert body.read() == (tmp / "local" / "span-1" / "data.csv").read_bytes()


def test_whole_run_on_s3_exits_0_and_pushes_a_complete_model(bucket_runs, seaweedfs):
    run = bucket_runs.run
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads(run.stdout[run.stdout.index("{") :])
    assert summary["blessed"] is True, summary
    keys = seaweedfs.keys("tfxp-e2e", "runs/taxi/serving/")
    # Beside the version: the registry's pointer naming it champion (tfxp/models/registry.py).
    pointer = "runs/taxi/serving/champion.json"
    assert pointer in keys
    versions = {k.split("/")[3] for k in keys if k != pointer}
    assert len(versions) == 1 and versions.pop().isdigit(), keys
    assert any(k.endswith("/saved_model.pb") for k in keys)
    assert any(k.endswith("/PUSH_COMPLETE") for k in keys)
    assert not [k for k in keys if "/.incoming-" in k], "a hidden upload was left behind"


def test_ml_metadata_records_s3_uris(bucket_runs):
    tmp, run = bucket_runs.tmp, bucket_runs.run
    assert run.returncode == 0
    store = _store(tmp / "state")
    # The data root's own record (DatasetSource, below) names the span it describes.
    sources = {a.id for a in store.get_artifacts_by_type("DatasetSource")}
    artifacts = [a for a in store.get_artifacts() if a.id not in sources]
    assert artifacts
    uris = {a.uri for a in artifacts if a.uri}
    assert uris and all(u.startswith("s3://tfxp-e2e/runs/taxi/pipeline_root/") for u in uris), uris
    examples = store.get_artifacts_by_type("Examples")
    assert examples[0].custom_properties["input_base"].string_value == "s3://tfxp-e2e/main/taxi"
    pushed = store.get_artifacts_by_type("PushedModel")
    destination = pushed[0].custom_properties["pushed_destination"].string_value
    assert destination.startswith("s3://tfxp-e2e/runs/taxi/serving/")
    # State stays local: nothing but artifacts and models in the bucket.
    assert (tmp / "state" / "logs").is_dir()


def test_data_list_shows_the_bucket_span_with_its_pushed_model(bucket_runs, forkserver):
    tmp, env, run = bucket_runs.tmp, bucket_runs.env, bucket_runs.run
    assert run.returncode == 0
    args = ["data", "list", "--json", "--data-root", "s3://tfxp-e2e/main/taxi"]
    listed = _run([*args, "--run-dir", str(tmp / "state")], env, timeout=300, via=forkserver)
    assert listed.returncode == 0, listed.stderr
    (span,) = json.loads(listed.stdout)["taxi"]["spans"]
    assert (span["span"], span["files"], span["path"]) == (1, 1, "s3://tfxp-e2e/main/taxi/span-1")
    assert span["ingestions"] and span["ingestions"][0]["models"][0]["pushed"] is True


def test_a_lakefs_style_data_root_records_its_repo_and_branch(bucket_runs):
    """s3://REPO/BRANCH/...: the run's span is recorded with the repo (bucket) and branch;
    SeaweedFS reports no commit, so none is recorded and the run says so."""
    tmp, run = bucket_runs.tmp, bucket_runs.run
    assert run.returncode == 0
    assert "data: span 1 from s3 repo tfxp-e2e branch main (commit not reported" in run.stdout
    store = _store(tmp / "state")
    [record] = store.get_artifacts_by_type("DatasetSource")
    props = {k: getattr(v, v.WhichOneof("value")) for k, v in record.properties.items()}
    [examples] = store.get_artifacts_by_type("Examples")[:1]
    sha = examples.custom_properties["content_sha256"].string_value
    assert props["kind"] == "s3" and props["data_root"] == "s3://tfxp-e2e/main/taxi"
    assert (props["repo"], props["branch"], props["span"]) == ("tfxp-e2e", "main", 1)
    assert "commit" not in props and props["content_sha256"] == sha


@pytest.mark.parametrize("case", ["missing bucket", "wrong credentials", "unreachable endpoint"])
def test_bad_storage_fails_before_any_component_with_one_line(
    case, bucket_runs, tmp_path, forkserver
):
    env = bucket_runs.env
    args = ["run", "--state-dir", str(tmp_path / "state"), *STEPS]
    data = "s3://tfxp-e2e/main/taxi"
    if case == "missing bucket":
        args += ["--data-root", data, "--run-dir", "s3://no-such-bucket-tfxp/runs"]
        expect = "bucket 'no-such-bucket-tfxp' does not exist"
    elif case == "wrong credentials":
        env = {**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
        args += ["--data-root", data, "--run-dir", "s3://tfxp-e2e/runs/x"]
        expect = "access denied"
    else:
        from trainer.ports import free_port

        env = {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}
        args += ["--data-root", data, "--run-dir", "s3://tfxp-e2e/runs/x"]
        expect = "cannot reach the S3 endpoint"
    done = _run(args, env, timeout=300, via=forkserver)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and expect in errors[0], done.stderr
    assert "[1/" not in done.stdout  # no component started
    assert "Traceback" not in done.stderr


def test_server_stopped_mid_run_fails_and_publishes_nothing(bucket_runs):
    output = bucket_runs.interrupted_output
    assert bucket_runs.interrupted_code not in (0, None), output
    assert "ERROR: Transform failed" in output, output
    assert not bucket_runs.serving_keys_after_failure  # nothing pushed, not even hidden

    from ml_metadata.proto import metadata_store_pb2 as pb

    store = _store(bucket_runs.tmp / "state")
    transform = [
        e
        for e in store.get_executions()
        if "Transform" in store.get_execution_types_by_id([e.type_id])[0].name
    ]
    failed = [e for e in transform if e.last_known_state != pb.Execution.COMPLETE]
    assert len(failed) == 1, transform  # the interrupted one; the rerun's is COMPLETE
    produced = {
        ev.artifact_id
        for ev in store.get_events_by_execution_ids([failed[0].id])
        if ev.type == pb.Event.OUTPUT
    }
    live = [a for a in store.get_artifacts_by_id(sorted(produced)) if a.state == pb.Artifact.LIVE]
    assert not live, f"the failed Transform published {live}"


def test_rerun_after_restart_completes_reusing_finished_components(bucket_runs):
    run = bucket_runs.run
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads(run.stdout[run.stdout.index("{") :])
    states = {c["node_id"]: c["state"] for c in summary["components"]}
    assert states["CsvExampleGen"] == "CACHED" and states["StatisticsGen"] == "CACHED", states
    assert states["Transform"] == "COMPLETE" and states["Pusher"] == "COMPLETE", states


def test_tfxp_exit_status_survives_the_tensorflow_io_teardown_abort(seaweedfs, tmp_path):
    """The plugin's abort at interpreter exit is real; `tfxp` never reaches it."""
    env = seaweedfs.env()
    probe = (
        "from tfxp.storage.storage import enable_filesystems; enable_filesystems(['s3://b/x']);"
        "import tensorflow as tf; tf.io.gfile.exists('s3://tfxp-e2e/main/taxi')"
    )
    plain = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=PROJECT_ROOT, capture_output=True, timeout=300
    )
    # If a tensorflow-io upgrade fixes the abort, this documents it (and the
    # rough-edge note in docs/object-storage.md can go).
    assert plain.returncode != 0, (
        "tensorflow-io no longer aborts at exit: update docs/object-storage.md"
    )
    upload = _run(["data", "upload", "s3://no-such-bucket-tfxp/x", "--no-create-bucket"], env)
    assert upload.returncode == 1
    assert "does not exist" in upload.stderr


def test_volume_files_hold_no_plaintext_of_spans_artifacts_or_models(bucket_runs, seaweedfs):
    """The store the runs used encrypts volume data (scripts/seaweedfs.sh's default): its
    raw volume files hold none of a CSV value, a feature name of an Examples TFRecord or
    an op name of the pushed SavedModel. The same objects, read back through S3 and put
    into a store started with SEAWEEDFS_ENCRYPT=0 (one bucket each: SeaweedFS keeps a
    bucket's objects in volume files named after it), are found by the same scan."""
    from seaweedfs_server import SeaweedFS
    from volume_scan import found_in

    assert bucket_runs.run.returncode == 0  # the rerun read its span and artifacts back
    client = seaweedfs.client()
    keys = seaweedfs.keys("tfxp-e2e")
    shard = next(k for k in keys if "CsvExampleGen/examples/" in k and k.endswith(".gz"))
    model = next(
        k for k in keys if k.startswith("runs/taxi/serving/") and k.endswith("/saved_model.pb")
    )
    objects = {
        "csv": ("main/taxi/span-1/data.csv", b"Chicago Elite Cab Corp. (Chicago Carriag"),
        "tfrecord": (shard, b"dropoff_census_tract"),
        "model": (model, b"ParseExampleV2"),
    }
    bodies = {}
    for name, (key, needle) in objects.items():
        bodies[name] = client.get_object(Bucket="tfxp-e2e", Key=key)["Body"].read()
        # The needle is in the object's content (a TFRecord shard is GZIP: inflated here).
        assert found_in_bytes(bodies[name], needle), (name, key)

    needles = [needle for _, needle in objects.values()]
    assert seaweedfs.volume_files()
    leaked = {n: files for n, files in found_in(seaweedfs.volume_files(), needles).items() if files}
    assert not leaked, f"plaintext in the encrypted store's volume files: {leaked}"

    plain = SeaweedFS(bucket_runs.tmp / "seaweedfs-plain", encrypt=False)
    plain.start()
    try:
        plain_client = plain.client()
        for name, (key, _) in objects.items():
            plain_client.create_bucket(Bucket=f"plain-{name}")
            plain_client.put_object(Bucket=f"plain-{name}", Key=key, Body=bodies[name])
        hits = found_in(plain.volume_files(), needles)
    finally:
        plain.stop()
    for name, (_, needle) in objects.items():
        assert any(f.startswith(f"plain-{name}_") for f in hits[needle]), (name, hits)


def found_in_bytes(data: bytes, needle: bytes) -> bool:
    import gzip

    return needle in data or (data[:2] == b"\x1f\x8b" and needle in gzip.decompress(data))
