"""Training/serving parity: the exported model scores raw tf.Examples exactly as it was trained.

docs/getting-started.md ("No training/serving skew"): `serving_default` takes serialized raw
tf.Examples and applies the transform graph inside the SavedModel. Here the
same rows go two ways: raw eval examples (ExampleGen's output) through the
pushed model's `serving_default`, and Transform's *materialized* eval features
(what the Trainer read) through the Keras model itself. Per row the two
probabilities agree to 1e-6.

Rows are matched by content, not position (Transform's output order is
Beam's): the transformed features of each raw row (the SavedModel's
`transform_features` signature) are matched to the nearest materialized row,
which must agree with them too.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TOLERANCE = 1e-6


def _uri(store, artifact_type: str, producer: str) -> str:
    uris = [a.uri for a in store.get_artifacts_by_type(artifact_type) if f"/{producer}/" in a.uri]
    assert uris, (artifact_type, producer)
    return uris[0]


def _records(folder: str) -> list[bytes]:
    import tensorflow as tf

    files = sorted(glob.glob(os.path.join(folder, "*.gz")))
    return list(tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator())


def _matrix(features: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    """One row per example: every transformed feature's values side by side, as float64."""
    n = len(next(iter(features.values())))
    return np.concatenate(
        [np.asarray(features[k], dtype=np.float64).reshape(n, -1) for k in names], axis=1
    )


def test_serving_default_on_raw_examples_matches_the_model_on_materialized_features(taxi_runs):
    import tensorflow as tf
    import tensorflow_transform as tft
    import tf_keras as keras

    from trainer.taxi import features as f

    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = taxi_runs.config.metadata_path
    store = metadata_store.MetadataStore(cfg)
    raw_eval = _records(os.path.join(_uri(store, "Examples", "CsvExampleGen"), "Split-eval"))
    materialized = _records(os.path.join(_uri(store, "Examples", "Transform"), "Split-eval"))
    assert len(raw_eval) == len(materialized) > 100

    model_dir = taxi_runs.first.pushed_model
    served = tf.saved_model.load(model_dir)
    serving_out = served.signatures["serving_default"](examples=tf.constant(raw_eval))
    serving_prob = serving_out["probability"].numpy().ravel()
    transformed_of_raw = {
        k: v.numpy()
        for k, v in served.signatures["transform_features"](examples=tf.constant(raw_eval)).items()
    }

    # The model as trained, on the features Transform materialized for the Trainer.
    tft_output = tft.TFTransformOutput(_uri(store, "TransformGraph", "Transform"))
    spec = tft_output.transformed_feature_spec()
    parsed = tf.io.parse_example(tf.constant(materialized), spec)
    label = parsed.pop(f.TRANSFORMED_LABEL_KEY)
    model = keras.models.load_model(model_dir, compile=False)
    trained_prob = model({k: v for k, v in parsed.items()}, training=False).numpy().ravel()
    materialized_np = {k: v.numpy() for k, v in parsed.items()}

    names = sorted(materialized_np)
    trained_rows = _matrix(materialized_np, names)
    served_rows = _matrix({k: transformed_of_raw[k] for k in names}, names)
    worst_feature, worst = 0.0, 0.0
    for i, row in enumerate(served_rows):
        distance = np.abs(trained_rows - row).max(axis=1)
        j = int(distance.argmin())  # this raw row's materialized counterpart
        worst_feature = max(worst_feature, float(distance[j]))
        worst = max(worst, abs(float(serving_prob[i]) - float(trained_prob[j])))
    assert worst_feature <= 1e-5, f"serving's transform differs from Transform's by {worst_feature}"
    assert worst <= TOLERANCE, f"serving vs training probabilities differ by up to {worst:.2e}"
    assert len(set(np.round(serving_prob, 4))) > 1 and label.shape[0] == len(materialized)
