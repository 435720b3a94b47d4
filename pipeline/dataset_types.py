"""The type of every top-level value of a dataset file, checked before it is parsed.

pipeline/datasets.py then reads each key knowing its shape: a list where a list is
expected, a mapping where a mapping is; a wrong type is refused here with the file and
the key, never a TypeError from deep inside the loader (tests/unit/pipeline/test_fuzz_inputs.py).
"""

from __future__ import annotations

from typing import Any

_TEXT = (str, int, float)  # names and paths; YAML reads `label: 2019` as a number
_TYPES: dict[str, tuple[type, ...]] = {
    "name": _TEXT,
    "description": _TEXT,
    "kind": (str,),
    "data_root": (str,),
    "span_pattern": (str,),
    "version_pattern": (str,),
    "serving_data": (str,),
    "csv_encoding": (str,),
    "label": _TEXT,
    "transformed_label": _TEXT,
    "task": (str,),
    "classes": (list,),
    "features": (dict,),
    "exclude": (list,),
    "preprocessing_fn": (str,),
    "run_fn": (str,),
    "train_steps": (int,),
    "eval_steps": (int,),
    "hyperparameters": (dict,),
    "evaluation": (dict,),
    "eval_signature": (str,),
    "image": (dict,),
    "sequence": (dict,),
    "slicing": (dict,),
    "intended_use": _TEXT,
    "limitations": _TEXT,
    "serving_check_rows": (int,),
    "batch_inference": (dict,),
    "on_push": (str,),
    "alerts": (dict,),
    "tuning": (dict,),
    "unlabelled_rows": (str,),
    "class_weights": (dict,),
    "model": (str,),
    "source": (dict,),
    "storage": (dict,),
    "request_log": (dict,),
}
_WORDS = {list: "a list", dict: "a mapping", int: "a whole number", str: "text", float: "a number"}
# Keys whose value may be left empty (`exclude:`), read as the empty default.
_MAY_BE_EMPTY = {
    "classes",
    "features",
    "exclude",
    "hyperparameters",
    "evaluation",
    "slicing",
    "image",
    "batch_inference",
    "alerts",
    "tuning",
    "class_weights",
}
_EVALUATION = {
    "metric": (str,),
    "lower_bound": (int, float),
    "upper_bound": (int, float),
    "min_change": (int, float),
    "extra_metrics": (list,),
}


class DatasetTypeError(ValueError):
    """A dataset-file value of the wrong type; the message names the key."""


def _check(value: Any, types: tuple[type, ...], where: str) -> None:
    # YAML's true/false are bools, which Python counts as ints: not a number here.
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        words = ["a number" if float in types and t in (int, float) else _WORDS[t] for t in types]
        expected = " or ".join(dict.fromkeys(words))
        hint = (
            " (YAML reads an unquoted yes/no/on/off/true/false as a boolean: quote it, e.g. 'no')"
            if isinstance(value, bool) and str in types
            else ""
        )
        raise DatasetTypeError(f"{where}: expected {expected}, not {value!r}{hint}")


def check_types(raw: dict[str, Any], where: str) -> None:
    """Every known top-level key's value has its type (unknown keys are refused elsewhere)."""
    for key, types in _TYPES.items():
        if key not in raw or (raw[key] is None and key in _MAY_BE_EMPTY):
            continue
        _check(raw[key], types, f"{where}: {key}")
    for i, value in enumerate(raw.get("classes") or []):
        _check(value, _TEXT, f"{where}: classes[{i}]")
    for i, value in enumerate(raw.get("exclude") or []):
        _check(value, _TEXT, f"{where}: exclude[{i}]")
    for key, value in (raw.get("evaluation") or {}).items():
        if key in _EVALUATION and value is not None:
            _check(value, _EVALUATION[key], f"{where}: evaluation.{key}")
    for i, value in enumerate((raw.get("evaluation") or {}).get("extra_metrics") or []):
        _check(value, (str,), f"{where}: evaluation.extra_metrics[{i}]")


def check_image(options: dict[str, Any], fields: set[str], where: str) -> None:
    """`image:` names only ImageOptions' fields, and class_names is a list of names."""
    unknown = sorted(str(k) for k in set(options) - fields)
    if unknown:
        raise DatasetTypeError(f"{where}: unknown key(s) {unknown}; known: {sorted(fields)}")
    names = options.get("class_names")
    _check(names, (list,), f"{where}.class_names")
    for i, value in enumerate(names or []):  # _check made it a list
        _check(value, _TEXT, f"{where}.class_names[{i}]")
    from pipeline.config import IMAGE_MODELS

    model = options.get("model", IMAGE_MODELS[0])
    if model not in IMAGE_MODELS:
        raise DatasetTypeError(
            f"{where}.model: {model!r} is not one of {list(IMAGE_MODELS)} (the small CNN, or "
            "keras.applications' MobileNetV2 / EfficientNetB0 trained from scratch)"
        )
    decode_in = options.get("decode_in", "transform")
    if decode_in not in ("transform", "trainer"):
        raise DatasetTypeError(f"{where}.decode_in: {decode_in!r} is not transform or trainer")
    if decode_in == "trainer" and options.get("image_format", "encoded") != "encoded":
        raise DatasetTypeError(
            f"{where}.decode_in: trainer decodes encoded files; image_format is "
            f"{options.get('image_format')!r} (use encoded, or decode_in: transform)"
        )
