"""Unit tests of tfxp/storage/storage.py: environment mapping, config split, fail-fast checks.

No server here: unreachable endpoints are closed or silent loopback ports, and
gs:// is checked without any network (no credentials) or against a loopback
listener that never answers.
"""

from __future__ import annotations

import json
import socket

import pytest

from pipeline.config import PROJECT_ROOT, PipelineConfig
from tfxp.storage import storage


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_endpoint_from_aws_variables_reaches_tensorflow_names():
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1"}
    storage.prepare_s3_environment(env)
    assert env["S3_ENDPOINT"] == "http://127.0.0.1:9000"
    assert env["AWS_ENDPOINT_URL_S3"] == "http://127.0.0.1:9000"
    assert env["S3_USE_HTTPS"] == "0" and env["S3_VERIFY_SSL"] == "0"
    assert env["AWS_DEFAULT_REGION"] == "eu-west-1"
    # tensorflow-io's multi-part download returned wrong bytes: always off.
    assert env["S3_DISABLE_MULTI_PART_DOWNLOAD"] == "1"
    assert env["AWS_MAX_ATTEMPTS"] == storage.DEFAULT_MAX_ATTEMPTS


def test_tensorflow_style_endpoint_reaches_boto3_and_user_values_win():
    env = {"S3_ENDPOINT": "minio.local:9000", "S3_USE_HTTPS": "0", "AWS_MAX_ATTEMPTS": "9"}
    storage.prepare_s3_environment(env)
    assert env["AWS_ENDPOINT_URL_S3"] == "http://minio.local:9000"
    assert env["S3_ENDPOINT"] == "minio.local:9000"  # not rewritten
    assert env["AWS_MAX_ATTEMPTS"] == "9"
    assert "AWS_ACCESS_KEY_ID" not in env  # credentials are never invented


def test_remote_run_dir_keeps_metadata_logs_and_lock_local():
    config = PipelineConfig(run_dir="s3://bucket/runs/taxi")
    assert config.pipeline_root == "s3://bucket/runs/taxi/pipeline_root"
    assert config.serving_dir == "s3://bucket/runs/taxi/serving"
    local = str(PROJECT_ROOT / "runs" / "remote" / "s3" / "bucket" / "runs" / "taxi")
    assert config.metadata_path == f"{local}/metadata.sqlite"
    assert config.log_dir == f"{local}/logs"
    pinned = config.replace(state_dir="/tmp/state")
    assert pinned.metadata_path == "/tmp/state/metadata.sqlite"


def test_local_config_unchanged_and_overrides_apply():
    config = PipelineConfig(run_dir="/x/run")
    assert (config.pipeline_root, config.serving_dir) == ("/x/run/pipeline_root", "/x/run/serving")
    assert (config.metadata_path, config.log_dir) == ("/x/run/metadata.sqlite", "/x/run/logs")
    split = config.replace(artifact_root="s3://b/root", serving_root="gs://g/serving")
    assert [loc.uri for loc in storage.config_locations(split)] == [
        "s3://b/root",
        "gs://g/serving",
    ]
    assert split.metadata_path == "/x/run/metadata.sqlite"


def test_unreachable_s3_endpoint_fails_fast_with_one_line(monkeypatch):
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    for name in ("AWS_ENDPOINT_URL_S3", "S3_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    # Each connection the SDK opens, counted: a retried refusal is the retry storm.
    from urllib3.util import connection

    attempts: list[tuple] = []
    real_create = connection.create_connection

    def counted(address, *args, **kwargs):
        attempts.append(address)
        return real_create(address, *args, **kwargs)

    monkeypatch.setattr(connection, "create_connection", counted)
    with pytest.raises(storage.StorageError) as e:
        storage.check_location(storage.Location("s3://bucket/data", "data root", write=False))
    message = str(e.value)
    assert "\n" not in message
    assert "cannot reach the S3 endpoint" in message and endpoint in message
    assert "data root s3://bucket/data" in message
    # The try and the one retry the client is given (botocore's `max_attempts` counts
    # retries); without that setting the SDK connects 4 times, TensorFlow's for ~100 s.
    assert len(attempts) == 2, attempts


def test_gs_without_credentials_fails_at_once_without_network(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(storage.StorageError, match="no Google Cloud credentials") as e:
        storage.check_location(storage.Location("gs://bucket/root", "pipeline root", write=True))
    assert "missing.json does not exist" in str(e.value)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no application_default_credentials
    monkeypatch.setattr(storage, "_gcp_credentials_hint", lambda: None)  # also not on GCE
    with pytest.raises(storage.StorageError, match="GOOGLE_APPLICATION_CREDENTIALS"):
        storage.check_location(storage.Location("gs://bucket/root", "pipeline root", write=True))


def test_gs_with_a_silent_token_server_times_out_instead_of_hanging(monkeypatch, tmp_path):
    """Credentials exist but Google does not answer (no network): a clear error in bounded time."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    silent = socket.socket()  # accepts connections (backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    creds = tmp_path / "sa.json"
    creds.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "tfxp-test",
                "private_key_id": "0",
                "private_key": pem,
                "client_email": "tfxp@tfxp-test.iam.gserviceaccount.com",
                "client_id": "0",
                # The token exchange is the first request: it goes to the silent port.
                "token_uri": f"http://127.0.0.1:{port}/token",
            }
        )
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "tfxp-test")
    monkeypatch.setattr(storage, "PROBE_TIMEOUT_S", 1.0)
    try:
        # Given up at the probe's deadline (twice the timeout), not at the client's retries.
        with pytest.raises(storage.StorageError, match="no answer within 2s") as e:
            storage.check_location(storage.Location("gs://bucket/root", "pipeline root", True))
    finally:
        silent.close()
    assert "gs://bucket/root" in str(e.value)


def test_unsupported_scheme_is_named():
    with pytest.raises(storage.StorageError, match="unsupported scheme 'hdfs://'"):
        storage.check_location(storage.Location("hdfs://nn/data", "data root", False))


def test_beam_s3_filesystem_reuses_one_boto3_client_per_settings(monkeypatch):
    """Beam's S3IO made a boto3 session per file operation; after the fix it gets a
    shared client, a new one only when the credentials (or other settings) change."""
    from apache_beam.io.aws import s3io
    from apache_beam.io.aws.clients.s3 import boto3_client
    from apache_beam.options.pipeline_options import PipelineOptions

    # Beam as shipped, restored afterwards: another test in this process may have run a
    # pipeline on s3:// already, which shares the clients (the wrapper keeps the module).
    shipped = getattr(boto3_client.boto3, "_boto3", boto3_client.boto3)
    monkeypatch.setattr(boto3_client, "boto3", shipped)
    for name, value in (("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    options = PipelineOptions([])

    def boto3_of_one_operation():
        return s3io.S3IO(options=options).client.client

    assert boto3_of_one_operation() is not boto3_of_one_operation()  # Beam as shipped
    storage.share_beam_s3_clients()
    storage.share_beam_s3_clients()  # idempotent: not wrapped twice
    first = s3io.S3IO(options=options)
    second = s3io.S3IO(options=options)
    assert first.client is not second.client  # Beam's per-download state stays separate
    assert first.client.client is second.client.client
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "other")
    assert boto3_of_one_operation() is not first.client.client
