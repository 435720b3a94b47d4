"""Image preprocessing (TF1 graph and TF2), augmentation in tf.data, the CNN, serving input."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from data.images import encode_png
from trainer.image import preprocessing as ip
from trainer.image.model import build_cnn, make_augment
from trainer.image.train import ImageHyperparameters, _raw_from_image_bytes, image_dataset

OPTIONS = {"height": 8, "width": 8, "channels": 1, "image_format": "encoded", "class_names": []}


def _pixels(seed: int, shape=(8, 8)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def _inputs(images: list[np.ndarray], raw: bool = False) -> dict[str, np.ndarray]:
    def col(values, dtype):
        return np.array(values, dtype=dtype).reshape(-1, 1)

    shapes = [i.shape if i.ndim == 3 else (*i.shape, 1) for i in images]
    data = [i.tobytes() if raw else encode_png(i) for i in images]
    return {
        "image": col(data, object),
        "label": col(range(len(images)), np.int64),
        "height": col([s[0] for s in shapes], np.int64),
        "width": col([s[1] for s in shapes], np.int64),
        "channels": col([s[2] for s in shapes], np.int64),
    }


def _run_tf1(inputs: dict[str, np.ndarray], options: dict) -> dict[str, np.ndarray]:
    """preprocessing_fn in a TF1 graph and session, as Transform runs it (force_tf_compat_v1)."""
    graph = tf.Graph()
    with graph.as_default():
        placeholders = {
            k: tf.compat.v1.placeholder(tf.string if k == "image" else tf.int64, [None, 1])
            for k in inputs
        }
        outputs = ip.preprocessing_fn(placeholders, {"image": options})
        with tf.compat.v1.Session(graph=graph) as sess:
            return sess.run(outputs, {placeholders[k]: v for k, v in inputs.items()})


def test_decode_normalise_in_tf1_graph_is_exact():
    images = [_pixels(i) for i in range(5)]
    out = _run_tf1(_inputs(images), OPTIONS)
    assert out[ip.IMAGE_XF].shape == (5, 8, 8, 1) and out[ip.IMAGE_XF].dtype == np.float32
    x = out[ip.IMAGE_XF][..., 0]
    np.testing.assert_allclose(x, np.stack(images) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(np.rint(x * 255).astype(np.uint8), np.stack(images))
    np.testing.assert_array_equal(out[ip.LABEL_XF], np.arange(5))


@pytest.mark.parametrize(
    "shapes",
    [[(8, 8)] * 3, [(8, 8), (16, 12, 3), (5, 9, 3)]],
    ids=["at-model-size", "other-sizes"],
)
def test_raw_pixels_give_the_same_model_input(shapes):
    images = [_pixels(i, shape) for i, shape in enumerate(shapes)]
    encoded = _run_tf1(_inputs(images), OPTIONS)
    raw = _run_tf1(_inputs(images, raw=True), {**OPTIONS, "image_format": "raw"})
    # RGB -> grey: libpng (decode_png) and tf.image.rgb_to_grayscale round
    # differently, by at most one grey level.
    atol = 1e-6 if len(set(shapes)) == 1 else 1 / 255 + 1e-6
    np.testing.assert_allclose(encoded[ip.IMAGE_XF], raw[ip.IMAGE_XF], atol=atol)


def test_other_sizes_and_colours_are_resized_and_converted():
    rgb = [_pixels(i, (16, 12, 3)) for i in range(2)]
    out = ip.preprocessing_fn(
        {k: tf.constant(v) for k, v in _inputs(rgb).items()}, {"image": OPTIONS}
    )
    x = out[ip.IMAGE_XF].numpy()
    assert x.shape == (2, 8, 8, 1) and x.min() >= 0.0 and x.max() <= 1.0
    grey = [_pixels(i) for i in range(2)]
    out = ip.preprocessing_fn(
        {k: tf.constant(v) for k, v in _inputs(grey).items()},
        {"image": {**OPTIONS, "channels": 3}},
    )
    x = out[ip.IMAGE_XF].numpy()
    assert x.shape == (2, 8, 8, 3)
    np.testing.assert_array_equal(x[..., 0], x[..., 2])  # grey copied into R, G, B


def test_preprocessing_needs_image_options():
    with pytest.raises(ValueError, match="custom_config\\['image'\\]"):
        ip.preprocessing_fn({"image": tf.constant([[b""]])}, {})


def test_serving_input_rebuilds_raw_pixels_from_png_bytes():
    images = [_pixels(i, (5, 7, 3)) for i in range(3)]
    spec = {
        k: tf.io.FixedLenFeature([1], tf.string if k == "image" else tf.int64)
        for k in ("image", "height", "width", "channels")
    }
    raw = _raw_from_image_bytes(
        tf.constant([encode_png(i) for i in images]), {"image_format": "raw"}, spec
    )
    for n, image in enumerate(images):
        assert raw["image"][n, 0].numpy() == image.tobytes()
        assert (raw["height"][n, 0], raw["width"][n, 0], raw["channels"][n, 0]) == (5, 7, 3)


# Augmentation ---------------------------------------------------------------------------


def _batch(n=16, size=8, channels=1, seed=0):
    rng = np.random.default_rng(seed)
    return tf.constant(rng.uniform(0.05, 0.95, size=(n, size, size, channels)), tf.float32)


def _shifts(image: np.ndarray, t: int) -> list[np.ndarray]:
    padded = np.pad(image, [(t, t), (t, t), (0, 0)], mode="symmetric")
    h, w = image.shape[:2]
    return [padded[y : y + h, x : x + w] for y in range(2 * t + 1) for x in range(2 * t + 1)]


def test_translate_is_an_exact_shift_per_image():
    tf.random.set_seed(1)
    images = _batch()
    out, label = make_augment(translate=1, brightness=0.0)({"image_xf": images}, "y")
    assert label == "y"
    out = out["image_xf"].numpy()
    moved = 0
    for before, after in zip(images.numpy(), out, strict=True):
        candidates = _shifts(before, 1)
        assert any(np.array_equal(after, c) for c in candidates)
        moved += not np.array_equal(after, before)
    assert moved > 8  # 8 of 9 offsets move the image; 16 images


def test_brightness_offsets_each_image_and_stays_in_range():
    tf.random.set_seed(2)
    images = _batch()
    out = make_augment(translate=0, brightness=0.04)({"image_xf": images}, None)[0]["image_xf"]
    delta = (out - images).numpy()
    per_image = delta.reshape(len(delta), -1)
    np.testing.assert_allclose(per_image, per_image[:, :1].repeat(per_image.shape[1], 1), atol=1e-6)
    assert np.abs(per_image[:, 0]).max() <= 0.04 and len(set(np.round(per_image[:, 0], 6))) > 8


def test_flip_is_a_config_choice():
    tf.random.set_seed(3)
    images = _batch(n=32)
    off = make_augment(translate=0, brightness=0.0)({"image_xf": images}, None)[0]["image_xf"]
    np.testing.assert_array_equal(off, images)
    on = make_augment(translate=0, brightness=0.0, flip=True)({"image_xf": images}, None)[0]
    flipped = [
        np.array_equal(a, b[:, ::-1]) and not np.array_equal(a, b)
        for a, b in zip(on["image_xf"].numpy(), images.numpy(), strict=True)
    ]
    assert 4 < sum(flipped) < 28


class _TransformOutput:
    """The one method of TFTransformOutput that image_dataset reads."""

    def transformed_feature_spec(self):
        return {
            "image_xf": tf.io.FixedLenFeature([8, 8, 1], tf.float32),
            "label_xf": tf.io.FixedLenFeature([], tf.int64),
        }


def _write_transformed(path, n=64) -> np.ndarray:
    images = _batch(n=n, seed=5).numpy()
    with tf.io.TFRecordWriter(str(path), options="GZIP") as w:
        for i, image in enumerate(images):
            f = {
                "image_xf": tf.train.Feature(float_list=tf.train.FloatList(value=image.ravel())),
                "label_xf": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString())
    return images


def test_augmentation_changes_training_batches_only(tmp_path):
    path = tmp_path / "data.gz"
    images = _write_transformed(path)
    hp = ImageHyperparameters(shuffle_buffer=64, translate=1, brightness=0.1)
    plain = ImageHyperparameters(shuffle_buffer=64, translate=0, brightness=0.0)

    def first(hparams, training):
        tf.random.set_seed(7)
        ds = image_dataset(str(path), _TransformOutput(), 16, hparams, training=training)
        features, labels = next(iter(ds))
        return features["image_xf"].numpy(), labels.numpy()

    augmented, labels = first(hp, training=True)
    unaugmented, same_labels = first(plain, training=True)
    np.testing.assert_array_equal(labels, same_labels)  # same shuffle, same examples
    np.testing.assert_array_equal(unaugmented, images[labels])
    changed = [not np.allclose(a, b) for a, b in zip(augmented, unaugmented, strict=True)]
    assert sum(changed) >= 14
    evaluated, eval_labels = first(hp, training=False)  # augmentation configured, not applied
    np.testing.assert_array_equal(eval_labels, np.arange(16))
    np.testing.assert_array_equal(evaluated, images[:16])


def test_cnn_shapes():
    small = build_cnn((8, 8, 1), 10)
    assert small.output_shape == (None, 10)
    large = build_cnn((64, 64, 3), 4)
    assert large.output_shape == (None, 4)
    # Larger images are pooled over space: the dense layer does not grow with the size.
    assert large.count_params() < 200_000
    probs = small({"image_xf": tf.zeros([2, 8, 8, 1])}).numpy()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_crop_resizes_a_random_window_of_each_image():
    tf.random.set_seed(4)
    # A horizontal ramp: a crop of it is a steeper ramp over a narrower range.
    ramp = np.tile(np.linspace(0.0, 1.0, 32, dtype=np.float32), (32, 1))[None, ..., None]
    images = tf.constant(np.repeat(ramp, 16, axis=0))
    out = make_augment(translate=0, brightness=0.0, crop=0.5)({"image_xf": images}, None)[0]
    x = out["image_xf"].numpy()
    assert x.shape == images.shape
    spans = x[:, 16, -1, 0] - x[:, 16, 0, 0]  # how much of the ramp each crop kept
    assert np.all(spans > 0.45 - 0.05) and np.all(spans <= 1.0 + 1e-6)
    assert len(set(np.round(spans, 3))) > 8  # a window per image
    with pytest.raises(ValueError, match="crop"):
        ImageHyperparameters.from_custom_config({"hyperparameters": {"crop": 1.5}})


@pytest.mark.parametrize("name", ["mobilenet_v2", "efficientnet_b0"])
def test_keras_applications_models_train_from_scratch(name):
    from trainer.image.train import _cnn

    options = {**OPTIONS, "height": 32, "width": 32, "channels": 3, "class_names": ["a", "b"]}
    model = _cnn({**options, "model": name}, ImageHyperparameters())
    assert model.output_shape == (None, 2)
    # Randomly initialised (weights=None): nothing was downloaded, and every layer trains.
    assert model.count_params() > 2_000_000
    assert all(layer.trainable for layer in model.layers)
    probabilities = model({"image_xf": tf.random.uniform([2, 32, 32, 3])}).numpy()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="at least 32x32 pixels, not 8x8"):
        _cnn({**options, "height": 8, "width": 8, "model": name}, ImageHyperparameters())


def test_model_names_are_the_dataset_files_and_checked_there(tmp_path):
    from pipeline.config import IMAGE_MODELS
    from pipeline.dataset_types import DatasetTypeError, check_image
    from trainer.image.model import MODELS

    assert IMAGE_MODELS == MODELS
    fields = {"class_names", "model"}
    check_image({"class_names": ["a"], "model": "efficientnet_b0"}, fields, "f.yaml: image")
    with pytest.raises(DatasetTypeError, match=r"f.yaml: image.model: 'resnet50' is not one of"):
        check_image({"class_names": ["a"], "model": "resnet50"}, fields, "f.yaml: image")
    from trainer.image.train import _cnn

    with pytest.raises(ValueError, match="image.model 'resnet50'"):
        _cnn({**OPTIONS, "model": "resnet50"}, ImageHyperparameters())


def test_decoding_in_the_trainer_gives_the_transforms_pixels(tmp_path):
    """decode_in: trainer: Transform passes the files through, the tf.data input decodes
    them with the same function, to the same model input as decoding in Transform."""
    rgb = [_pixels(i, (12, 10, 3)) for i in range(6)] + [_pixels(9, (8, 8))]
    inputs = {k: tf.constant(v) for k, v in _inputs(rgb).items()}
    options = {**OPTIONS, "channels": 3}
    decoded = ip.preprocessing_fn(inputs, {"image": options})[ip.IMAGE_XF].numpy()
    trainer_options = {**options, "decode_in": "trainer"}
    passed = ip.preprocessing_fn(inputs, {"image": trainer_options})
    assert passed[ip.IMAGE_XF].dtype == tf.string  # the PNG files themselves
    path = tmp_path / "data.gz"
    with tf.io.TFRecordWriter(str(path), options="GZIP") as w:
        pairs = zip(passed[ip.IMAGE_XF].numpy(), passed[ip.LABEL_XF].numpy(), strict=True)
        for data, label in pairs:
            f = {
                "image_xf": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                "label_xf": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString())

    class BytesOutput:
        def transformed_feature_spec(self):
            return {
                "image_xf": tf.io.FixedLenFeature([], tf.string),
                "label_xf": tf.io.FixedLenFeature([], tf.int64),
            }

    hp = ImageHyperparameters(translate=0, brightness=0.0)
    ds = image_dataset(str(path), BytesOutput(), 7, hp, training=False, options=trainer_options)
    features, labels = next(iter(ds))
    np.testing.assert_array_equal(labels.numpy(), np.arange(7))
    np.testing.assert_array_equal(features["image_xf"].numpy(), decoded)
    with pytest.raises(ValueError, match="decode_in: trainer takes encoded images"):
        ip.preprocessing_fn(inputs, {"image": {**trainer_options, "image_format": "raw"}})
