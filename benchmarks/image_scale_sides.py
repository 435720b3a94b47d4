"""The sides benchmarks/image_scale.py measures, each run in a fresh process of its own.

`child(name, spec)` starts `image_scale.py --child NAME --spec JSON`, waits
for it with wait4 (its own ru_maxrss) and returns the JSON it printed on its
`RESULT` line plus `peak_rss_mb`: the larger of the child's own peak and its
largest waited-for subprocess (Beam's SDK workers, when a mode starts them).
Each side times only its own work, after its imports.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "image_scale.py"
CHILD_TIMEOUT = 3 * 3600.0
WARMUP_BATCHES = 3


def best_of(repeats: int, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The fastest of `repeats` runs of a side, each in a fresh process (a shared
    machine's load only slows a run down; a process of its own keeps each peak RSS
    that of one pass); `peak_rss_mb` is the largest of them."""
    runs = [child(name, spec) for _ in range(repeats)]
    best = max(runs, key=lambda r: r["images_per_s"])
    return {
        **best,
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "passes_images_per_s": [r["images_per_s"] for r in runs],
    }


def child(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    # The spec goes in a file: a cold pass's list of 100,000 paths is too long for argv.
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("w", suffix=".json") as spec_file,
    ):
        json.dump(spec, spec_file)
        spec_file.flush()
        cmd = [sys.executable, str(SCRIPT), "--child", name, "--spec", spec_file.name]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err)
        watchdog = threading.Timer(CHILD_TIMEOUT, proc.kill)  # wait4 has no timeout
        watchdog.start()
        _, status, usage = os.wait4(proc.pid, 0)
        watchdog.cancel()
        out.seek(0)
        err.seek(0)
        text = out.read().decode()
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"side {name} failed:\n{text[-2000:]}\n{err.read().decode()[-4000:]}")
    lines = [x for x in text.splitlines() if x.startswith("RESULT ")]
    if not lines:
        sys.exit(f"side {name} printed no RESULT line:\n{text[-2000:]}")
    result = json.loads(lines[-1].removeprefix("RESULT "))
    own = usage.ru_maxrss / 1024
    result["peak_rss_mb"] = round(max(own, result.pop("children_peak_rss_mb", 0.0)), 1)
    return result


def _finish(result: dict[str, Any]) -> int:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print("RESULT " + json.dumps({**result, "children_peak_rss_mb": kids}), flush=True)
    os._exit(0)  # skips TensorFlow's teardown


def warm(paths: list[Path]) -> None:
    """Reads every byte once, so the page cache holds them (a warm pass)."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def drop_cache(paths: list[str]) -> float | None:
    """posix_fadvise(DONTNEED) on every file (clean pages leave the page cache, no root
    needed); returns the fraction of a sample's pages still resident (mincore)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)  # DONTNEED drops clean pages only: a file just written is dirty
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    step = max(1, len(paths) // 200)
    return resident_fraction(paths[::step])


def resident_fraction(paths: list[str]) -> float | None:
    """Fraction of the files' pages in the page cache, by mincore(2); None if unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mincore = libc.mincore
    except (OSError, AttributeError):
        return None
    page = mmap.PAGESIZE
    total = resident = 0
    for p in paths:
        size = os.path.getsize(p)
        if size == 0:
            continue
        with open(p, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as m:
            pages = (size + page - 1) // page
            vec = (ctypes.c_ubyte * pages)()
            addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
            if mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) != 0:
                return None
            total += pages
            resident += sum(v & 1 for v in vec)
            del addr
    return resident / total if total else None


def our_shards(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("pipeline_root/ImageExampleGen/examples/*/Split-*/*.gz"))


def _count_records(files: list[Path], compression: str) -> int:
    import tensorflow as tf

    ds = tf.data.TFRecordDataset([str(f) for f in files], compression_type=compression)
    return int(ds.reduce(0, lambda n, _: n + 1))


def _files_out(files: list[Path], compression: str) -> dict[str, Any]:
    return {
        "records": _count_records(files, compression),
        "output_mb": round(sum(f.stat().st_size for f in files) / 1e6, 1),
        "output_files": len(files),
    }


def ours_ingest(spec: dict[str, Any]) -> dict[str, Any]:
    from pipeline import node_ids
    from pipeline.config import ImageOptions
    from pipeline.datasets import DATASETS
    from tfxp.local.runner import run_local

    data = Path(spec["data_root"])
    classes = tuple(sorted(p.name for p in (data / "span-1").iterdir() if p.is_dir()))
    config = DATASETS["digits"].replace(
        pipeline_name="image-scale",
        data_root=str(data),
        run_dir=spec["run_dir"],
        image=ImageOptions(
            class_names=classes, channels=3, height=spec["size"], width=spec["size"]
        ),
        enable_cache=False,
    )
    files = [p for p in (data / "span-1").glob("*/*") if p.is_file()]
    start = time.perf_counter()
    run_local(config, to_nodes=[node_ids.IMAGE_EXAMPLE_GEN], printer=lambda _: None)
    seconds = time.perf_counter() - start
    out = _files_out(our_shards(Path(spec["run_dir"])), "GZIP")
    return {
        "seconds": round(seconds, 2),
        "input_mb": round(sum(p.stat().st_size for p in files) / 1e6, 1),
        "beam_args": list(config.beam_args),
        **out,
    }


def seed_writer(spec: dict[str, Any]) -> dict[str, Any]:
    """The seed's writer as it is written: its two helpers, its serialize_example and one
    TFRecordWriter loop; the images come from the folder (decoded with PIL to the
    uint8 array the seed's `image.tobytes()` takes) instead of np.random."""
    import numpy as np
    import tensorflow as tf
    from PIL import Image

    def _bytes_feature(value):
        if isinstance(value, type(tf.constant(0))):
            value = value.numpy()
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    def _int64_feature(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    def serialize_example(image, label, height, width, channels):
        feature = {
            "image_raw": _bytes_feature(image.tobytes()),
            "label": _int64_feature(label),
            "height": _int64_feature(height),
            "width": _int64_feature(width),
            "channels": _int64_feature(channels),
        }
        example_proto = tf.train.Example(features=tf.train.Features(feature=feature))
        return example_proto.SerializeToString()

    span = Path(spec["span"])
    classes = sorted(p.name for p in span.iterdir() if p.is_dir())
    out = Path(spec["out"])
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    files = [(p, i) for i, c in enumerate(classes) for p in sorted((span / c).iterdir())]
    input_mb = 0.0
    with tf.io.TFRecordWriter(str(out)) as writer:
        for path, label in files:
            input_mb += path.stat().st_size / 1e6
            image = np.asarray(Image.open(path).convert("RGB"))
            h, w, c = image.shape
            writer.write(serialize_example(image, label, h, w, c))
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 2), "input_mb": round(input_mb, 1), **_files_out([out], "")}


def import_example_gen(spec: dict[str, Any]) -> dict[str, Any]:
    """TFX's ImportExampleGen executor over the seed's file, with the Beam arguments
    ours ran with (the pipeline config's)."""
    from google.protobuf import json_format
    from tfx.components.example_gen.import_example_gen.executor import Executor
    from tfx.proto import example_gen_pb2
    from tfx.types import standard_artifacts

    from pipeline.datasets import DATASETS

    beam_args = list(DATASETS["digits"].beam_args)
    out_dir = Path(spec["out"])
    examples = standard_artifacts.Examples()
    examples.uri = str(out_dir / "examples")
    input_config = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*.tfrecord")]
    )
    output_config = example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(
            splits=[
                example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=4),
                example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=1),
            ]
        )
    )
    props = {
        "input_base": spec["input"],
        "input_config": json_format.MessageToJson(input_config),
        "output_config": json_format.MessageToJson(output_config),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    }
    context = Executor.Context(beam_pipeline_args=beam_args, tmp_dir=str(out_dir / "tmp"))
    inputs = sorted(Path(spec["input"]).glob("*.tfrecord"))
    start = time.perf_counter()
    Executor(context).Do({}, {"examples": [examples]}, props)
    seconds = time.perf_counter() - start
    out = _files_out(sorted((out_dir / "examples").glob("Split-*/*.gz")), "GZIP")
    input_mb = sum(p.stat().st_size for p in inputs) / 1e6
    return {
        "seconds": round(seconds, 2),
        "input_mb": round(input_mb, 1),
        "beam_args": beam_args,
        **out,
    }


def _decode_resize(size: int):
    """What image_dataset_from_directory's load_image does per image (decode_image,
    bilinear resize, 3 channels), then /255 as a model takes it."""
    import tensorflow as tf

    def one(data):
        image = tf.io.decode_image(data, channels=3, expand_animations=False)
        image = tf.image.resize(image, [size, size], method="bilinear")
        return tf.ensure_shape(image, [size, size, 3]) / 255.0

    return one


def _files_dataset(spec: dict[str, Any]):
    import tensorflow as tf

    size, batch = spec["size"], spec["batch"]
    ds = tf.keras.utils.image_dataset_from_directory(
        spec["dir"], image_size=(size, size), batch_size=batch, seed=0
    )
    ds = ds.map(lambda x, y: (x / 255.0, y), num_parallel_calls=tf.data.AUTOTUNE)
    if spec["tuned"]:
        options = tf.data.Options()
        options.deterministic = False  # lets the parallel map hand over out of order
        ds = ds.with_options(options).prefetch(tf.data.AUTOTUNE)
    return ds


def _shards_dataset(spec: dict[str, Any]):
    import tensorflow as tf

    from trainer.input import input_fn

    size = spec["size"]
    one = _decode_resize(size)
    out_spec = tf.TensorSpec([size, size, 3], tf.float32)

    def decode(features, label):
        return tf.map_fn(one, features["image"], fn_output_signature=out_spec), label

    return input_fn(
        spec["shards"],
        {
            "image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64),
        },
        "label",
        spec["batch"],
        shuffle=True,
        shuffle_buffer=spec.get("shuffle_buffer", 4096),  # the image trainer's default
        cache=False,
        augment=decode,
    )


def _one_pass(spec: dict[str, Any], make) -> dict[str, Any]:
    resident = drop_cache(spec["drop_cache"]) if "drop_cache" in spec else None
    start = time.perf_counter()  # listing the folder or opening the shards included
    return _timed_pass(make(spec), spec["images"], spec["batch"], start, resident)


def read_files(spec: dict[str, Any]) -> dict[str, Any]:
    return _one_pass(spec, _files_dataset)


def read_shards(spec: dict[str, Any]) -> dict[str, Any]:
    return _one_pass(spec, _shards_dataset)


def _timed_pass(ds, images: int, batch: int, start: float, resident) -> dict[str, Any]:
    """Images/s over `images` images from `start` (the pipeline's first file opened),
    start-up included: a cold epoch pays it too."""
    n = 0
    first = None
    for x, y in ds:
        n += int(y.shape[0])
        if first is None:
            first = time.perf_counter() - start
            assert x.dtype.name == "float32" and x.shape[1:] == (x.shape[1], x.shape[2], 3)
        if n >= images:
            break
    seconds = time.perf_counter() - start
    return {
        "images": n,
        "seconds": round(seconds, 2),
        "first_batch_seconds": round(first or 0.0, 2),
        "images_per_s": round(n / seconds, 1),
        "resident_after_drop": resident,
    }


def train_steps(spec: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from trainer.image.model import build_cnn

    size, batch, classes = spec["size"], spec["batch"], spec["classes"]
    if spec["model"] == "cnn":
        model = build_cnn((size, size, 3), classes)
        x = {"image_xf": tf.random.uniform([batch, size, size, 3])}
    else:
        model = keras.applications.MobileNetV2(
            input_shape=(size, size, 3), weights=None, classes=classes
        )
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        x = tf.random.uniform([batch, size, size, 3])
    y = tf.constant(np.arange(batch) % classes)
    for _ in range(2):  # tracing and first-step allocations
        model.train_on_batch(x, y)
    start = time.perf_counter()
    for _ in range(spec["steps"]):
        model.train_on_batch(x, y)
    seconds = time.perf_counter() - start
    return {
        "seconds_per_step": round(seconds / spec["steps"], 3),
        "images_per_s": round(batch * spec["steps"] / seconds, 1),
        "params": int(model.count_params()),
    }


SIDES = {
    "ours_ingest": ours_ingest,
    "seed_writer": seed_writer,
    "import_example_gen": import_example_gen,
    "read_files": read_files,
    "read_shards": read_shards,
    "train_steps": train_steps,
}


def run_child(name: str, spec: dict[str, Any]) -> int:
    if name not in SIDES:
        print(f"ERROR: no side {name!r} (known: {sorted(SIDES)})", file=sys.stderr)
        return 2
    return _finish(SIDES[name](spec))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description="One side of benchmarks/image_scale.py (which starts each in a process of "
        "its own); run that script, not this one."
    )
    parser.add_argument("side", choices=sorted(SIDES))
    parser.add_argument("spec", type=Path, help="the side's JSON spec file")
    args = parser.parse_args()
    sys.exit(run_child(args.side, json.loads(args.spec.read_text())))
