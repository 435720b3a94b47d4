"""trainer/base.py's serving signatures: raw examples in, the transform graph inside."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from trainer.base import SERVING_SIGNATURE, TRANSFORM_SIGNATURE, serving_signatures

RAW_SPEC = {
    "x": tf.io.FixedLenFeature([1], tf.float32),
    "label": tf.io.FixedLenFeature([1], tf.float32),
}


class _Transform(tf.Module):
    """Stands for tf.Transform's layer: x_xf = 2x, the label passed through."""

    def __call__(self, raw: dict) -> dict:
        out = {"x_xf": raw["x"] * 2.0}
        if "label" in raw:
            out["label_xf"] = raw["label"]
        return out


class _TransformOutput:
    def raw_feature_spec(self) -> dict:
        return dict(RAW_SPEC)

    def transform_features_layer(self) -> _Transform:
        return _Transform()


class _Model(tf.Module):
    seen: list = []

    def __call__(self, features: dict) -> tf.Tensor:
        self.seen.append(sorted(features))
        return features["x_xf"] + 1.0


def _examples(rows: list[dict]) -> tf.Tensor:
    def example(row):
        feature = {
            k: tf.train.Feature(float_list=tf.train.FloatList(value=[v])) for k, v in row.items()
        }
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    return tf.constant([example(r) for r in rows])


def test_serving_takes_examples_without_the_label_and_the_saved_model_keeps_the_graph(tmp_path):
    model = _Model()
    _Model.seen.clear()
    signatures = serving_signatures(
        model, _TransformOutput(), "label", "label_xf", lambda out: {"probability": out}
    )
    assert set(signatures) == {SERVING_SIGNATURE, TRANSFORM_SIGNATURE}
    tf.saved_model.save(model, str(tmp_path), signatures=signatures)
    loaded = tf.saved_model.load(str(tmp_path))
    # No label in a serving request: the signature's raw spec leaves it out.
    served = loaded.signatures[SERVING_SIGNATURE](examples=_examples([{"x": 1.5}, {"x": -2.0}]))
    assert list(served) == ["probability"]
    np.testing.assert_allclose(served["probability"].numpy()[:, 0], [4.0, -3.0])
    assert ["x_xf"] in _Model.seen  # the transformed label never reaches the model
    # TFMA's signature: raw examples with the label -> every transformed feature.
    transformed = loaded.signatures[TRANSFORM_SIGNATURE](
        examples=_examples([{"x": 1.0, "label": 1.0}])
    )
    assert sorted(transformed) == ["label_xf", "x_xf"]
    np.testing.assert_allclose(transformed["x_xf"].numpy()[:, 0], [2.0])
