"""Resolves the Evaluator's baseline: the latest blessed model other than the candidate.

TFX's LatestBlessedModelStrategy resolves before training, so on an unchanged
rerun it hands the Evaluator the very model it is about to evaluate as its own
baseline. The Evaluator's inputs then differ from the previous run and its
cache misses: every rerun re-evaluates. Resolving after the Trainer and
excluding the candidate keeps the baseline "the model we would replace", and
an unchanged rerun fully cached.
"""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.dsl.components.common import resolver

CANDIDATE_KEY = "candidate"
MODEL_KEY = "model"
BLESSING_KEY = "model_blessing"

# Custom properties the Evaluator writes on a ModelBlessing.
_CURRENT_MODEL_ID = "current_model_id"
_BLESSED = "blessed"


def latest_blessed_excluding(
    models: list[types.Artifact], blessings: list[types.Artifact], exclude_ids: set[int]
) -> tuple[list[types.Artifact], list[types.Artifact]]:
    """([model], [blessing]) of the newest blessed model not in `exclude_ids`, or ([], [])."""
    blessing_by_model = {
        b.get_int_custom_property(_CURRENT_MODEL_ID): b
        for b in blessings
        if b.get_int_custom_property(_BLESSED) == 1
    }
    for model in sorted(models, key=lambda a: a.id, reverse=True):
        if model.id in blessing_by_model and model.id not in exclude_ids:
            return [model], [blessing_by_model[model.id]]
    return [], []


class BaselineModelStrategy(resolver.ResolverStrategy):
    """Inputs: `candidate` (the Trainer's model), all `model`s and `model_blessing`s."""

    def resolve_artifacts(
        self, store: Any, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]] | None:
        candidate = list(input_dict.get(CANDIDATE_KEY, []))
        model, blessing = latest_blessed_excluding(
            list(input_dict.get(MODEL_KEY, [])),
            list(input_dict.get(BLESSING_KEY, [])),
            {a.id for a in candidate},
        )
        return {CANDIDATE_KEY: candidate, MODEL_KEY: model, BLESSING_KEY: blessing}
