"""Read benchmark: images/s delivered to training (decode, normalise, augment), ours vs the tutorial.

    .venv/bin/python benchmarks/image_read.py [--work DIR] [--images 5000] [--batch 64]

Reads what benchmarks/image_ingest.py wrote into WORK (run it first), in one
process, and times the same delivered batches (float32 [batch, H, W, 3] in
[0, 1], randomly shifted and brightened, with labels) from

  tutorial          TFRecordDataset -> map(parse_single_example) ->
                    decode_raw -> reshape -> /255 -> batch -> augment
                    (the common pattern: one record at a time, no parallelism)
  ours, raw         trainer/input.py's input_fn on ImageExampleGen's raw-pixel
                    GZIP shards: shards interleaved, shuffled, batched before
                    parsing, then decode_raw + normalise
                    (trainer/image/preprocessing.decode_images, the transform
                    graph's own code) + augment (trainer/image/model.make_augment) per
                    batch, all stages parallel and prefetched
  ours, encoded     the same on the PNG-bytes shards (PNG decoding per image)
  ours, raw stored  the raw-pixel shards written with gzip_level=0 (stored
                    blocks: no inflating)

Each pipeline first delivers 5 batches (start-up, not timed), then --images
images are timed. Prints images/s and the ratio to the tutorial; then the
same four without the augmentation step, to show where the time goes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

WARMUP_BATCHES = 5


def tutorial_dataset(path: str, batch: int, augment):
    import tensorflow as tf

    image_feature_description = {
        "height": tf.io.FixedLenFeature([], tf.int64),
        "width": tf.io.FixedLenFeature([], tf.int64),
        "depth": tf.io.FixedLenFeature([], tf.int64),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "image_raw": tf.io.FixedLenFeature([], tf.string),
    }

    def _parse_image_function(example_proto):
        return tf.io.parse_single_example(example_proto, image_feature_description)

    def _decode(parsed):
        image = tf.io.decode_raw(parsed["image_raw"], tf.uint8)
        image = tf.reshape(image, [parsed["height"], parsed["width"], parsed["depth"]])
        return {"image_xf": tf.cast(image, tf.float32) / 255.0}, parsed["label"]

    compression = "GZIP" if path.endswith(".gz") else ""
    dataset = tf.data.TFRecordDataset(path, compression_type=compression)
    dataset = dataset.map(_parse_image_function).map(_decode).batch(batch)
    return dataset.map(augment).repeat()


def our_dataset(pattern: str, batch: int, augment, image_format: str, size: int):
    import tensorflow as tf

    from trainer.image.preprocessing import decode_images
    from trainer.input import input_fn

    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "height": tf.io.FixedLenFeature([], tf.int64),
        "width": tf.io.FixedLenFeature([], tf.int64),
        "channels": tf.io.FixedLenFeature([], tf.int64),
    }
    options = {"height": size, "width": size, "channels": 3, "image_format": image_format}

    def decode_normalise_augment(features, label):
        images = decode_images(
            features["image"], options, features["height"], features["width"], features["channels"]
        )
        return augment({"image_xf": images}, label)

    return input_fn(
        pattern,
        spec,
        "label",
        batch,
        shuffle=True,
        # 150 KB per 224x224 raw record: a buffer of 1,024 is ~150 MB.
        shuffle_buffer=1024,
        cache=False,
        augment=decode_normalise_augment,
    )


def measure(dataset, images: int, batch: int) -> tuple[float, int]:
    it = iter(dataset)
    for _ in range(WARMUP_BATCHES):
        next(it)
    n = 0
    start = time.perf_counter()
    while n < images:
        features, label = next(it)
        n += int(label.shape[0])
    assert features["image_xf"].dtype.name == "float32"
    return time.perf_counter() - start, n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/image-bench")
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()

    work = Path(args.work)
    tutorial = work / "tutorial.tfrecord"
    ours = {
        name: sorted(work.glob(f"ours-{name}/pipeline_root/*/examples/*/Split-train/*.gz"))
        for name in ("raw", "encoded", "raw-level0")
    }
    if not tutorial.is_file() or not all(ours.values()):
        print(
            f"ERROR: no ingested images in {work}; run `.venv/bin/python "
            f"benchmarks/image_ingest.py --work {work}` first",
            file=sys.stderr,
        )
        return 1

    import tensorflow as tf

    from trainer.image.model import make_augment

    tf.random.set_seed(0)
    augment = make_augment(translate=8, brightness=0.1, flip=True)

    def ours_for(name: str, augment_fn):
        files = [str(p) for p in ours[name]]
        fmt = name.split("-")[0]
        return lambda: our_dataset(files, args.batch, augment_fn, fmt, args.size)

    def no_augment(features, label):
        return features, label

    pipelines = [
        ("tutorial (uncompressed)", lambda: tutorial_dataset(str(tutorial), args.batch, augment)),
        ("ours, raw pixels, GZIP", ours_for("raw", augment)),
        ("ours, encoded PNG, GZIP", ours_for("encoded", augment)),
        ("ours, raw, stored GZIP", ours_for("raw-level0", augment)),
        # Where the time goes: the same without the augmentation step.
        (
            "tutorial, no augment",
            lambda: tutorial_dataset(str(tutorial), args.batch, no_augment),
        ),
        ("ours raw, no augment", ours_for("raw", no_augment)),
        ("ours encoded, no augment", ours_for("encoded", no_augment)),
        ("ours raw stored, no augment", ours_for("raw-level0", no_augment)),
    ]
    print(f"{args.images:,} images per pipeline, batches of {args.batch}, {os.cpu_count()} cores")
    rows = []
    for name, make in pipelines:
        seconds, n = measure(make(), args.images, args.batch)
        rows.append((name, n / seconds))
        print(f"  {name}: {n / seconds:.0f} images/s ({seconds:.1f}s)", flush=True)
    print(f"\n{'pipeline':<26} {'images/s':>9} {'ratio':>6}  (ratio: to the tutorial)")
    for i, (name, rate) in enumerate(rows):
        anchor = rows[0 if i < 4 else 4][1]  # each group against its tutorial row
        print(f"{name:<26} {rate:>9.0f} {rate / anchor:>5.2f}x")
    return 0


if __name__ == "__main__":
    from tfxp.cli import exit_now  # skips TensorFlow's teardown (~2 s of CPU)

    exit_now(main() or 0)
