"""trainer.taxi.model: the wide-and-deep Keras model over transformed features."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainer.taxi import features as f
from trainer.taxi.model import build_keras_model

DENSE = [f.transformed_name(k) for k in f.DENSE_FLOAT_FEATURE_KEYS]
CATEGORICAL = {
    **{f.transformed_name(k): f.VOCAB_SIZE + f.OOV_SIZE for k in f.VOCAB_FEATURE_KEYS},
    **{f.transformed_name(k): f.FEATURE_BUCKET_COUNT for k in f.BUCKET_FEATURE_KEYS},
    **{f.transformed_name(k): upper for k, upper in f.CATEGORICAL_FEATURE_MAX.items()},
}


def _batch(n: int, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A linearly separable batch: the label is whether fare_xf is positive."""
    rng = np.random.default_rng(seed)
    features: dict[str, np.ndarray] = {
        name: rng.normal(size=(n, 1)).astype(np.float32) for name in DENSE
    }
    for name, num_tokens in CATEGORICAL.items():
        features[name] = rng.integers(0, num_tokens, size=(n, 1), dtype=np.int64)
    label = (features["fare_xf"][:, 0] > 0).astype(np.int64)
    return features, label


@pytest.fixture(scope="module")
def model():
    tf.keras.utils.set_random_seed(0)
    return build_keras_model(hidden_units=(8, 4), learning_rate=0.01)


def test_inputs_are_the_transformed_features(model):
    expected = set(DENSE) | set(CATEGORICAL)
    assert f.TRANSFORMED_LABEL_KEY not in expected
    assert set(model.input_names) == expected
    assert set(model.input) == expected
    for name, tensor in model.input.items():
        assert tensor.shape.as_list() == [None, 1], name
        assert tensor.dtype == (tf.float32 if name in DENSE else tf.int64), name


def test_outputs_probabilities(model):
    features, _ = _batch(16)
    # Large inputs push the logits far out: the output must still be a probability.
    features["fare_xf"] = features["fare_xf"] * 100
    probs = model(features, training=False).numpy()
    assert probs.shape == (16, 1)
    assert ((probs >= 0) & (probs <= 1)).all()
    assert np.isfinite(probs).all()


def test_predict_batch_shape(model):
    features, _ = _batch(5, seed=1)
    assert model.predict(features, verbose=0).shape == (5, 1)


def test_training_reduces_loss():
    tf.keras.utils.set_random_seed(1)
    model = build_keras_model(hidden_units=(8,), learning_rate=0.05)
    features, label = _batch(64, seed=2)
    before = model.evaluate(features, label, verbose=0, return_dict=True)
    model.fit(features, label, batch_size=64, epochs=15, verbose=0)
    after = model.evaluate(features, label, verbose=0, return_dict=True)
    assert after["loss"] < 0.7 * before["loss"], (before, after)
    assert after["binary_accuracy"] > before["binary_accuracy"]
    assert after["binary_accuracy"] >= 0.9


def test_vocab_sizes_set_the_one_hot_width():
    small = build_keras_model(hidden_units=(4,), vocab_sizes={"company": 20})
    default = build_keras_model(hidden_units=(4,))
    wide_small = small.get_layer("wide").output.shape[-1]
    wide_default = default.get_layer("wide").output.shape[-1]
    assert wide_default - wide_small == (f.VOCAB_SIZE + f.OOV_SIZE) - 20
