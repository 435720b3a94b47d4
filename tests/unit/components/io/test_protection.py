"""Protection settings without a server: `storage:` and its refusals, the SSE hook on
boto3 clients (per request), the relay's choice of requests, the request-log policy
(hashing, fingerprints, keys), owner-only secret files, log file modes, DVC remotes."""

from __future__ import annotations

import gzip
import os
import stat
import time
from pathlib import Path

import numpy as np
import pytest

from components.io import encryption as enc
from components.io import log_policy as lp
from runtime.access import SecretFileError, check_owner_only, read_token_file

KEY = "k" * 32


# -- storage: -----------------------------------------------------------------


def test_storage_settings_are_checked_naming_the_key():
    assert enc.read_storage(None, "f").active is False
    s = enc.read_storage({"sse": "aws:kms", "kms_key_id": "arn:k", "require_encryption": True}, "f")
    assert s.s3_params() == {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "arn:k"}
    assert s.s3_headers() == {enc.SSE_HEADER: "aws:kms", enc.KMS_HEADER: "arn:k"}
    for raw, words in [
        ({"sse": "AES128"}, "f.sse"),
        ({"kms_key_id": "k"}, "needs sse: aws:kms"),
        ({"gcs_kms_key": "my-key"}, "cryptoKeys"),
        ({"require_encryption": "yes"}, "true or false"),
        ({"ssee": "AES256"}, "unknown key"),
    ]:
        with pytest.raises(enc.EncryptionSettingError, match=words):
            enc.read_storage(raw, "f")


def test_the_setting_travels_through_the_environment():
    setting = enc.StorageEncryption(sse="AES256", require=True)
    env: dict[str, str] = {enc.ENV_KMS_KEY_ID: "stale"}
    enc.export_env(setting, env)
    assert enc.ENV_KMS_KEY_ID not in env
    assert enc.from_env(env) == setting


def test_the_dataset_file_and_flags_make_one_setting(tmp_path):
    import argparse

    from pipeline.dataset_sections import DatasetFileError
    from pipeline.datasets import dataset_config, load_dataset_file
    from tfxp.cli.common import add_storage_flags, storage_from_args

    src = (dataset_config("taxi").schema_file).replace("schema.pbtxt", "dataset.yaml")
    folder = tmp_path / "taxi"
    folder.mkdir()
    text = Path(src).read_text()
    (folder / "dataset.yaml").write_text(text + "\nstorage:\n  sse: AES256\n")
    config = load_dataset_file(folder / "dataset.yaml")
    assert config.storage == enc.StorageEncryption(sse="AES256")
    parser = argparse.ArgumentParser()
    add_storage_flags(parser)
    args = parser.parse_args(["--sse", "aws:kms", "--kms-key-id", "k1", "--require-encryption"])
    assert storage_from_args(args, config) == enc.StorageEncryption("aws:kms", "k1", None, True)
    (folder / "dataset.yaml").write_text(text + "\nstorage:\n  sse: none\n")
    with pytest.raises(DatasetFileError, match="storage.sse"):
        load_dataset_file(folder / "dataset.yaml")


def _recording_client(sent: list):
    """A boto3 S3 client whose requests are recorded and answered without a network."""
    import boto3
    from botocore.awsrequest import AWSResponse

    client = boto3.session.Session().client(
        "s3",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="a",
        aws_secret_access_key="b",
    )

    class Raw:
        def stream(self, **_):
            yield b""

    def answer(request, **_):
        sent.append(request)
        body = b""
        if "uploads" in request.url:
            body = (
                b"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
                b"<UploadId>u1</UploadId></InitiateMultipartUploadResult>"
            )
        response = AWSResponse(request.url, 200, {}, Raw())
        response._content = body
        return response

    client.meta.events.register("before-send.s3", answer)
    return client


def test_every_object_write_of_a_hooked_client_carries_the_setting():
    sent: list = []
    client = _recording_client(sent)
    enc.add_sse_to_client(client, enc.StorageEncryption(sse="aws:kms", kms_key_id="key-1"))
    client.put_object(Bucket="b", Key="k", Body=b"x")
    client.create_multipart_upload(Bucket="b", Key="k")
    client.copy_object(Bucket="b", Key="k2", CopySource="b/k")
    client.put_object(Bucket="b", Key="mine", Body=b"x", ServerSideEncryption="AES256")
    client.head_object(Bucket="b", Key="k")
    writes = [_headers(r) for r in sent[:3]]
    assert [r.method for r in sent[:3]] == ["PUT", "POST", "PUT"]
    assert all(h[enc.SSE_HEADER] == "aws:kms" and h[enc.KMS_HEADER] == "key-1" for h in writes)
    assert _headers(sent[3])[enc.SSE_HEADER] == "AES256"  # the caller's own choice kept
    assert enc.SSE_HEADER not in _headers(sent[4])  # reads carry nothing
    bare: list = []
    _recording_client(bare).put_object(Bucket="b", Key="k", Body=b"x")
    assert enc.SSE_HEADER not in _headers(bare[0])


def _headers(request) -> dict[str, str]:
    return {
        k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
    }


def test_the_relay_adds_headers_to_object_writes_only():
    from tfxp.storage.s3_shim import writes_object

    assert writes_object("PUT", "/bucket/key.txt")
    assert writes_object("POST", "/bucket/key?uploads")
    assert not writes_object("PUT", "/bucket/key?partNumber=2&uploadId=u")
    assert not writes_object("PUT", "/bucket")  # CreateBucket
    assert not writes_object("POST", "/bucket/key?uploadId=u")  # CompleteMultipartUpload
    assert not writes_object("GET", "/bucket/key")


def test_require_encryption_refuses_writers_that_would_write_in_the_clear(monkeypatch):
    from tfxp.storage.storage import Location, StorageError, apply_encryption

    monkeypatch.setattr(os, "environ", dict(os.environ))
    s3 = Location("s3://b/runs", "pipeline root", write=True)
    gs = Location("gs://b/runs", "pipeline root", write=True)
    data = Location("s3://b/data", "data root", write=False)
    required = enc.StorageEncryption(require=True)
    with pytest.raises(StorageError, match="pipeline root s3://b/runs has no storage.sse"):
        apply_encryption(required, [data, s3])
    with pytest.raises(StorageError, match="gcs_kms_key"):
        apply_encryption(required, [gs])
    apply_encryption(required, [data])  # nothing is written there
    apply_encryption(enc.StorageEncryption(sse="AES256", require=True), [s3])
    assert os.environ[enc.ENV_SSE] == "AES256"


def test_gcs_cmek_is_the_buckets_default_key():
    from types import SimpleNamespace

    from tfxp.storage.storage import Location, StorageError, check_gcs_default_key

    key = "projects/p/locations/l/keyRings/r/cryptoKeys/k"
    loc = Location("gs://b/runs", "pipeline root", write=True)
    os.environ[enc.ENV_GCS_KMS_KEY] = key
    try:
        check_gcs_default_key(
            SimpleNamespace(name="b", default_kms_key_name=f"{key}/cryptoKeyVersions/3"), loc
        )
        with pytest.raises(StorageError, match="--default-encryption-key"):
            check_gcs_default_key(SimpleNamespace(name="b", default_kms_key_name=None), loc)
    finally:
        del os.environ[enc.ENV_GCS_KMS_KEY]


def test_a_dvc_s3_remote_must_set_sse_itself():
    from types import SimpleNamespace

    from tfxp.datasets.dvc import remote_encryption_problem

    def repo(remote: dict) -> SimpleNamespace:
        return SimpleNamespace(config={"core": {"remote": "r"}, "remote": {"r": remote}})

    sse = enc.StorageEncryption(sse="AES256")
    assert "dvc remote modify r sse AES256" in remote_encryption_problem(
        repo({"url": "s3://b/dvc"}), sse
    )
    assert remote_encryption_problem(repo({"url": "s3://b/dvc", "sse": "AES256"}), sse) is None
    required = enc.StorageEncryption(require=True)
    assert "cannot make DVC encrypt" in remote_encryption_problem(
        repo({"url": "ssh://host/dvc"}), required
    )
    assert remote_encryption_problem(repo({"url": "/mnt/dvc"}), required) is None


# -- request-log policy -----------------------------------------------------


def _example(**features) -> bytes:
    import tensorflow as tf

    def feature(v):
        if isinstance(v, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))
        if isinstance(v, float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=[v]))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    ex = tf.train.Example()
    for k, v in features.items():
        ex.features.feature[k].CopyFrom(feature(v))
    return ex.SerializeToString()


def test_policy_is_read_and_checked():
    policy = lp.read_policy({"hash": ["name"], "drop": ["email"], "others": "keep"}, "f")
    assert [policy.action(c) for c in ("name", "email", "fare")] == ["hash", "drop", "keep"]
    assert lp.LogPolicy.from_json(policy.to_json()) == policy
    for raw, words in [
        ({"hash": ["a"], "drop": ["a"]}, "both hash and drop"),
        ({"others": "hash"}, "keep or drop"),
        ({"hash": "name"}, "a list of column names"),
        ({"hashed": ["a"]}, "unknown key"),
    ]:
        with pytest.raises(lp.LogPolicyError, match=words):
            lp.read_policy(raw, "f")


def test_a_hash_policy_needs_a_key_and_never_an_exposed_key_file(tmp_path):
    policy = lp.LogPolicy(hash=("name",))
    with pytest.raises(lp.LogPolicyError, match="TFXP_LOG_HASH_KEY"):
        lp.Applier(policy, env={})
    with pytest.raises(lp.LogPolicyError, match="shorter"):
        lp.Applier(policy, env={"TFXP_LOG_HASH_KEY": "short"})
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o644)
    from_file = lp.LogPolicy(hash=("name",), key_file=str(key_file))
    with pytest.raises(lp.LogPolicyError, match="chmod 600"):
        lp.Applier(from_file, env={})
    key_file.chmod(0o600)
    assert lp.Applier(from_file, env={}).key == KEY.encode()
    lp.Applier(lp.LogPolicy(drop=("email",)), env={})  # nothing hashed: no key needed


def test_applied_policy_drops_hashes_and_keeps_and_fingerprints_rules_and_key():
    from tensorflow.core.example import example_pb2

    policy = lp.LogPolicy(hash=("name", "customer_id"), drop=("email",))
    applier = lp.Applier(policy, env={"TFXP_LOG_HASH_KEY": KEY})
    raw = _example(name=b"Ada Lovelace", customer_id=1815, email=b"ada@example.org", fare=9.5)
    logged = applier.example(raw)
    assert b"Ada Lovelace" not in logged and b"ada@example.org" not in logged
    f = example_pb2.Example.FromString(logged).features.feature
    assert "email" not in f and f["fare"].float_list.value == [9.5]
    hashed = f["name"].bytes_list.value[0]
    assert hashed.startswith(b"h:") and len(hashed) == 2 + lp.HASH_HEX_DIGITS
    assert hashed == applier.hashed([b"Ada Lovelace"])[0]  # a stable category
    assert f["customer_id"].bytes_list.value == applier.hashed([1815])
    other_key = lp.Applier(policy, env={"TFXP_LOG_HASH_KEY": "x" * 32})
    assert other_key.hashed([b"Ada Lovelace"]) != [hashed]
    assert len({applier.fingerprint, other_key.fingerprint, lp.NO_POLICY}) == 3
    assert lp.Applier(None).example(raw) == raw


def _entry(raw: list[bytes]):
    from serving.request_log import Entry

    return Entry(
        "r" * 32,
        int(time.time() * 1e6),
        "m",
        1,
        "champion",
        "served",
        raw,
        {"probability": np.array([[0.5]] * len(raw), dtype=np.float32)},
    )


def test_the_request_log_writes_the_policy_into_owner_only_files(tmp_path):
    from serving.request_log import RequestLog

    policy = lp.LogPolicy(hash=("name",), drop=("email",))
    applier = lp.Applier(policy, env={"TFXP_LOG_HASH_KEY": KEY})
    folder = tmp_path / "serving-log"
    log = RequestLog(str(folder), label_key="tips", policy=applier)
    log.add(_entry([_example(name=b"Grace Hopper", email=b"g@navy.mil", fare=3.0, tips=1.0)]))
    log.close()
    [path] = log.published
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    data = gzip.decompress(Path(path).read_bytes())
    assert b"Grace Hopper" not in data and b"g@navy.mil" not in data
    assert applier.hashed([b"Grace Hopper"])[0] in data
    assert applier.fingerprint.encode() in data  # the __policy feature
    with pytest.raises(ValueError, match="local folder"):
        RequestLog("s3://bucket/serving-log")


# -- secrets on disk ------------------------------------------------------------


def test_token_files_must_be_owner_only_and_not_empty(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    token.chmod(0o640)
    with pytest.raises(SecretFileError, match="group or others"):
        read_token_file(token)
    token.chmod(0o600)
    assert read_token_file(token) == "s3cret-token"
    token.write_text("\n")
    with pytest.raises(SecretFileError, match="empty"):
        read_token_file(token)
    with pytest.raises(SecretFileError, match="cannot be read"):
        check_owner_only(tmp_path / "missing", "--token-file")


def test_serve_and_ui_refuse_a_readable_token_file(tmp_path, capsys, monkeypatch):
    import tfxp.cli
    from tfxp.cli import main

    monkeypatch.setattr(tfxp.cli, "owner_only_umask", lambda: 0o022)  # keep pytest's umask

    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    token.chmod(0o644)
    # Off loopback (refused before anything binds: the token file is group-readable).
    off = "0.0.0.0"  # noqa: S104 - nothing binds: the command refuses first
    for command in (["serve", "--host", off], ["ui", "--host", off]):
        code = main([*command, "--token-file", str(token), "--run-dir", str(tmp_path)])
        err = capsys.readouterr().err
        assert code == 2 and "chmod 600" in err, err


MODES = """
import os, stat, sys
from runtime.access import owner_only_umask
from components.validation.gate import _write_atomic
for case, (umask, chosen) in enumerate([("022", ""), ("027", ""), ("022", "022")]):
    os.umask(int(umask, 8))
    in_effect = owner_only_umask({"TFXP_UMASK": chosen})
    report = os.path.join(sys.argv[1], str(case), "reports", "run.json")
    _write_atomic(report, "{}")
    modes = (os.stat(report).st_mode, os.stat(os.path.dirname(report)).st_mode)
    print(oct(in_effect), *(oct(stat.S_IMODE(m)) for m in modes))
"""


def test_reports_are_owner_only_unless_the_user_chose_a_umask(tmp_path):
    """A gate report (written through TFX's fileio, as reports and model cards are):
    0600 in a 0700 folder under a distribution's default umask; a chosen umask kept."""
    import subprocess
    import sys

    from pipeline.config import PROJECT_ROOT

    done = subprocess.run(
        [sys.executable, "-c", MODES, str(tmp_path)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-3:] == [
        "0o77 0o600 0o700",  # 022, nothing chosen: owner-only
        "0o27 0o640 0o750",  # the user's own 027 kept
        "0o22 0o644 0o755",  # TFXP_UMASK=022 chosen
    ]


def test_every_tfxp_command_sets_the_umask(monkeypatch, tmp_path):
    import tfxp.cli as cli

    called = []
    monkeypatch.setattr(cli, "owner_only_umask", lambda: called.append(True))
    assert cli.main(["ui", "--token-file", str(tmp_path / "none"), "--run-dir", str(tmp_path)])
    assert called == [True]


def test_infer_outputs_hash_and_drop_the_input_columns_they_echo(tmp_path):
    import csv

    from components.batch_inference.output import PREDICTIONS_CSV, SUMMARY_JSON, PredictionsWriter

    policy = lp.LogPolicy(hash=("name",), drop=("email",))
    applier = lp.Applier(policy, env={"TFXP_LOG_HASH_KEY": KEY})
    destination = tmp_path / "predictions"
    with PredictionsWriter(
        str(destination), ("name", "email", "trip"), ("probability",), policy=applier
    ) as writer:
        writer.write(
            str(tmp_path / "data.csv"), 2, ["Ada Lovelace", "ada@example.org", "t1"], ["0.5"]
        )
        writer.publish({"span": 1})
    text = (destination / PREDICTIONS_CSV).read_text()
    assert "Ada Lovelace" not in text and "ada@example.org" not in text
    [row] = list(csv.DictReader(text.splitlines()))
    assert list(row) == ["file", "line", "name", "trip", "probability"]
    assert row["name"] == applier.hashed(["Ada Lovelace"])[0].decode() and row["trip"] == "t1"
    assert applier.fingerprint in (destination / SUMMARY_JSON).read_text()


def test_a_refused_console_request_is_logged_without_what_it_sent(tmp_path, caplog):
    import logging

    from starlette.testclient import TestClient

    from metadata.store import location_from
    from tfxp.ui.app import create_app
    from tfxp.ui.browse import StoreBrowser

    app = create_app(StoreBrowser(location_from(run_dir=str(tmp_path))), token="t0ken-of-ours")
    client = TestClient(app, base_url="http://127.0.0.1")
    with caplog.at_level(logging.WARNING, logger="tfxp.ui"):
        answer = client.get(
            "/runs?token=guessed-token", headers={"Authorization": "Bearer other-guess"}
        )
    assert answer.status_code == 401
    [line] = [r.getMessage() for r in caplog.records if r.name == "tfxp.ui"]
    assert line.startswith("refused GET /runs from ") and "401" in line
    assert "guessed-token" not in line and "other-guess" not in line


def test_init_proposes_hashing_ids_and_personal_names():
    from types import SimpleNamespace

    import yaml

    from tfxp.init.inference import request_log_lines

    def col(name, treatment="vocabulary", note=""):
        return SimpleNamespace(name=name, treatment=treatment, note=note)

    columns = [
        col("order_ref", "excluded", "values look like UUIDs (an id)"),
        col("customer_name"),
        col("Email"),
        col("fare", "zscore"),
        col("username_length", "zscore"),
    ]
    lines = request_log_lines(columns, lambda s: s)
    policy = lp.read_policy(yaml.safe_load("\n".join(lines))["request_log"], "init")
    assert policy.hash == ("order_ref", "customer_name", "Email")
    assert request_log_lines([col("fare", "zscore")], str) == []
