"""An event table end to end: `tfxp init` -> `tfxp run` -> `tfxp predict` -> `tfxp serve`.

One shared run (a module fixture): the generator's shopping sessions (rows of a
session spread over three files, shuffled), `tfxp init --sequence-key --order-by`
with no file edited, the whole pipeline (SequenceExampleGen to Pusher), then
`tfxp predict` on new sessions (one prediction per key) and `tfxp serve` answering
the same SequenceExamples on :predict and :classify with the same numbers. The
request log it writes is read back by the skew check as SequenceExamples.
"""

from __future__ import annotations

import base64
import csv
import glob
import json
import os
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from data.sequences import write_events
from metadata.summary import RunSummary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

KEYS = 1200
NEW_KEYS = 60


@dataclass
class SequenceRun:
    init_output: str
    dataset_yaml: str
    run: RunSummary
    config: Any
    predictions: list[dict]
    new_events: Path
    home: Path


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> SequenceRun:
    sys.path.insert(0, str(Path(__file__).parent))
    from test_tabular_e2e import dataset_path, tfxp

    from pipeline.datasets import dataset_config
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("sequences")
    home, data, run_dir = tmp / "schema", tmp / "data", tmp / "run"
    write_events(tmp / "events", KEYS, seed=5, files=3)
    files = sorted(str(p) for p in (tmp / "events").glob("*.csv"))
    code, init_out, err = tfxp(
        home, "init", "shop", "--csv", *files, "--label", "converted",
        "--sequence-key", "session_id", "--order-by", "event_time",
        "--data-root", str(data), "--sequence-model", "conv",
    )  # fmt: skip
    assert code == 0, err
    with dataset_path(home):
        config = dataset_config("shop").replace(run_dir=str(run_dir))
    summary = run_local(config, printer=lambda _: None)
    write_events(tmp / "new", NEW_KEYS, seed=11, files=1)
    new_events = tmp / "new" / "events-000.csv"
    out = tmp / "predictions.csv"
    code, _, err = tfxp(
        home, "predict", "--dataset", "shop", "--run-dir", str(run_dir), str(new_events),
        "-o", str(out),
    )  # fmt: skip
    assert code == 0, err
    with out.open() as f:
        predictions = list(csv.DictReader(f))
    text = (home / "shop" / "dataset.yaml").read_text()
    return SequenceRun(init_out, text, summary, config, predictions, new_events, home)


def test_init_tells_context_from_per_event_columns(shop):
    lines = {line.split()[0]: line for line in shop.init_output.splitlines() if line.strip()}
    assert " context " in lines["device"] and " context " in lines["tenure_days"]
    for column in ("action", "amount", "dwell_s"):
        assert " feature " in lines[column], lines[column]
    assert " key " in lines["session_id"] and " order " in lines["event_time"]
    assert f"in {KEYS} sequences" in shop.init_output
    assert "kind: sequence" in shop.dataset_yaml
    assert "order_format: timestamp" in shop.dataset_yaml


def test_example_gen_writes_one_sequence_example_per_key_split_by_key(shop):
    import tensorflow as tf
    from tfx.components.example_gen import utils as example_gen_utils
    from tfx.proto import example_gen_pb2

    from metadata.store import location_from, open_store

    store = open_store(location_from(run_dir=shop.config.local_dir))
    examples = [a for a in store.get_artifacts_by_type("Examples") if "SequenceExampleGen" in a.uri]
    assert examples
    artifact = examples[0]
    payload = artifact.custom_properties[
        example_gen_utils.PAYLOAD_FORMAT_PROPERTY_NAME
    ].string_value
    assert payload == example_gen_pb2.PayloadFormat.Name(
        example_gen_pb2.PayloadFormat.FORMAT_TF_SEQUENCE_EXAMPLE
    )
    keys = {}
    for split in ("train", "eval"):
        files = glob.glob(os.path.join(artifact.uri, f"Split-{split}", "*.gz"))
        records = tf.data.TFRecordDataset(files, compression_type="GZIP")
        keys[split] = set()
        for record in records.as_numpy_iterator():
            example = tf.train.SequenceExample.FromString(record)
            keys[split].add(example.context.feature["session_id"].bytes_list.value[0])
            steps = example.feature_lists.feature_list
            assert len(steps["action"].feature) == len(steps["amount"].feature)
    assert not keys["train"] & keys["eval"]  # a sequence never straddles the splits
    assert len(keys["train"]) + len(keys["eval"]) == KEYS


def test_the_model_is_blessed_pushed_and_beats_the_majority(shop):
    assert shop.run.blessed and shop.run.pushed, shop.run.render()
    # The pre-push serving check sent eval SequenceExamples to the loaded model.
    assert (shop.run.serving_check or "").startswith("passed"), shop.run.render()
    accuracy = shop.run.metrics["binary_accuracy"]
    majority = float(shop.dataset_yaml.split("lower_bound: ")[1].split()[0])
    assert accuracy > majority + 0.03, (accuracy, majority)


def test_predict_writes_one_prediction_per_key(shop):
    keys = {r["session_id"] for r in shop.predictions}
    assert len(shop.predictions) == NEW_KEYS == len(keys)
    assert {r["prediction"] for r in shop.predictions} <= {"no", "yes"}
    for r in shop.predictions:
        assert 0.0 <= float(r["probability_yes"]) <= 1.0


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(  # noqa: S310 - the test server on loopback
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback
        return json.loads(response.read())


def test_serve_answers_sequence_examples_as_predict_did_and_logs_them(shop, tmp_path):
    sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
    from serving_support import Running

    from components.validation.schema_importer import load_schema
    from components.validation.serving_data import load_serving_data
    from components.validation.serving_log import WindowOptions
    from tfxp.models.predict_sequences import serialized_examples

    built, _ = serialized_examples(shop.config, [str(shop.new_events)])
    expected = {r["session_id"]: float(r["probability_yes"]) for r in shop.predictions}
    log_dir = tmp_path / "log"
    server = Running(shop.config, log_dir=str(log_dir), log_max_seconds=0.5)
    try:
        body = {"instances": [{"b64": base64.b64encode(b).decode()} for _, b in built]}
        answer = _post(f"{server.url}/v1/models/taxi:predict", body)["predictions"]
        for (key, _), row in zip(built, answer, strict=True):
            assert abs(row["logistic"][0] - expected[key]) < 1e-5, key
        # :classify with a sequence as JSON: context values and one list per feature.
        one = {
            "session_id": "x", "device": "mobile", "tenure_days": 30.0,
            "action": ["view", "cart", "cart"], "amount": [10.0, None, 30.0], "dwell_s": [5, 9, 3],
        }  # fmt: skip
        classified = _post(f"{server.url}/v1/models/taxi:classify", {"examples": [one]})
        assert [c for c, _ in classified["results"][0]] == ["no", "yes"]
        # gRPC Predict (TF Serving's API) takes the serialized SequenceExamples as a tensor.
        logistic = _grpc_predict(server.grpc, [b for _, b in built])
        for (key, _), value in zip(built, logistic, strict=True):
            assert abs(float(value[0]) - expected[key]) < 1e-5, key
    finally:
        server.close()
    schema = load_schema(shop.config.schema_file)
    served = load_serving_data(schema, "", str(log_dir), WindowOptions(min_examples=NEW_KEYS))
    # Every request logged, whichever API: REST :predict, :classify, gRPC Predict.
    assert served.rows == NEW_KEYS + 1 + NEW_KEYS, served.missing
    names = {".".join(f.path.step) for f in served.statistics.datasets[0].features}
    assert {"##SEQUENCE##.amount", "##SEQUENCE##.action", "device"} <= names


def _grpc_predict(address: str, examples: list[bytes]):
    """PredictionService.Predict with `examples` as the serving signature's input."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "taxi"
        request.inputs["examples"].CopyFrom(tf.make_tensor_proto(examples, dtype=tf.string))
        answer = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            request, timeout=60
        )
    return tf.make_ndarray(answer.outputs["logistic"])
