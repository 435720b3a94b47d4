"""The `sequence:` section of a dataset file (`kind: sequence`): how an event table
(one row per event) becomes one `tf.train.SequenceExample` per key.

    kind: sequence
    label: converted            # a context column (constant within a key)
    task: binary                # binary | multiclass | regression
    classes: ["no", "yes"]
    sequence:
      key: session_id           # which sequence a row belongs to
      order_by: event_time      # orders a key's rows
      order_format: timestamp   # number | timestamp (ISO text, parsed)
      context:                  # per-sequence columns (constant within a key)
        device: vocabulary
        tenure_days: zscore
      features:                 # per-event columns, one value per step
        action: vocabulary
        amount: zscore
      max_length: 64            # longer sequences are cut ...
      truncate: keep_last       # ... keeping their last (or first) max_length steps
      model: gru                # gru | conv (trainer/sequence/)

The ExampleGen (components/example_gen/sequence_example_gen.py), the preprocessing
and the trainer (trainer/sequence/) read these options through custom_config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pipeline.dataset_sections import TASKS, DatasetFileError, check_keys

SEQUENCE_KEYS = {
    "key",
    "order_by",
    "order_format",
    "context",
    "features",
    "max_length",
    "truncate",
    "model",
    "units",
}
SEQUENCE_TREATMENTS = ("zscore", "vocabulary")
ORDER_FORMATS = ("number", "timestamp")
TRUNCATE = ("keep_last", "keep_first")
SEQUENCE_MODELS = ("gru", "conv")
MAX_LENGTH_LIMIT = 10_000


@dataclass(frozen=True)
class SequenceOptions:
    """A sequence dataset's columns and its model, as the dataset file names them."""

    key: str
    order_by: str
    label: str
    task: str
    classes: tuple[str, ...] = ()
    # name -> treatment (zscore | vocabulary), in the file's order.
    context: dict[str, str] = dataclasses.field(default_factory=dict)
    features: dict[str, str] = dataclasses.field(default_factory=dict)
    order_format: str = "number"
    max_length: int = 64
    truncate: str = "keep_last"
    model: str = "gru"
    units: int = 32

    def to_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "classes": list(self.classes),
            "context": dict(self.context),
            "features": dict(self.features),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SequenceOptions:
        return cls(**{**raw, "classes": tuple(raw.get("classes") or ())})

    @property
    def columns(self) -> list[str]:
        """Every column the ExampleGen reads, key and order first."""
        return [self.key, self.order_by, self.label, *self.context, *self.features]


def _treatments(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: a mapping of column -> treatment, not {raw!r}")
    out: dict[str, str] = {}
    for name, treatment in raw.items():
        if isinstance(treatment, dict):
            check_keys(treatment, {"treatment"}, f"{where}.{name}")
            treatment = treatment.get("treatment")
        if treatment not in SEQUENCE_TREATMENTS:
            raise DatasetFileError(
                f"{where}.{name}: treatment must be one of {list(SEQUENCE_TREATMENTS)}, "
                f"not {treatment!r}"
            )
        out[str(name)] = str(treatment)
    return out


def _choice(raw: dict, key: str, choices: tuple[str, ...], where: str) -> str:
    value = raw.get(key, choices[0])
    if value not in choices:
        raise DatasetFileError(f"{where}.{key} must be one of {list(choices)}, not {value!r}")
    return str(value)


def _whole(raw: dict, key: str, default: int, high: int, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise DatasetFileError(f"{where}.{key} is a whole number from 1 to {high}, not {value!r}")
    return value


def read_sequence(raw: dict, where: str) -> SequenceOptions:
    """The checked `sequence:` section of a `kind: sequence` dataset file (`raw`: the file)."""
    section = raw.get("sequence")
    if not isinstance(section, dict):
        raise DatasetFileError(
            f"{where}: a sequence dataset needs a `sequence:` mapping (key, order_by, "
            "context, features)"
        )
    at = f"{where}: sequence"
    check_keys(section, SEQUENCE_KEYS, at)
    for required in ("key", "order_by"):
        if not isinstance(section.get(required), str) or not section[required]:
            raise DatasetFileError(f"{at}.{required} is required (a column name)")
    label = str(raw.get("label"))
    task = raw.get("task")
    if task not in TASKS:
        raise DatasetFileError(f"{where}: task must be one of {list(TASKS)}, not {task!r}")
    classes = tuple(str(c) for c in raw.get("classes") or ())
    if task != "regression" and len(classes) < 2:
        raise DatasetFileError(f"{where}: a {task} task needs `classes:` (the label's values)")
    if task == "binary" and len(classes) != 2:
        raise DatasetFileError(f"{where}: a binary task has 2 classes, not {len(classes)}")
    context = _treatments(section.get("context"), f"{at}.context")
    features = _treatments(section.get("features"), f"{at}.features")
    if not features:
        raise DatasetFileError(f"{at}.features: name at least one per-event column")
    named: dict[str, str] = {}
    for role, names in (
        ("key", [section["key"]]),
        ("order_by", [section["order_by"]]),
        ("label", [label]),
        ("context", list(context)),
        ("features", list(features)),
    ):
        for name in names:
            if name in named:
                raise DatasetFileError(
                    f"{at}: column {name!r} is both {named[name]} and {role}; name it once"
                )
            named[name] = role
    return SequenceOptions(
        key=section["key"],
        order_by=section["order_by"],
        label=label,
        task=str(task),
        classes=classes,
        context=context,
        features=features,
        order_format=_choice(section, "order_format", ORDER_FORMATS, at),
        max_length=_whole(section, "max_length", 64, MAX_LENGTH_LIMIT, at),
        truncate=_choice(section, "truncate", TRUNCATE, at),
        model=_choice(section, "model", SEQUENCE_MODELS, at),
        units=_whole(section, "units", 32, 1024, at),
    )
