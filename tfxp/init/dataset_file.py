"""`tfxp init`, step 3: the text of the files the user edits, dataset.yaml (label,
task, treatments, model, Evaluator thresholds, slicing) and validation.yaml."""

from __future__ import annotations

import math

from tfxp.init import inference as init_inference
from tfxp.init.model_choice import MLP_BATCH_SIZE, choose_model, mlp_batch_size, model_lines
from tfxp.init.profile import Inferred

# Train steps: about this many passes over the training split (2/3 of the rows), within
# bounds. Measured on scikit-learn's diabetes (442 rows): RMSE 56 after 15 passes, 67
# after 65 (the small tower overfits a small table); wine and breast cancer lose nothing.
TRAIN_EPOCHS = 15
MIN_TRAIN_STEPS, MAX_TRAIN_STEPS = 50, 5000
DEFAULT_BATCH_SIZE = MLP_BATCH_SIZE
INIT_MARK = "written by `tfxp init`"  # in the dataset files --force may rewrite

FEATURES_COMMENT = (
    "# Each feature's treatment: zscore (numbers; blanks -> mean + is-missing indicator),",
    "# bucketize (numbers; `buckets: 10`), vocabulary (strings, categorical ints;",
    "# `top_k: 1000`, `oov_buckets: 1`), date / timestamp (`format: iso | dmy | mdy`, a",
    "# timestamp also `unix_seconds`: year, month, day of week and of year, hour, days",
    "# since 1970), text (words -> vocabulary ids; `max_tokens: 32`). Remove a feature,",
    "# or list it under exclude, to drop it.",
)


# ---------------------------------------------------------------------------
# The files init writes.


def round_up(x: float, places: int = 3) -> float:
    return math.ceil(x * 10**places) / 10**places


def _round_down(x: float, places: int = 3) -> float:
    return math.floor(x * 10**places) / 10**places


def significant(x: float) -> float:
    """`x` rounded down to 3 significant digits (an RMSE bound in the label's units)."""
    if x <= 0:
        return 0.0
    places = max(0, 2 - int(math.floor(math.log10(x))))
    return _round_down(x, places)


def dataset_yaml(inferred: Inferred, data_root: str | None) -> str:
    q = yaml_str
    batch = mlp_batch_size(inferred.rows)
    lines = [
        f"# Dataset file of {inferred.name!r}, {INIT_MARK} from {inferred.rows} rows.",
        f"# Edit it, not code: `tfxp run --dataset {inferred.name}` reads it on every run.",
        f"name: {inferred.name}",
    ]
    if data_root:
        lines.append(f"data_root: {q(data_root)}")
    else:
        lines.append(f"data_root: data/{inferred.name}")
    lines += [
        "",
        f"label: {q(inferred.label.name)}",
        f"# binary | multiclass | regression (inferred: {inferred.label.distinct} distinct "
        f"{_kind_word(inferred.label.kind)} values)",
        f"task: {inferred.task}",
    ]
    if inferred.classes:
        order = "[negative, positive]" if inferred.task == "binary" else "output order"
        lines.append(f"# The label's values, {order}.")
        lines.append(f"classes: [{', '.join(q(c) for c in inferred.classes)}]")
    lines += ["", *FEATURES_COMMENT, "features:"]
    for c in inferred.features:
        fmt = f", format: {c.format}" if c.format else ""
        lines.append(f"  {q(c.name)}: {{treatment: {c.treatment}{fmt}}}")
    excluded = [c for c in inferred.columns if c.treatment == "excluded"]
    lines.append("# Columns kept in the data but not used by the model.")
    if excluded:
        lines.append("exclude:")
        lines += [f"  - {q(c.name)}  # {c.note}" for c in excluded]
    else:
        lines.append("exclude: []")
    lines += init_inference.table_option_lines(inferred, yaml_str)
    lines += init_inference.request_log_lines(inferred.columns, yaml_str)
    lines += [
        "",
        f"# About {TRAIN_EPOCHS} passes over the training split (2/3 of the rows).",
        f"train_steps: {train_steps(inferred.rows, batch)}",
        "eval_steps: 5",
    ]
    lines += model_lines(*model_choice(inferred), batch)  # tfxp/init/model_choice.py
    lines += [
        "",
        "# When the Evaluator blesses a model (and so the Pusher pushes it).",
        "evaluation:",
    ]
    if inferred.task == "regression":
        bound = significant(inferred.label_std)
        lines += [
            f"  # Predicting the mean ({inferred.label_mean:.4g}) for every row has RMSE "
            f"{inferred.label_std:.4g}: a model must do better.",
            "  metric: RootMeanSquaredError",
            f"  upper_bound: {bound}",
            "  extra_metrics: [MeanAbsoluteError]",
        ]
    elif inferred.class_weights:
        classes = len(inferred.class_weights)
        lines += init_inference.imbalanced_evaluation_lines(inferred, classes)
    else:
        metric = "BinaryAccuracy" if inferred.task == "binary" else "SparseCategoricalAccuracy"
        extra = "[AUC]" if inferred.task == "binary" else "[]"
        lines += [
            f"  # Always predicting the most frequent class is right {inferred.majority:.1%} "
            "of the time: a model must do better.",
            f"  metric: {metric}",
            f"  lower_bound: {round_up(inferred.majority)}",
            f"  extra_metrics: {extra}",
        ]
    return "\n".join(lines + _slicing_lines(inferred)) + "\n"


# A categorical feature with at most this many values makes a readable slicing.
SLICE_MAX_VALUES = 12


def suggested_slices(inferred: Inferred) -> list[str]:
    """Features to slice the evaluation by: up to two categorical features with few
    values (fewest first), or for a classifier with none, its label (one slice per class)."""
    categorical = sorted(
        (
            c
            for c in inferred.features
            if c.treatment == "vocabulary" and 2 <= c.distinct <= SLICE_MAX_VALUES
        ),
        key=lambda c: (c.distinct, c.name),
    )
    names = [c.name for c in categorical[:2]]
    if not names and inferred.task != "regression":
        names = [inferred.label.name]
    return names


def _slicing_lines(inferred: Inferred) -> list[str]:
    names = suggested_slices(inferred)
    lines = [
        "",
        "# Evaluation by slice (docs/trust.md): every metric per value of these features",
        "# (a numeric feature needs `buckets: {name: [boundaries]}`), and the blessing",
        "# asks each slice with at least `min_examples` eval rows not to fall more than",
        "# `max_drop` behind the baseline model on that slice. `lower_bound` adds a floor.",
        "# Written with the limitations below into the model card of every pushed model.",
    ]
    if not names:
        return lines + ["# slicing:", "#   by: [a_feature]", "#   min_examples: 20"]
    drop = significant(0.1 * inferred.label_std) if inferred.task == "regression" else 0.1
    lines += [
        "slicing:",
        f"  by: [{', '.join(yaml_str(n) for n in names)}]",
        f"  min_examples: {max(20, inferred.rows // 100)}",
        f"  max_drop: {drop}",
        "# What the model is for and where it must not be trusted (the model card says it).",
        "# intended_use: >-",
        "#   ...",
        "# limitations: >-",
        "#   ...",
    ]
    return lines


def train_steps(rows: int, batch_size: int = DEFAULT_BATCH_SIZE) -> int:
    steps = math.ceil(TRAIN_EPOCHS * (rows * 2 // 3) / batch_size)
    return min(MAX_TRAIN_STEPS, max(MIN_TRAIN_STEPS, steps))


def _kind_word(kind: str) -> str:
    return {"INT": "integer", "FLOAT": "number", "BYTES": "text"}[kind]


def yaml_str(value: str) -> str:
    import yaml

    text = yaml.safe_dump(value, default_style=None).strip()
    return text[: -len("\n...")] if text.endswith("\n...") else text.removesuffix("...").strip()


def validation_yaml(inferred: Inferred) -> str:
    # Ids, dates and free text take new values in every span: not compared.
    off = [
        c.name for c in inferred.columns if c.treatment in ("excluded", "date", "timestamp", "text")
    ]
    features = "".join(f"    {c}: off\n" for c in off) or ""
    block = "  features:\n" + features if features else "  features: {}\n"
    return (
        f"# Data validation thresholds of {inferred.name!r} (read by the validation gate).\n"
        "# drift: a span against the previous span; skew: training data against serving\n"
        "# requests (data_root/serving/*.csv, when there are any). Categorical features are\n"
        "# compared by L-infinity distance, numeric ones by Jensen-Shannon divergence;\n"
        "# `off` = not compared. Small drops are noisy: raise a threshold rather than\n"
        "# turning a feature off. Excluded columns (ids), dates and free text are off.\n"
        "drift:\n  categorical: 0.1\n  numeric: 0.15\n" + block + "skew:\n  categorical: 0.1\n"
        "  numeric: 0.15\n" + block + "\n"
        "# Anomaly kinds reported as warnings instead of blocking the run.\nwarn_only: []\n"
    )


def model_choice(inferred: Inferred) -> tuple[str, str]:
    """The model init writes, and why (tfxp/init/model_choice.py)."""
    weighted = bool(inferred.class_weights) and inferred.task == "binary"
    treatments = [c.treatment for c in inferred.features]
    return choose_model(inferred.rows, treatments, imbalanced=weighted)
