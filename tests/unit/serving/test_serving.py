"""`tfxp serve` after a pipeline run: TF Serving's REST and gRPC APIs give the numbers
`tfxp predict` gives, every client fault is a 4xx naming what and where, the metrics and
health answer, the request log reads back, and off loopback a token is required."""

from __future__ import annotations

import os

import grpc
import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from serving_support import Running, b64, raw_rows, read_log

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def live(serving_run, tmp_path_factory):
    server = Running(
        serving_run.config,
        log_dir=str(tmp_path_factory.mktemp("serving-log")),
        max_request_bytes=1024 * 1024,
    )
    yield server
    server.close()


@pytest.fixture(scope="module")
def client(live):
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def expected(serving_run):
    """What `tfxp predict` prints for the rows: one probability each."""
    from tfxp.models.predict import predict_csv

    return predict_csv(serving_run.config, str(serving_run.csv_path)).probabilities


def _close(a, b) -> None:
    np.testing.assert_allclose(np.ravel(a), np.ravel(b), rtol=0, atol=1e-6)


def test_rest_predict_gives_tfxp_predicts_numbers(serving_run, client, expected) -> None:
    examples, objects = raw_rows(serving_run.config, serving_run.csv_path)
    for body in (
        {"instances": [b64(e) for e in examples]},  # TF Serving's b64 tf.Example
        {"instances": [{"examples": b64(e)} for e in examples]},
        {"instances": objects},  # raw feature objects, typed by the schema
    ):
        r = client.post("/v1/models/taxi:predict", json=body)
        assert r.status_code == 200, r.text
        assert r.headers["x-model-version"] == serving_run.new
        assert r.headers["x-model-label"] == "champion"
        _close([p[0] for p in r.json()["predictions"]], expected)
    r = client.post(
        "/v1/models/taxi/labels/champion:predict", json={"inputs": [b64(e) for e in examples]}
    )
    _close(r.json()["outputs"], expected)
    r = client.post(
        f"/v1/models/taxi/versions/{serving_run.new}:classify", json={"examples": objects}
    )
    assert r.status_code == 200, r.text
    _close([dict(c)["1"] for c in r.json()["results"]], expected)


def test_grpc_gives_tfxp_predicts_numbers(serving_run, live, expected) -> None:
    import tensorflow as tf
    from tensorflow_serving.apis import (
        classification_pb2,
        get_model_metadata_pb2,
        get_model_status_pb2,
        model_service_pb2_grpc,
        predict_pb2,
        prediction_service_pb2_grpc,
    )

    examples, _ = raw_rows(serving_run.config, serving_run.csv_path)
    with grpc.insecure_channel(live.grpc) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        req = predict_pb2.PredictRequest()
        req.model_spec.name = "taxi"
        req.model_spec.version_label = "champion"
        req.inputs["examples"].CopyFrom(tf.make_tensor_proto(examples, dtype=tf.string))
        resp = stub.Predict(req, timeout=30)
        assert resp.model_spec.version.value == int(serving_run.new)
        _close(tf.make_ndarray(resp.outputs["probability"]), expected)

        creq = classification_pb2.ClassificationRequest()
        creq.model_spec.name = "taxi"
        for e in examples:
            creq.input.example_list.examples.add().ParseFromString(e)
        cresp = stub.Classify(creq, timeout=30)
        _close([c.classes[1].score for c in cresp.result.classifications], expected)

        mreq = get_model_metadata_pb2.GetModelMetadataRequest()
        mreq.model_spec.name = "taxi"
        mreq.metadata_field.append("signature_def")
        sigs = get_model_metadata_pb2.SignatureDefMap()
        stub.GetModelMetadata(mreq, timeout=30).metadata["signature_def"].Unpack(sigs)
        assert sigs.signature_def["serving_default"].inputs["examples"].dtype == tf.string

        sreq = get_model_status_pb2.GetModelStatusRequest()
        sreq.model_spec.name = "taxi"
        status = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(sreq, timeout=30)
        assert [s.version for s in status.model_version_status] == [int(serving_run.new)]
        assert (
            status.model_version_status[0].state
            == get_model_status_pb2.ModelVersionStatus.AVAILABLE
        )

        req.model_spec.name = "nope"
        with pytest.raises(grpc.RpcError) as e:
            stub.Predict(req, timeout=30)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND and "nope" in e.value.details()
        req.model_spec.name = "taxi"
        req.inputs["wrong"].CopyFrom(req.inputs["examples"])
        with pytest.raises(grpc.RpcError) as e:
            stub.Predict(req, timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "wrong" in e.value.details()


def test_the_pushed_version_carries_warmup_requests_replayed_before_available(
    serving_run, live
) -> None:
    from serving.models import WARMUP_FILE

    assert os.path.isfile(
        os.path.join(serving_run.config.serving_dir, serving_run.new, WARMUP_FILE)
    )
    # 4 one-example requests and one batch, from the rows the serving check sent
    assert live.server.repository.state.versions[int(serving_run.new)].warmup_records == 5


def test_status_metadata_and_labels_as_tf_serving_prints_them(serving_run, client) -> None:
    for path in (
        "/v1/models/taxi",
        "/v1/models/taxi/labels/champion",
        f"/v1/models/taxi/versions/{serving_run.new}",
    ):
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)
        assert r.json() == {
            "model_version_status": [
                {
                    "version": serving_run.new,
                    "state": "AVAILABLE",
                    "status": {"error_code": "OK", "error_message": ""},
                }
            ]
        }
    meta = client.get("/v1/models/taxi/metadata").json()
    assert meta["model_spec"] == {"name": "taxi", "signature_name": "", "version": serving_run.new}
    sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert sig["method_name"] == "tensorflow/serving/predict"
    assert sig["inputs"]["examples"]["dtype"] == "DT_STRING"
    assert "probability" in sig["outputs"]


ROW = {"fare": 12.5, "trip_miles": 1.0}
ERRORS = [
    # (method, path, body (bytes: raw), status, words the error names)
    ("POST", "/v1/models/taxi:predict", b"{bad", 400, "not valid JSON"),
    ("POST", "/v1/models/taxi:predict", b"[1]", 400, "JSON object"),
    (
        "POST",
        "/v1/models/taxi:predict",
        {"instances": [{"b64": "!!"}]},
        400,
        "instances[0]: not valid base64",
    ),
    ("POST", "/v1/models/taxi:predict", {"instances": [{"foo": 1}]}, 400, "unknown feature 'foo'"),
    ("POST", "/v1/models/taxi:predict", {"instances": [{"fare": "x"}]}, 400, "instances[0].fare"),
    (
        "POST",
        "/v1/models/taxi:predict",
        {"instances": [{"trip_seconds": 1.5}]},
        400,
        "not an integer",
    ),
    (
        "POST",
        "/v1/models/taxi:predict",
        {"instances": [b64(b"not an example")]},
        400,
        "could not parse",
    ),
    ("POST", "/v1/models/taxi:predict", {"instances": [ROW]}, 400, "is required"),
    ("POST", "/v1/models/taxi:predict", {"instances": []}, 400, "non-empty"),
    ("POST", "/v1/models/taxi:predict", {"instances": [1], "inputs": [1]}, 400, "exactly one"),
    ("POST", "/v1/models/taxi:predict", {"inputs": {"wrong": [1]}}, 400, "unknown input"),
    ("POST", "/v1/models/taxi:predict", {"instances": [5]}, 400, "instances[0]"),
    (
        "POST",
        "/v1/models/taxi:predict",
        {"signature_name": "x", "instances": [1]},
        404,
        "signature 'x'",
    ),
    ("POST", "/v1/models/nope:predict", {"instances": [1]}, 404, "model 'nope'"),
    ("POST", "/v1/models/taxi/versions/7:predict", {"instances": [1]}, 404, "version '7'"),
    ("POST", "/v1/models/taxi/versions/x:predict", {"instances": [1]}, 404, "version 'x'"),
    ("POST", "/v1/models/taxi/labels/staging:predict", {"instances": [1]}, 404, "label 'staging'"),
    ("POST", "/v1/models/taxi:classify", {"examples": "x"}, 400, "examples"),
    ("POST", "/v1/models/taxi:classify", {"examples": [ROW], "context": 3}, 400, "context"),
    ("POST", "/v1/models/taxi:regress", {"examples": [{"company": 3}]}, 400, "examples[0].company"),
    ("GET", "/v1/models/taxi:predict", None, 405, "takes POST"),
    ("POST", "/v1/models/taxi/metadata", {}, 405, "takes GET"),
    ("GET", "/v1/models/taxi/../../etc/passwd", None, 404, "no such path"),
    ("GET", "/static/../../pyproject.toml", None, 404, "no such path"),
    ("POST", "/v1/models/taxi:predict", b"x" * (2 * 1024 * 1024), 413, "larger than the limit"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "words"), ERRORS)
def test_client_faults_are_4xx_naming_what_and_where(client, method, path, body, status, words):
    kwargs = (
        {"content": body} if isinstance(body, bytes) else {"json": body} if body is not None else {}
    )
    r = client.request(method, path, **kwargs)
    assert r.status_code == status, r.text
    assert words.lower() in r.json()["error"].lower(), r.json()


def test_metrics_health_and_request_log(serving_run, live, client) -> None:
    examples, _ = raw_rows(serving_run.config, serving_run.csv_path)
    for e in examples[:5]:
        assert (
            client.post("/v1/models/taxi:predict", json={"instances": [b64(e)]}).status_code == 200
        )
    assert client.get("/v1/health/live").status_code == 200
    assert client.get("/v1/health/ready").json() == {"ready": True}
    page = client.get("/monitoring/prometheus/metrics").text
    v = serving_run.new
    assert (
        f'tfxp_serving_requests_total{{api="predict",code="200",label="champion",model="taxi",'
        f'version="{v}"}}' in page
    )
    assert 'tfxp_serving_errors_total{api="predict",code="400"' in page
    assert (
        'tfxp_serving_request_latency_seconds_bucket{api="predict",label="champion",le="0.005"'
        in page
    )
    assert (
        f'tfxp_serving_batch_size_count{{model="taxi",signature="serving_default",version="{v}"}}'
        in page
    )
    gauges = {
        s.labels["label"]: s.value
        for family in text_string_to_metric_families(page)
        if family.name == "tfxp_serving_label_version"
        for s in family.samples
    }
    assert gauges == {"champion": int(v)}

    live.server.request_log.rotate()
    records = [r for path in live.server.request_log.published for r in read_log(path)]
    assert len(records) >= 5
    f = records[-1].features.feature
    assert f["__version"].int64_list.value == [int(v)]
    assert f["__model"].bytes_list.value == [b"taxi"]
    assert f["__label"].bytes_list.value == [b"champion"]
    assert f["__role"].bytes_list.value == [b"served"]
    assert len(f["__request_id"].bytes_list.value[0]) == 32
    assert f["__logged_at"].int64_list.value[0] > 1.7e15
    assert len(f["__output"].float_list.value) == 1
    assert "fare" in f and "tips" not in f  # the raw features, never the label


def test_a_token_is_required_with_one_and_loopback_hosts_only_without(serving_run, live) -> None:
    r = httpx.get(f"{live.url}/v1/models/taxi", headers={"host": "evil.example"})
    assert r.status_code == 400 and "loopback" in r.json()["error"]
    guarded = Running(serving_run.config, token="s3cret", log_fraction=0)
    try:
        url = f"{guarded.url}/v1/models/taxi"
        assert httpx.get(url).status_code == 401
        assert httpx.get(url, headers={"authorization": "Bearer nope"}).status_code == 401
        assert httpx.get(url, headers={"authorization": "Bearer s3cret"}).status_code == 200
        assert httpx.get(f"{guarded.url}/v1/health/live").status_code == 200
        from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

        req = get_model_status_pb2.GetModelStatusRequest()
        req.model_spec.name = "taxi"
        with grpc.insecure_channel(guarded.grpc) as channel:
            stub = model_service_pb2_grpc.ModelServiceStub(channel)
            with pytest.raises(grpc.RpcError) as e:
                stub.GetModelStatus(req, timeout=30)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
            ok = stub.GetModelStatus(req, timeout=30, metadata=[("authorization", "Bearer s3cret")])
            assert ok.model_version_status[0].version == int(serving_run.new)
    finally:
        guarded.close()


def test_off_loopback_it_refuses_to_start_without_a_token(capsys) -> None:
    from tfxp.cli import main

    assert main(["serve", "--host", "0.0.0.0", "--no-token"]) == 2  # noqa: S104 - refused
    assert "reverse proxy" in capsys.readouterr().err
