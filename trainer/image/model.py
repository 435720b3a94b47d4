"""The image models (a small Keras CNN, or keras.applications' MobileNetV2 or
EfficientNetB0 trained from scratch) and per-batch augmentation for tf.data."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf
import tf_keras as keras

from trainer.fast_steps import FastStepModel
from trainer.image.preprocessing import IMAGE_XF


def build_cnn(
    input_shape: Sequence[int],
    num_classes: int,
    *,
    filters: Sequence[int] = (32, 64),
    dense_units: int = 64,
    dropout: float = 0.2,
    learning_rate: float = 0.003,
) -> keras.Model:
    """Conv blocks (two 3x3 convolutions, 2x2 pooling while the image is larger than 4x4),
    then a dense layer and a softmax over the classes.

    Small images (digits: 8x8) keep their spatial layout into the dense layer
    (Flatten); larger ones are averaged over space first, so the parameter
    count does not grow with the image size.
    """
    height, width, _ = input_shape
    inputs = keras.Input(shape=tuple(input_shape), name=IMAGE_XF)
    x = inputs
    for n in filters:
        x = keras.layers.Conv2D(n, 3, padding="same", activation="relu")(x)
        x = keras.layers.Conv2D(n, 3, padding="same", activation="relu")(x)
        if min(height, width) > 4:
            x = keras.layers.MaxPool2D(2)(x)
            height, width = height // 2, width // 2
    x = (
        keras.layers.Flatten()(x)
        if height * width <= 16
        else keras.layers.GlobalAveragePooling2D()(x)
    )
    x = keras.layers.Dense(dense_units, activation="relu")(x)
    return _classifier(inputs, x, num_classes, dropout, learning_rate)


def _classifier(
    inputs: tf.Tensor, features: tf.Tensor, num_classes: int, dropout: float, learning_rate: float
) -> keras.Model:
    """Dropout and a softmax over the classes on `features`, compiled as every image model is."""
    x = keras.layers.Dropout(dropout)(features) if dropout else features
    outputs = keras.layers.Dense(num_classes, activation="softmax", name="probabilities")(x)
    model = FastStepModel(inputs={IMAGE_XF: inputs}, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


# keras.applications' networks need at least this many pixels on each side.
APPLICATION_MIN_SIZE = 32


def build_application(
    name: str,
    input_shape: Sequence[int],
    num_classes: int,
    *,
    dropout: float = 0.2,
    learning_rate: float = 0.003,
) -> keras.Model:
    """keras.applications' `mobilenet_v2` or `efficientnet_b0` without its top, average-pooled,
    then dropout and a softmax over the classes. `weights=None`: trained from scratch (no
    ImageNet weights can be downloaded here, and they expect RGB photos anyway).

    The model input is `image_xf` in [0, 1]; each network gets the range it was built for:
    MobileNetV2 [-1, 1], EfficientNet 0-255 (it rescales and normalises inside)."""
    height, width, channels = (int(v) for v in input_shape)
    if min(height, width) < APPLICATION_MIN_SIZE:
        raise ValueError(
            f"image.model {name!r} needs images of at least {APPLICATION_MIN_SIZE}x"
            f"{APPLICATION_MIN_SIZE} pixels, not {height}x{width} (image.height/width in the "
            "dataset file); the `cnn` model takes any size"
        )
    shape = (height, width, channels)
    inputs = keras.Input(shape=shape, name=IMAGE_XF)
    if name == "mobilenet_v2":
        x = keras.layers.Rescaling(2.0, offset=-1.0)(inputs)
        base = keras.applications.MobileNetV2(
            input_shape=shape, include_top=False, weights=None, pooling="avg"
        )
    elif name == "efficientnet_b0":
        x = keras.layers.Rescaling(255.0)(inputs)
        base = keras.applications.EfficientNetB0(
            input_shape=shape, include_top=False, weights=None, pooling="avg"
        )
    else:
        raise ValueError(f"unknown image model {name!r}; known: {list(MODELS)}")
    return _classifier(inputs, base(x), num_classes, dropout, learning_rate)


# The dataset file's `image.model` (pipeline/config.py IMAGE_MODELS names the same).
MODELS = ("cnn", "mobilenet_v2", "efficientnet_b0")


def random_crop(images: tf.Tensor, smallest: float) -> tf.Tensor:
    """Each image of the batch cropped to its own random window, then resized back.

    The window keeps the aspect ratio, a random share in [smallest, 1] of each side,
    at a random position (bilinear resize, one vectorised kernel for the batch)."""
    shape = tf.shape(images)
    batch = shape[0]
    side = tf.random.uniform([batch], smallest, 1.0)
    top = tf.random.uniform([batch]) * (1.0 - side)
    left = tf.random.uniform([batch]) * (1.0 - side)
    boxes = tf.stack([top, left, top + side, left + side], axis=1)
    return tf.image.crop_and_resize(
        images, boxes, tf.range(batch), tf.stack([shape[1], shape[2]]), method="bilinear"
    )


def make_augment(
    *,
    translate: int = 1,
    brightness: float = 0.1,
    flip: bool = False,
    crop: float = 0.0,
    image_key: str = IMAGE_XF,
):
    """A per-batch `(features, label) -> (features, label)` for trainer.input.input_fn.

    With `crop` in (0, 1), each image is first cropped to a random window keeping at
    least that share of each side, resized back to the model size (`random_crop`).
    Each image of a batch gets its own random shift of up to `translate`
    pixels in each direction (edges reflected), its own brightness offset in
    [-brightness, brightness] (then clipped to [0, 1]) and, with `flip`, a
    left-right mirror half the time. Flips suit photos; they do not suit
    digits or text, where a mirrored 2 or 7 is no longer one (off by default).
    Runs inside the tf.data graph, vectorised over the batch.
    """

    def augment(features: dict[str, tf.Tensor], label: tf.Tensor):
        images = features[image_key]
        if 0.0 < crop < 1.0:
            images = random_crop(images, crop)
        shape = tf.shape(images)
        batch, height, width = shape[0], shape[1], shape[2]
        if translate > 0 or flip:
            # One projective transform per image, one vectorised kernel for the
            # batch: output pixel (x, y) reads input (a0*x + a2, y + dy). Integer
            # offsets and nearest sampling make it an exact shift (and mirror);
            # pixels shifted in from outside are the edge reflected.
            shifts = tf.random.uniform([batch, 2], -translate, translate + 1, dtype=tf.int32)
            dx, dy = tf.unstack(tf.cast(shifts, tf.float32), axis=1)
            ones, zeros = tf.ones([batch]), tf.zeros([batch])
            a0, a2 = ones, dx
            if flip:
                mirrored = tf.random.uniform([batch]) < 0.5
                a0 = tf.where(mirrored, -ones, ones)
                a2 = tf.where(mirrored, tf.cast(width - 1, tf.float32) + dx, dx)
            transforms = tf.stack([a0, zeros, a2, zeros, ones, dy, zeros, zeros], axis=1)
            images = tf.raw_ops.ImageProjectiveTransformV3(
                images=images,
                transforms=transforms,
                output_shape=tf.stack([height, width]),
                fill_value=0.0,
                interpolation="NEAREST",
                fill_mode="REFLECT",
            )
        if brightness > 0:
            delta = tf.random.uniform([batch, 1, 1, 1], -brightness, brightness)
            images = tf.clip_by_value(images + delta, 0.0, 1.0)
        return {**features, image_key: images}, label

    return augment
