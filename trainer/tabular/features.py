"""The tabular trainer's options, as the pipeline passes them in custom_config["tabular"].

{"label": "quality", "task": "multiclass", "classes": ["high", "low", "mid"],
 "features": {"alcohol": {"treatment": "zscore"},
              "region": {"treatment": "vocabulary", "top_k": 1000, "oov_buckets": 1},
              "age": {"treatment": "bucketize", "buckets": 10},
              "sold": {"treatment": "date", "format": "iso"},
              "notes": {"treatment": "text", "max_tokens": 32}},
 "class_weights": {"high": 4.0, "low": 0.6, "mid": 0.7}}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TASKS = ("binary", "multiclass", "regression")
TREATMENTS = ("zscore", "bucketize", "vocabulary", "date", "timestamp", "text")
DEFAULT_BUCKETS = 10
DEFAULT_TOP_K = 1000
DEFAULT_OOV_BUCKETS = 1
DEFAULT_MAX_TOKENS = 32


@dataclass(frozen=True)
class Feature:
    name: str
    treatment: str
    buckets: int = DEFAULT_BUCKETS
    top_k: int = DEFAULT_TOP_K
    oov_buckets: int = DEFAULT_OOV_BUCKETS
    format: str = ""  # date and timestamp: iso, dmy, mdy, unix_seconds
    max_tokens: int = DEFAULT_MAX_TOKENS  # text: words kept per value

    @property
    def has_vocabulary(self) -> bool:
        return self.treatment in ("vocabulary", "text")


@dataclass(frozen=True)
class TabularSpec:
    label: str
    task: str
    classes: tuple[str, ...]
    features: tuple[Feature, ...]
    class_weights: tuple[float, ...] = ()  # per class, in `classes` order; () = all 1

    @property
    def label_xf(self) -> str:
        return transformed_name(self.label)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TabularSpec:
        task = raw.get("task")
        if task not in TASKS:
            raise ValueError(f"tabular task must be one of {TASKS}, not {task!r}")
        features = []
        for name, spec in sorted((raw.get("features") or {}).items()):
            spec = dict(spec)
            if spec.get("treatment") not in TREATMENTS:
                raise ValueError(f"feature {name}: treatment must be one of {TREATMENTS}")
            features.append(Feature(name=name, **spec))
        classes = tuple(str(c) for c in raw.get("classes") or ())
        if task != "regression" and len(classes) < 2:
            raise ValueError(f"a {task} label needs at least 2 classes, got {list(classes)}")
        weights = raw.get("class_weights") or {}
        class_weights = tuple(float(weights[c]) for c in classes) if weights else ()
        return cls(str(raw["label"]), task, classes, tuple(features), class_weights)


def tabular_spec(custom_config: dict[str, Any] | None) -> TabularSpec:
    """The dataset's tabular options from custom_config (pipeline/datasets.py puts them there)."""
    raw = (custom_config or {}).get("tabular")
    if not raw:
        raise ValueError(
            "the tabular trainer needs custom_config['tabular'] (label, task, features); "
            "it comes from the dataset file schema/<NAME>/dataset.yaml"
        )
    return TabularSpec.from_dict(raw)


def transformed_name(key: str) -> str:
    return key + "_xf"


def missing_name(key: str) -> str:
    """The 0/1 is-missing indicator of a numeric feature with blank cells."""
    return key + "_missing"
