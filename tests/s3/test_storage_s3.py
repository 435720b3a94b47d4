"""TensorFlow's and our own S3 access against a real SeaweedFS server.

TensorFlow work runs in a subprocess: importing tensorflow-io changes the
process for good (a registered filesystem, an abort at teardown), and the
subprocess shows exactly what a `tfxp` process sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pipeline.config import PROJECT_ROOT

# The first test of a module also pays for its module fixture's whole runs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

BUCKET = "tfxp-io"


def _python(code: str, env: dict[str, str], via=subprocess) -> subprocess.CompletedProcess:
    """`python -c CODE`, fresh or (`via=forkserver`) forked from the session's fork server."""
    return via.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def objects(seaweedfs):
    client = seaweedfs.client()
    client.create_bucket(Bucket=BUCKET)
    big = os.urandom(3 * 1024 * 1024 + 17)  # several of the plugin's read sizes, odd length
    client.put_object(Bucket=BUCKET, Key="big.bin", Body=big)
    client.put_object(Bucket=BUCKET, Key="vocab.txt", Body=b"a\nb\nc\n")
    return big


def test_tensorflow_reads_exact_bytes_and_ends_cleanly_through_the_relay(objects, seaweedfs):
    done = _python(
        f"""
        import hashlib, json, os
        from tfxp.storage.storage import enable_filesystems
        enable_filesystems(["s3://{BUCKET}"])
        import tensorflow as tf
        out = {{}}
        with tf.io.gfile.GFile("s3://{BUCKET}/big.bin", "rb") as f:
            out["sha"] = hashlib.sha256(f.read()).hexdigest()
        with tf.io.gfile.GFile("s3://{BUCKET}/vocab.txt", "rb") as f:
            f.seek(6)
            out["at_end"] = f.read(10).decode()
        # A vocabulary table reads to the end of its file (the plugin's crash case).
        table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                "s3://{BUCKET}/vocab.txt", tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), -1)
        out["lookup"] = table.lookup(tf.constant(["c", "zz"])).numpy().tolist()
        with tf.io.gfile.GFile("s3://{BUCKET}/written.bin", "wb") as f:
            f.write(b"x" * 1_000_003)
        out["listed"] = sorted(tf.io.gfile.listdir("s3://{BUCKET}/"))
        print(json.dumps(out), flush=True)
        os._exit(0)
        """,
        seaweedfs.env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    import hashlib

    assert out["sha"] == hashlib.sha256(objects).hexdigest()
    assert out["at_end"] == ""
    assert out["lookup"] == [2, -1]
    assert "written.bin" in out["listed"]
    body = seaweedfs.client().get_object(Bucket=BUCKET, Key="written.bin")["Body"].read()
    assert body == b"x" * 1_000_003


def test_the_plugin_without_the_relay_still_crashes_at_end_of_file(objects, seaweedfs):
    """Why the relay exists. If a tensorflow-io release fixes this, the relay can go."""
    done = _python(
        f"""
        import os
        from tfxp.storage.storage import prepare_s3_environment
        prepare_s3_environment()
        import tensorflow as tf, tensorflow_io
        with tf.io.gfile.GFile("s3://{BUCKET}/vocab.txt", "rb") as f:
            f.seek(6)
            f.read(10)
        os._exit(0)
        """,
        seaweedfs.env(),
    )
    assert done.returncode == -11, (done.returncode, done.stderr[-2000:])  # SIGSEGV


def test_atomic_push_to_a_bucket_writes_complete_numbered_versions(
    objects, seaweedfs, tmp_path, forkserver
):
    model = tmp_path / "model"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"graph")
    (model / "variables" / "variables.index").write_bytes(b"index")
    done = _python(
        f"""
        import json, os
        from tfxp.storage.storage import enable_filesystems
        enable_filesystems(["s3://{BUCKET}"])
        from components.release.atomic_pusher import is_complete_version, publish_model
        a = publish_model("{model}", "s3://{BUCKET}/serving")
        b = publish_model("{model}", "s3://{BUCKET}/serving")
        print(json.dumps([a, b, is_complete_version(a[0]),
                          is_complete_version("s3://{BUCKET}/serving/1")]), flush=True)
        os._exit(0)
        """,
        seaweedfs.env(),
        via=forkserver,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (path_a, version_a), (path_b, version_b), complete, bogus = json.loads(
        done.stdout.strip().splitlines()[-1]
    )
    assert int(version_b) > int(version_a)
    assert complete and not bogus
    keys = seaweedfs.keys(BUCKET, "serving/")
    for version in (version_a, version_b):
        assert f"serving/{version}/saved_model.pb" in keys
        assert f"serving/{version}/variables/variables.index" in keys
        assert f"serving/{version}/PUSH_COMPLETE" in keys
    assert not [k for k in keys if ".incoming-" in k]


def test_upload_numbers_spans_and_reports_missing_credentials(seaweedfs, tmp_path, forkserver):
    from e2e_support import write_sample

    write_sample(tmp_path / "local", rows=50)
    tfxp = os.path.join(os.path.dirname(sys.executable), "tfxp")
    args = [tfxp, "data", "upload", "s3://tfxp-up/taxi", "--source-root", str(tmp_path / "local")]
    first = forkserver.run(args, env=seaweedfs.env(), capture_output=True, text=True, timeout=120)
    second = forkserver.run(args, env=seaweedfs.env(), capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "as span 1" in first.stdout and "as span 2" in second.stdout
    assert "next: tfxp run --data-root s3://tfxp-up/taxi --run-dir s3://tfxp-up/runs/taxi" in (
        first.stdout
    )
    env = seaweedfs.env()
    del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    anonymous = forkserver.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert anonymous.returncode == 1
    assert "no AWS credentials found" in anonymous.stderr
    # Each span's _PUBLISHED marker is written after its files (tfxp watch waits for it).
    assert sorted(seaweedfs.keys("tfxp-up")) == [
        "taxi/span-1/_PUBLISHED",
        "taxi/span-1/data.csv",
        "taxi/span-2/_PUBLISHED",
        "taxi/span-2/data.csv",
    ]


def test_relay_serves_only_requests_signed_with_our_secret(objects, seaweedfs, monkeypatch):
    """The relay adds credentials: nobody else on the machine may ride on it."""
    import urllib.error
    import urllib.request

    import boto3
    from botocore.exceptions import ClientError

    from tfxp.storage import s3_shim

    for k, v in seaweedfs.env().items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    endpoint = s3_shim.start_relay(seaweedfs.endpoint, "us-east-1")

    def client(secret: str):
        return boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=seaweedfs.env()["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=secret,
            region_name="us-east-1",
        )

    body = client(seaweedfs.env()["AWS_SECRET_ACCESS_KEY"]).get_object(
        Bucket=BUCKET, Key="vocab.txt", Range="bytes=6-20"
    )["Body"]
    assert body.read() == b""  # past the end: an empty read, not a 416
    with pytest.raises(ClientError) as e:
        client("someone-elses-guess").get_object(Bucket=BUCKET, Key="vocab.txt")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{endpoint}/{BUCKET}/vocab.txt", timeout=10)  # noqa: S310 - the test's http endpoint
    assert e.value.code == 403


def test_push_failing_mid_copy_leaves_no_version_and_no_upload(
    objects, seaweedfs, tmp_path, forkserver
):
    model = tmp_path / "model"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"graph")
    (model / "variables" / "variables.index").write_bytes(b"index")
    done = _python(
        f"""
        import os
        from tfxp.storage.storage import enable_filesystems
        enable_filesystems(["s3://{BUCKET}"])
        from components.release import atomic_pusher
        real, calls = atomic_pusher.fileio.copy, []
        def dying_copy(src, dst, overwrite=False):
            if "/.incoming-" not in dst:  # into the version: the second file fails
                calls.append(dst)
                if len(calls) > 1:
                    raise OSError("store went away mid-copy")
            return real(src, dst, overwrite=overwrite)
        atomic_pusher.fileio.copy = dying_copy
        try:
            atomic_pusher.publish_model("{model}", "s3://{BUCKET}/broken-serving")
        except OSError as e:
            print("failed:", e, flush=True)
        os._exit(0)
        """,
        seaweedfs.env(),
        via=forkserver,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "failed: store went away mid-copy" in done.stdout
    # The version had its first file when the copy failed; the cleanup removed it
    # and the hidden upload.
    assert seaweedfs.keys(BUCKET, "broken-serving/") == []
