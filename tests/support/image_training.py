"""A small image Trainer run, as TFX's Trainer calls it, for tests that need a real one.

`make_inputs(work)` (in the test's process, once) writes what the Transform step would:
a transform graph of trainer.image.preprocessing at SIZE x SIZE RGB (tf.Transform,
Beam's direct runner) and GZIP TFRecords of transformed examples, two classes that
a CNN learns in a few steps (reddish vs bluish noise). `decode_in: trainer`: the
transformed examples hold the PNG files, decoded by the Trainer's input and in the
exported model.

`python tests/support/image_training.py WORK RUN --steps N --checkpoint-steps K` then runs
trainer.image.train.run_fn on them in a process of its own, with the folders TFX
gives it: `WORK/Trainer/model_run/RUN` and `WORK/Trainer/model/RUN/Format-Serving`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

SIZE = 16
OPTIONS = {
    "class_names": ["red", "blue"],
    "image_format": "encoded",
    "height": SIZE,
    "width": SIZE,
    "channels": 3,
    "model": "cnn",
    # Decoded in the Trainer's input and in the served model (the large-image setting).
    "decode_in": "trainer",
}


def pixels(label: int, seed: int, size: int = SIZE) -> np.ndarray:
    """uint8 [size, size, 3]: noise, brighter in red (label 0) or blue (label 1)."""
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 120, size=(size, size, 3))
    image[..., 0 if label == 0 else 2] += 120
    return image.astype(np.uint8)


def _raw_rows(n: int, seed: int) -> list[dict]:
    from data.images import encode_png

    rows = []
    for i in range(n):
        label = i % 2
        rows.append(
            {
                "image": [encode_png(pixels(label, seed + i))],
                "label": [label],
                "height": [SIZE],
                "width": [SIZE],
                "channels": [3],
            }
        )
    return rows


def _write_transformed(path: Path, rows: list[dict], options: dict) -> None:
    import tensorflow as tf

    from trainer.image.preprocessing import preprocessing_fn

    inputs = {k: tf.constant([r[k] for r in rows]) for k in rows[0]}
    out = preprocessing_fn(inputs, {"image": options})
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for image, label in zip(out["image_xf"].numpy(), out["label_xf"].numpy(), strict=True):
            if isinstance(image, bytes):  # decode_in: trainer, the encoded file
                value = tf.train.Feature(bytes_list=tf.train.BytesList(value=[image]))
            else:
                value = tf.train.Feature(float_list=tf.train.FloatList(value=image.ravel()))
            feature = {
                "image_xf": value,
                "label_xf": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def make_inputs(work: Path, train: int = 256, evaluate: int = 64, options=None) -> None:
    """The transform graph (WORK/transform) and transformed train/eval examples."""
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

    from trainer.image.preprocessing import preprocessing_fn

    options = options or OPTIONS
    raw_spec = {
        "image": tf.io.FixedLenFeature([1], tf.string),
        **{
            k: tf.io.FixedLenFeature([1], tf.int64)
            for k in ("label", "height", "width", "channels")
        },
    }
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    rows = _raw_rows(train, seed=0)
    with tft_beam.Context(temp_dir=str(work / "tft-tmp"), force_tf_compat_v1=True):
        transform_fn = (rows, metadata) | tft_beam.AnalyzeDataset(
            lambda inputs: preprocessing_fn(inputs, {"image": options})
        )
        _ = transform_fn | tft_beam.WriteTransformFn(str(work / "transform"))
    # The raw metadata TFX's Transform writes beside the graph (the serving signatures read it).
    metadata_io.write_metadata(metadata, str(work / "transform" / "metadata"))
    for split, data in (("train", rows), ("eval", _raw_rows(evaluate, seed=10_000))):
        (work / split).mkdir(parents=True, exist_ok=True)
        _write_transformed(work / split / "data.gz", data, options)


def fn_args(
    work: Path, run: str, steps: int, checkpoint_steps: int, options=None
) -> SimpleNamespace:
    node = work / "Trainer"
    return SimpleNamespace(
        train_files=[str(work / "train" / "*.gz")],
        eval_files=[str(work / "eval" / "*.gz")],
        transform_output=str(work / "transform"),
        train_steps=steps,
        eval_steps=1,
        serving_model_dir=str(node / "model" / run / "Format-Serving"),
        model_run_dir=str(node / "model_run" / run),
        hyperparameters=None,
        custom_config={
            "image": options or OPTIONS,
            "hyperparameters": {
                "batch_size": 16,
                "filters": [8],
                "dense_units": 16,
                "shuffle_buffer": 256,
                "checkpoint_steps": checkpoint_steps,
            },
        },
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("work", type=Path)
    parser.add_argument("run")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--checkpoint-steps", type=int, default=20)
    args = parser.parse_args(argv)
    from absl import logging

    from trainer.image.train import run_fn

    logging.set_verbosity(logging.INFO)
    run_fn(fn_args(args.work, args.run, args.steps, args.checkpoint_steps))
    print("trained", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    sys.exit(main())
