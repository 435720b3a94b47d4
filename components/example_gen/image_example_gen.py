"""ImageExampleGen: folders of images (`span-<N>/<label>/*`) to GZIP TFRecord splits.

The component is TFX's FileBasedExampleGen with the project's content-fingerprint
driver (`components.example_gen.driver.ContentFingerprintDriver`), so spans,
versions, `{SPAN}`/`{VERSION}` patterns, range configs and the cache behave
exactly as for CSV data. The executor, one Beam pipeline, writes one
`tf.train.Example` per image file (`image_decode`: image, label, height,
width, channels, format); the file's encoded bytes are stored as they are.

- Listing streams (`image_listing`): class folders, then each folder's files
  from a directory iterator inside the pipeline; no step holds every path or
  more than a few open files.
- Splits are decided by a SHA-256 of the image's *bytes* (bucketed like TFX's
  `hash_buckets`): the same picture lands in the same split whatever its
  folder, file name or span, so a duplicate cannot leak from train into eval.
- Shards are cut by bytes (`image_shards`): ~128 MB each (`image.shard_mb`),
  at least ten per worker when the data allows, none under 16 MB.
- Every file is decoded once. One that does not decode is "bad": with
  `on_bad_image: skip` (default) it is left out and named with its reason in
  `.image_ingest.json` beside the splits, the Examples artifact's custom
  properties and the run summary; with `fail` the run stops with the list and
  publishes nothing. OS files (`.DS_Store`, `Thumbs.db`, dot-files) are
  "ignored": left out and counted, not bad.
- Throughput (images/s, MB/s) is logged per shard, as progress, and for the
  whole ingest, and recorded in the report file.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import apache_beam as beam
from absl import logging
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
    split_configs,
)
from components.example_gen.image_decode import decode, image_example
from components.example_gen.image_listing import (
    IGNORED,
    ImageInputError,
    ListFolder,
    class_folders,
    first_image_files,
    folder_files,
)
from components.example_gen.image_shards import (
    DEFAULT_SHARD_MB,
    INCOMPLETE,
    WriteShard,
    gzip_level,
    shard_of,
    shards_for,
)

COMPONENT_ID = "ImageExampleGen"
IMAGE_FORMATS = ("encoded", "raw")
BAD_IMAGE_POLICIES = ("skip", "fail")

# Custom properties of the Examples artifact (besides span, version, fingerprint...).
IMAGE_COUNT = "image_count"
CLASS_COUNTS = "class_counts"  # JSON: {split: {class name: examples}}
SKIPPED_IMAGES = "skipped_images"  # bad files left out (on_bad_image: skip)
BAD_IMAGES = "bad_images"  # JSON list of "path: reason", the first MAX_LISTED
IGNORED_FILES = "ignored_files"  # OS files (.DS_Store, Thumbs.db, dot-files) left out
IMAGE_FORMATS_SEEN = "image_formats"  # JSON: {format: images}
IMAGE_FORMAT = "image_format"
GZIP_LEVEL = "gzip_level"
INGEST_SECONDS = "ingest_seconds"
IMAGES_PER_SECOND = "images_per_second"
MB_PER_SECOND = "mb_per_second"
REPORT_FILE = ".image_ingest.json"  # hidden: readers glob Split-*/, `verify` skips dot-files
MAX_LISTED = 100


def _gather(results: list[dict], ignored: list[str], path: str) -> None:
    """Every shard's counts and bad files, and the ignored files, into one report file."""
    counts: dict[tuple[int, int], int] = {}
    formats: dict[str, int] = {}
    for r in results:
        for key, n in r["counts"]:
            counts[tuple(key)] = counts.get(tuple(key), 0) + n
        for fmt, n in r["formats"].items():
            formats[fmt] = formats.get(fmt, 0) + n
    report = {
        "counts": sorted(counts.items()),
        "bad": sorted(b for r in results for b in r["bad"]),
        "ignored": sorted(ignored),
        "formats": dict(sorted(formats.items())),
        "bytes_read": sum(r["bytes"] for r in results),
        "shards": len(results),
    }
    with fileio.open(path, "w") as f:
        f.write(json.dumps(report))


def _workers(beam_args: list[str] | None) -> int:
    """Beam's worker processes, or in process the cores the shard writers' threads use."""
    for arg in beam_args or []:
        if arg.startswith("--direct_num_workers="):
            n = int(arg.split("=", 1)[1] or 0)
            if n > 1:
                return n
    return os.cpu_count() or 1


class Executor(base_beam_executor.BaseBeamExecutor):
    """Image folders -> split, sharded GZIP TFRecords of tf.Examples, in one Beam pipeline."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # TFX API
        self._log_startup(input_dict, output_dict, exec_properties)
        options, image_format, policy, class_names = _options(exec_properties)
        input_config, output_config = _split_configs(exec_properties)
        examples = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.EXAMPLES_KEY]
        )
        split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
        examples.split_names = artifact_utils.encode_split_names(split_names)
        base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        pattern = input_config.splits[0].pattern
        folders, ignored_above = class_folders(base, pattern, class_names)
        samples = first_image_files(folders)
        if not samples:
            raise ImageInputError(
                f"no image files match {pattern} under {base}; "
                "expected span-<N>/<class>/<image>.png|jpg"
            )
        cumulative: list[int] = []
        for s in output_config.split_config.splits:
            cumulative.append((cumulative[-1] if cumulative else 0) + s.hash_buckets)
        workers = _workers(self._beam_pipeline_args)
        num_shards, level = _sizing(
            exec_properties, options, folders, samples, image_format, output_config, workers
        )
        uris = [artifact_utils.get_split_uri([examples], name) for name in split_names]
        report_path = os.path.join(examples.uri, REPORT_FILE)
        started = time.perf_counter()
        self._run_pipeline(folders, pattern, num_shards, (image_format, cumulative, uris, level))
        report = self._finish_report(report_path, time.perf_counter() - started, ignored_above)
        bad = report["bad"]
        if bad and policy == "fail":
            # Nothing half-written stays behind: the artifact is not published
            # (the execution fails) and its split folders are removed.
            for uri in uris:
                if fileio.exists(uri):
                    fileio.rmtree(uri)
            _raise_bad_images(bad, base)
        _record(examples, report, split_names, class_names, base)
        examples.set_string_custom_property(IMAGE_FORMAT, image_format)
        examples.set_int_custom_property(TFRECORD_SHARDS, report["shards"] * len(split_names))
        examples.set_int_custom_property(GZIP_LEVEL, level)
        examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
        examples_utils.set_file_format(
            examples,
            write_split.to_file_format_str(example_gen_pb2.FileFormat.FORMAT_TFRECORDS_GZIP),
        )

    def _run_pipeline(self, folders, pattern: str, num_shards: int, writer_args) -> None:
        file_pattern = pattern.split("/")[-1]
        image_format, cumulative, uris, level = writer_args
        partial = os.path.join(os.path.dirname(uris[0]), REPORT_FILE + INCOMPLETE)
        with self._make_beam_pipeline() as pipeline:
            listed = (
                pipeline
                | "ClassFolders" >> beam.Create(folders)
                # One folder per bundle: large folders are listed in parallel.
                | "SpreadFolders" >> beam.Reshuffle()
                | "List" >> beam.ParDo(ListFolder(file_pattern)).with_outputs(IGNORED, main="files")
            )
            ignored = listed[IGNORED] | "GatherIgnored" >> beam.combiners.ToList()
            _ = (
                listed.files
                | "ToShards" >> beam.Map(lambda f, n: (shard_of(f[0], n), (f[0], f[1])), num_shards)
                | "GroupShards" >> beam.GroupByKey()
                | "ReadCheckWrite"
                >> beam.ParDo(WriteShard(image_format, cumulative, uris, num_shards, level))
                | "Gather" >> beam.combiners.ToList()
                | "Report"
                >> beam.Map(_gather, ignored=beam.pvalue.AsSingleton(ignored), path=partial)
            )

    def _finish_report(self, report_path: str, seconds: float, ignored_above: list[str]) -> dict:
        """The pipeline's report plus the ingest's throughput, published under its final name."""
        partial = report_path + INCOMPLETE
        with fileio.open(partial, "r") as f:
            report = json.loads(f.read())
        images = sum(n for _, n in report["counts"])
        report.update(
            ignored=sorted(report["ignored"] + ignored_above),
            seconds=round(seconds, 3),
            images_per_second=round(images / max(seconds, 1e-9), 1),
            mb_per_second=round(report["bytes_read"] / 1e6 / max(seconds, 1e-9), 2),
        )
        with fileio.open(partial, "w") as f:
            f.write(json.dumps(report, indent=1))
        fileio.rename(partial, report_path, overwrite=True)
        logging.info(
            "ImageExampleGen: %d images, %.1f MB in %.1fs (%.0f images/s, %.1f MB/s) in %d "
            "shard(s); %d bad file(s), %d non-image file(s) ignored",
            images, report["bytes_read"] / 1e6, seconds, report["images_per_second"],
            report["mb_per_second"], report["shards"], len(report["bad"]), len(report["ignored"]),
        )  # fmt: skip
        return report


def _record(examples, report: dict, split_names, class_names, base: str) -> None:
    """Counts per split and class, formats, bad and ignored files: custom properties."""
    per_split: dict[str, dict[str, int]] = {n: {} for n in split_names}
    for (split, label), n in report["counts"]:
        per_split[split_names[split]][class_names[label]] = n
    total = sum(sum(c.values()) for c in per_split.values())
    if total == 0:
        raise ImageInputError(
            f"no image under {base} could be decoded ({len(report['bad'])} bad file(s))"
        )
    examples.set_int_custom_property(IMAGE_COUNT, total)
    examples.set_string_custom_property(CLASS_COUNTS, json.dumps(per_split, sort_keys=True))
    examples.set_int_custom_property(SKIPPED_IMAGES, len(report["bad"]))
    examples.set_string_custom_property(BAD_IMAGES, json.dumps(report["bad"][:MAX_LISTED]))
    examples.set_int_custom_property(IGNORED_FILES, len(report["ignored"]))
    examples.set_string_custom_property(IMAGE_FORMATS_SEEN, json.dumps(report["formats"]))
    examples.set_float_custom_property(INGEST_SECONDS, report["seconds"])
    examples.set_float_custom_property(IMAGES_PER_SECOND, report["images_per_second"])
    examples.set_float_custom_property(MB_PER_SECOND, report["mb_per_second"])


def _options(exec_properties) -> tuple[dict, str, str, list[str]]:
    """(custom_config options, image format, bad-image policy, class names), checked."""
    options = custom_struct(exec_properties)
    image_format = str(options.get("image_format") or "encoded")
    # "bad_images" is what pipelines compiled before on_bad_image carried.
    policy = str(options.get("on_bad_image") or options.get("bad_images") or "skip")
    class_names = [str(c) for c in options.get("class_names") or []]
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, not {image_format!r}")
    if policy not in BAD_IMAGE_POLICIES:
        raise ValueError(f"on_bad_image must be one of {BAD_IMAGE_POLICIES}, not {policy!r}")
    if not class_names:
        raise ValueError("ImageExampleGen needs class_names (the label folder names)")
    return options, image_format, policy, class_names


def _split_configs(exec_properties) -> tuple[example_gen_pb2.Input, example_gen_pb2.Output]:
    input_config, output_config = split_configs(exec_properties)
    if len(input_config.splits) != 1 or not output_config.split_config.splits:
        raise ValueError(
            "ImageExampleGen takes one input split and splits it by hash_buckets "
            "(output_config.split_config)"
        )
    return input_config, output_config


def _sizing(exec_properties, options, folders, samples, image_format, output_config, workers):
    """(shards per split, GZIP level), from the configuration or estimated from a few images."""
    raw_bytes = exec_properties.get(RAW_BYTES)
    if raw_bytes is None:  # run without the driver (tests): one streamed pass of stats
        raw_bytes = sum(size for folder, _ in folders for _, size, _ in folder_files(folder))
    sample, sample_bytes, sample_pixels = b"", 0, 0
    for path in samples:
        with fileio.open(path, "rb") as f:
            data = f.read()
        try:
            pixels, fmt = decode(data)
        except ValueError:
            continue
        sample += image_example(data, pixels, 0, image_format, fmt)
        sample_bytes, sample_pixels = sample_bytes + len(data), sample_pixels + pixels.size
    # Raw pixels take H*W*C bytes whatever the file's compression.
    estimate = raw_bytes
    if image_format == "raw" and sample_bytes:
        estimate = raw_bytes * sample_pixels / sample_bytes
    configured_level = options.get("gzip_level")
    level = gzip_level(sample) if configured_level is None else int(configured_level)
    # One file per split per shard, sized for the largest split.
    buckets = [s.hash_buckets for s in output_config.split_config.splits]
    num_shards = shards_for(
        estimate * max(buckets) / sum(buckets),
        int(options.get("num_shards") or 0),
        workers=workers,
        shard_mb=float(options.get("shard_mb") or DEFAULT_SHARD_MB),
    )
    return num_shards, level


def _raise_bad_images(bad: list[str], base: str) -> None:
    shown = "\n  ".join(bad[:20])
    more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
    raise ImageInputError(
        f"{len(bad)} image file(s) under {base} could not be decoded:\n  {shown}{more}\n"
        "Fix or remove them, or set image.on_bad_image: skip in the dataset file to "
        "leave them out (they are then named in the run's report and counted)."
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
    on_bad_image: str = "skip",
    gzip_level: int | None = None,
    shard_mb: float = DEFAULT_SHARD_MB,
) -> FileBasedExampleGen:
    """An ExampleGen over `input_base/span-<N>/<class>/*` image folders.

    Args:
      class_names: the label folder names; a file's label is its folder's index here.
      version: ingest this version of the span (default: the span's latest).
      expected_sha256: refuse input whose content SHA-256 is another (a named data version).
      num_shards: TFRecord files per output split; 0 cuts them by bytes (`shard_mb`).
      image_format: "encoded" (the file's bytes) or "raw" (decoded uint8 pixels).
      on_bad_image: "skip" leaves an undecodable file out, named and counted; "fail" stops.
      gzip_level: deflate level of the GZIP shards, 0 (stored) to 9; None picks
        0 or 1 from a sample record (`gzip_level`).
      shard_mb: target shard size in MB (see `image_shards` for the rule).
    """
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, not {image_format!r}")
    if on_bad_image not in BAD_IMAGE_POLICIES:
        raise ValueError(f"on_bad_image must be one of {BAD_IMAGE_POLICIES}, not {on_bad_image!r}")
    if not class_names:
        raise ValueError("class_names must list the label folder names")
    if gzip_level is not None and not 0 <= gzip_level <= 9:
        raise ValueError(f"gzip_level must be 0-9 or None, not {gzip_level!r}")
    if not shard_mb > 0:
        raise ValueError(f"shard_mb must be a positive size in MB, not {shard_mb!r}")
    options: dict[str, Any] = {
        "class_names": list(class_names),
        "num_shards": num_shards,
        "image_format": image_format,
        "on_bad_image": on_bad_image,
        "shard_mb": shard_mb,
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
