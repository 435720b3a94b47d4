"""The sequence trainer's view of the dataset file's `sequence:` options and the
names of what Transform writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# tfx_bsl reads a SequenceExample's feature lists as children of this STRUCT feature;
# tf.Transform sees each as a RaggedTensor named "##SEQUENCE##.<column>".
SEQUENCE_STRUCT = "##SEQUENCE##"
LENGTH_XF = "sequence_length_xf"
ZSCORE, VOCABULARY = "zscore", "vocabulary"
# Ids of categorical steps: 0 pads, so a vocabulary index i is written as i + 1.
PAD_ID = 0
OOV_BUCKETS = 1


def transformed_name(name: str) -> str:
    return f"{name}_xf"


def raw_sequence_name(name: str) -> str:
    return f"{SEQUENCE_STRUCT}.{name}"


@dataclass(frozen=True)
class SequenceSpec:
    """custom_config["sequence"] (pipeline/dataset_sequence.SequenceOptions.to_dict())."""

    key: str
    label: str
    task: str
    classes: tuple[str, ...]
    context: dict[str, str]
    features: dict[str, str]
    max_length: int
    truncate: str = "keep_last"
    model: str = "gru"
    units: int = 32
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def label_xf(self) -> str:
        return transformed_name(self.label)


def sequence_spec(custom_config: dict[str, Any] | None) -> SequenceSpec:
    raw = dict((custom_config or {}).get("sequence") or {})
    if not raw:
        raise ValueError("the sequence trainer needs custom_config['sequence'] (kind: sequence)")
    return SequenceSpec(
        key=raw["key"],
        label=raw["label"],
        task=raw["task"],
        classes=tuple(raw.get("classes") or ()),
        context=dict(raw.get("context") or {}),
        features=dict(raw["features"]),
        max_length=int(raw.get("max_length", 64)),
        truncate=raw.get("truncate", "keep_last"),
        model=raw.get("model", "gru"),
        units=int(raw.get("units", 32)),
    )
