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
import logging
import os
import re
from pathlib import Path
from typing import Any

import yaml

from components.io.csv_text import CsvTextError, check_encoding
from components.io.encryption import EncryptionSettingError, read_storage
from components.io.log_policy import LogPolicyError, read_policy
from pipeline import dataset_types, table_options
from pipeline.config import (
    GENERIC_PREPROCESSING_FN,
    GENERIC_RUN_FN,
    IMAGE_TUNABLE,
    PROJECT_ROOT,
    SEQUENCE_TUNABLE,
    TUNABLE,
    DataSource,
    ImageOptions,
    PipelineConfig,
)
from pipeline.dataset_sections import (
    DatasetFileError,
    check_keys,
    check_slice_features,
    read_alert_env,
    read_inference,
    read_on_push,
    read_serving_log,
    read_slicing,
    read_tabular,
    read_thresholds,
    resolve_path,
    schema_columns,
)
from pipeline.dataset_sequence import read_sequence
from pipeline.dataset_tuning import read_tuning
from pipeline.models import tabular_model

# The dataset every command and runner uses when none is named (TFX's taxi example).
DEFAULT_DATASET = "taxi"
DATASET_FILE = "dataset.yaml"
SCHEMA_FILE = "schema.pbtxt"
VALIDATION_FILE = "validation.yaml"
DATASET_PATH_ENV = "TFXP_DATASET_PATH"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
KINDS = ("tabular", "image", "sequence")
# The sequence trainer (trainer/sequence/), for `kind: sequence` without its own code.
SEQUENCE_FNS = (
    "trainer.sequence.preprocessing.preprocessing_fn",
    "trainer.sequence.train.run_fn",
)


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
    "sequence",
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
    "storage",
    "request_log",
} | table_options.TOP_KEYS


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


def _source(raw: Any, where: str, base: Path) -> DataSource | None:
    """`source: {dvc: REPO, path: data/x.csv, rev: v1}`: a relative REPO is the dataset file's."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: a mapping with dvc, path and optionally rev")
    check_keys(raw, {"dvc", "path", "rev"}, where)
    missing = [k for k in ("dvc", "path") if not isinstance(raw.get(k), str) or not raw[k]]
    if missing:
        raise DatasetFileError(f"{where}: {' and '.join(missing)} required (strings)")
    repo = raw["dvc"] if raw["dvc"].startswith("git@") else resolve_path(raw["dvc"], base)
    rev = raw.get("rev")
    return DataSource(repo, raw["path"], None if rev is None else str(rev))


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
    if "bad_images" in options:  # the key's earlier name
        old = options.pop("bad_images")
        if "on_bad_image" in options:
            raise DatasetFileError(f"{path}: image.bad_images is image.on_bad_image; keep one")
        logging.getLogger(__name__).warning(
            "%s: image.bad_images is now image.on_bad_image (read as on_bad_image: %s)", path, old
        )
        options["on_bad_image"] = old
    fields = {f.name for f in dataclasses.fields(ImageOptions)}
    dataset_types.check_image(options, fields, f"{path}: image")
    if options.get("on_bad_image", "skip") not in ("skip", "fail"):
        raise DatasetFileError(
            f"{path}: image.on_bad_image is skip or fail, not {options['on_bad_image']!r}"
        )
    shard_mb = options.get("shard_mb", 128)
    if isinstance(shard_mb, bool) or not isinstance(shard_mb, int | float) or shard_mb <= 0:
        raise DatasetFileError(f"{path}: image.shard_mb is a size in MB above 0, not {shard_mb!r}")
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
        changes["serving_log_window"] = read_serving_log(raw["serving_log"], f"{path}: serving_log")
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
    try:  # the protection settings (docs/protecting-data.md)
        if "storage" in raw:
            changes["storage"] = read_storage(raw["storage"], f"{path}: storage")
        if "request_log" in raw:
            changes["request_log"] = read_policy(raw["request_log"], f"{path}: request_log")
    except (EncryptionSettingError, LogPolicyError) as e:
        raise DatasetFileError(str(e)) from e
    return changes


def _load_dataset_file(path: Path) -> PipelineConfig:
    folder = path.parent
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise DatasetFileError(f"{path}: cannot read the dataset file: {e}") from e
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{path}: expected a mapping (see schema/taxi/{DATASET_FILE})")
    check_keys(raw, _KEYS, str(path))
    dataset_types.check_types(raw, str(path))
    name = str(raw.get("name", folder.name))
    if name != folder.name:
        raise DatasetFileError(f"{path}: name {name!r} differs from its folder {folder.name!r}")
    label = raw.get("label")
    if not label:
        raise DatasetFileError(f"{path}: `label:` (the label column) is required")
    kind = raw.get("kind", "tabular")
    if kind not in KINDS:
        raise DatasetFileError(f"{path}: kind must be one of {list(KINDS)}, not {kind!r}")

    generic = kind == "tabular" and "preprocessing_fn" not in raw and "run_fn" not in raw
    tabular = read_tabular(raw, str(path)) if generic else None
    image = _image(raw, path) if kind == "image" else None
    sequence = read_sequence(raw, str(path)) if kind == "sequence" else None
    if sequence is None and "sequence" in raw:
        raise DatasetFileError(f"{path}: `sequence:` belongs to `kind: sequence` datasets")

    changes: dict[str, Any] = {
        "pipeline_name": name,
        "data_root": resolve_path(str(raw.get("data_root", f"data/{name}")), PROJECT_ROOT),
        "schema_file": str(folder / SCHEMA_FILE),
        "validation_file": str(folder / VALIDATION_FILE),
        "run_dir": str(PROJECT_ROOT / "runs" / name),
        "label_key": str(label),
        "transformed_label_key": str(raw.get("transformed_label", f"{label}_xf")),
        "thresholds": read_thresholds(
            raw.get("evaluation"),
            f"{path}: evaluation",
            tabular.task if tabular else sequence.task if sequence else None,
        ),
        "example_gen": {"image": "image", "sequence": "sequence"}.get(kind, "csv"),
        "image": image,
        "sequence": sequence,
        "tabular": tabular,
        "slicing": read_slicing(raw.get("slicing"), f"{path}: slicing"),
        "inference": read_inference(raw.get("batch_inference"), f"{path}: batch_inference", kind),
        "data_source": _source(raw.get("source"), f"{path}: source", folder),
    }
    columns = schema_columns(folder / SCHEMA_FILE)
    if columns:
        check_slice_features(changes["slicing"], columns, f"{path}: slicing")
    changes.update(_optional_settings(raw, path))
    # `model:` (pipeline/models.py): which trainer fits a generic tabular dataset.
    try:
        model = tabular_model(raw, str(path), generic)
    except ValueError as e:
        raise DatasetFileError(str(e)) from e
    tunable = (
        model.tunable
        if model
        else {"image": IMAGE_TUNABLE, "sequence": SEQUENCE_TUNABLE}.get(kind, TUNABLE)
    )
    changes["tuning"] = read_tuning(raw.get("tuning"), f"{path}: tuning", tunable)
    changes["on_push"] = read_on_push(raw, str(path))
    changes["alert_webhook_env"] = read_alert_env(raw.get("alerts"), f"{path}: alerts")
    generic_fns = SEQUENCE_FNS if sequence else (GENERIC_PREPROCESSING_FN, GENERIC_RUN_FN)
    changes["preprocessing_fn"] = raw.get("preprocessing_fn", generic_fns[0])
    changes["run_fn"] = raw.get("run_fn", model.run_fn if model else generic_fns[1])
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
