"""Scoring the evaluated examples in large batches through each model's SavedModel.

TFMA feeds its own batches (up to 1,000 examples, re-estimated as it goes) to the
signature positionally; TensorFlow then formats an error message before falling back
to the keyword call, for every batch. Here tf.data reads the split's TFRecord files
in batches of 8,192 serialized examples (components/evaluation/fast/pieces.py) and
each signature is called by its input's name. Labels come from the model spec's
`label_key` in the outputs of its preprocessing functions (TFMA's transformed
features, which it searches first).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from compat import tfma as tfma_internals
from components.evaluation.fast.columns import Columns, Unsupported


def _string_input(signature: Any, what: str) -> str:
    """The name of `signature`'s one input, which must take serialized examples."""
    _, inputs = signature.structured_input_signature
    if len(inputs) != 1:
        raise Unsupported(f"{what} takes {len(inputs)} inputs, not one of serialized examples")
    name, spec = next(iter(inputs.items()))
    if spec.dtype != tf.string:
        raise Unsupported(f"{what} takes {spec.dtype.name}, not serialized examples")
    return name


# Without a prediction_key, TFMA takes the first of these outputs that a model with
# several has (metric_util.prepare_labels_and_predictions).
COMMON_PREDICTION_KEYS = (
    tf.saved_model.CLASSIFY_OUTPUT_SCORES,
    tf.saved_model.REGRESS_OUTPUTS,
    tfma_internals.PREDICTIONS,
    tfma_internals.LOGISTIC,
    tfma_internals.PROBABILITIES,
    tfma_internals.LOGITS,
)


def prediction_output(outputs: Any, prediction_key: str) -> str:
    """The output TFMA reads the predictions from: `prediction_key`, the only output,
    or else the first common one (`COMMON_PREDICTION_KEYS`)."""
    if prediction_key:
        if prediction_key not in outputs:
            raise Unsupported(f"no prediction output {prediction_key!r}")
        return prediction_key
    if len(outputs) == 1:
        return next(iter(outputs))
    for key in COMMON_PREDICTION_KEYS:
        if key in outputs:
            return key
    raise Unsupported(
        f"{len(outputs)} prediction outputs ({sorted(outputs)}), none of TFMA's common "
        "ones, and no prediction_key"
    )


class ModelScorer:
    """One model spec's SavedModel: predictions and labels from serialized examples."""

    def __init__(self, model_spec: Any, model_path: str):
        self.name = model_spec.name
        if model_spec.example_weight_key or model_spec.example_weight_keys:
            raise Unsupported("example weights")
        if model_spec.label_keys or model_spec.prediction_keys or not model_spec.label_key:
            raise Unsupported("multi-output label or prediction keys, or no label_key")
        self.label_key = model_spec.label_key
        self.prediction_key = model_spec.prediction_key
        self.model = tf.saved_model.load(model_path)
        signature_name = model_spec.signature_name or "serving_default"
        signatures = self.model.signatures
        if signature_name not in signatures:
            raise Unsupported(f"the model has no signature {signature_name!r}")
        self.predict = signatures[signature_name]
        self.predict_input = _string_input(self.predict, signature_name)
        self.preprocess = []
        for name in model_spec.preprocessing_function_names:
            if name not in signatures:
                raise Unsupported(f"preprocessing function {name!r} is not a signature")
            self.preprocess.append((signatures[name], _string_input(signatures[name], name)))
        # Every output name of the preprocessing functions (TFMA's transformed features).
        self.transformed_keys: set[str] = set()

    def score(self, serialized: tf.Tensor) -> Columns:
        """The model's labels and predictions on one batch of serialized examples."""
        outputs = self.predict(**{self.predict_input: serialized})
        prediction = outputs[prediction_output(outputs, self.prediction_key)]
        label = None
        for function, input_name in self.preprocess:
            transformed = function(**{input_name: serialized})
            self.transformed_keys.update(transformed)
            if self.label_key in transformed:
                label = transformed[self.label_key]
        if label is None:
            raise Unsupported(f"label {self.label_key!r} is not a transformed feature")
        predictions = _column(prediction, "prediction", per_class=True)
        labels = _column(label, "label")
        return Columns(
            labels=labels.astype(np.float64),
            predictions=predictions.astype(np.float64),
            label_dtype=labels.dtype,
            prediction_dtype=predictions.dtype,
        )


def _column(value: Any, what: str, per_class: bool = False) -> np.ndarray:
    """One value per example, shape (n,), or with `per_class` one value per class,
    shape (n, classes) (one class: (n,)). In the model's dtype: float64 of it is
    float(x) of TFMA's values, as its combiners take them."""
    if not isinstance(value, tf.Tensor) or value.dtype == tf.string:
        raise Unsupported(f"{what} is not a dense numeric tensor")
    array = value.numpy()
    if array.ndim == 0:
        raise Unsupported(f"{what} is a scalar, not one value per example")
    if array.size == array.shape[0]:
        array = array.reshape(-1)
    elif not (per_class and array.ndim == 2):
        raise Unsupported(f"{what} has {array.shape[1:]} values per example, not one")
    if array.dtype.kind == "f" and np.isnan(array).any():
        raise Unsupported(f"{what} has NaN values")
    return array
