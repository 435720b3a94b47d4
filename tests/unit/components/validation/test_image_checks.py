"""Image statistics and drift (components/validation/image_checks.py) on hand-made examples.

Statistics are TFDV's, computed in memory from rows shaped like ImageExampleGen's
examples (encoded bytes, label, height, width, channels, and `format` when the
ingest records it) with the digits schema, as StatisticsGen computes them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from components.validation import image_checks as ic
from components.validation.checks import evaluate
from components.validation.findings import BLOCK, DRIFT, PASS, WARN
from components.validation.schema_importer import load_schema
from components.validation.settings import ImageThresholds, load_settings
from pipeline.datasets import DATASETS

DIGITS = DATASETS["digits"]


@pytest.fixture(scope="module")
def schema() -> schema_pb2.Schema:
    return load_schema(DIGITS.schema_file)


def _stats(schema, n=200, size=64, channels=3, formats=("jpeg",), nbytes=4000, seed=0):
    """Statistics of `n` images; size, channels, formats and byte lengths cycle per image."""
    from tensorflow_data_validation.statistics import stats_impl, stats_options

    rng = np.random.default_rng(seed)
    sizes = np.resize(np.atleast_1d(size), n)
    chans = np.resize(np.atleast_1d(channels), n)
    lengths = rng.integers(int(nbytes * 0.8), int(nbytes * 1.2), n)
    columns = {
        "image": pa.array([[bytes([i % 256]) * int(k)] for i, k in enumerate(lengths)]),
        "label": pa.array([[i % 10] for i in range(n)]),
        "height": pa.array([[int(s)] for s in sizes]),
        "width": pa.array([[int(s)] for s in sizes]),
        "channels": pa.array([[int(c)] for c in chans]),
    }
    if formats:
        columns["format"] = pa.array([[formats[i % len(formats)].encode()] for i in range(n)])
    batch = pa.RecordBatch.from_arrays(list(columns.values()), list(columns))
    return stats_impl.generate_statistics_in_memory(
        batch, stats_options.StatsOptions(schema=schema)
    )


@pytest.fixture(scope="module")
def photos(schema):
    return _stats(schema)


def test_summary_reads_the_stored_fields(schema):
    stats = _stats(schema, n=100, size=[64, 32], channels=[3, 3, 3, 1], formats=("jpeg", "png"))
    s = ic.summarize(stats)
    assert s.count == 100
    assert (s.height.low, s.height.high, s.width.low, s.width.high) == (32, 64, 32, 64)
    assert s.grey_share == pytest.approx(0.25, abs=0.02)
    assert s.formats == {"jpeg": 0.5, "png": 0.5}
    assert 3200 <= s.mean_bytes <= 4800
    line = s.line()
    assert "100 images" in line and "grey 25%" in line and "jpeg 50%, png 50%" in line


def test_image_domain_keeps_byte_lengths_not_the_files(photos):
    [image] = [f for f in photos.datasets[0].features if f.path.step == ["image"]]
    assert image.HasField("bytes_stats") and not image.HasField("string_stats")
    assert 3200 <= image.bytes_stats.avg_num_bytes <= 4800


def test_without_format_and_for_tables(schema):
    s = ic.summarize(_stats(schema, formats=()))
    assert s.formats == {} and "jpeg" not in s.line()
    table = statistics_pb2.DatasetFeatureStatisticsList()
    table.datasets.add().features.add().path.step.append("fare")
    assert ic.summarize(table) is None
    assert ic.gate_findings(
        {"train": table}, {"train": table}, current_span=2, baseline_span=1
    ) == (
        [],
        [],
    )


def test_same_kind_of_images_pass(schema, photos):
    again = _stats(schema, seed=1, size=[64, 60, 68])
    assert ic.image_findings(again, photos, "span 2 vs span 1") == []


def test_half_size_blocks_naming_from_and_to(schema, photos):
    [f] = ic.image_findings(_stats(schema, size=32, nbytes=1000), photos, "span 2 vs span 1")
    assert (f.kind, f.feature, f.anomaly, f.severity) == (
        DRIFT,
        "image.size",
        ic.SIZE_SHRANK,
        BLOCK,
    )
    assert "64x64 -> 32x32 px" in f.description and f.measured == pytest.approx(0.5)
    assert f.threshold == ic.SHRINK_RATIO and "< threshold 0.7" in f.line()


def test_a_lower_shrink_ratio_lets_a_half_size_span_pass(schema, photos):
    half = _stats(schema, size=32, nbytes=1000)
    lenient = ImageThresholds(shrink_ratio=0.4)
    # No longer shrunk, so at a similar size: its files, 4x fewer pixels, are 4x smaller.
    assert [f.anomaly for f in ic.image_findings(half, photos, "w", lenient)] == [ic.BYTES_SHRANK]
    quarter = _stats(schema, size=16, nbytes=250)
    [f] = ic.image_findings(quarter, photos, "w", lenient)
    assert f.anomaly == ic.SIZE_SHRANK and "64x64 -> 16x16 px" in f.description
    assert f.threshold == 0.4 and "< threshold 0.4" in f.line()


def test_custom_shifts_and_bytes_ratio_change_the_decision(schema, photos):
    grey = _stats(schema, channels=[1, 1, 1, 3])  # grey share up by 75 points
    assert [f.anomaly for f in ic.image_findings(grey, photos, "w")] == [ic.GRAYSCALE]
    assert ic.image_findings(grey, photos, "w", ImageThresholds(grey_shift=0.9)) == []
    png = _stats(schema, formats=("png",))
    assert ic.image_findings(png, photos, "w", ImageThresholds(format_shift=1.0)) != []
    mixed = _stats(schema, formats=("jpeg", "jpeg", "png"))  # jpeg 100% -> 67%
    assert ic.image_findings(mixed, photos, "w") == []
    [f] = ic.image_findings(mixed, photos, "w", ImageThresholds(format_shift=0.3))
    assert f.anomaly == ic.FORMAT_CHANGED and "jpeg 100% -> jpeg 67%, png 33%" in f.description
    lighter = _stats(schema, nbytes=2400)  # x0.6
    assert ic.image_findings(lighter, photos, "w") == []
    [f] = ic.image_findings(lighter, photos, "w", ImageThresholds(bytes_ratio=0.8))
    assert f.anomaly == ic.BYTES_SHRANK and f.threshold == 0.8


def test_suddenly_grey_blocks(schema, photos):
    [f] = ic.image_findings(_stats(schema, channels=1), photos, "w")
    assert (f.feature, f.anomaly, f.severity) == ("image.channels", ic.GRAYSCALE, BLOCK)
    assert "0% -> 100%" in f.description and "mean channels 3.00 -> 1.00" in f.description


def test_larger_or_colour_images_are_no_finding(schema):
    small_grey = _stats(schema, size=8, channels=1, nbytes=100)
    assert ic.image_findings(_stats(schema, size=24, channels=3), small_grey, "w") == []


def test_format_and_compression_only_warn(schema, photos):
    found = ic.image_findings(_stats(schema, formats=("png",)), photos, "w")
    assert [(f.anomaly, f.severity) for f in found] == [(ic.FORMAT_CHANGED, WARN)]
    assert "jpeg 100% -> png 100%" in found[0].description
    [f] = ic.image_findings(_stats(schema, nbytes=1000), photos, "w")
    assert (f.anomaly, f.severity) == (ic.BYTES_SHRANK, WARN) and "x0.2" in f.description


def test_the_gate_blocks_a_grey_half_size_span(schema, photos):
    """Through the gate's evaluate, as components/validation/gate.py calls it."""
    # The digits schema declares `format` (ImageExampleGen writes it): both spans carry it.
    settings = load_settings(DIGITS.validation_file)
    before = {"train": _stats(schema, formats=("png",))}
    current = {"train": _stats(schema, size=32, channels=1, nbytes=500, formats=("png",))}
    found, notes = ic.gate_findings(current, before, current_span=2, baseline_span=1)
    assert any("span 2 train split: 200 images, 32x32 px" in n for n in notes)
    result = evaluate(
        current,
        schema,
        settings,
        baseline=before,
        current_span=2,
        baseline_span=1,
        extra_findings=found,
    )
    assert result.decision == BLOCK
    assert {f.feature for f in result.blocking} == {"image.size", "image.channels"}
    message = result.message()
    assert "64x64 -> 32x32 px" in message and "grey images (1-2 channels) 0% -> 100%" in message
    # TFDV's own drift measures of height/width/channels stay warnings (warn_only).
    assert {f.feature for f in result.warnings} >= {"height", "channels"}
    # The same span compared with itself passes.
    same, _ = ic.gate_findings(current, current, current_span=2, baseline_span=2)
    assert same == []
    assert evaluate(current, schema, settings, extra_findings=same).decision == PASS


def test_the_thresholds_file_sets_the_gate_image_limits(schema, tmp_path):
    """A dataset's `images: {shrink_ratio: 0.4}` reaches gate_findings as gate.py passes it."""
    path = tmp_path / "validation.yaml"
    path.write_text(Path(DIGITS.validation_file).read_text() + "images:\n  shrink_ratio: 0.4\n")
    lenient = load_settings(str(path))
    before = {"train": _stats(schema, formats=("png",))}
    current = {"train": _stats(schema, size=32, nbytes=1000, formats=("png",))}
    # Lenient: only warnings remain (TFDV's height/width drift, warn_only; the smaller files).
    for settings, decision in ((load_settings(DIGITS.validation_file), BLOCK), (lenient, WARN)):
        found, _ = ic.gate_findings(
            current, before, current_span=2, baseline_span=1, limits=settings.images
        )
        result = evaluate(current, schema, settings, baseline=before, extra_findings=found)
        assert result.decision == decision
        assert ("image.size" in {f.feature for f in result.blocking}) == (decision == BLOCK)


def test_warn_only_downgrades_an_image_finding(schema):
    settings = load_settings(DIGITS.validation_file).with_warn_only(["drift:image.size"])
    before = {"train": _stats(schema, formats=("png",))}
    current = {"train": _stats(schema, size=32, formats=("png",))}
    found, _ = ic.gate_findings(current, before, current_span=2, baseline_span=1)
    result = evaluate(current, schema, settings, baseline=before, extra_findings=found)
    assert result.decision == WARN and "image.size" in {f.feature for f in result.warnings}


def test_report_shows_the_byte_lengths_of_images(schema, photos):
    from components.validation.html_report import render_report

    settings = load_settings(DIGITS.validation_file)
    result = evaluate({"train": photos}, schema, settings)
    html = render_report(
        result, current={"train": photos}, baseline=None, serving=None, settings=settings, title="t"
    )
    assert "<td>image</td><td>bytes</td><td class=num>200</td>" in html and "bytes min" in html
