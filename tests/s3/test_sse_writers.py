"""Every object-storage writer sends `storage.sse`, checked on each request it makes.

The writers talk to a recording endpoint (tests/support/recording_s3.py) in
front of the session's SeaweedFS, which honours SSE-S3 (`AES256`; the key
scripts/seaweedfs.sh gives it) and reports it back per object:

- our own helpers (`tfxp data upload`'s `upload_span`, boto3),
- Beam's S3 filesystem (boto3, through the shared-client hook),
- TensorFlow's s3:// writes (tensorflow-io, through the relay), in a child
  process as the pipeline's components run them.

Without the setting the same request goes out bare: the check can fail.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from recording_s3 import RecordingS3

from pipeline.config import PROJECT_ROOT

pytestmark = pytest.mark.timeout(300)

BUCKET = "tfxp-sse"
SSE = "x-amz-server-side-encryption"


def _bucket(seaweedfs) -> None:
    if BUCKET not in {b["Name"] for b in seaweedfs.client().list_buckets()["Buckets"]}:
        seaweedfs.create_bucket(BUCKET)


@pytest.fixture(scope="module")
def recorder(seaweedfs):
    _bucket(seaweedfs)
    proxy = RecordingS3(seaweedfs.endpoint)
    yield proxy
    proxy.close()


def _env(seaweedfs, recorder, **extra: str) -> dict[str, str]:
    return seaweedfs.env(AWS_ENDPOINT_URL=recorder.endpoint, **extra)


def _writes_under(recorder: RecordingS3, prefix: str):
    return [r for r in recorder.object_writes() if r.path.startswith(f"/{BUCKET}/{prefix}")]


def _head_sse(seaweedfs, key: str) -> str | None:
    return seaweedfs.client().head_object(Bucket=BUCKET, Key=key).get("ServerSideEncryption")


def test_our_helpers_and_beams_filesystem_send_sse_on_every_write(
    seaweedfs, recorder, tmp_path, monkeypatch
):
    for name, value in _env(seaweedfs, recorder, TFXP_S3_SSE="AES256").items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL_S3", "S3_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions

    from tfxp.storage.storage import share_beam_s3_clients
    from tfxp.storage.upload import upload_span

    drop = tmp_path / "data.csv"
    drop.write_text("a,b\n1,2\n")
    done = upload_span([drop], f"s3://{BUCKET}/ours", create_bucket=False)

    share_beam_s3_clients()
    FileSystems.set_options(PipelineOptions([]))
    with FileSystems.create(f"s3://{BUCKET}/beam/part-0.txt") as f:
        f.write(b"beam bytes\n" * 1000)

    ours, beam = _writes_under(recorder, "ours/"), _writes_under(recorder, "beam/")
    assert len(ours) == 2, ours  # the CSV and the span's publish marker
    assert beam, "Beam wrote nothing through the recording endpoint"
    assert all(r.headers.get(SSE) == "AES256" for r in ours + beam), ours + beam
    for key in (*(u.split("/", 3)[3] for u in done.uris), "beam/part-0.txt"):
        assert _head_sse(seaweedfs, key) == "AES256", key


TF_WRITE = """
import os, sys
from tfxp.storage.storage import enable_filesystems
enable_filesystems(["s3://"])
import tensorflow as tf
with tf.io.gfile.GFile(sys.argv[1], "w") as f:
    f.write("tensorflow bytes\\n" * 100)
sys.stdout.flush()
os._exit(0)  # tensorflow-io's S3 plugin aborts at interpreter teardown
"""


@pytest.mark.parametrize("sse", ["AES256", ""])
def test_tensorflow_writes_get_sse_from_the_relay(seaweedfs, recorder, sse):
    key = f"tf-{sse or 'none'}/file.txt"
    done = subprocess.run(
        [sys.executable, "-c", TF_WRITE, f"s3://{BUCKET}/{key}"],
        env=_env(seaweedfs, recorder, TFXP_S3_SSE=sse),
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Read back whole: SeaweedFS 4.48 answers a *ranged* read of an SSE-S3 object
    # with ciphertext (test_a_store_that_garbles_ranged_sse_reads_is_refused).
    body = seaweedfs.client().get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert body == b"tensorflow bytes\n" * 100
    writes = _writes_under(recorder, f"tf-{sse or 'none'}/")
    assert writes, recorder.requests[-5:]
    assert all(r.headers.get(SSE) == (sse or None) for r in writes), writes
    assert _head_sse(seaweedfs, key) == (sse or None)


def test_a_store_that_garbles_ranged_sse_reads_is_refused(seaweedfs, monkeypatch):
    """SeaweedFS 4.48 returns ciphertext for a ranged GET of an SSE-S3 object, and
    TensorFlow reads in ranges: the pre-flight finds out and refuses, one line."""
    _bucket(seaweedfs)
    for name, value in seaweedfs.env(TFXP_S3_SSE="AES256").items():
        monkeypatch.setenv(name, value)
    from tfxp.storage.storage import Location, StorageError, check_location

    with pytest.raises(StorageError, match="wrong bytes for a ranged read"):
        check_location(Location(f"s3://{BUCKET}/runs", "pipeline root", write=True))
    monkeypatch.delenv("TFXP_S3_SSE")
    check_location(Location(f"s3://{BUCKET}/runs", "pipeline root", write=True))
