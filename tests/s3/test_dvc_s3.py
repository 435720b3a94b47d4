"""DVC pushes to an s3:// remote (the dvc-s3 plugin), checked on each request it makes.

`tfxp data tag --dvc` publishes through `tfxp.datasets.dvc.publish`: DVC adds the
files, git commits and tags, DVC pushes to the repository's default remote. Here
that remote is a bucket of the session's SeaweedFS, behind the recording endpoint
(tests/support/recording_s3.py). DVC's own S3 client sends SSE when the remote's
config says so (`dvc remote modify NAME sse AES256`); nothing of ours is in its
path, so this checks that what the project relies on happens: every object DVC
writes carries the header, SeaweedFS stores it encrypted and holds the file; without
the setting the same push goes out bare (the check can fail), and a fresh clone's
`dvc pull` reads the tagged revision back from the bucket. (Not the encrypted one:
SeaweedFS 4.48 answers a ranged read of an SSE-S3 object with ciphertext, and
DVC's client reads in ranges; AWS S3 does not do that.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dvc_repos import init_repo, run
from recording_s3 import RecordingS3

from components.io.encryption import StorageEncryption

pytestmark = pytest.mark.timeout(300)

BUCKET = "tfxp-dvc"
ENV_DVC = {"DVC_NO_ANALYTICS": "1", "DVC_NO_UPDATE": "1", "GIT_TERMINAL_PROMPT": "0"}
SSE = "x-amz-server-side-encryption"


@pytest.fixture(scope="module")
def recorder(seaweedfs):
    if BUCKET not in {b["Name"] for b in seaweedfs.client().list_buckets()["Buckets"]}:
        seaweedfs.create_bucket(BUCKET)
    proxy = RecordingS3(seaweedfs.endpoint)
    yield proxy
    proxy.close()


def _repo(root: Path, endpoint: str, prefix: str, sse: str | None) -> Path:
    """A git + DVC repository whose default remote is s3://BUCKET/PREFIX at `endpoint`."""
    repo = init_repo(root / "repo")
    run(repo, "dvc", "remote", "add", "-d", "bucket", f"s3://{BUCKET}/{prefix}")
    run(repo, "dvc", "remote", "modify", "bucket", "endpointurl", endpoint)
    if sse:
        run(repo, "dvc", "remote", "modify", "bucket", "sse", sse)
    run(repo, "git", "add", "-A")
    run(repo, "git", "commit", "-q", "-m", "dvc with an s3 remote")
    return repo


def _publish(tmp_path: Path, seaweedfs, recorder, monkeypatch, prefix: str, sse: str | None):
    from tfxp.datasets import dvc as dvc_data

    for name, value in seaweedfs.env(AWS_ENDPOINT_URL=recorder.endpoint).items():
        monkeypatch.setenv(name, value)
    repo = _repo(tmp_path, recorder.endpoint, prefix, sse)
    drop = tmp_path / "trips.csv"
    drop.write_text(
        "trip_seconds,fare\n" + "".join(f"{60 + i},{i * 0.5:.2f}\n" for i in range(500))
    )
    published = dvc_data.publish(
        str(repo),
        [(str(drop), "trips.csv")],
        "data/span-1",
        "v1",
        "span 1",
        encryption=StorageEncryption(sse=sse),
    )
    writes = [r for r in recorder.object_writes() if r.path.startswith(f"/{BUCKET}/{prefix}/")]
    return repo, drop, published, writes


def test_a_push_to_an_s3_remote_with_sse_encrypts_every_object(
    tmp_path, seaweedfs, recorder, monkeypatch
):
    repo, drop, published, writes = _publish(
        tmp_path, seaweedfs, recorder, monkeypatch, "with-sse", "AES256"
    )
    assert published.pushed_to == f"s3://{BUCKET}/with-sse"
    assert writes, recorder.requests[-5:]  # DVC pushed through the recording endpoint
    assert all(r.headers.get(SSE) == "AES256" for r in writes), writes
    client = seaweedfs.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET)["Contents"]]
    pushed = [k for k in keys if k.startswith("with-sse/")]
    assert pushed
    for key in pushed:
        assert client.head_object(Bucket=BUCKET, Key=key).get("ServerSideEncryption") == "AES256"

    # What DVC stored is the file: read whole (SeaweedFS 4.48 garbles *ranged* reads of
    # SSE objects, and DVC's S3 client reads in ranges; see the module's docstring).
    bodies = {client.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in pushed}
    assert drop.read_bytes() in bodies


def test_a_push_to_an_s3_remote_without_sse_goes_out_bare(
    tmp_path, seaweedfs, recorder, monkeypatch
):
    repo, drop, published, writes = _publish(
        tmp_path, seaweedfs, recorder, monkeypatch, "bare", None
    )
    assert published.pushed_to == f"s3://{BUCKET}/bare"
    assert writes and not any(r.headers.get(SSE) for r in writes), writes

    # A fresh clone has none of it cached: `dvc pull` of the tag reads it from the bucket.
    # (dvc_repos.run's environment is the one at import: this one has the credentials.)
    clone = tmp_path / "clone"
    run(tmp_path, "git", "clone", "-q", "--branch", "v1", str(repo), str(clone))
    pull = subprocess.run(
        [sys.executable, "-m", "dvc", "pull"],
        cwd=clone,
        env={**os.environ, **ENV_DVC},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert pull.returncode == 0, pull.stdout + pull.stderr
    assert (clone / "data" / "span-1" / "trips.csv").read_bytes() == drop.read_bytes()
