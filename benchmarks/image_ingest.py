"""Ingest benchmark: ImageExampleGen vs the tutorial TFRecord loop, on the same image files.

    .venv/bin/python benchmarks/image_ingest.py [--count 10000] [--size 224] [--work DIR]

Writes COUNT synthetic SIZE x SIZE RGB PNGs (`python -m data.images synthetic`,
kept in WORK and reused by later runs), then ingests them, in this process, with

  ours       a partial pipeline run to ImageExampleGen (content fingerprint,
             decode check, content-hash split, GZIP shards), image_format
             "encoded" (the default) and "raw" (decoded pixels);
  tutorial   the common loop: one tf.io.TFRecordWriter, per image PIL decode,
             serialize_example with image.tobytes(); uncompressed (as written
             in the tutorials) and with options="GZIP".

and prints images/s, MB/s of input PNG, the ratio to the tutorial, the size on
disk, and the records' size without GZIP. Every output is read back and
counted. Outputs stay in WORK for benchmarks/image_read.py.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def tutorial_write(files: list[Path], out: Path, compression: str | None) -> None:
    """The tutorial pattern, verbatim in spirit: one writer, one Example per image."""
    import numpy as np
    import tensorflow as tf
    from PIL import Image

    def _bytes_feature(value):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    def _int64_feature(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    def serialize_example(image, label):
        feature = {
            "height": _int64_feature(image.shape[0]),
            "width": _int64_feature(image.shape[1]),
            "depth": _int64_feature(image.shape[2]),
            "label": _int64_feature(label),
            "image_raw": _bytes_feature(image.tobytes()),
        }
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    with tf.io.TFRecordWriter(str(out), options=compression) as writer:
        for path in files:
            image = np.array(Image.open(path))
            writer.write(serialize_example(image, int(path.parent.name)))


def ours(data_root: Path, run_dir: Path, image_format: str, level: int | None) -> list[Path]:
    from pipeline import node_ids
    from pipeline.config import ImageOptions
    from pipeline.datasets import DATASETS
    from tfxp.local.runner import run_local

    config = DATASETS["digits"].replace(
        pipeline_name=f"image-bench-{image_format}",
        data_root=str(data_root),
        run_dir=str(run_dir),
        image=ImageOptions(
            class_names=tuple(str(c) for c in range(10)),
            image_format=image_format,
            channels=3,
            gzip_level=level,
        ),
        enable_cache=False,
    )
    run_local(config, to_nodes=[node_ids.IMAGE_EXAMPLE_GEN], printer=lambda _: None)
    return sorted(
        run_dir.glob(f"pipeline_root/{node_ids.IMAGE_EXAMPLE_GEN}/examples/*/Split-*/*.gz")
    )


def count_and_raw_size(files: list[Path], compressed: bool) -> tuple[int, int]:
    """(records, bytes of the TFRecord framing + records, i.e. the size without GZIP)."""
    import tensorflow as tf

    n = raw = 0
    for f in files:
        if compressed:
            with gzip.open(f, "rb") as g:
                while chunk := g.read(1 << 24):
                    raw += len(chunk)
        else:
            raw += f.stat().st_size
    for _ in tf.data.TFRecordDataset(
        [str(f) for f in files], compression_type="GZIP" if compressed else ""
    ):
        n += 1
    return n, raw


def _synthetic_pngs(work: Path, count: int, size: int) -> tuple[Path, list[Path]]:
    """(dataset root, its PNG files), written once and reused while count and size match."""
    from data.images import write_synthetic

    data = work / f"images-{count}-{size}"
    span = data / "span-1"
    if not span.is_dir() or sum(1 for _ in span.glob("*/*.png")) != count:
        shutil.rmtree(data, ignore_errors=True)
        print(f"writing {count:,} synthetic {size}x{size} RGB PNGs to {span} ...")
        start = time.perf_counter()
        write_synthetic(
            span,
            count,
            size=size,
            progress=lambda n, b: print(f"  {n:,} images, {b / 1e6:.0f} MB", flush=True),
        )
        print(f"  done in {time.perf_counter() - start:.0f}s")
    return data, sorted(span.glob("*/*.png"))


def _time_writers(work: Path, data: Path, files: list[Path]) -> list[tuple]:
    """(writer, seconds, bytes on disk, bytes without GZIP, files) of each writer timed."""
    results = []

    def record(name, seconds, out_files, compressed):
        n, raw = count_and_raw_size(out_files, compressed)
        if n != len(files):
            raise SystemExit(f"{name}: {n} records read back, expected {len(files)}")
        disk = sum(f.stat().st_size for f in out_files)
        results.append((name, seconds, disk, raw, len(out_files)))
        print(f"  {name}: {seconds:.1f}s, {len(out_files)} file(s), {disk / 1e6:.0f} MB on disk")

    # (format, GZIP level: None = the component's choice, 0 = stored).
    for fmt, level in (("encoded", None), ("raw", None), ("raw", 0)):
        name = f"ours-{fmt}" + ("" if level is None else f"-level{level}")
        run_dir = work / name
        shutil.rmtree(run_dir, ignore_errors=True)
        print(f"{name} ...", flush=True)
        start = time.perf_counter()
        out_files = ours(data, run_dir, fmt, level)
        label = f"ImageExampleGen {fmt}" + (" +GZIP" if level is None else f" GZIP level {level}")
        record(label, time.perf_counter() - start, out_files, True)

    for compression in (None, "GZIP"):
        out = work / ("tutorial.tfrecord" + (".gz" if compression else ""))
        print(f"tutorial ({compression or 'no compression'}) ...", flush=True)
        start = time.perf_counter()
        tutorial_write(files, out, compression)
        record(
            f"tutorial loop raw{' +GZIP' if compression else ''}",
            time.perf_counter() - start,
            [out],
            bool(compression),
        )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--work", default="/tmp/image-bench")
    args = parser.parse_args()

    work = Path(args.work)
    data, files = _synthetic_pngs(work, args.count, args.size)
    # Every file read once before any clock starts: no writer pays for the
    # first read from disk (the page cache then serves all of them alike).
    for f in files:
        f.read_bytes()
    # Imports (TFX, TFMA, TensorFlow: ~10 s) happen before any clock starts.
    import pipeline.definition  # noqa: F401
    import tfxp.local.runner  # noqa: F401

    input_mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"input: {len(files):,} PNG files, {input_mb:.0f} MB\n")
    results = _time_writers(work, data, files)

    anchor = results[3][1]  # the tutorial as written (no compression)
    print(
        f"\n{len(files):,} images {args.size}x{args.size} RGB, {input_mb:.0f} MB of PNG; "
        "ratio = tutorial (uncompressed) seconds / these seconds\n"
    )
    print(
        f"{'writer':<30} {'images/s':>9} {'MB/s in':>8} {'ratio':>6} "
        f"{'on disk MB':>11} {'w/o GZIP MB':>12} {'files':>6}"
    )
    for name, seconds, disk, raw, nfiles in results:
        print(
            f"{name:<30} {len(files) / seconds:>9.0f} {input_mb / seconds:>8.1f} "
            f"{anchor / seconds:>5.2f}x {disk / 1e6:>11.0f} {raw / 1e6:>12.0f} {nfiles:>6}"
        )
    return 0


if __name__ == "__main__":
    from tfxp.cli import exit_now  # skips TensorFlow's teardown (~2 s of CPU)

    exit_now(main() or 0)
