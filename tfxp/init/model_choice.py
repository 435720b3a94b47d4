"""Which model `tfxp init` writes into a new dataset file (`model:`), and why.

Measured by benchmarks/tabular_quality.py (docs/performance.md), against
scikit-learn's HistGradientBoosting with default settings on the same splits:
gradient-boosted trees (`model: gbt`) are within the target on every table,
the Keras MLP misses it on the taxi span (2.6 points of accuracy), breast
cancer (569 rows) and a generated 6,000-row multiclass table; on the two
smallest tables (wine, 178 rows; diabetes, 442) the MLP does better than both.
So a table of GBT_MIN_ROWS rows or more gets gbt, a smaller one the MLP.

On those small tables the MLP trains on batches of SMALL_TABLE_BATCH_SIZE rows
(the same passes over the data, twice the steps): with 64-row batches a table of
a few hundred rows gives the MLP a few dozen steps, and its RMSE on a 398-row
cars-like table was 5.2% above HistGradientBoosting's; with 32 it is within the
target on all three small tables (wine, diabetes, cars), the benchmark's figures.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

GBT_MIN_ROWS = 500
# An imbalanced binary label (class weights written) below this many rows keeps the MLP: with
# a few dozen rows of the rare class, trees of min_samples_leaf 20 find it less often than the
# MLP's weighted loss (tests/e2e/test_imbalanced_e2e.py: 700 rows, 7% rare, balanced accuracy
# 0.71 with weighted trees against the 0.75 the test asks).
GBT_MIN_ROWS_IMBALANCED = 5000

# The MLP's batch size: MLP_BATCH_SIZE, or SMALL_TABLE_BATCH_SIZE below GBT_MIN_ROWS rows.
MLP_BATCH_SIZE = 64
SMALL_TABLE_BATCH_SIZE = 32

# The hyperparameters each model's block starts with in a new dataset file.
MLP_HYPERPARAMETERS: dict[str, Any] = {"learning_rate": 0.003, "hidden_units": [64, 32]}
GBT_HYPERPARAMETERS = {
    "learning_rate": 0.1,
    "max_iter": 100,
    "max_leaf_nodes": 31,
    "min_samples_leaf": 20,
}


# Treatments whose transformed features are not a fixed number of values per row
# (free text's tokens): the trees cannot read them (trainer/tabular/gbt.py refuses them).
NOT_FOR_TREES = ("text",)


def choose_model(
    rows: int, treatments: Iterable[str] = (), imbalanced: bool = False
) -> tuple[str, str]:
    """(model, the reason in a sentence) for a table of `rows` rows with these feature
    treatments; `imbalanced`: a binary label whose class weights the dataset file uses."""
    blocked = sorted(set(treatments) & set(NOT_FOR_TREES))
    if blocked:
        return (
            "mlp",
            f"a {blocked[0]} feature: gradient-boosted trees read fixed-size features only",
        )
    if imbalanced and rows < GBT_MIN_ROWS_IMBALANCED:
        return "mlp", (
            f"an imbalanced label in {rows} rows (< {GBT_MIN_ROWS_IMBALANCED}): the MLP's "
            "class-weighted loss finds the rare class more often than trees fitted on its few rows"
        )
    if rows >= GBT_MIN_ROWS:
        return "gbt", (
            f"{rows} rows (>= {GBT_MIN_ROWS}): gradient-boosted trees match default "
            "HistGradientBoosting where the MLP can fall behind"
        )
    return "mlp", (
        f"{rows} rows (< {GBT_MIN_ROWS}): on tables this small the MLP does as well as "
        "gradient-boosted trees or better"
    )


def mlp_batch_size(rows: int) -> int:
    """The MLP's batch size for a table of `rows` rows (see the module's docstring)."""
    return SMALL_TABLE_BATCH_SIZE if rows < GBT_MIN_ROWS else MLP_BATCH_SIZE


def _value(value) -> str:
    return f"[{', '.join(str(v) for v in value)}]" if isinstance(value, list) else str(value)


def model_lines(model: str, reason: str, batch_size: int) -> list[str]:
    """The dataset file's `model:` and `hyperparameters:` lines for the chosen model."""
    if model == "gbt":
        values = dict(GBT_HYPERPARAMETERS)
    else:
        values = {"batch_size": batch_size, **MLP_HYPERPARAMETERS}
    other = "gbt" if model == "mlp" else "mlp"
    return [
        f"# {reason}.",
        f"# mlp (a Keras MLP) or gbt (gradient-boosted trees); switching to {other} means "
        f"its hyperparameters (docs/own-data.md).",
        f"model: {model}",
        "hyperparameters:",
        *(f"  {k}: {_value(v)}" for k, v in values.items()),
    ]
