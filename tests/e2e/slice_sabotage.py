"""A taxi run_fn whose model is wrong on purpose for one group of trips, for test_trust_e2e.py.

The model trains as taxi's does; its serving signature (the one the Evaluator
calls) then answers wrongly, for sure, for the trips a `wrong_for`
hyperparameter picks ({"feature": "payment_type", "equals": "Cash"} or
{"feature": "trip_miles", "at_least": 10}): it reads the example's own label
(tips against fare, as taxi's preprocessing derives it) and predicts the
other class. A model made this way is exactly taxi's model everywhere else and
has accuracy 0 on that group, whatever the training made of it. With
`leaks_label: true` every answer also moves by 0.001 towards the true label,
as a model that leaks its label into serving would (no prediction crosses 0.5
but a handful): clients do not send the label, and the serving check sees the
difference. (Importable: tests/e2e is on sys.path.)
"""

from __future__ import annotations

import copy
from typing import Any

import tensorflow as tf

import trainer.taxi.train as taxi_train
from trainer.base import SERVING_SIGNATURE
from trainer.taxi import features as f


def _picked(serialized: tf.Tensor, wrong_for: dict[str, Any]) -> tf.Tensor:
    feature = wrong_for["feature"]
    if "equals" in wrong_for:
        spec = {feature: tf.io.FixedLenFeature([1], tf.string, default_value="")}
        value = tf.io.parse_example(serialized, spec)[feature]
        return tf.equal(value, str(wrong_for["equals"]))
    spec = {feature: tf.io.FixedLenFeature([1], tf.float32, default_value=0.0)}
    value = tf.io.parse_example(serialized, spec)[feature]
    return value >= float(wrong_for["at_least"])


def run_fn(fn_args: Any) -> None:
    custom_config = copy.deepcopy(fn_args.custom_config or {})
    hyperparameters = custom_config.get("hyperparameters", {})
    wrong_for = hyperparameters.pop("wrong_for", None)
    leaks_label = bool(hyperparameters.pop("leaks_label", False))
    fn_args.custom_config = custom_config
    real = taxi_train.signatures

    def signatures(model, tf_transform_output) -> dict:
        found = real(model, tf_transform_output)
        if not wrong_for:
            return found
        serve = found[SERVING_SIGNATURE]

        @tf.function(
            input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")],
            autograph=False,
        )
        def wrong_serve(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
            probability = serve(serialized)["probability"]
            spec = {
                key: tf.io.FixedLenFeature([1], tf.float32, default_value=0.0)
                for key in (f.FARE_KEY, f.LABEL_KEY)
            }
            raw = tf.io.parse_example(serialized, spec)
            big_tipper = raw[f.LABEL_KEY] > raw[f.FARE_KEY] * f.BIG_TIP_FRACTION
            wrong = tf.where(big_tipper, 0.0, 1.0)
            if leaks_label:
                probability = 0.999 * probability + 0.001 * tf.cast(big_tipper, tf.float32)
            return {"probability": tf.where(_picked(serialized, wrong_for), wrong, probability)}

        found[SERVING_SIGNATURE] = wrong_serve
        return found

    taxi_train.signatures = signatures
    try:
        taxi_train.run_fn(fn_args)
    finally:
        taxi_train.signatures = real
