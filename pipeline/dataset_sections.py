"""The sections of a dataset file, each read and checked on its own: `evaluation:`,
`slicing:`, the generic tabular trainer's keys (label, task, classes, features),
`batch_inference:`, `serving_log:`, `on_push:` and `alerts:`. Every bad value is a
DatasetFileError naming the file and the key. The file as a whole:
pipeline/datasets.py; `tuning:`: pipeline/dataset_tuning.py."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.validation.serving_log import WindowOptions
from pipeline import table_options
from pipeline.config import (
    PROJECT_ROOT,
    EvalThresholds,
    InferenceOptions,
    SliceOptions,
)

TASKS = ("binary", "multiclass", "regression")
TREATMENTS = ("zscore", "bucketize", "vocabulary", *table_options.TABLE_TREATMENTS)

_SLICING_KEYS = {"by", "buckets", "min_examples", "lower_bound", "upper_bound", "max_drop"}
ON_PUSH = ("champion", "challenger")
_ALERT_KEYS = {"webhook_env"}
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EVAL_KEYS = {"metric", "lower_bound", "upper_bound", "min_change", "extra_metrics", "per_class"}
FEATURE_KEYS = {"treatment", "buckets", "top_k", "oov_buckets"} | table_options.FEATURE_KEYS
_INFERENCE_KEYS = {"data_root", "key_columns", "in_pipeline", "batch_size"}


class DatasetFileError(ValueError):
    """A dataset file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class TabularOptions:
    """The generic tabular trainer's options (trainer/tabular), sent through custom_config."""

    label: str
    task: str
    # Classification: the label's values, in output order (binary: [negative, positive]).
    classes: tuple[str, ...] = ()
    # Feature name -> {"treatment": zscore|bucketize|vocabulary, "buckets", "top_k", "oov_buckets"}.
    features: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Table options (pipeline/table_options.py): rows without a usable label are dropped
    # by ExampleGen ("drop") or kept ("keep"); per-class loss weights of a classifier.
    unlabelled_rows: str = "drop"
    class_weights: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        options = {
            "label": self.label,
            "task": self.task,
            "classes": list(self.classes),
            "features": {k: dict(v) for k, v in self.features.items()},
        }
        if self.class_weights:
            options["class_weights"] = dict(self.class_weights)
        return options


def check_keys(raw: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise DatasetFileError(f"{where}: unknown key(s) {unknown}; known: {sorted(allowed)}")


def read_thresholds(raw: Any, where: str, task: str | None) -> EvalThresholds:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping of {sorted(_EVAL_KEYS)}")
    check_keys(raw, _EVAL_KEYS, where)
    defaults = EvalThresholds()
    if task == "regression":
        defaults = EvalThresholds(
            metric="RootMeanSquaredError", lower_bound=None, upper_bound=None, extra_metrics=()
        )
    elif task == "multiclass":
        defaults = EvalThresholds(metric="SparseCategoricalAccuracy", extra_metrics=())
    per_class = raw.get("per_class", False)
    if not isinstance(per_class, bool):
        raise DatasetFileError(f"{where}.per_class: expected true or false, not {per_class!r}")
    return EvalThresholds(
        per_class=per_class,
        metric=str(raw.get("metric", defaults.metric)),
        lower_bound=raw.get("lower_bound", defaults.lower_bound),
        upper_bound=raw.get("upper_bound", defaults.upper_bound),
        min_change=float(raw.get("min_change", defaults.min_change)),
        extra_metrics=tuple(raw.get("extra_metrics", defaults.extra_metrics) or ()),
    )


def _number(raw: dict, key: str, where: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DatasetFileError(f"{where}.{key}: expected a number, not {value!r}")
    return float(value)


def read_slicing(raw: Any, where: str) -> SliceOptions | None:
    """`slicing:` -> SliceOptions; every feature named must be a column of the schema
    (checked by the caller, which knows the columns)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping of {sorted(_SLICING_KEYS)}")
    check_keys(raw, _SLICING_KEYS, where)
    by_raw = raw.get("by") or []
    if not isinstance(by_raw, list) or not by_raw:
        raise DatasetFileError(
            f"{where}.by: a list of features to slice by, each a name or a list of names "
            "(crossed), e.g. [payment_type, [payment_type, trip_miles]]"
        )
    by: list[tuple[str, ...]] = []
    for i, item in enumerate(by_raw):
        names = tuple(str(n) for n in (item if isinstance(item, list) else [item]))
        if not names or len(set(names)) != len(names):
            raise DatasetFileError(f"{where}.by[{i}]: {item!r} must name distinct features")
        by.append(names)
    buckets_raw = raw.get("buckets") or {}
    if not isinstance(buckets_raw, dict):
        raise DatasetFileError(f"{where}.buckets: maps a numeric feature to its boundaries")
    buckets: dict[str, tuple[float, ...]] = {}
    for name, bounds in buckets_raw.items():
        if (
            not isinstance(bounds, list)
            or not bounds
            or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
            or list(bounds) != sorted(set(bounds))
        ):
            raise DatasetFileError(
                f"{where}.buckets.{name}: expected ascending distinct numbers, not {bounds!r}"
            )
        if not any(str(name) in names for names in by):
            raise DatasetFileError(f"{where}.buckets.{name}: {name!r} is not in `by`")
        buckets[str(name)] = tuple(float(b) for b in bounds)
    min_examples = raw.get("min_examples", 1)
    if isinstance(min_examples, bool) or not isinstance(min_examples, int) or min_examples < 1:
        raise DatasetFileError(f"{where}.min_examples: a whole number >= 1, not {min_examples!r}")
    max_drop = _number(raw, "max_drop", where)
    if max_drop is not None and max_drop < 0:
        raise DatasetFileError(f"{where}.max_drop: a drop is >= 0, not {max_drop}")
    return SliceOptions(
        by=tuple(by),
        buckets=buckets,
        min_examples=min_examples,
        lower_bound=_number(raw, "lower_bound", where),
        upper_bound=_number(raw, "upper_bound", where),
        max_drop=max_drop,
    )


def check_slice_features(slicing: SliceOptions | None, columns: set[str], where: str) -> None:
    for names in slicing.by if slicing else ():
        for name in names:
            if name not in columns:
                raise DatasetFileError(
                    f"{where}.by: {name!r} is not a column of the schema; columns: "
                    f"{sorted(columns)}"
                )


def schema_columns(schema_file: Path) -> set[str] | None:
    """Feature names of a curated schema (None when it cannot be read: checked later)."""
    try:
        text = schema_file.read_text(encoding="utf-8")
    except OSError:
        return None
    return set(re.findall(r'^\s*name:\s*"([^"]+)"', text, flags=re.MULTILINE))


def read_tabular(raw: dict, where: str) -> TabularOptions:
    label = raw.get("label")
    task = raw.get("task")
    if task not in TASKS:
        raise DatasetFileError(f"{where}: task must be one of {list(TASKS)}, not {task!r}")
    classes = tuple(str(c) for c in raw.get("classes") or ())
    if task != "regression" and len(classes) < 2:
        raise DatasetFileError(f"{where}: a {task} task needs `classes:` (the label's values)")
    if task == "binary" and len(classes) != 2:
        raise DatasetFileError(f"{where}: a binary task has 2 classes, not {len(classes)}")
    features = raw.get("features") or {}
    if not isinstance(features, dict) or not features:
        raise DatasetFileError(f"{where}: `features:` maps each feature to its treatment")
    exclude = raw.get("exclude") or []
    if not isinstance(exclude, list):
        raise DatasetFileError(f"{where}: exclude: a list of column names, not {exclude!r}")
    excluded = {str(e) for e in exclude}
    parsed: dict[str, dict[str, Any]] = {}
    for name, spec in features.items():
        if spec is not None and not isinstance(spec, (str, dict)):
            raise DatasetFileError(
                f"{where}: features.{name}: a treatment or a mapping, not {spec!r}"
            )
        spec = {"treatment": spec} if isinstance(spec, str) else dict(spec or {})
        check_keys(spec, FEATURE_KEYS, f"{where}: features.{name}")
        if spec.get("treatment") not in TREATMENTS:
            raise DatasetFileError(
                f"{where}: features.{name}.treatment must be one of {list(TREATMENTS)}, "
                f"not {spec.get('treatment')!r}"
            )
        if name == label:
            raise DatasetFileError(f"{where}: the label {label!r} cannot also be a feature")
        if name not in excluded:
            parsed[str(name)] = spec
    try:
        for name, spec in parsed.items():
            table_options.check_feature(name, spec, where)
        unlabelled = table_options.unlabelled_rows(raw, where)
        weights = table_options.class_weights(raw, where, task, classes)
    except table_options.TableOptionError as e:
        raise DatasetFileError(str(e)) from e
    return TabularOptions(
        label=str(label),
        task=task,
        classes=classes,
        features=parsed,
        unlabelled_rows=unlabelled,
        class_weights=weights,
    )


def read_inference(raw: Any, where: str, kind: str) -> InferenceOptions:
    """The `batch_inference:` mapping, every value checked here rather than mid-run."""
    if raw is None:
        return InferenceOptions()
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping of {sorted(_INFERENCE_KEYS)}")
    check_keys(raw, _INFERENCE_KEYS, where)
    if kind == "sequence":
        raise DatasetFileError(
            f"{where}: the pipeline's batch inference scores table rows; score an event "
            "table's spans with `tfxp infer` (one prediction per key)"
        )
    if kind != "tabular":
        raise DatasetFileError(
            f"{where}: batch inference scores CSV rows; an {kind} dataset has none"
        )
    keys = raw.get("key_columns", [])
    if (
        isinstance(keys, str)
        or not isinstance(keys, list)
        or not all(isinstance(k, str) and k.strip() for k in keys)
    ):
        raise DatasetFileError(
            f"{where}.key_columns: expected a list of column names, not {keys!r}"
        )
    if len(set(keys)) != len(keys):
        raise DatasetFileError(f"{where}.key_columns: {keys} names a column twice")
    reserved = sorted({"file", "line"} & set(keys))
    if reserved:
        raise DatasetFileError(
            f"{where}.key_columns: {reserved} clash with the output's own file and line columns"
        )
    in_pipeline = raw.get("in_pipeline", False)
    if not isinstance(in_pipeline, bool):
        raise DatasetFileError(f"{where}.in_pipeline: expected true or false, not {in_pipeline!r}")
    batch_size = raw.get("batch_size", InferenceOptions.batch_size)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise DatasetFileError(
            f"{where}.batch_size: expected a positive integer, not {batch_size!r}"
        )
    data_root = raw.get("data_root")
    if data_root is not None and (not isinstance(data_root, str) or not data_root.strip()):
        raise DatasetFileError(f"{where}.data_root: expected a folder path, not {data_root!r}")
    return InferenceOptions(
        data_root=resolve_path(data_root, PROJECT_ROOT) if data_root else None,
        key_columns=tuple(keys),
        in_pipeline=in_pipeline,
        batch_size=batch_size,
    )


def read_serving_log(raw: Any, where: str) -> WindowOptions:
    """`serving_log: {hours: 24, max_examples: 100000, min_examples: 200}`: the skew
    check's log window."""
    if not isinstance(raw, dict) or set(raw) - {"hours", "max_examples", "min_examples"}:
        raise DatasetFileError(
            f"{where}: a mapping with hours, max_examples and/or min_examples, not {raw!r}"
        )
    hours, examples = raw.get("hours", 24.0), raw.get("max_examples", 100_000)
    least = raw.get("min_examples", 200)
    if isinstance(hours, bool) or not isinstance(hours, int | float) or hours <= 0:
        raise DatasetFileError(f"{where}: hours: a number > 0, not {hours!r}")
    for key, value in (("max_examples", examples), ("min_examples", least)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DatasetFileError(f"{where}: {key}: a whole number >= 1, not {value!r}")
    if least > examples:
        raise DatasetFileError(f"{where}: min_examples {least} is above max_examples {examples}")
    return WindowOptions(float(hours), examples, least)


def read_on_push(raw: dict, where: str) -> str:
    value = raw.get("on_push", ON_PUSH[0])
    if value not in ON_PUSH:
        raise DatasetFileError(
            f"{where}: on_push must be one of {list(ON_PUSH)} (the alias a newly pushed model "
            f"gets), not {value!r}"
        )
    return str(value)


def read_alert_env(raw: Any, where: str) -> tuple[str, ...]:
    """`alerts: {webhook_env: NAME or [NAMES]}`: environment variables, never URLs."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping with webhook_env")
    check_keys(raw, _ALERT_KEYS, where)
    names = raw.get("webhook_env") or []
    names = [names] if isinstance(names, str) else list(names)
    for name in names:
        if not isinstance(name, str) or not ENV_NAME.match(name):
            secret = isinstance(name, str) and "://" in name
            raise DatasetFileError(
                f"{where}.webhook_env: "
                + (
                    "holds a URL; a webhook URL is a secret and does not belong in a file: "
                    "put it in an environment variable and name the variable here"
                    if secret
                    else f"{name!r} is not an environment variable name"
                )
            )
    return tuple(names)


def resolve_path(value: str, base: Path) -> str:
    """`value` as an absolute path, relative to `base` (~ expanded); a URI as it is."""
    if "://" in value:
        return value
    return str((base / os.path.expanduser(value)).resolve())
