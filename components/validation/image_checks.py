"""Gate checks for image datasets, from the statistics StatisticsGen already computed.

ImageExampleGen stores, per image, its encoded bytes (`image`), `label`,
`height`, `width`, `channels` and, when the ingest records it, `format`
(b"jpeg", b"png", b"gif", b"bmp"). Everything here is read from TFDV's
statistics of those stored fields: no image is decoded again. With
`image_domain {}` on `image` in the schema, TFDV keeps byte lengths (mean,
min, max) for it instead of counting every (distinct) encoded file as a
category.

`summarize` turns one split's statistics into an `ImageSummary` (count,
median/min/max height and width, share of grey images, formats, mean
encoded bytes); `image_findings` compares this span's with the previous
span's and reports, each naming what changed from what to what:

- IMAGE_SIZE_SHRANK (blocks): the median height or width fell below
  `shrink_ratio` of the previous span's. The transform upsamples them to the
  model size, so the model would see blurrier images than it learned from.
- IMAGE_GRAYSCALE (blocks): the share of grey images (1 or 2 channels) rose
  by `grey_shift` or more. A colour camera switched to grey, or an export
  dropped colour: the model's colour cues are gone.
- IMAGE_FORMAT_CHANGED (warns): the formats' shares moved by `format_shift`
  or more (e.g. PNG to JPEG: compression artefacts the model has not seen).
- IMAGE_BYTES_SHRANK (warns): the mean encoded size per image fell below
  `bytes_ratio` of the previous span's at a similar size: heavier compression.

The thresholds come from the thresholds file's `images:` mapping
(`ImageThresholds` in settings.py: 0.7, 0.5, 0.5 and 0.4 by default).

Larger images or grey turning to colour are not findings: the transform
resizes and converts them without losing what the model learned from (TFDV's
own drift measure on height, width and channels still reports them). Each
finding is a drift finding on a feature named `image.<what>`, so a dataset's
thresholds file can downgrade one to a warning (`warn_only: [drift:image.size]`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tensorflow_metadata.proto.v0 import statistics_pb2

from components.validation.findings import BLOCK, COMPARED_SPLIT, DRIFT, WARN, Finding
from components.validation.settings import ImageThresholds

IMAGE, HEIGHT, WIDTH, CHANNELS, FORMAT = "image", "height", "width", "channels", "format"
REQUIRED = (IMAGE, HEIGHT, WIDTH, CHANNELS)

DEFAULTS = ImageThresholds()
SHRINK_RATIO = DEFAULTS.shrink_ratio
GREY_SHIFT = DEFAULTS.grey_shift
FORMAT_SHIFT = DEFAULTS.format_shift
BYTES_RATIO = DEFAULTS.bytes_ratio

SIZE_SHRANK = "IMAGE_SIZE_SHRANK"
GRAYSCALE = "IMAGE_GRAYSCALE"
FORMAT_CHANGED = "IMAGE_FORMAT_CHANGED"
BYTES_SHRANK = "IMAGE_BYTES_SHRANK"
L_INFTY_SHARE = "largest share change"


@dataclass(frozen=True)
class Dimension:
    """A numeric stored field over a split: median, min, max, mean."""

    median: float
    low: float
    high: float
    mean: float


@dataclass(frozen=True)
class ImageSummary:
    """One split's images, from their stored fields."""

    count: int
    height: Dimension
    width: Dimension
    channels: Dimension
    grey_share: float  # images with 1 or 2 channels (grey, grey + alpha)
    formats: Mapping[str, float] = field(default_factory=dict)  # format -> share; {} if unknown
    mean_bytes: float | None = None  # mean encoded bytes per image; None if not recorded

    def line(self) -> str:
        """`1,797 images, 8x8 px median (8-8 x 8-8), grey 100%, png 100%, 0.1 KB mean`."""
        h, w = self.height, self.width
        parts = [
            f"{self.count:,} images",
            f"{h.median:g}x{w.median:g} px median ({h.low:g}-{h.high:g} x {w.low:g}-{w.high:g})",
            f"grey {self.grey_share:.0%}",
        ]
        if self.formats:
            parts.append(", ".join(f"{k} {v:.0%}" for k, v in _by_share(self.formats)))
        if self.mean_bytes is not None:
            parts.append(f"{self.mean_bytes / 1024:.1f} KB mean")
        return ", ".join(parts)


def _by_share(shares: Mapping[str, float]) -> list[tuple[str, float]]:
    return sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))


def _features(stats: statistics_pb2.DatasetFeatureStatisticsList) -> dict[str, Any]:
    if not stats.datasets:
        return {}
    return {".".join(f.path.step) or f.name: f for f in stats.datasets[0].features}


def _dimension(num: statistics_pb2.NumericStatistics) -> Dimension:
    return Dimension(median=num.median, low=num.min, high=num.max, mean=num.mean)


def _grey_share(num: statistics_pb2.NumericStatistics) -> float:
    """Share of values 1 or 2, from the standard histogram (channels are 1-4)."""
    total = num.common_stats.num_non_missing
    if not total:
        return 0.0
    if num.min == num.max:  # one value: TFDV may write no or a degenerate histogram
        return 1.0 if num.min <= 2 else 0.0
    for histogram in num.histograms:
        if histogram.type == statistics_pb2.Histogram.STANDARD:
            grey = sum(
                b.sample_count for b in histogram.buckets if (b.low_value + b.high_value) / 2 < 2.5
            )
            return min(1.0, grey / total)
    return 1.0 if num.median <= 2 else 0.0


def _formats(feature) -> dict[str, float]:
    if feature is None or not feature.HasField("string_stats"):
        return {}
    s = feature.string_stats
    total = s.common_stats.num_non_missing
    if not total:
        return {}
    counts = {b.label: b.sample_count for b in s.rank_histogram.buckets} or {
        v.value: v.frequency for v in s.top_values
    }
    return {str(k).lower(): float(n) / total for k, n in counts.items()}


def _mean_bytes(feature) -> float | None:
    if feature.HasField("bytes_stats"):
        return feature.bytes_stats.avg_num_bytes
    if feature.HasField("string_stats") and feature.string_stats.avg_length:
        return feature.string_stats.avg_length
    return None


def summarize(stats: statistics_pb2.DatasetFeatureStatisticsList) -> ImageSummary | None:
    """The split's images, or None when its examples are not images (no image, height,
    width and channels fields: a tabular dataset)."""
    features = _features(stats)
    if any(name not in features for name in REQUIRED):
        return None
    numeric = {name: features[name].num_stats for name in (HEIGHT, WIDTH, CHANNELS)}
    if not all(features[name].HasField("num_stats") for name in numeric):
        return None
    return ImageSummary(
        count=int(numeric[HEIGHT].common_stats.num_non_missing),
        height=_dimension(numeric[HEIGHT]),
        width=_dimension(numeric[WIDTH]),
        channels=_dimension(numeric[CHANNELS]),
        grey_share=_grey_share(numeric[CHANNELS]),
        formats=_formats(features.get(FORMAT)),
        mean_bytes=_mean_bytes(features[IMAGE]),
    )


def _finding(what: str, anomaly: str, description: str, where: str, severity: str, **measured):
    return Finding(
        DRIFT, f"{IMAGE}.{what}", anomaly, description, where=where, severity=severity, **measured
    )


def _size_findings(
    now: ImageSummary, before: ImageSummary, where: str, limits: ImageThresholds
) -> list[Finding]:
    ratios = {
        dim: getattr(now, dim).median / getattr(before, dim).median
        for dim in (HEIGHT, WIDTH)
        if getattr(before, dim).median > 0
    }
    if not ratios or min(ratios.values()) >= limits.shrink_ratio:
        return []
    smallest = min(ratios.values())
    return [
        _finding(
            "size",
            SIZE_SHRANK,
            f"median image size {before.height.median:g}x{before.width.median:g} -> "
            f"{now.height.median:g}x{now.width.median:g} px (height x{ratios.get(HEIGHT, 1):.2f}, "
            f"width x{ratios.get(WIDTH, 1):.2f}): smaller images are upsampled to the model "
            "size, blurrier than the images the model learned from",
            where,
            BLOCK,
            measured=smallest,
            threshold=limits.shrink_ratio,
            measure="median size ratio",
            op="<",
        )
    ]


def _grey_findings(
    now: ImageSummary, before: ImageSummary, where: str, limits: ImageThresholds
) -> list[Finding]:
    shift = now.grey_share - before.grey_share
    if shift < limits.grey_shift:
        return []
    return [
        _finding(
            "channels",
            GRAYSCALE,
            f"grey images (1-2 channels) {before.grey_share:.0%} -> {now.grey_share:.0%} of "
            f"the span (mean channels {before.channels.mean:.2f} -> {now.channels.mean:.2f}): "
            "the images lost their colour",
            where,
            BLOCK,
            measured=shift,
            threshold=limits.grey_shift,
            measure="grey share increase",
            op=">=",
        )
    ]


def _format_findings(
    now: ImageSummary, before: ImageSummary, where: str, limits: ImageThresholds
) -> list[Finding]:
    if not now.formats or not before.formats:
        return []
    names = set(now.formats) | set(before.formats)
    shift = max(abs(now.formats.get(k, 0.0) - before.formats.get(k, 0.0)) for k in names)
    if shift < limits.format_shift:
        return []

    def mix(shares):
        return ", ".join(f"{k} {v:.0%}" for k, v in _by_share(shares))

    return [
        _finding(
            FORMAT,
            FORMAT_CHANGED,
            f"image formats {mix(before.formats)} -> {mix(now.formats)}",
            where,
            WARN,
            measured=shift,
            threshold=limits.format_shift,
            measure=L_INFTY_SHARE,
            op=">=",
        )
    ]


def _bytes_findings(
    now: ImageSummary, before: ImageSummary, where: str, limits: ImageThresholds
) -> list[Finding]:
    if not now.mean_bytes or not before.mean_bytes:
        return []
    ratio = now.mean_bytes / before.mean_bytes
    # Smaller images are smaller files: that is the size finding's business.
    pixels_ratio = (now.height.mean * now.width.mean) / max(
        before.height.mean * before.width.mean, 1.0
    )
    if ratio >= limits.bytes_ratio or pixels_ratio < limits.shrink_ratio**2:
        return []
    return [
        _finding(
            "bytes",
            BYTES_SHRANK,
            f"mean encoded size {before.mean_bytes / 1024:.1f} KB -> "
            f"{now.mean_bytes / 1024:.1f} KB per image (x{ratio:.2f}) at a similar size: "
            "heavier compression",
            where,
            WARN,
            measured=ratio,
            threshold=limits.bytes_ratio,
            measure="mean bytes ratio",
            op="<",
        )
    ]


def image_findings(
    current: statistics_pb2.DatasetFeatureStatisticsList,
    baseline: statistics_pb2.DatasetFeatureStatisticsList | None,
    where: str,
    limits: ImageThresholds = DEFAULTS,
) -> list[Finding]:
    """This span's images against the previous span's: shrunk, grey, new format, compressed,
    by the thresholds file's `images:` limits (the defaults when it has none)."""
    now = summarize(current)
    before = summarize(baseline) if baseline is not None else None
    if now is None or before is None or not now.count or not before.count:
        return []
    return [
        *_size_findings(now, before, where, limits),
        *_grey_findings(now, before, where, limits),
        *_format_findings(now, before, where, limits),
        *_bytes_findings(now, before, where, limits),
    ]


def gate_findings(
    current: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList],
    baseline: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList] | None,
    *,
    current_span: int | None,
    baseline_span: int | None,
    limits: ImageThresholds = DEFAULTS,
) -> tuple[list[Finding], list[str]]:
    """The gate's image findings and notes (a summary line per compared span), for
    components/validation/gate.py; ([], []) for datasets that are not images."""
    compared = current.get(COMPARED_SPLIT) or next(iter(current.values()))
    now = summarize(compared)
    if now is None:
        return [], []
    notes = [f"images: span {current_span} {COMPARED_SPLIT} split: {now.line()}"]
    if not baseline:
        return [], notes
    previous = baseline.get(COMPARED_SPLIT) or next(iter(baseline.values()))
    before_name = "the previous run's span" if baseline_span is None else f"span {baseline_span}"
    before = summarize(previous)
    if before is not None:
        notes.append(f"images: {before_name} {COMPARED_SPLIT} split: {before.line()}")
    where = f"span {current_span} vs {before_name}, {COMPARED_SPLIT} split"
    return image_findings(compared, previous, where, limits), notes
