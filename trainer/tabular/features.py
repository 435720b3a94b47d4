"""The tabular trainer's options, as the pipeline passes them in custom_config["tabular"].

{"label": "quality", "task": "multiclass", "classes": ["high", "low", "mid"],
 "features": {"alcohol": {"treatment": "zscore"},
              "region": {"treatment": "vocabulary", "top_k": 1000, "oov_buckets": 1},
              "age": {"treatment": "bucketize", "buckets": 10}}}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TASKS = ("binary", "multiclass", "regression")
TREATMENTS = ("zscore", "bucketize", "vocabulary")
DEFAULT_BUCKETS = 10
DEFAULT_TOP_K = 1000
DEFAULT_OOV_BUCKETS = 1


@dataclass(frozen=True)
class Feature:
    name: str
    treatment: str
    buckets: int = DEFAULT_BUCKETS
    top_k: int = DEFAULT_TOP_K
    oov_buckets: int = DEFAULT_OOV_BUCKETS


@dataclass(frozen=True)
class TabularSpec:
    label: str
    task: str
    classes: tuple[str, ...]
    features: tuple[Feature, ...]

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
        return cls(str(raw["label"]), task, classes, tuple(features))


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
