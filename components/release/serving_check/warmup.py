"""TF Serving's warmup file: requests a model server replays before it reports a version AVAILABLE.

The serving check writes `tf_serving_warmup_requests` (a TFRecord file of
`tensorflow.serving.PredictionLog` records, as TF Serving reads it) from the
rows it checked, the label removed, into its blessing folder; the Pusher
copies it into the pushed version as `assets.extra/tf_serving_warmup_requests`.
TF Serving and `tfxp serve` replay it, so the first real request does not pay
for TensorFlow's first call of each signature.
"""

from __future__ import annotations

import os

FILE_NAME = "tf_serving_warmup_requests"
ASSETS_EXTRA = "assets.extra"
# In a pushed version: where a model server looks for it.
IN_MODEL = f"{ASSETS_EXTRA}/{FILE_NAME}"
SINGLE_REQUESTS = 4  # one-example requests (the common shape online)
MAX_BATCH = 64  # and one request of up to this many examples


def without_label(example: bytes, label_key: str) -> bytes:
    """The record without its label; a SequenceExample's context too (check.without_feature)."""
    import tensorflow as tf

    parsed = tf.train.Example.FromString(example)
    if label_key in parsed.features.feature:
        del parsed.features.feature[label_key]
    return parsed.SerializeToString()


def write_warmup_requests(
    path: str, examples: list[bytes], signature: str, input_name: str = "examples"
) -> int:
    """Writes PredictRequests of `examples` (serialized tf.Examples) to `path`; returns how many."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    batches = [[e] for e in examples[:SINGLE_REQUESTS]]
    if len(examples) > 1:
        batches.append(examples[:MAX_BATCH])
    tmp = f"{path}.tmp"
    with tf.io.TFRecordWriter(tmp) as writer:
        for batch in batches:
            request = predict_pb2.PredictRequest()
            request.model_spec.signature_name = signature
            request.inputs[input_name].CopyFrom(tf.make_tensor_proto(batch, dtype=tf.string))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
    tf.io.gfile.rename(tmp, path, overwrite=True)
    return len(batches)


def blessing_warmup(blessing_uri: str) -> str | None:
    """The warmup file the serving check left in its blessing folder, if any."""
    import tensorflow as tf

    path = os.path.join(blessing_uri, FILE_NAME)
    return path if tf.io.gfile.exists(path) else None
