"""`tfxp serve`'s pieces on their own, without a pipeline: the batcher, the JSON codec,
the A/B split, the request log (rotation, hidden names, salvage), and a tiny image model
served through the REST app in-process (PNG as b64, logged under its raw column)."""

from __future__ import annotations

import asyncio
import base64
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from serving.batching import Batcher
from serving.codec import ClientError, ExampleEncoder, predict_response
from serving.request_log import Entry, RequestLog, published_files, salvage
from serving.service import Split


def _double(inputs):
    return {"y": inputs["x"] * 2}


def test_concurrent_jobs_are_batched_and_each_gets_its_own_rows() -> None:
    sizes: list[int] = []
    gate = threading.Event()

    def slow(inputs):
        gate.wait(5)  # the first call holds the thread while the others queue up
        return _double(inputs)

    b = Batcher(slow, max_batch_size=8, observe=sizes.append)
    futures = [b.submit({"x": np.array([i, i + 100])}, 2) for i in range(5)]
    time.sleep(0.1)
    gate.set()
    for i, f in enumerate(futures):
        assert f.result(5)["y"].tolist() == [2 * i, 2 * (i + 100)]
    assert sum(sizes) == 10 and max(sizes) <= 8 and len(sizes) < 5  # batched, never too big
    b.close()


def test_a_failing_job_fails_alone_and_jobs_after_close_still_run() -> None:
    def picky(inputs):
        if (inputs["x"] < 0).any():
            raise ValueError("negative")
        return _double(inputs)

    gate = threading.Event()
    b = Batcher(lambda i: (gate.wait(5), picky(i))[1], max_batch_size=16)
    futures = [b.submit({"x": np.array([v])}, 1) for v in (1, -1, 3)]
    gate.set()
    assert futures[0].result(5)["y"].tolist() == [2]
    with pytest.raises(ValueError):
        futures[1].result(5)
    assert futures[2].result(5)["y"].tolist() == [6]
    b.close()
    b.join(5)
    assert b.submit({"x": np.array([4])}, 1).result(5)["y"].tolist() == [8]  # never dropped


def test_example_encoder_types_features_and_names_the_faulty_one() -> None:
    import tensorflow as tf

    enc = ExampleEncoder({"a": "INT", "b": "FLOAT", "c": "BYTES", "label": "INT"}, "label")
    ex = tf.train.Example.FromString(
        enc(
            {"a": 3, "b": [1.5, 2], "c": {"b64": base64.b64encode(b"\x00").decode()}, "label": 1},
            "x",
        )
    )
    f = ex.features.feature
    assert f["a"].int64_list.value == [3] and f["b"].float_list.value == [1.5, 2.0]
    assert f["c"].bytes_list.value == [b"\x00"] and "label" not in f
    for bad, words in (
        ({"a": 1.5}, "x.a: 1.5 is not an integer"),
        ({"a": True}, "x.a: True is not an integer"),
        ({"b": "1"}, "x.b: '1' is not a number"),
        ({"c": 5}, "x.c: 5 is not a string"),
        ({"c": {"b64": "%%"}}, "x.c: not valid base64"),
        ({"z": 1}, "x: unknown feature 'z'"),
        ({"a": 2**63}, "does not fit a 64-bit integer"),
    ):
        with pytest.raises(ClientError, match=words.replace("(", r"\(")):
            enc(bad, "x")


def test_predict_response_rows_and_columns_as_tf_serving() -> None:
    out = {"p": np.array([[0.25], [0.5]]), "c": np.array([b"a", b"b"], dtype=object)}
    assert predict_response({"p": out["p"]}, True) == {"predictions": [[0.25], [0.5]]}
    assert predict_response(out, True) == {
        "predictions": [{"c": "a", "p": [0.25]}, {"c": "b", "p": [0.5]}]
    }
    assert predict_response(out, False) == {"outputs": {"c": ["a", "b"], "p": [[0.25], [0.5]]}}


def test_split_is_sticky_by_key_and_near_its_share() -> None:
    split = Split.parse("challenger=10")
    assert split == Split("challenger", 10.0)
    keys = [f"user-{i}" for i in range(4000)]
    chosen = [split.chooses(k) for k in keys]
    assert chosen == [split.chooses(k) for k in keys]  # the same key, the same side
    assert 300 < sum(chosen) < 500
    for bad in ("challenger", "challenger=x", "challenger=101", "=5"):
        with pytest.raises(ValueError, match="LABEL=PERCENT"):
            Split.parse(bad)


def _entry(i: int, raw: bytes) -> Entry:
    return Entry(
        f"r{i}",
        1_700_000_000_000_000 + i,
        "m",
        7,
        "champion",
        "served",
        [raw],
        {"p": np.array([[0.5]])},
    )


def test_request_log_rotates_by_size_publishes_whole_files_and_drops_the_label(tmp_path) -> None:
    """Files readable by TensorFlow's own GZIP TFRecord reader, records in order."""
    import tensorflow as tf

    ex = tf.train.Example()
    ex.features.feature["x"].float_list.value.append(1.0)
    ex.features.feature["label"].int64_list.value.append(1)
    log = RequestLog(str(tmp_path), label_key="label", max_bytes=500)
    for i in range(40):
        log.add(_entry(i, ex.SerializeToString()))
    log.close()
    files = published_files(str(tmp_path))
    assert len(files) > 1 and not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    for name in map(os.path.basename, files):
        assert name.startswith("requests-") and name.endswith(".tfrecord.gz")
        stamp, pid, seq = name[len("requests-") : -len(".tfrecord.gz")].split("-")
        assert len(stamp) == 15 and pid == str(os.getpid()) and len(seq) == 6
    records = [
        tf.train.Example.FromString(r.numpy())
        for f in files
        for r in tf.data.TFRecordDataset(f, compression_type="GZIP")
    ]
    assert [r.features.feature["__request_id"].bytes_list.value[0] for r in records] == [
        f"r{i}".encode() for i in range(40)
    ]
    f = records[0].features.feature
    assert "label" not in f and f["x"].float_list.value == [1.0]
    assert f["__version"].int64_list.value == [7] and f["__output"].float_list.value == [0.5]
    assert f["__role"].bytes_list.value == [b"served"]


def test_salvage_publishes_the_readable_records_of_a_dead_writer(tmp_path) -> None:
    import tensorflow as tf

    dead_pid = 2**22 + 12345  # above the kernel's pid_max: never a live process
    name = f"requests-20261204T000000-{dead_pid}-000001.tfrecord.gz"
    whole = tmp_path / "whole.gz"
    with tf.io.TFRecordWriter(str(whole), options="GZIP") as w:
        for i in range(2000):
            w.write(f"record {i}".encode() * 20)
    data = whole.read_bytes()
    (tmp_path / f".{name}.tmp").write_bytes(data[: len(data) * 2 // 3])  # killed mid-write
    whole.unlink()
    salvaged = salvage(str(tmp_path))
    assert [os.path.basename(p) for p in salvaged] == [name]
    records = list(tf.data.TFRecordDataset(salvaged[0], compression_type="GZIP"))
    assert 0 < len(records) < 2000 and records[0].numpy() == b"record 0" * 20
    assert os.listdir(tmp_path) == [name]


# -- a tiny image model, served through the REST app in-process


class _ImageModel:
    @staticmethod
    def save(path: Path) -> None:
        import tensorflow as tf

        class M(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")])
            def serve(self, image_bytes):
                def one(b):
                    return (
                        tf.reduce_mean(tf.cast(tf.io.decode_png(b, channels=1), tf.float32)) / 255
                    )

                m = tf.map_fn(one, image_bytes, fn_output_signature=tf.float32)
                return {"probabilities": tf.stack([1 - m, m], axis=1)}

        module = M()
        tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})


def _png(value: int) -> bytes:
    import tensorflow as tf

    return tf.io.encode_png(tf.fill([4, 4, 1], tf.constant(value, tf.uint8))).numpy()


def test_an_image_model_answers_png_as_b64_and_logs_the_image(tmp_path) -> None:
    import httpx
    import tensorflow as tf

    from serving.codec import ExampleEncoder as _  # noqa: F401 - the same codec
    from serving.metrics import Metrics
    from serving.repository import Repository
    from serving.rest import RestApp
    from serving.service import Service

    _ImageModel.save(tmp_path / "serving" / "3")
    repo = Repository("digits", str(tmp_path / "serving"), max_batch_size=8, batch_timeout_ms=0)
    repo.refresh()
    log = RequestLog(str(tmp_path / "log"))
    service = Service(repo, Metrics(8), None, request_log=log, class_names=["dark", "light"],
                      log_inputs={"image_bytes": "image"})  # fmt: skip
    app = RestApp(service)

    async def ask():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            body = {"instances": [{"b64": base64.b64encode(_png(v)).decode()} for v in (0, 255)]}
            ok = await c.post("/v1/models/digits:predict", json=body)
            bad = await c.post("/v1/models/digits:predict", json={"instances": [{"b64": "aGk="}]})
            return ok, bad

    ok, bad = asyncio.run(ask())
    assert ok.status_code == 200 and ok.headers["x-model-version"] == "3"
    assert ok.json() == {"predictions": [[1.0, 0.0], [0.0, 1.0]]}
    assert bad.status_code == 400 and "rejected the input" in bad.json()["error"]
    log.close()
    repo.stop()
    [path] = published_files(str(tmp_path / "log"))
    records = [
        tf.train.Example.FromString(r.numpy())
        for r in tf.data.TFRecordDataset(path, compression_type="GZIP")
    ]
    assert [r.features.feature["image"].bytes_list.value[0] for r in records] == [
        _png(0),
        _png(255),
    ]
    assert list(records[1].features.feature["__output"].float_list.value) == [0.0, 1.0]


def test_the_repository_follows_new_versions_and_alias_pointers(tmp_path) -> None:
    from metadata.aliases import AliasChange
    from serving.repository import NotFound, Repository
    from tfxp.models import registry

    serving = tmp_path / "serving"
    _ImageModel.save(serving / "1")
    repo = Repository("digits", str(serving), max_batch_size=4, batch_timeout_ms=0)
    repo.refresh()
    assert repo.resolve("digits").version.version == 1
    (serving / ".incoming-x").mkdir()  # a push under way is no version
    os.rename(serving / "1", serving / "2")
    _ImageModel.save(serving / "1")
    assert repo.refresh()
    assert repo.resolve("digits").version.version == 2 and sorted(repo.state.versions) == [2]
    change = AliasChange(0, "challenger", "promote", 0, "1", None, None, "t", "", "now")
    registry.point(str(serving), change, registry.ModelVersion("1", 0, str(serving / "1"), None))
    assert repo.refresh()
    assert repo.resolve("digits", label="challenger").version.version == 1
    assert repo.resolve("digits").version.version == 2  # no champion: the newest
    with pytest.raises(NotFound, match="label 'champion'"):
        repo.resolve("digits", label="champion")
    assert not repo.refresh()  # nothing changed, no swap
    repo.stop()


def test_wire_level_records_parse_as_tensorflow_builds_them() -> None:
    import tensorflow as tf

    from serving import records

    ex = tf.train.Example()
    f = ex.features.feature
    f["a"].int64_list.value.extend([1, -5, 2**40])
    f["tips"].float_list.value.append(3.5)
    f["c"].bytes_list.value.append(b"tips and more")
    serialized = ex.SerializeToString()
    dropped = tf.train.Example.FromString(records.without_feature(serialized, "tips"))
    del f["tips"]
    assert dropped == ex
    assert records.without_feature(b"tips: no example", "tips") == b"tips: no example"
    meta = records.example(
        [
            records.bytes_feature("__b", [b"x", b""]),
            records.int64_feature("__i", [-1, 7]),
            records.float_feature("__f", [0.25]),
        ]
    )
    merged = tf.train.Example.FromString(serialized + meta).features.feature
    assert merged["a"].int64_list.value == [1, -5, 2**40]
    assert merged["__b"].bytes_list.value == [b"x", b""]
    assert merged["__i"].int64_list.value == [-1, 7]
    assert merged["__f"].float_list.value == [0.25]


def test_rest_and_grpc_share_service_score(tmp_path, monkeypatch) -> None:
    """Both front ends only decode and encode: the scoring, the version that answered
    and the mapping of a refused input are Service.score's, once for each request."""
    import grpc
    import httpx
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from serving.grpc_api import start_grpc
    from serving.metrics import Metrics
    from serving.repository import Repository
    from serving.rest import RestApp
    from serving.service import Service

    _ImageModel.save(tmp_path / "serving" / "3")
    repo = Repository("digits", str(tmp_path / "serving"), max_batch_size=8, batch_timeout_ms=0)
    repo.refresh()
    service = Service(repo, Metrics(8), None, class_names=["dark", "light"])
    answers: list = []
    scored = Service.score

    def score(self, api, resolved, payload):
        scoring = scored(self, api, resolved, payload)
        answers.append(api)
        return scoring

    monkeypatch.setattr(Service, "score", score)
    pngs = [_png(0), _png(255)]

    async def rest(instances):
        transport = httpx.ASGITransport(app=RestApp(service))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.post("/v1/models/digits:predict", json={"instances": instances})

    by_rest = asyncio.run(rest([{"b64": base64.b64encode(p).decode()} for p in pngs]))
    refused_rest = asyncio.run(rest([{"b64": "aGk="}]))
    server, port = start_grpc(service, "127.0.0.1", 0, None, 2)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "digits"
            request.inputs["image_bytes"].CopyFrom(tf.make_tensor_proto(pngs))
            by_grpc = stub.Predict(request, timeout=30)
            request.inputs["image_bytes"].CopyFrom(tf.make_tensor_proto([b"hi"]))
            with pytest.raises(grpc.RpcError) as refused_grpc:
                stub.Predict(request, timeout=30)
    finally:
        server.stop(None)
        repo.stop()
    assert answers == ["predict"] * 4  # every request, either API, through Service.score
    assert by_rest.json() == {"predictions": [[1.0, 0.0], [0.0, 1.0]]}
    grpc_outputs = tf.make_ndarray(by_grpc.outputs["probabilities"]).tolist()
    assert grpc_outputs == by_rest.json()["predictions"]
    assert by_rest.headers["x-model-version"] == "3" and by_grpc.model_spec.version.value == 3
    # One mapping of the model's refusal: 400 and INVALID_ARGUMENT, the same words.
    assert refused_rest.status_code == 400
    assert refused_grpc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused_grpc.value.details() == refused_rest.json()["error"]
    assert "rejected the input" in refused_grpc.value.details()
