"""TFX Trainer entry point (`run_fn`) for image datasets, and the exported signatures.

Signatures of the SavedModel:
  serving_default      image_bytes: [None] string, encoded PNG/JPEG/GIF/BMP files
                       -> probabilities [None, classes], class [None] (int64)
  serving_examples     serialized raw tf.Examples (as ImageExampleGen writes) ->
                       the same; what the Evaluator (TFMA) feeds
  transform_features   serialized raw tf.Examples -> transformed features (TFMA)
All three run the transform graph inside the model: what is served is
decoded, resized and normalised exactly as the training data was.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from trainer.base import SERVING_SIGNATURE, TRANSFORM_SIGNATURE, with_tuned_values
from trainer.distribution import TrainingJob, train_and_export
from trainer.image.model import MODELS, build_application, build_cnn, make_augment
from trainer.image.preprocessing import (
    CHANNELS_KEY,
    HEIGHT_KEY,
    IMAGE_KEY,
    IMAGE_XF,
    LABEL_KEY,
    LABEL_XF,
    WIDTH_KEY,
    decode_images,
    decodes_in_trainer,
    image_options,
)
from trainer.input import input_fn
from trainer.tuning import search_result

EXAMPLES_SIGNATURE = "serving_examples"


@dataclass(frozen=True)
class ImageHyperparameters:
    """Training knobs; from the pipeline config's `hyperparameters` via custom_config."""

    batch_size: int = 64  # global: split between the workers (trainer/distribution.py)
    eval_batch_size: int = 256
    learning_rate: float = 0.003
    filters: tuple[int, ...] = (32, 64)
    dense_units: int = 64
    dropout: float = 0.2
    seed: int = 42
    shuffle_buffer: int = 4096
    cache: bool = True
    deterministic: bool = True
    # Augmentation of training batches (trainer/image/model.make_augment).
    translate: int = 1  # pixels; 0 turns shifting off
    brightness: float = 0.1
    flip: bool = False  # mirrors change digits and text: off unless the classes allow it
    crop: float = 0.0  # random crops keep at least this share of each side; 0: no cropping
    # A checkpoint every this many steps; a rerun after a crash resumes from the
    # last one (trainer/checkpoints.py). 0: no checkpoints.
    checkpoint_steps: int = 100

    @classmethod
    def from_custom_config(cls, custom_config: dict[str, Any] | None) -> ImageHyperparameters:
        raw = dict((custom_config or {}).get("hyperparameters", {}))
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown hyperparameters {sorted(unknown)}; known: {list(asdict(cls()))}"
            )
        if "filters" in raw:
            raw["filters"] = tuple(raw["filters"])
        hp = cls(**raw)
        if not 0.0 <= hp.crop < 1.0:
            raise ValueError(f"hyperparameter crop={hp.crop}: a share of each side in [0, 1)")
        if hp.checkpoint_steps < 0:
            raise ValueError(
                f"hyperparameter checkpoint_steps={hp.checkpoint_steps}: a step count, 0 for none"
            )
        return hp

    @classmethod
    def from_fn_args(cls, fn_args: Any) -> ImageHyperparameters:
        """The dataset file's values, overridden by the Tuner's best trial when there is one."""
        return with_tuned_values(cls.from_custom_config(fn_args.custom_config), fn_args)


def _raw_from_image_bytes(image_bytes: tf.Tensor, options: dict[str, Any], raw_spec) -> dict:
    """Encoded image files -> the raw feature dict ImageExampleGen would have written."""

    def shaped(key: str, value: tf.Tensor) -> tf.Tensor:
        # A schema feature of shape [1] parses as [batch, 1]; match what Transform saw.
        spec = raw_spec[key]
        return tf.reshape(value, [-1, *spec.shape]) if spec.shape else value

    if options.get("image_format", "encoded") == "encoded":
        return {IMAGE_KEY: shaped(IMAGE_KEY, image_bytes)}

    # Raw-pixel datasets: decode here, then lay the pixels out as the ingest did
    # (row-major uint8). serialize_tensor of a flat uint8 tensor ends with its
    # raw content (TensorProto field 4, written last), so its tail is the bytes.
    def one(data: tf.Tensor):
        pixels = tf.io.decode_image(data, expand_animations=False)
        n = tf.size(pixels)
        serialized = tf.io.serialize_tensor(tf.reshape(pixels, [-1]))
        content = tf.strings.substr(serialized, tf.strings.length(serialized) - n, n)
        return content, tf.cast(tf.shape(pixels), tf.int64)

    content, shapes = tf.map_fn(
        one,
        image_bytes,
        fn_output_signature=(tf.TensorSpec([], tf.string), tf.TensorSpec([3], tf.int64)),
    )
    return {
        IMAGE_KEY: shaped(IMAGE_KEY, content),
        HEIGHT_KEY: shaped(HEIGHT_KEY, shapes[:, 0]),
        WIDTH_KEY: shaped(WIDTH_KEY, shapes[:, 1]),
        CHANNELS_KEY: shaped(CHANNELS_KEY, shapes[:, 2]),
    }


def _signatures(model: keras.Model, tf_transform_output: tft.TFTransformOutput, options):
    model.tft_layer = tf_transform_output.transform_features_layer()
    raw_spec = tf_transform_output.raw_feature_spec()
    serving_spec = {k: v for k, v in raw_spec.items() if k != LABEL_KEY}

    def predict(raw: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        transformed = model.tft_layer(raw)
        transformed.pop(LABEL_XF, None)
        if decodes_in_trainer(options):  # as image_dataset decodes the training images
            transformed[IMAGE_XF] = decode_images(tf.reshape(transformed[IMAGE_XF], [-1]), options)
        probabilities = model(transformed)
        return {"probabilities": probabilities, "class": tf.argmax(probabilities, axis=-1)}

    # autograph=False: no Python control flow, and conversion costs seconds.
    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")], autograph=False
    )
    def serve_images(image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        return predict(_raw_from_image_bytes(image_bytes, options, raw_spec))

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="examples")], autograph=False
    )
    def serve_examples(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        return predict(tf.io.parse_example(serialized, serving_spec))

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="examples")], autograph=False
    )
    def transform(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        return model.tft_layer(tf.io.parse_example(serialized, raw_spec))

    return {
        SERVING_SIGNATURE: serve_images,
        EXAMPLES_SIGNATURE: serve_examples,
        TRANSFORM_SIGNATURE: transform,
    }


def image_dataset(
    patterns: list[str] | str,
    tf_transform_output: tft.TFTransformOutput,
    batch_size: int,
    hp: ImageHyperparameters,
    *,
    training: bool,
    record_shard: tuple[int, int] | None = None,
    options: dict[str, Any] | None = None,
) -> tf.data.Dataset:
    """(features, label) batches of transformed images, augmented when `training`.

    The project's input pipeline (trainer/input.py): shards read in parallel,
    records batched before parsing, prefetched; augmentation runs on whole
    batches inside the tf.data graph, for training only. With `decode_in:
    trainer` in `options`, each batch's encoded files are decoded and resized
    there first (a parallel map over batches; `cache` keeps the encoded records).
    """
    augment = (
        make_augment(translate=hp.translate, brightness=hp.brightness, flip=hp.flip, crop=hp.crop)
        if training
        else None
    )
    if options is not None and decodes_in_trainer(options):
        augment = _decoding(options, augment)
    return input_fn(
        patterns,
        tf_transform_output.transformed_feature_spec(),
        LABEL_XF,
        batch_size,
        shuffle=training,
        shuffle_buffer=hp.shuffle_buffer,
        cache=hp.cache,
        deterministic=hp.deterministic,
        seed=hp.seed,
        augment=augment,
        record_shard=record_shard,
    )


def _decoding(options: dict[str, Any], augment):
    """A batch function that decodes the batch's encoded files, then applies `augment`."""

    def decode(features: dict[str, tf.Tensor], label: tf.Tensor):
        images = decode_images(tf.reshape(features[IMAGE_XF], [-1]), options)
        decoded = {**features, IMAGE_XF: images}
        return augment(decoded, label) if augment is not None else (decoded, label)

    return decode


def _cnn(options: dict[str, Any], hp: ImageHyperparameters) -> keras.Model:
    """The compiled model the dataset's `image.model` names (the CNN by default), for its
    image size and classes, with `hp`'s knobs."""
    shape = (int(options["height"]), int(options["width"]), int(options["channels"]))
    classes = len(options["class_names"])
    name = options.get("model") or "cnn"
    if name not in MODELS:
        raise ValueError(f"image.model {name!r} is not one of {list(MODELS)}")
    if name != "cnn":
        return build_application(
            name, shape, classes, dropout=hp.dropout, learning_rate=hp.learning_rate
        )
    return build_cnn(
        shape,
        classes,
        filters=hp.filters,
        dense_units=hp.dense_units,
        dropout=hp.dropout,
        learning_rate=hp.learning_rate,
    )


def tuner_fn(fn_args: Any):
    """The Tuner step's search (trainer/tuning.py) over the CNN's knobs and its input."""
    base = ImageHyperparameters.from_custom_config(fn_args.custom_config)
    options = image_options(fn_args.custom_config)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)

    def dataset(patterns, batch_size: int, training: bool) -> tf.data.Dataset:
        return image_dataset(
            patterns, tf_transform_output, batch_size, base, training=training, options=options
        )

    return search_result(fn_args, lambda hp: _cnn(options, hp), dataset, base)


def run_fn(fn_args: Any) -> None:
    """Trains the CNN on transformed images and exports it with image-bytes serving.

    With a multi-worker `TF_CONFIG`, every worker runs this (trainer/distribution.py).
    """
    hp = ImageHyperparameters.from_fn_args(fn_args)
    options = image_options(fn_args.custom_config)
    logging.info("hyperparameters: %s; image: %s", json.dumps(asdict(hp)), json.dumps(options))
    keras.utils.set_random_seed(hp.seed)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)

    def dataset(patterns, batch_size: int, training: bool, record_shard) -> tf.data.Dataset:
        return image_dataset(
            patterns,
            tf_transform_output,
            batch_size,
            hp,
            training=training,
            record_shard=record_shard,
            options=options,
        )

    train_and_export(
        fn_args,
        TrainingJob(
            build_model=lambda: _cnn(options, hp),
            dataset=dataset,
            signatures=lambda model: _signatures(model, tf_transform_output, options),
            batch_size=hp.batch_size,
            eval_batch_size=hp.eval_batch_size,
            checkpoint_steps=hp.checkpoint_steps,
        ),
    )
