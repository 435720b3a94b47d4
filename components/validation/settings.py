"""The gate's thresholds file (validation.yaml): drift and skew thresholds, warn-only kinds,
and the image checks' thresholds."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import yaml
from tensorflow_metadata.proto.v0 import anomalies_pb2

from components.validation.findings import KINDS


class ValidationConfigError(ValueError):
    """The thresholds file is malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class Thresholds:
    """Default thresholds per feature kind, and per-feature overrides (None = not compared)."""

    categorical: float = 0.1
    numeric: float = 0.15
    features: Mapping[str, float | None] = field(default_factory=dict)

    def for_feature(self, name: str, categorical: bool) -> float | None:
        if name in self.features:
            return self.features[name]
        return self.categorical if categorical else self.numeric


@dataclass(frozen=True)
class ImageThresholds:
    """The image checks' thresholds (components/validation/image_checks.py), each in (0, 1]."""

    shrink_ratio: float = 0.7  # median height or width below this x the previous span's blocks
    grey_shift: float = 0.5  # grey share up by this much blocks
    format_shift: float = 0.5  # a format's share moving this much warns
    bytes_ratio: float = 0.4  # mean file size below this x, at a similar size, warns


@dataclass(frozen=True)
class ValidationSettings:
    drift: Thresholds = Thresholds()
    skew: Thresholds = Thresholds()
    # Anomaly kinds (schema/drift/skew) or TFDV anomaly type names that only warn.
    warn_only: tuple[str, ...] = ()
    # Date and timestamp columns -> their format (the dataset file's), checked per span.
    date_formats: Mapping[str, str] = field(default_factory=dict)
    images: ImageThresholds = ImageThresholds()

    def to_json(self) -> str:
        raw = asdict(self)
        if not raw["date_formats"]:  # datasets without dates keep their cache key
            del raw["date_formats"]
        if self.images == ImageThresholds():  # so do files without (or with default) `images:`
            del raw["images"]
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ValidationSettings:
        raw = json.loads(text)
        return cls(
            drift=Thresholds(**raw["drift"]),
            skew=Thresholds(**raw["skew"]),
            warn_only=tuple(raw.get("warn_only", ())),
            date_formats=dict(raw.get("date_formats") or {}),
            images=ImageThresholds(**raw.get("images", {})),
        )

    def with_warn_only(self, kinds: Iterable[str]) -> ValidationSettings:
        merged = tuple(dict.fromkeys([*self.warn_only, *kinds]))
        check_warn_only(merged, "--warn-only")
        return replace(self, warn_only=merged)


def check_warn_only(kinds: Sequence[str], where: str) -> None:
    known = set(KINDS) | set(anomalies_pb2.AnomalyInfo.Type.keys())
    # `kind:feature` (e.g. drift:height) downgrades one feature's findings of that kind.
    unknown = [k for k in kinds if k not in known and k.partition(":")[0] not in KINDS]
    unknown += [k for k in kinds if k.partition(":")[0] in KINDS and k.endswith(":")]
    if unknown:
        raise ValidationConfigError(
            f"{where}: unknown anomaly kind(s) {unknown}; use one of {list(KINDS)}, "
            "a TFDV anomaly type such as ENUM_TYPE_UNEXPECTED_STRING_VALUES, "
            "or kind:feature such as drift:height"
        )


def _number(value: Any, where: str) -> float | None:
    # YAML reads a bare `off` as False.
    if value is False or value is None or (isinstance(value, str) and value.lower() == "off"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValidationConfigError(f"{where}: expected a number in [0, 1] or `off`, got {value!r}")
    return float(value)


def _thresholds(raw: Any, where: str) -> Thresholds:
    if raw is None:
        return Thresholds()
    if not isinstance(raw, dict):
        raise ValidationConfigError(f"{where}: expected a mapping, got {raw!r}")
    unknown = set(raw) - {"categorical", "numeric", "features"}
    if unknown:
        raise ValidationConfigError(f"{where}: unknown key(s) {sorted(unknown)}")
    default = Thresholds()
    features = raw.get("features") or {}
    if not isinstance(features, dict):
        raise ValidationConfigError(f"{where}.features: expected a mapping of feature: threshold")
    categorical = _number(raw.get("categorical", default.categorical), f"{where}.categorical")
    numeric = _number(raw.get("numeric", default.numeric), f"{where}.numeric")
    if categorical is None or numeric is None:
        raise ValidationConfigError(f"{where}: default thresholds cannot be `off`")
    return Thresholds(
        categorical=categorical,
        numeric=numeric,
        features={str(k): _number(v, f"{where}.features.{k}") for k, v in features.items()},
    )


def _images(raw: Any, where: str) -> ImageThresholds:
    if raw is None:
        return ImageThresholds()
    if not isinstance(raw, dict):
        raise ValidationConfigError(f"{where}: expected a mapping, got {raw!r}")
    names = [f.name for f in fields(ImageThresholds)]
    unknown = set(raw) - set(names)
    if unknown:
        raise ValidationConfigError(f"{where}: unknown key(s) {sorted(unknown)}; use {names}")
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise ValidationConfigError(
                f"{where}.{key}: expected a number in (0, 1], got {value!r}"
            )
    return ImageThresholds(**{k: float(v) for k, v in raw.items()})


def load_settings(path: str) -> ValidationSettings:
    """Reads a validation.yaml (see schema/taxi/validation.yaml)."""
    try:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
    except OSError as e:
        raise ValidationConfigError(f"cannot read thresholds file {path}: {e}") from e
    except yaml.YAMLError as e:
        raise ValidationConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise ValidationConfigError(f"{path}: expected a mapping with drift/skew/warn_only/images")
    unknown = set(raw) - {"drift", "skew", "warn_only", "images"}
    if unknown:
        raise ValidationConfigError(f"{path}: unknown key(s) {sorted(unknown)}")
    warn_only = tuple(str(k) for k in (raw.get("warn_only") or ()))
    check_warn_only(warn_only, f"{path}: warn_only")
    return ValidationSettings(
        drift=_thresholds(raw.get("drift"), f"{path}: drift"),
        skew=_thresholds(raw.get("skew"), f"{path}: skew"),
        warn_only=warn_only,
        images=_images(raw.get("images"), f"{path}: images"),
    )
