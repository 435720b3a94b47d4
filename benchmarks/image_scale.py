"""Images at scale: the seed's TFRecord claims (5x disk throughput, -70% peak memory) measured here.

    .venv/bin/python benchmarks/image_scale.py --images 3000 --size 224      # smoke, ~5 min
    .venv/bin/python benchmarks/record.py --name image_scale-100k benchmarks/image_scale.py \\
        --images 100000 --size 224

The dataset (class folders of JPEGs and PNGs, `data.photos.write_photos` with
broken=False; `data.images.write_synthetic` PNGs where that module is absent)
is written once outside every timing and kept in --cache by its arguments, so
a rerun reuses it. Every side then runs in a fresh Python process of its own
(its peak RSS is its own: `wait4`'s ru_maxrss, and the largest of its own
children), timed inside the process after its imports:

ingest, image folder -> TFRecords
  ours        the project's ImageExampleGen (a partial pipeline run, as
              benchmarks/image_ingest.py runs it): listing, decode check,
              content-hash split, encoded bytes stored, byte-sized GZIP shards,
              ML Metadata; Beam mode as `tfxp run` picks it for that input
  seed        the seed's writer as written: one tf.io.TFRecordWriter, PIL
              decode, serialize_example(image.tobytes(), label, height, width,
              channels) per image, one uncompressed file, no split
  import      TFX's ImportExampleGen over the seed's file (read, hash split,
              GZIP shards), the same Beam mode; seed + import is the seed's way
              from the same folder to the same kind of artifact as ours
training input, files vs shards (decode, resize to SIZE bilinear, /255, batch)
  files default  tf.keras.utils.image_dataset_from_directory as called bare
  files tuned    the same with what an expert adds (deterministic=False; its
                 map is already parallel with AUTOTUNE and it prefetches)
  shards         trainer/input.py's input_fn over ImageExampleGen's shards
                 (interleaved, shuffled, batched, parallel map, prefetch), the
                 same decode and resize ops per image
  each warm (every byte read once before, page cache holds it) and cold
  (posix_fadvise DONTNEED on every file or shard first; the fraction still
  resident is checked with mincore on a sample)
input vs compute
  a training step of the project's small CNN and of MobileNetV2 (weights=None)
  at SIZE, batch 32, on in-memory tensors, after warm-up steps
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import image_scale_sides as sides  # noqa: E402

# A published GPU training rate the input must keep up with: NVIDIA's
# ResNet-50 v1.5 for TensorFlow, 1x A100 40GB, mixed precision + XLA, batch 256
# ("Training performance: NVIDIA DGX A100 (8x A100 40GB)", 1 GPU row).
GPU_REFERENCE = {
    "images_per_s": 2375,
    "what": "ResNet-50 v1.5 training, 1x A100 40GB, mixed precision + XLA, batch 256",
    "source": "https://github.com/NVIDIA/DeepLearningExamples/blob/master/TensorFlow/"
    "Classification/ConvNets/resnet50v1.5/README.md#training-performance-results",
}


def dataset(cache: Path, images: int, size: int, classes: int) -> tuple[Path, str]:
    """(data root holding span-1/<class>/*, writer name), written once per arguments."""
    try:
        from data.photos import write_photos
    except ImportError:  # the photo generator is not on this branch: synthetic PNGs
        write_photos = None
    writer = "photos" if write_photos else "synthetic"
    root = cache / f"{writer}-{images}-{size}-{classes}-seed0"
    if (root / ".complete").is_file():
        return root, writer
    shutil.rmtree(root, ignore_errors=True)
    span = root / "span-1"
    span.mkdir(parents=True)
    print(f"writing {images:,} {writer} images of ~{size}x{size} into {span} ...", flush=True)
    start = time.perf_counter()

    def progress(done: int, *_: Any) -> None:
        print(f"  {done:,} images ({time.perf_counter() - start:.0f} s)", flush=True)

    if write_photos:
        write_photos(
            span, images, size=size, classes=classes, seed=0, broken=False, progress=progress
        )
    else:
        from data.images import write_synthetic

        write_synthetic(span, images, size=size, classes=classes, progress=progress)
    (root / ".complete").write_text(f"{images} {size} {classes}\n")  # reused only when whole
    print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    return root, writer


def _image_files(span: Path) -> list[Path]:
    return sorted(p for p in span.glob("*/*") if p.is_file() and not p.name.startswith("."))


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def run_ingest(args, data: Path, work: Path, files: list[Path]) -> dict[str, Any]:
    input_mb = sum(f.stat().st_size for f in files) / 1e6
    sides.warm(files)
    out: dict[str, Any] = {"input_mb": round(input_mb, 1)}
    print("\ningest (each side a fresh process; warm page cache for the image files):", flush=True)
    spec = {"data_root": str(data), "run_dir": str(work / "ours-run"), "size": args.size}
    out["ours"] = sides.child("ours_ingest", spec)
    seed_file = work / "seed" / "train.tfrecord"
    out["seed"] = sides.child("seed_writer", {"span": str(data / "span-1"), "out": str(seed_file)})
    seed_mb = seed_file.stat().st_size / 1e6
    out["import"] = None
    if args.skip_import:
        out["import_skipped"] = "--skip-import"
    elif seed_mb > args.import_max_mb:
        # TFX's ImportExampleGen on the FnApiRunner holds the records of its
        # write's GroupByKey in memory: its peak RSS grows with the input.
        out["import_skipped"] = (
            f"the seed's file is {seed_mb:,.0f} MB, above --import-max-mb {args.import_max_mb:,}: "
            "ImportExampleGen's in-process Beam keeps the records in memory"
        )
        print(f"  import  not run: {out['import_skipped']}", flush=True)
    else:
        sides.warm([seed_file])
        out["import"] = sides.child(
            "import_example_gen", {"input": str(seed_file.parent), "out": str(work / "import")}
        )
    for name in ("ours", "seed", "import"):
        r = out[name]
        if r is None:
            continue
        r["images_per_s"] = round(r["records"] / r["seconds"], 1)
        r["input_mb_per_s"] = round(r["input_mb"] / r["seconds"], 1)
        print(
            f"  {name:<7} {r['records']:>8,} records {r['seconds']:>8.1f} s "
            f"{r['images_per_s']:>8.0f} images/s {r['input_mb_per_s']:>7.1f} MB/s in, "
            f"{r['output_mb']:>8.0f} MB out in {r['output_files']} file(s), "
            f"peak RSS {r['peak_rss_mb']:.0f} MB",
            flush=True,
        )
    if out["import"]:
        both = out["seed"]["seconds"] + out["import"]["seconds"]
        out["seed_plus_import_seconds"] = round(both, 1)
        out["ours_vs_seed_plus_import"] = _ratio(both, out["ours"]["seconds"])
    out["ours_vs_seed_writer"] = _ratio(out["seed"]["seconds"], out["ours"]["seconds"])
    return out


def run_read(args, data: Path, work: Path, files: list[Path]) -> dict[str, Any]:
    shards = sides.our_shards(work / "ours-run")
    n = min(args.read_images, len(files))
    common = {"images": n, "size": args.size, "batch": args.batch}
    plan = [
        ("files_default", "files", {"dir": str(data / "span-1"), "tuned": False}, False),
        ("files_tuned", "files", {"dir": str(data / "span-1"), "tuned": True}, False),
        ("shards", "shards", {"shards": [str(s) for s in shards]}, False),
        ("files_tuned_cold", "files", {"dir": str(data / "span-1"), "tuned": True}, True),
        ("shards_cold", "shards", {"shards": [str(s) for s in shards]}, True),
        # The same reader with a 256-record shuffle window (the trainer's default
        # is 4,096): how much of its peak memory is the window.
        ("shards_window256", "shards", {"shards": [str(s) for s in shards], "shuffle_buffer": 256},
         False),
    ]  # fmt: skip
    out: dict[str, Any] = {"images_timed": n, "batch": args.batch}
    print(
        f"\ntraining input: {n:,} images per pass, batch {args.batch}, best of {args.repeats} "
        "passes:",
        flush=True,
    )
    for name, kind, spec, cold in plan:
        paths = files if kind == "files" else shards
        if cold:
            spec = {**spec, "drop_cache": [str(p) for p in paths]}
        else:
            sides.warm(paths)
        r = sides.best_of(args.repeats, f"read_{kind}", {**common, **spec})
        r["bytes_mb"] = round(sum(p.stat().st_size for p in paths) / 1e6, 1)
        r["page_cache"] = "cold" if cold else "warm"
        out[name] = r
        resident = r.get("resident_after_drop")
        if cold and (resident is None or resident > 0.5):  # e.g. tmpfs: nothing to drop
            r["page_cache"] = "not dropped"
        print(
            f"  {name:<17} {r['images_per_s']:>7.0f} images/s  peak RSS {r['peak_rss_mb']:>6.0f} MB"
            f"  ({r['page_cache']} page cache"
            + (f", {resident or 0:.1%} of a sample still resident after DONTNEED" if cold else "")
            + f"; {len(paths):,} file(s), {r['bytes_mb']:,.0f} MB)",
            flush=True,
        )
    out["disk"] = disk_read(files, shards, n)
    files_best = out["files_tuned"]
    out["throughput_ratio"] = _ratio(out["shards"]["images_per_s"], files_best["images_per_s"])
    out["peak_memory_ratio"] = _ratio(out["shards"]["peak_rss_mb"], files_best["peak_rss_mb"])
    out["cold_throughput_ratio"] = _ratio(
        out["shards_cold"]["images_per_s"], out["files_tuned_cold"]["images_per_s"]
    )
    out["cold_peak_memory_ratio"] = _ratio(
        out["shards_cold"]["peak_rss_mb"], out["files_tuned_cold"]["peak_rss_mb"]
    )
    return out


def disk_read(files: list[Path], shards: list[Path], n: int) -> dict[str, Any]:
    """Bytes from disk alone, cold, one thread, nothing decoded: `n` files in a shuffled
    order (as a training pass opens them) against as many bytes of the shards in order."""
    import random

    sample = random.Random(0).sample(files, n)
    want = sum(p.stat().st_size for p in sample)
    out = {"mb": round(want / 1e6, 1)}
    for name, paths in (("files", sample), ("shards", shards)):
        resident = sides.drop_cache([str(p) for p in paths])
        start, got = time.perf_counter(), 0
        for p in paths:
            with open(p, "rb") as f:
                while got < want and (chunk := f.read(1 << 20)):
                    got += len(chunk)
            if got >= want:
                break
        seconds = time.perf_counter() - start
        out[f"{name}_mb_per_s"] = round(got / 1e6 / seconds, 1)
        out[f"{name}_resident_after_drop"] = resident
    out["ratio"] = _ratio(out["shards_mb_per_s"], out["files_mb_per_s"])
    print(
        f"  disk alone (cold, one thread, no decoding, {want / 1e6:,.0f} MB): files "
        f"{out['files_mb_per_s']:,.0f} MB/s, shards {out['shards_mb_per_s']:,.0f} MB/s: "
        f"{out['ratio']:.2f}x",
        flush=True,
    )
    return out


def run_compute(args, classes: int) -> dict[str, Any]:
    out = {}
    print(
        f"\ntraining steps on this CPU (batch {args.batch}, {args.steps} timed steps):", flush=True
    )
    for model in args.models.split(","):
        spec = {"model": model, "size": args.size, "batch": args.batch}
        r = sides.child("train_steps", {**spec, "classes": classes, "steps": args.steps})
        out[model] = r
        print(
            f"  {model:<13} {r['images_per_s']:>7.1f} images/s ({r['seconds_per_step']:.2f} s/step), "
            f"peak RSS {r['peak_rss_mb']:.0f} MB",
            flush=True,
        )
    return out


def verdicts(read: dict, compute: dict) -> dict[str, Any]:
    """Which side bounds training here, and what a published GPU rate asks of the input."""
    feed = read["shards"]["images_per_s"]
    bound = {m: ("input" if feed < r["images_per_s"] else "compute") for m, r in compute.items()}
    gpu = GPU_REFERENCE["images_per_s"]
    return {
        "input_images_per_s": feed,
        "bound_by": bound,
        "gpu_reference": GPU_REFERENCE,
        "gpu_needs_x_input": round(gpu / feed, 1),
        "gpu_cores_needed_at_this_rate": round(gpu / feed * (os.cpu_count() or 1), 0),
    }


def report(result: dict) -> None:
    read = result["read"]
    print(
        f"\nshards vs files: throughput {read['throughput_ratio']:.2f}x, "
        f"peak memory {read['peak_memory_ratio']:.2f}x"
    )
    print(
        "  (ours = input_fn over the shards; files = image_dataset_from_directory tuned; warm page "
        f"cache; cold, after DONTNEED: throughput {read['cold_throughput_ratio']:.2f}x, "
        f"peak memory {read['cold_peak_memory_ratio']:.2f}x; disk alone, cold: "
        f"{read['disk']['ratio']:.2f}x the MB/s)"
    )
    v = result["input_vs_compute"]
    for model, bound in v["bound_by"].items():
        step = result["compute"][model]["images_per_s"]
        print(
            f"  {model}: input {v['input_images_per_s']:.0f} images/s vs training {step:.1f} "
            f"images/s on this CPU: {bound}-bound"
        )
    g = v["gpu_reference"]
    print(
        f"  a GPU at {g['images_per_s']:,} images/s ({g['what']}; {g['source']}) needs "
        f"{v['gpu_needs_x_input']}x this input rate (~{v['gpu_cores_needed_at_this_rate']:.0f} "
        "cores like these)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--images", type=int, default=3000)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--cache", default="/tmp/image-scale-cache", help="datasets, kept by arguments")
    p.add_argument("--work", default=None, help="outputs (default: <cache>/work-<images>-<size>)")
    p.add_argument("--read-images", type=int, default=20000, help="images timed per read pass")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="read passes per side, each a fresh process; the fastest counts",
    )
    p.add_argument("--steps", type=int, default=5, help="timed training steps per model")
    p.add_argument(
        "--models", default="cnn,mobilenet_v2", help="training steps timed: cnn, mobilenet_v2"
    )
    p.add_argument("--skip-import", action="store_true", help="leave out ImportExampleGen")
    p.add_argument(
        "--import-max-mb",
        type=int,
        default=1000,
        help="run ImportExampleGen only over a seed file up to this size (its memory grows with it)",
    )
    p.add_argument("--json", action="store_true", help="also print the results as JSON")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return sides.run_child(args.child, json.loads(Path(args.spec).read_text()))
    if not set(args.models.split(",")) <= {"cnn", "mobilenet_v2"}:
        p.error(f"--models takes cnn and/or mobilenet_v2, not {args.models!r}")
    if min(args.images, args.size, args.classes, args.read_images, args.steps, args.batch,
           args.repeats) < 1:  # fmt: skip
        p.error("--images, --size, --classes, --read-images, --steps, --batch, --repeats: >= 1")
    cache = Path(args.cache)
    data, writer = dataset(cache, args.images, args.size, args.classes)
    work = Path(args.work or cache / f"work-{args.images}-{args.size}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    files = _image_files(data / "span-1")
    result: dict[str, Any] = {
        "images": len(files),
        "size": args.size,
        "classes": args.classes,
        "dataset": writer,
        "cores": os.cpu_count(),
    }
    result["ingest"] = run_ingest(args, data, work, files)
    result["read"] = run_read(args, data, work, files)
    result["compute"] = run_compute(args, args.classes)
    result["input_vs_compute"] = verdicts(result["read"], result["compute"])
    report(result)
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
