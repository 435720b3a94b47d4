"""ImageExampleGen: folders of images (`span-<N>/<label>/*.png|jpg`) to GZIP TFRecord splits.

The component is TFX's FileBasedExampleGen with the project's content-fingerprint
driver (`components.example_gen.driver.ContentFingerprintDriver`), so spans,
versions, `{SPAN}`/`{VERSION}` patterns, range configs and the cache behave
exactly as for CSV data. The executor, a Beam pipeline, writes one
`tf.train.Example` per image file:

  image     bytes   the file's encoded bytes (PNG/JPEG/GIF/BMP, as TensorFlow
                    decodes them), or with image_format="raw" the decoded
                    uint8 pixels, row-major [height, width, channels]
  label     int64   index of the file's folder name in `class_names`
  height, width, channels   int64

What differs from TFX's own ExampleGens:

- Splits are decided by a SHA-256 of the image's *bytes* (bucketed like TFX's
  `hash_buckets`), not of the serialized example: the same picture lands in
  the same split whatever its folder, file name or span, so a duplicate
  cannot leak from train into eval.
- Every file is decoded once during ingestion. One that does not decode is
  reported by path: with `bad_images="fail"` (default) the run stops with the
  list and publishes nothing; with "skip" the file is left out and counted.
- Examples per split and class, and the skipped files, are recorded as custom
  properties of the Examples artifact (and in `.image_ingest.json` beside the
  splits), so class balance is visible in ML Metadata.
- Shards are sized for the data (~128 MB of output each) and GZIP files,
  deflated at level 1 when a sample record compresses (raw pixels: 0.80 of
  their size, as at level 6 in under half the time) and stored (level 0)
  when it does not (encoded PNG/JPEG bytes), see `gzip_level`. Only file paths
  pass through Beam; each worker streams its shard's images into its own
  files (see `_WriteShard`).
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import math
import os
import zlib
from typing import Any

import apache_beam as beam
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen import write_split
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs

from components.example_gen.driver import (
    EXPECTED_SHA256,
    RAW_BYTES,
    TFRECORD_SHARDS,
    ContentFingerprintDriver,
    custom_struct,
    example_gen_node,
    resolved_files,
    split_configs,
)

COMPONENT_ID = "ImageExampleGen"

IMAGE_KEY = "image"
LABEL_KEY = "label"
HEIGHT_KEY = "height"
WIDTH_KEY = "width"
CHANNELS_KEY = "channels"

IMAGE_FORMATS = ("encoded", "raw")
BAD_IMAGE_POLICIES = ("fail", "skip")
# What TensorFlow's decode_image reads; anything else could not be decoded in
# the transform graph or at serving time.
DECODABLE = {"PNG", "JPEG", "GIF", "BMP"}

# Custom properties of the Examples artifact (besides span, version, fingerprint...).
IMAGE_COUNT = "image_count"
CLASS_COUNTS = "class_counts"  # JSON: {split: {class name: examples}}
SKIPPED_IMAGES = "skipped_images"  # count; the paths are in the report file
IMAGE_FORMAT = "image_format"
GZIP_LEVEL = "gzip_level"
REPORT_FILE = ".image_ingest.json"
INCOMPLETE = ".incomplete"  # suffix of a shard being written (readers glob *.gz)  # hidden: readers glob Split-*/, `verify` skips dot-files

# Output bytes per shard: large enough that per-file overhead vanishes, small
# enough that a reader interleaves several shards of a split in parallel.
OUTPUT_BYTES_PER_SHARD = 128 * 1024 * 1024


class ImageInputError(ValueError):
    """The image folders cannot be ingested as configured; the message says where and why."""


def label_of(path: str, input_base: str, class_names: list[str]) -> int:
    """The class index of an image at `.../<label>/<file>` (its parent folder's name)."""
    folder = os.path.basename(os.path.dirname(path))
    try:
        return class_names.index(folder)
    except ValueError:
        raise ImageInputError(
            f"{path}: folder {folder!r} is not a class of this dataset "
            f"(classes: {', '.join(class_names)}); images go in "
            f"{input_base}/span-<N>/<class>/, or add the class to the dataset config"
        ) from None


def split_of(data: bytes, cumulative_buckets: list[int]) -> int:
    """Output split index from a SHA-256 of the image bytes (TFX's bucket arithmetic)."""
    bucket = int(hashlib.sha256(data).hexdigest(), 16) % cumulative_buckets[-1]
    return bisect.bisect(cumulative_buckets, bucket)


# The mode a decoded image is converted to before its pixels are stored, and
# so its channel count: grey for bit/integer/float modes, RGB(A) for palettes,
# RGB for anything else (CMYK, YCbCr, ...).
_GREY_MODES = ("1", "I", "I;16", "F")
_KEPT_MODES = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}


def _target_mode(img: Any) -> str:
    if img.mode in _GREY_MODES:
        return "L"
    if img.mode == "P":
        return "RGBA" if "transparency" in img.info else "RGB"
    return img.mode if img.mode in _KEPT_MODES else "RGB"


def _decode(data: bytes, with_pixels: bool) -> tuple[Any, tuple[int, int, int], str]:
    """(pixels or None, (height, width, channels), format); ValueError naming why it failed."""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    pixels = None
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt = img.format or "?"
            if fmt not in DECODABLE:
                raise ValueError(f"{fmt} is not a format TensorFlow decodes (PNG, JPEG, GIF, BMP)")
            # The pixel data itself: truncated or corrupt files fail here. Pillow
            # decodes without the GIL, so threads decode images in parallel.
            img.load()
            mode = _target_mode(img)
            width, height = img.size
            if with_pixels:
                pixels = np.asarray(img if img.mode == mode else img.convert(mode), dtype=np.uint8)
    except UnidentifiedImageError:
        raise ValueError("not an image file (no known image header)") from None
    except (OSError, SyntaxError, Image.DecompressionBombError) as e:
        raise ValueError(str(e) or type(e).__name__) from None
    if min(height, width) == 0:
        raise ValueError(f"empty image ({height}x{width})")
    if pixels is not None and pixels.ndim == 2:
        pixels = pixels[..., None]
    return pixels, (height, width, _KEPT_MODES[mode]), fmt


def decode(data: bytes) -> tuple[Any, str]:
    """(pixels as a uint8 [H, W, C] array, format). Raises ValueError naming why it failed."""
    pixels, _, fmt = _decode(data, with_pixels=True)
    return pixels, fmt


def probe(data: bytes) -> tuple[tuple[int, int, int], str]:
    """((height, width, channels), format) of an image `decode` accepts, checked the same
    way (every pixel decoded), without converting or copying the pixels."""
    _, shape, fmt = _decode(data, with_pixels=False)
    return shape, fmt


def image_example(data: bytes, pixels: Any, label: int, image_format: str = "encoded") -> bytes:
    """A serialized tf.train.Example for one image (deterministic bytes).

    With image_format "encoded", `pixels` may be the (height, width, channels)
    shape alone (from `probe`): only the file's bytes are stored.
    """
    import tensorflow as tf

    height, width, channels = pixels if isinstance(pixels, tuple) else pixels.shape
    image = data if image_format == "encoded" else pixels.tobytes()

    def ints(v: int) -> tf.train.Feature:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))

    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                IMAGE_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                LABEL_KEY: ints(label),
                HEIGHT_KEY: ints(height),
                WIDTH_KEY: ints(width),
                CHANNELS_KEY: ints(channels),
            }
        )
    )
    return example.SerializeToString(deterministic=True)


def decode_threads() -> int:
    """Threads that read and decode images inside one shard writer: one per core."""
    return max(1, min(8, os.cpu_count() or 1))


class _WriteShard(beam.DoFn):
    """One shard's image files -> one GZIP TFRecord file per split; yields counts and bad files.

    Only file paths travel through Beam: each worker reads, checks and encodes
    its shard's images and streams them into its own output files, so no
    record is shuffled between workers and memory stays flat however large
    the images. Within a worker, a thread pool reads, decodes, hashes and
    encodes images (Pillow, hashlib and zlib release the GIL, so this uses
    every core even under Beam's one-thread in-process runner) while this
    thread writes the records in input order, so the output is the same as
    one thread's; at most `_AHEAD` images per thread are in flight. Files
    are written under a temporary name and renamed when complete: a reader
    never sees a half-written shard.
    """

    _AHEAD = 4

    def __init__(
        self, image_format, cumulative_buckets, split_uris, num_shards, gzip_level, threads=0
    ):
        self._level = gzip_level
        self._format = image_format
        self._buckets = cumulative_buckets
        self._uris = split_uris
        self._shards = num_shards
        self._threads = threads or decode_threads()

    def _prepare(self, item: tuple[str, int]) -> tuple[int, int, bytes | None, str | None]:
        """(split, label, serialized example, None), or (-1, label, None, "path: why")."""
        path, label = item
        with fileio.open(path, "rb") as f:
            data = f.read()
        try:
            # Encoded bytes are stored as they are: check they decode, keep the
            # shape, and skip converting and copying the pixels.
            pixels = decode(data)[0] if self._format == "raw" else probe(data)[0]
        except ValueError as e:
            return -1, label, None, f"{path}: {e}"
        split = split_of(data, self._buckets)
        return split, label, image_example(data, pixels, label, self._format), None

    def _prepared(self, files: list[tuple[str, int]]):
        """`_prepare` of each file, in order, computed by the thread pool."""
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        if self._threads == 1:
            yield from map(self._prepare, files)
            return
        with ThreadPoolExecutor(self._threads, thread_name_prefix="image-decode") as pool:
            pending: deque = deque()
            for item in files:
                pending.append(pool.submit(self._prepare, item))
                if len(pending) >= self._AHEAD * self._threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

    def process(self, element):
        import gzip

        from compat.beam import TFRecordUtil

        shard, files = element
        name = f"{write_split.DEFAULT_FILE_NAME}-{shard:05d}-of-{self._shards:05d}.gz"
        counts: dict[tuple[int, int], int] = {}
        bad: list[str] = []
        outputs, handles = [], []
        try:
            for uri in self._uris:
                fileio.makedirs(uri)
                raw = fileio.open(os.path.join(uri, name + INCOMPLETE), "wb")
                # mtime=0, no file name: the same images give the same bytes.
                handles.append(raw)
                outputs.append(
                    gzip.GzipFile(
                        fileobj=raw, mode="wb", filename="", mtime=0, compresslevel=self._level
                    )
                )
            for split, label, record, error in self._prepared(files):
                if error is not None:
                    bad.append(error)
                    continue
                TFRecordUtil.write_record(outputs[split], record)
                counts[(split, label)] = counts.get((split, label), 0) + 1
        finally:
            for out, raw in zip(outputs, handles, strict=False):
                out.close()
                raw.close()
        for uri in self._uris:
            fileio.rename(
                os.path.join(uri, name + INCOMPLETE), os.path.join(uri, name), overwrite=True
            )
        yield {"counts": sorted(counts.items()), "bad": bad}


def _write_report(results, path):
    counts: dict[tuple[int, int], int] = {}
    for r in results:
        for key, n in r["counts"]:
            counts[tuple(key)] = counts.get(tuple(key), 0) + n
    report = {"counts": sorted(counts.items()), "bad": sorted(b for r in results for b in r["bad"])}
    with fileio.open(path, "w") as f:
        f.write(json.dumps(report))


def gzip_level(sample_record: bytes) -> int:
    """1 for records that compress; 0 (GZIP framing, stored blocks) for ones that do not.

    Encoded PNG/JPEG bytes are compressed already: deflating them again costs
    ~2-4 ms per 224x224 image (more than decoding it) and saves nothing
    (ratio 1.000 on the benchmark images). Raw pixels and small records (the
    8x8 digits: 0.32) compress well at level 1, about as well as at level 6.
    """
    if not sample_record:
        return 1
    return 0 if len(zlib.compress(sample_record, 1)) > 0.95 * len(sample_record) else 1


def shard_groups(
    inputs: list[tuple[str, int]], num_shards: int
) -> list[tuple[int, list[tuple[str, int]]]]:
    """Files dealt into shards by a hash of their path, in hash order within each shard.

    Hash order spreads every class over every shard and mixes classes within
    a shard (sorted paths would write a shard class by class, which a
    bounded shuffle buffer cannot undo); it is the same on every run.
    """
    keyed = sorted((hashlib.sha256(p.encode()).digest(), p, label) for p, label in inputs)
    groups: list[list[tuple[str, int]]] = [[] for _ in range(num_shards)]
    for key, path, label in keyed:
        groups[int.from_bytes(key[:8], "big") % num_shards].append((path, label))
    return list(enumerate(groups))


def shards_for(output_bytes: float, configured: int = 0) -> int:
    if configured > 0:
        return configured
    return max(1, math.ceil(output_bytes / OUTPUT_BYTES_PER_SHARD))


class Executor(base_beam_executor.BaseBeamExecutor):
    """Image folders -> split, sharded GZIP TFRecords of tf.Examples, in one Beam pipeline."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX API
        self._log_startup(input_dict, output_dict, exec_properties)
        options, image_format, bad_images, class_names = _options(exec_properties)
        input_config, output_config = _split_configs(exec_properties)
        examples = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.EXAMPLES_KEY]
        )
        split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
        examples.split_names = artifact_utils.encode_split_names(split_names)
        base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        files = _image_files(exec_properties, input_config.splits[0].pattern, base)
        inputs = [(path, label_of(path, base, class_names)) for path in files]
        cumulative: list[int] = []
        for s in output_config.split_config.splits:
            cumulative.append((cumulative[-1] if cumulative else 0) + s.hash_buckets)
        num_shards, level = _sizing(exec_properties, options, files, image_format, output_config)
        uris = [artifact_utils.get_split_uri([examples], name) for name in split_names]
        report_path = os.path.join(examples.uri, REPORT_FILE)

        with self._make_beam_pipeline() as pipeline:
            _ = (
                pipeline
                | "Shards" >> beam.Create(shard_groups(inputs, num_shards))
                # One shard per bundle, so workers write shards in parallel.
                | "Reshuffle" >> beam.Reshuffle()
                | "ReadCheckWrite"
                >> beam.ParDo(_WriteShard(image_format, cumulative, uris, num_shards, level))
                | "Gather" >> beam.combiners.ToList()
                | "Report" >> beam.Map(_write_report, path=report_path)
            )

        with fileio.open(report_path, "r") as f:
            report = json.loads(f.read())
        bad = report["bad"]
        if bad and bad_images == "fail":
            # Nothing half-written stays behind: the artifact is not published
            # (the execution fails) and its split folders are removed.
            for uri in uris:
                if fileio.exists(uri):
                    fileio.rmtree(uri)
            _raise_bad_images(bad, base)
        per_split: dict[str, dict[str, int]] = {n: {} for n in split_names}
        for (split, label), n in report["counts"]:
            per_split[split_names[split]][class_names[label]] = n
        total = sum(sum(c.values()) for c in per_split.values())
        if total == 0:
            raise ImageInputError(f"no image under {base} could be decoded ({len(bad)} skipped)")
        examples.set_int_custom_property(IMAGE_COUNT, total)
        examples.set_string_custom_property(CLASS_COUNTS, json.dumps(per_split, sort_keys=True))
        examples.set_int_custom_property(SKIPPED_IMAGES, len(bad))
        examples.set_string_custom_property(IMAGE_FORMAT, image_format)
        examples.set_int_custom_property(TFRECORD_SHARDS, num_shards * len(split_names))
        examples.set_int_custom_property(GZIP_LEVEL, level)
        examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
        examples_utils.set_file_format(
            examples,
            write_split.to_file_format_str(example_gen_pb2.FileFormat.FORMAT_TFRECORDS_GZIP),
        )


def _options(exec_properties) -> tuple[dict, str, str, list[str]]:
    """(custom_config options, image format, bad-image policy, class names), checked."""
    options = custom_struct(exec_properties)
    image_format = str(options.get("image_format") or "encoded")
    bad_images = str(options.get("bad_images") or "fail")
    class_names = [str(c) for c in options.get("class_names") or []]
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, not {image_format!r}")
    if bad_images not in BAD_IMAGE_POLICIES:
        raise ValueError(f"bad_images must be one of {BAD_IMAGE_POLICIES}, not {bad_images!r}")
    if not class_names:
        raise ValueError("ImageExampleGen needs class_names (the label folder names)")
    return options, image_format, bad_images, class_names


def _split_configs(exec_properties) -> tuple[example_gen_pb2.Input, example_gen_pb2.Output]:
    input_config, output_config = split_configs(exec_properties)
    if len(input_config.splits) != 1 or not output_config.split_config.splits:
        raise ValueError(
            "ImageExampleGen takes one input split and splits it by hash_buckets "
            "(output_config.split_config)"
        )
    return input_config, output_config


def _image_files(exec_properties, pattern: str, base: str) -> list[str]:
    """The span's image files. Layout checks before Beam starts: no files, or a
    folder that is no class, fail in a second with the path. Hidden files
    (.DS_Store, editor backups) and sub-folders are not images."""
    files = [
        f
        for f in resolved_files(exec_properties)
        if not os.path.basename(f).startswith(".") and not fileio.isdir(f)
    ]
    if not files:
        raise ImageInputError(
            f"no image files match {pattern} under {base}; "
            "expected span-<N>/<class>/<image>.png|jpg"
        )
    return files


def _sizing(exec_properties, options, files, image_format, output_config) -> tuple[int, int]:
    """(shards per split, GZIP level), from the configuration or estimated from one image."""
    raw_bytes = exec_properties.get(RAW_BYTES) or sum(fileio.stat(f).length for f in files)
    configured = int(options.get("num_shards") or 0)
    with fileio.open(files[0], "rb") as f:
        first = f.read()
    try:
        pixels, _ = decode(first)
        sample = image_example(first, pixels, 0, image_format)
    except ValueError:
        pixels, sample = None, b""
    # Raw pixels take H*W*C bytes whatever the file's compression: estimate from one image.
    estimate = raw_bytes
    if pixels is not None and image_format == "raw":
        estimate = pixels.size * len(files)
    configured_level = options.get("gzip_level")
    level = gzip_level(sample) if configured_level is None else int(configured_level)
    # One file per split per shard; sized so the largest split's files hold ~128 MB.
    buckets = [s.hash_buckets for s in output_config.split_config.splits]
    num_shards = shards_for(estimate * max(buckets) / sum(buckets), configured)
    return num_shards, level


def _raise_bad_images(bad: list[str], base: str) -> None:
    shown = "\n  ".join(bad[:20])
    more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
    raise ImageInputError(
        f"{len(bad)} image file(s) under {base} could not be decoded:\n  {shown}{more}\n"
        "Fix or remove them, or set bad_images='skip' in the dataset config to "
        "leave them out (they are then counted)."
    )


class ImageExampleGen(FileBasedExampleGen):
    DRIVER_CLASS = ContentFingerprintDriver


def image_example_gen(
    input_base: str,
    class_names: tuple[str, ...] | list[str],
    input_config: example_gen_pb2.Input | None = None,
    output_config: example_gen_pb2.Output | None = None,
    range_config: Any = None,
    *,
    version: int | None = None,
    expected_sha256: str | None = None,
    num_shards: int = 0,
    image_format: str = "encoded",
    bad_images: str = "fail",
    gzip_level: int | None = None,
) -> FileBasedExampleGen:
    """An ExampleGen over `input_base/span-<N>/<class>/*` image folders.

    Args:
      class_names: the label folder names; a file's label is its folder's index here.
      version: ingest this version of the span (default: the span's latest).
      expected_sha256: refuse input whose content SHA-256 is another (a named data version).
      num_shards: TFRecord files per output split; 0 sizes them for the data.
      image_format: "encoded" (the file's bytes) or "raw" (decoded uint8 pixels).
      bad_images: "fail" stops on an undecodable file; "skip" leaves it out and counts it.
      gzip_level: deflate level of the GZIP shards, 0 (stored) to 9; None picks
        0 or 1 from a sample record (`gzip_level`).
    """
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, not {image_format!r}")
    if bad_images not in BAD_IMAGE_POLICIES:
        raise ValueError(f"bad_images must be one of {BAD_IMAGE_POLICIES}, not {bad_images!r}")
    if not class_names:
        raise ValueError("class_names must list the label folder names")
    if gzip_level is not None and not 0 <= gzip_level <= 9:
        raise ValueError(f"gzip_level must be 0-9 or None, not {gzip_level!r}")
    options: dict[str, Any] = {
        "class_names": list(class_names),
        "num_shards": num_shards,
        "image_format": image_format,
        "bad_images": bad_images,
    }
    if version is not None:
        options["version"] = version
    if expected_sha256:
        options[EXPECTED_SHA256] = expected_sha256
    if gzip_level is not None:
        options["gzip_level"] = gzip_level
    return example_gen_node(
        ImageExampleGen,
        Executor,
        COMPONENT_ID,
        options,
        input_base=input_base,
        input_config=input_config,
        output_config=output_config,
        range_config=range_config,
    )
