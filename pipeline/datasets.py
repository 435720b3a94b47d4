"""Datasets are files: `schema/<NAME>/dataset.yaml` beside the curated schema.

A dataset file holds everything that varies between datasets (where the data
is, the label and task, each feature's treatment, the Evaluator's metric and
thresholds, training steps and hyperparameters); this module finds the files
and turns each into a `PipelineConfig`. `tfxp init` writes them for a user's
CSV; taxi and digits are dataset files too. A dataset may still name its own
trainer code by importable path (`preprocessing_fn:`, `run_fn:`, the plug-in
contract described in trainer/base.py; taxi does); otherwise the
generic tabular trainer (`trainer/tabular/`) reads the `features:` treatments
through custom_config.

Where datasets are found: every folder of `TFXP_DATASET_PATH` (os.pathsep
separated; `tfxp init` writes into the first), then the project's `schema/`.
The first file of a name wins.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.io.csv_text import CsvTextError, check_encoding
from components.validation.serving_log import WindowOptions
from pipeline import dataset_types, table_options
from pipeline.config import (
    GENERIC_PREPROCESSING_FN,
    GENERIC_RUN_FN,
    IMAGE_TUNABLE,
    PROJECT_ROOT,
    TUNABLE,
    TUNING_ALGORITHMS,
    DataSource,
    EvalThresholds,
    ImageOptions,
    InferenceOptions,
    PipelineConfig,
    SliceOptions,
    TuningOptions,
)
from pipeline.models import tabular_model

DATASET_FILE = "dataset.yaml"
SCHEMA_FILE = "schema.pbtxt"
VALIDATION_FILE = "validation.yaml"
DATASET_PATH_ENV = "TFXP_DATASET_PATH"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")

TASKS = ("binary", "multiclass", "regression")
TREATMENTS = ("zscore", "bucketize", "vocabulary", *table_options.TABLE_TREATMENTS)

_KEYS = {
    "name",
    "description",
    "kind",
    "data_root",
    "span_pattern",
    "version_pattern",
    "serving_data",
    "serving_log",
    "csv_encoding",
    "label",
    "transformed_label",
    "task",
    "classes",
    "features",
    "exclude",
    "preprocessing_fn",
    "run_fn",
    "train_steps",
    "eval_steps",
    "hyperparameters",
    "evaluation",
    "eval_signature",
    "image",
    "slicing",
    "intended_use",
    "limitations",
    "serving_check_rows",
    "batch_inference",
    "on_push",
    "alerts",
    "tuning",
    "source",
    "model",
} | table_options.TOP_KEYS
_SLICING_KEYS = {"by", "buckets", "min_examples", "lower_bound", "upper_bound", "max_drop"}
ON_PUSH = ("champion", "challenger")
_ALERT_KEYS = {"webhook_env"}
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EVAL_KEYS = {"metric", "lower_bound", "upper_bound", "min_change", "extra_metrics", "per_class"}
_FEATURE_KEYS = {"treatment", "buckets", "top_k", "oov_buckets"} | table_options.FEATURE_KEYS
_TUNING_KEYS = {
    "search_space",
    "algorithm",
    "max_trials",
    "max_minutes",
    "trial_steps",
    "parallel_trials",
    "trial_timeout_minutes",
}
# Hyperparameters whose values are bounded beyond their type: [low, high).
_TUNING_BOUNDS = {"dropout": (0.0, 1.0)}
_RANGE_KEYS = {"min", "max", "sampling", "step"}
_SAMPLINGS = ("linear", "log")
_INFERENCE_KEYS = {"data_root", "key_columns", "in_pipeline", "batch_size"}


VALID_FEATURE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def feature_name(header: str) -> str:
    """A valid feature name for a CSV header: letters, digits and _, not starting with a digit.

    `tfxp init` renames such columns in the data and schema; `tfxp predict` maps a
    file's original header names to them.
    """
    name = re.sub(r"[^A-Za-z0-9_]+", "_", header.strip()).strip("_") or "column"
    return "c_" + name if name[0].isdigit() else name


def feature_header(header: list[str], columns: dict[str, str] | Any) -> list[str]:
    """A CSV header with original column names `tfxp init` renamed mapped to their feature names."""
    return [
        feature_name(h) if h.strip() not in columns and feature_name(h) in columns else h.strip()
        for h in header
    ]


def rename_header(path: str | os.PathLike, columns: dict[str, str]) -> bool:
    """Rewrites a CSV file's header in place with `feature_header`; True if it changed."""
    import csv
    import shutil

    path = Path(path)
    with path.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader([f.readline()]), [])
        names = feature_header(header, columns)
        if names == [h.strip() for h in header]:
            return False
        tmp = path.with_name(path.name + ".renaming")
        with tmp.open("w", newline="", encoding="utf-8") as out:
            csv.writer(out, lineterminator="\n").writerow(names)
            shutil.copyfileobj(f, out)
    os.replace(tmp, path)
    return True


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


def dataset_dirs() -> list[Path]:
    """Folders holding `<NAME>/dataset.yaml`, searched in order."""
    extra = [Path(p) for p in os.environ.get(DATASET_PATH_ENV, "").split(os.pathsep) if p]
    return [*extra, PROJECT_ROOT / "schema"]


def dataset_files() -> dict[str, Path]:
    """Dataset name -> its dataset file (the first found along `dataset_dirs`)."""
    found: dict[str, Path] = {}
    for root in dataset_dirs():
        for path in sorted(root.glob(f"*/{DATASET_FILE}")) if root.is_dir() else ():
            found.setdefault(path.parent.name, path)
    return found


def _path(value: str, base: Path) -> str:
    if "://" in value:
        return value
    return str((base / os.path.expanduser(value)).resolve())


def _source(raw: Any, where: str, base: Path) -> DataSource | None:
    """`source: {dvc: REPO, path: data/x.csv, rev: v1}`: a relative REPO is the dataset file's."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: a mapping with dvc, path and optionally rev")
    _check_keys(raw, {"dvc", "path", "rev"}, where)
    missing = [k for k in ("dvc", "path") if not isinstance(raw.get(k), str) or not raw[k]]
    if missing:
        raise DatasetFileError(f"{where}: {' and '.join(missing)} required (strings)")
    repo = raw["dvc"] if raw["dvc"].startswith("git@") else _path(raw["dvc"], base)
    rev = raw.get("rev")
    return DataSource(repo, raw["path"], None if rev is None else str(rev))


def _check_keys(raw: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise DatasetFileError(f"{where}: unknown key(s) {unknown}; known: {sorted(allowed)}")


def _thresholds(raw: Any, where: str, task: str | None) -> EvalThresholds:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping of {sorted(_EVAL_KEYS)}")
    _check_keys(raw, _EVAL_KEYS, where)
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


def _slicing(raw: Any, where: str) -> SliceOptions | None:
    """`slicing:` -> SliceOptions; every feature named must be a column of the schema
    (checked by the caller, which knows the columns)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping of {sorted(_SLICING_KEYS)}")
    _check_keys(raw, _SLICING_KEYS, where)
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


def _check_slice_features(slicing: SliceOptions | None, columns: set[str], where: str) -> None:
    for names in slicing.by if slicing else ():
        for name in names:
            if name not in columns:
                raise DatasetFileError(
                    f"{where}.by: {name!r} is not a column of the schema; columns: "
                    f"{sorted(columns)}"
                )


def _schema_columns(schema_file: Path) -> set[str] | None:
    """Feature names of a curated schema (None when it cannot be read: checked later)."""
    try:
        text = schema_file.read_text(encoding="utf-8")
    except OSError:
        return None
    return set(re.findall(r'^\s*name:\s*"([^"]+)"', text, flags=re.MULTILINE))


def _tabular(raw: dict, where: str) -> TabularOptions:
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
        _check_keys(spec, _FEATURE_KEYS, f"{where}: features.{name}")
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


def _inference(raw: Any, where: str, kind: str) -> InferenceOptions:
    """The `batch_inference:` mapping, every value checked here rather than mid-run."""
    if raw is None:
        return InferenceOptions()
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping of {sorted(_INFERENCE_KEYS)}")
    _check_keys(raw, _INFERENCE_KEYS, where)
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
        data_root=_path(data_root, PROJECT_ROOT) if data_root else None,
        key_columns=tuple(keys),
        in_pipeline=in_pipeline,
        batch_size=batch_size,
    )


def _is_number(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind == "int" else isinstance(value, (int, float))


def _units(value: Any) -> bool:
    """A list of layer sizes: positive integers, at least one."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(_is_number(u, "int") and u > 0 for u in value)
    )


def _search_dimension(name: str, kind: str, spec: Any, where: str) -> dict[str, Any]:
    """One hyperparameter's range ({min, max, sampling, step}) or its {choices}."""
    if not isinstance(spec, dict):
        raise DatasetFileError(f"{where}: expected {{min:, max:}} or {{choices: [...]}}")
    if "choices" in spec:
        _check_keys(spec, {"choices"}, where)
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise DatasetFileError(f"{where}.choices: an empty range; list at least one value")
        check = _units if kind == "units" else (lambda v: _is_number(v, kind))
        wrong = [c for c in choices if not check(c)]
        if wrong:
            expected = {"units": "lists of positive layer sizes", "int": "integers"}
            raise DatasetFileError(
                f"{where}.choices: {wrong} are not {expected.get(kind, 'numbers')}"
            )
        if len({str(c) for c in choices}) != len(choices):
            raise DatasetFileError(f"{where}.choices: {choices} lists a value twice")
        _check_bounds(name, choices, where)
        return {"choices": [list(c) if kind == "units" else c for c in choices]}
    if kind == "units":
        raise DatasetFileError(f"{where}: layer sizes are tuned as {{choices: [[64, 32], ...]}}")
    _check_keys(spec, _RANGE_KEYS, where)
    low, high = spec.get("min"), spec.get("max")
    for key, value in (("min", low), ("max", high)):
        if not _is_number(value, kind):
            what = "an integer" if kind == "int" else "a number"
            raise DatasetFileError(f"{where}.{key}: expected {what}, not {value!r}")
    if not low < high:
        raise DatasetFileError(f"{where}: an empty range (min {low} is not below max {high})")
    _check_bounds(name, [low, high], where)
    sampling = spec.get("sampling", "linear")
    if sampling not in _SAMPLINGS:
        raise DatasetFileError(
            f"{where}.sampling: must be one of {list(_SAMPLINGS)}, not {sampling!r}"
        )
    if sampling == "log" and low <= 0:
        raise DatasetFileError(f"{where}: a log range needs min > 0, not {low}")
    dimension = {"min": low, "max": high, "sampling": sampling}
    if "step" in spec:
        step = spec["step"]
        if not _is_number(step, kind) or step <= 0:
            raise DatasetFileError(f"{where}.step: expected a positive {kind}, not {step!r}")
        dimension["step"] = step
    return dimension


def _check_bounds(name: str, values: list, where: str) -> None:
    if name not in _TUNING_BOUNDS:
        return
    low, high = _TUNING_BOUNDS[name]
    outside = [v for v in values if not low <= v < high]
    if outside:
        raise DatasetFileError(f"{where}: {outside} outside [{low}, {high}) for {name}")


def _positive(raw: dict, key: str, kind: str, where: str, default: Any) -> Any:
    value = raw.get(key, default)
    if value is None and default is None:
        return None
    if not _is_number(value, kind) or value <= 0:
        what = "a positive integer" if kind == "int" else "a positive number"
        raise DatasetFileError(f"{where}.{key}: expected {what}, not {value!r}")
    return value


def _tuning(raw: Any, where: str, tunable: dict[str, str]) -> TuningOptions | None:
    """The `tuning:` mapping: a search space over the trainer's `tunable` hyperparameters,
    budgets and how many trials run at once."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping of {sorted(_TUNING_KEYS)}")
    _check_keys(raw, _TUNING_KEYS, where)
    space = raw.get("search_space")
    if not isinstance(space, dict) or not space:
        raise DatasetFileError(
            f"{where}.search_space: name at least one of {sorted(tunable)} with its range"
        )
    unknown = sorted(str(k) for k in set(space) - set(tunable))
    if unknown:
        raise DatasetFileError(
            f"{where}.search_space: unknown hyperparameter(s) {unknown}; tunable: {sorted(tunable)}"
        )
    parsed = {
        name: _search_dimension(name, tunable[name], spec, f"{where}.search_space.{name}")
        for name, spec in space.items()
    }
    algorithm = raw.get("algorithm", "random")
    if algorithm not in TUNING_ALGORITHMS:
        raise DatasetFileError(
            f"{where}.algorithm: must be one of {list(TUNING_ALGORITHMS)}, not {algorithm!r}"
        )
    return TuningOptions(
        search_space=parsed,
        algorithm=algorithm,
        max_trials=_positive(raw, "max_trials", "int", where, TuningOptions.max_trials),
        max_minutes=_positive(raw, "max_minutes", "float", where, None),
        trial_steps=_positive(raw, "trial_steps", "int", where, None),
        parallel_trials=_positive(
            raw, "parallel_trials", "int", where, TuningOptions.parallel_trials
        ),
        trial_timeout_minutes=_positive(
            raw, "trial_timeout_minutes", "float", where, TuningOptions.trial_timeout_minutes
        ),
    )


def _serving_log(raw: Any, where: str) -> WindowOptions:
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


def _on_push(raw: dict, where: str) -> str:
    value = raw.get("on_push", ON_PUSH[0])
    if value not in ON_PUSH:
        raise DatasetFileError(
            f"{where}: on_push must be one of {list(ON_PUSH)} (the alias a newly pushed model "
            f"gets), not {value!r}"
        )
    return str(value)


def _alert_env(raw: Any, where: str) -> tuple[str, ...]:
    """`alerts: {webhook_env: NAME or [NAMES]}`: environment variables, never URLs."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping with webhook_env")
    _check_keys(raw, _ALERT_KEYS, where)
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


def load_dataset_file(path: str | os.PathLike) -> PipelineConfig:
    """The `PipelineConfig` a dataset file describes; schema and thresholds beside it.

    Raises DatasetFileError naming the file and the key for anything it cannot use.
    """
    try:
        return _load_dataset_file(Path(path))
    except dataset_types.DatasetTypeError as e:
        raise DatasetFileError(str(e)) from e
    except DatasetFileError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as e:
        # A value the checks above let through but the config cannot take.
        raise DatasetFileError(f"{path}: {type(e).__name__}: {e}") from e


def _image(raw: dict, path: Path) -> ImageOptions:
    options = dict(raw.get("image") or {})
    if "class_names" not in options:
        raise DatasetFileError(f"{path}: an image dataset needs image.class_names")
    fields = {f.name for f in dataclasses.fields(ImageOptions)}
    dataset_types.check_image(options, fields, f"{path}: image")
    options["class_names"] = tuple(str(c) for c in options["class_names"])
    return ImageOptions(**options)


def _optional_settings(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """The config fields of the optional keys the file sets (the others keep their defaults)."""
    changes: dict[str, Any] = {}
    for key in ("description", "intended_use", "limitations"):
        if raw.get(key) is not None:
            changes[key] = str(raw[key]).strip()
    if "serving_check_rows" in raw:
        rows = raw["serving_check_rows"]
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise DatasetFileError(f"{path}: serving_check_rows: a whole number >= 0, not {rows!r}")
        changes["serving_check_rows"] = rows
    if "serving_log" in raw:
        changes["serving_log_window"] = _serving_log(raw["serving_log"], f"{path}: serving_log")
    for key in ("span_pattern", "version_pattern", "eval_signature", "serving_data"):
        if key in raw:
            changes[key] = raw[key]
    for key in ("train_steps", "eval_steps"):
        if key in raw:
            changes[key] = int(raw[key])
    if "csv_encoding" in raw:
        try:  # a typo in the file fails here, naming it, not in the middle of a run
            check_encoding(str(raw["csv_encoding"]))
        except CsvTextError as e:
            raise DatasetFileError(f"{path}: csv_encoding: {e}") from e
        changes["csv_encoding"] = str(raw["csv_encoding"])
    if "hyperparameters" in raw:
        changes["hyperparameters"] = dict(raw["hyperparameters"] or {})
    return changes


def _load_dataset_file(path: Path) -> PipelineConfig:
    folder = path.parent
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise DatasetFileError(f"{path}: cannot read the dataset file: {e}") from e
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{path}: expected a mapping (see schema/taxi/{DATASET_FILE})")
    _check_keys(raw, _KEYS, str(path))
    dataset_types.check_types(raw, str(path))
    name = str(raw.get("name", folder.name))
    if name != folder.name:
        raise DatasetFileError(f"{path}: name {name!r} differs from its folder {folder.name!r}")
    label = raw.get("label")
    if not label:
        raise DatasetFileError(f"{path}: `label:` (the label column) is required")
    kind = raw.get("kind", "tabular")
    if kind not in ("tabular", "image"):
        raise DatasetFileError(f"{path}: kind must be tabular or image, not {kind!r}")

    generic = kind == "tabular" and "preprocessing_fn" not in raw and "run_fn" not in raw
    tabular = _tabular(raw, str(path)) if generic else None
    image = _image(raw, path) if kind == "image" else None

    changes: dict[str, Any] = {
        "pipeline_name": name,
        "data_root": _path(str(raw.get("data_root", f"data/{name}")), PROJECT_ROOT),
        "schema_file": str(folder / SCHEMA_FILE),
        "validation_file": str(folder / VALIDATION_FILE),
        "run_dir": str(PROJECT_ROOT / "runs" / name),
        "label_key": str(label),
        "transformed_label_key": str(raw.get("transformed_label", f"{label}_xf")),
        "thresholds": _thresholds(
            raw.get("evaluation"), f"{path}: evaluation", tabular.task if tabular else None
        ),
        "example_gen": "image" if kind == "image" else "csv",
        "image": image,
        "tabular": tabular,
        "slicing": _slicing(raw.get("slicing"), f"{path}: slicing"),
        "inference": _inference(raw.get("batch_inference"), f"{path}: batch_inference", kind),
        "data_source": _source(raw.get("source"), f"{path}: source", folder),
    }
    columns = _schema_columns(folder / SCHEMA_FILE)
    if columns:
        _check_slice_features(changes["slicing"], columns, f"{path}: slicing")
    changes.update(_optional_settings(raw, path))
    # `model:` (pipeline/models.py): which trainer fits a generic tabular dataset.
    try:
        model = tabular_model(raw, str(path), generic)
    except ValueError as e:
        raise DatasetFileError(str(e)) from e
    tunable = model.tunable if model else IMAGE_TUNABLE if kind == "image" else TUNABLE
    changes["tuning"] = _tuning(raw.get("tuning"), f"{path}: tuning", tunable)
    changes["on_push"] = _on_push(raw, str(path))
    changes["alert_webhook_env"] = _alert_env(raw.get("alerts"), f"{path}: alerts")
    changes["preprocessing_fn"] = raw.get("preprocessing_fn", GENERIC_PREPROCESSING_FN)
    changes["run_fn"] = raw.get("run_fn", model.run_fn if model else GENERIC_RUN_FN)
    return PipelineConfig(**changes)


def load_datasets() -> dict[str, PipelineConfig]:
    """Every dataset with a dataset file, by name."""
    return {name: load_dataset_file(path) for name, path in sorted(dataset_files().items())}


def dataset_names() -> list[str]:
    return sorted(dataset_files())


def dataset_config(name: str) -> PipelineConfig:
    files = dataset_files()
    if name not in files:
        raise ValueError(
            f"unknown dataset {name!r}; known: {', '.join(sorted(files))} "
            f"(`tfxp init {name} --csv FILE.csv --label COLUMN` makes one)"
        )
    return load_dataset_file(files[name])


def __getattr__(name: str) -> Any:
    # DATASETS is read when asked for: a dataset `tfxp init` just wrote is known
    # without a restart.
    if name == "DATASETS":
        return load_datasets()
    raise AttributeError(name)
