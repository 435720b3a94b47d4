"""tf.Transform preprocessing for image datasets: decode, resize, normalise.

Raw examples come from components/example_gen/image_example_gen.py: `image` (the file's
encoded bytes, or with image_format="raw" its uint8 pixels), `label`, `height`,
`width`, `channels`. The transform graph turns them into `image_xf`, float32
[height, width, channels] in [0, 1] at the configured model size, and
`label_xf`. With `decode_in: trainer` (large images) it passes the encoded
files through as `image_xf` instead, and the same `decode_images` runs in the
Trainer's tf.data input and in the served model. It is the same graph at serving time (trainer/image/train.py puts
it in the SavedModel), so a served image is decoded and scaled exactly as the
training images were. No analyzers: nothing here depends on the dataset, so
Transform's cost is one pass of decoding.

Written for Transform's TF1 graph mode (force_tf_compat_v1=True) as well as
TF2: per-image decoding runs in `tf.map_fn` (decode ops take one image).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

IMAGE_KEY = "image"
LABEL_KEY = "label"
HEIGHT_KEY = "height"
WIDTH_KEY = "width"
CHANNELS_KEY = "channels"
IMAGE_XF = "image_xf"
LABEL_XF = "label_xf"


def decodes_in_trainer(options: dict[str, Any]) -> bool:
    """`decode_in: trainer`: Transform passes the encoded files through (`image_xf` holds
    them) and the Trainer's tf.data input and the served model decode them, with
    `decode_images` both. For large images: transformed examples stay the size of the
    JPEG/PNG files instead of float32 pixels (224x224x3: 602 KB each)."""
    return options.get("decode_in", "transform") == "trainer"


def image_options(custom_config: dict[str, Any] | None) -> dict[str, Any]:
    """The dataset's ImageOptions (pipeline/config.py), as passed in custom_config."""
    options = (custom_config or {}).get("image")
    if not options:
        raise ValueError(
            "image preprocessing needs custom_config['image'] (height, width, channels, "
            "image_format); set `image=ImageOptions(...)` in the dataset config"
        )
    return options


def _flat(x: tf.Tensor) -> tf.Tensor:
    # Schema features of shape [1] parse as [batch, 1].
    return tf.reshape(x, [-1])


def match_channels(image: tf.Tensor, have: tf.Tensor, want: int) -> tf.Tensor:
    """uint8 [h, w, have] -> [h, w, want], as decode_png(channels=want) converts."""
    if want == 1:
        grey = tf.cond(
            have >= 3,
            lambda: tf.image.rgb_to_grayscale(image[..., :3]),
            lambda: image[..., :1],
        )
        return tf.ensure_shape(grey, [None, None, 1])
    if want == 3:
        rgb = tf.cond(
            have >= 3,
            lambda: image[..., :3],
            lambda: tf.tile(image[..., :1], [1, 1, 3]),
        )
        return tf.ensure_shape(rgb, [None, None, 3])
    raise ValueError(f"the model takes 1 or 3 channels, not {want}")


def to_model_input(image: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """uint8 [h, w, c] -> float32 [height, width, c] in [0, 1]."""
    pixels = tf.image.convert_image_dtype(image, tf.float32)  # /255, exact for uint8
    # Images already at the model size are left untouched (bit-exact); others
    # are resized with antialiasing, so shrinking a photo does not alias.
    same = tf.logical_and(tf.shape(pixels)[0] == height, tf.shape(pixels)[1] == width)
    resized = tf.cond(
        same,
        lambda: pixels,
        lambda: tf.image.resize(pixels, [height, width], antialias=True),
    )
    return tf.clip_by_value(tf.ensure_shape(resized, [height, width, None]), 0.0, 1.0)


def decode_images(
    images: tf.Tensor,
    options: dict[str, Any],
    heights: tf.Tensor | None = None,
    widths: tf.Tensor | None = None,
    channels: tf.Tensor | None = None,
) -> tf.Tensor:
    """A batch of stored images -> float32 [batch, height, width, channels] in [0, 1].

    `images` holds encoded files, or raw pixels with their `heights`, `widths`
    and `channels` (image_format="raw").
    """
    height, width, want = int(options["height"]), int(options["width"]), int(options["channels"])
    out_spec = tf.TensorSpec([height, width, want], tf.float32)
    if options.get("image_format", "encoded") == "encoded":

        def one(data: tf.Tensor) -> tf.Tensor:
            decoded = tf.io.decode_image(data, channels=want, expand_animations=False)
            return to_model_input(tf.ensure_shape(decoded, [None, None, want]), height, width)

        return tf.map_fn(one, images, fn_output_signature=out_spec)
    if heights is None or widths is None or channels is None:
        raise ValueError("raw pixels need their height, width and channels")

    def one_raw(args: tuple[tf.Tensor, ...]) -> tf.Tensor:
        data, h, w, c = args
        pixels = tf.reshape(tf.io.decode_raw(data, tf.uint8), tf.stack([h, w, c]))
        return to_model_input(match_channels(pixels, c, want), height, width)

    heights, widths, channels = (tf.cast(x, tf.int32) for x in (heights, widths, channels))
    # The usual case, every image already at the model's size and channels:
    # one decode_raw for the whole batch (4x faster than image by image).
    at_size = tf.reduce_all((heights == height) & (widths == width) & (channels == want))
    return tf.cond(
        at_size,
        lambda: tf.image.convert_image_dtype(
            tf.reshape(tf.io.decode_raw(images, tf.uint8), [-1, height, width, want]), tf.float32
        ),
        lambda: tf.map_fn(
            one_raw, (images, heights, widths, channels), fn_output_signature=out_spec
        ),
    )


def preprocessing_fn(
    inputs: dict[str, tf.Tensor], custom_config: dict[str, Any] | None = None
) -> dict[str, tf.Tensor]:
    """Raw image examples -> {image_xf: float32 [H, W, C] in [0, 1], label_xf: int64}."""
    options = image_options(custom_config)
    raw = options.get("image_format", "encoded") == "raw"
    if decodes_in_trainer(options):
        if raw:
            raise ValueError("decode_in: trainer takes encoded images (image_format: encoded)")
        outputs = {IMAGE_XF: _flat(inputs[IMAGE_KEY])}
        if LABEL_KEY in inputs:
            outputs[LABEL_XF] = tf.cast(_flat(inputs[LABEL_KEY]), tf.int64)
        return outputs
    outputs = {
        IMAGE_XF: decode_images(
            _flat(inputs[IMAGE_KEY]),
            options,
            *((_flat(inputs[k]) for k in (HEIGHT_KEY, WIDTH_KEY, CHANNELS_KEY)) if raw else ()),
        )
    }
    # Serving requests carry no label: the transform layer then prunes this output.
    if LABEL_KEY in inputs:
        outputs[LABEL_XF] = tf.cast(_flat(inputs[LABEL_KEY]), tf.int64)
    return outputs
