"""The `model:` key of a tabular dataset file: which trainer fits the table.

    model: mlp   the Keras MLP (trainer/tabular/train.py), the default
    model: gbt   gradient-boosted trees (trainer/tabular/gbt.py)

Both share the Transform (trainer/tabular/preprocessing.py) and the serving
signature; the choice picks the `run_fn` (and the `tuner_fn` beside it) and
what a `tuning:` search space may name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.config import GENERIC_RUN_FN, TUNABLE

GBT_RUN_FN = "trainer.tabular.gbt.run_fn"
DEFAULT_MODEL = "mlp"

# trainer/tabular/gbt.py's GbtHyperparameters that a `tuning:` search may vary.
GBT_TUNABLE: dict[str, str] = {
    "learning_rate": "float",
    "max_iter": "int",
    "max_leaf_nodes": "int",
    "min_samples_leaf": "int",
    "l2_regularization": "float",
}


# trainer/tabular/gbt.py's GbtHyperparameters fields (a test keeps the two lists equal):
# checked when the file loads, so that the MLP's `hidden_units` left in a file
# switched to `model: gbt` is named there, not mid-run.
GBT_HYPERPARAMETERS = (
    "learning_rate",
    "max_iter",
    "max_leaf_nodes",
    "max_depth",
    "min_samples_leaf",
    "l2_regularization",
    "early_stopping",
    "seed",
    "batch_size",
    "eval_batch_size",
)


@dataclass(frozen=True)
class TabularModel:
    name: str
    run_fn: str
    tunable: dict[str, str]
    # The `hyperparameters:` it takes (None: checked by the trainer).
    hyperparameters: tuple[str, ...] | None = None


MODELS = {
    "mlp": TabularModel("mlp", GENERIC_RUN_FN, TUNABLE),
    "gbt": TabularModel("gbt", GBT_RUN_FN, GBT_TUNABLE, GBT_HYPERPARAMETERS),
}


def tabular_model(raw: dict[str, Any], where: str, generic: bool) -> TabularModel | None:
    """The dataset file's `model:` (None when it names none); refused where it cannot apply.

    Raises ValueError (pipeline/datasets.py turns it into a DatasetFileError).
    """
    if "model" not in raw:
        return None
    value = raw["model"]
    if value not in MODELS:
        raise ValueError(f"{where}: model must be one of {sorted(MODELS)}, not {value!r}")
    if not generic:
        raise ValueError(
            f"{where}: model: chooses the generic tabular trainer's model; a dataset with its "
            "own run_fn/preprocessing_fn, or an image dataset, has no use for it"
        )
    model = MODELS[value]
    given = raw.get("hyperparameters") or {}
    unknown = (
        sorted(set(given) - set(model.hyperparameters or given)) if isinstance(given, dict) else []
    )
    if unknown:
        raise ValueError(
            f"{where}: hyperparameters {unknown} are not model: {value}'s; it takes "
            f"{list(model.hyperparameters or ())}. Switching models, replace the whole "
            "hyperparameters: block (the MLP's learning_rate, e.g. 0.003, is far too small "
            "for trees, whose default is 0.1; docs/own-data.md)"
        )
    return model
