"""A dataset file's `tuning:` section: the search space (each hyperparameter a list
of values or a range), the algorithm and the trial and time budget."""

from __future__ import annotations

from typing import Any

from pipeline.config import (
    TUNING_ALGORITHMS,
    TuningOptions,
)
from pipeline.dataset_sections import DatasetFileError, check_keys

_TUNING_KEYS = {
    "search_space",
    "algorithm",
    "max_trials",
    "max_minutes",
    "trial_steps",
    "parallel_trials",
    "trial_timeout_minutes",
}
# Hyperparameters whose values are bounded beyond their type: [low, high).
_TUNING_BOUNDS = {"dropout": (0.0, 1.0)}
_RANGE_KEYS = {"min", "max", "sampling", "step"}
_SAMPLINGS = ("linear", "log")


def _is_number(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind == "int" else isinstance(value, (int, float))


def _units(value: Any) -> bool:
    """A list of layer sizes: positive integers, at least one."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(_is_number(u, "int") and u > 0 for u in value)
    )


def _search_dimension(name: str, kind: str, spec: Any, where: str) -> dict[str, Any]:
    """One hyperparameter's range ({min, max, sampling, step}) or its {choices}."""
    if not isinstance(spec, dict):
        raise DatasetFileError(f"{where}: expected {{min:, max:}} or {{choices: [...]}}")
    if "choices" in spec:
        check_keys(spec, {"choices"}, where)
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise DatasetFileError(f"{where}.choices: an empty range; list at least one value")
        check = _units if kind == "units" else (lambda v: _is_number(v, kind))
        wrong = [c for c in choices if not check(c)]
        if wrong:
            expected = {"units": "lists of positive layer sizes", "int": "integers"}
            raise DatasetFileError(
                f"{where}.choices: {wrong} are not {expected.get(kind, 'numbers')}"
            )
        if len({str(c) for c in choices}) != len(choices):
            raise DatasetFileError(f"{where}.choices: {choices} lists a value twice")
        _check_bounds(name, choices, where)
        return {"choices": [list(c) if kind == "units" else c for c in choices]}
    if kind == "units":
        raise DatasetFileError(f"{where}: layer sizes are tuned as {{choices: [[64, 32], ...]}}")
    check_keys(spec, _RANGE_KEYS, where)
    low: Any = spec.get("min")
    high: Any = spec.get("max")
    for key, value in (("min", low), ("max", high)):
        if not _is_number(value, kind):
            what = "an integer" if kind == "int" else "a number"
            raise DatasetFileError(f"{where}.{key}: expected {what}, not {value!r}")
    if not low < high:
        raise DatasetFileError(f"{where}: an empty range (min {low} is not below max {high})")
    _check_bounds(name, [low, high], where)
    sampling = spec.get("sampling", "linear")
    if sampling not in _SAMPLINGS:
        raise DatasetFileError(
            f"{where}.sampling: must be one of {list(_SAMPLINGS)}, not {sampling!r}"
        )
    if sampling == "log" and low <= 0:
        raise DatasetFileError(f"{where}: a log range needs min > 0, not {low}")
    dimension = {"min": low, "max": high, "sampling": sampling}
    if "step" in spec:
        step = spec["step"]
        if not _is_number(step, kind) or step <= 0:
            raise DatasetFileError(f"{where}.step: expected a positive {kind}, not {step!r}")
        dimension["step"] = step
    return dimension


def _check_bounds(name: str, values: list, where: str) -> None:
    if name not in _TUNING_BOUNDS:
        return
    low, high = _TUNING_BOUNDS[name]
    outside = [v for v in values if not low <= v < high]
    if outside:
        raise DatasetFileError(f"{where}: {outside} outside [{low}, {high}) for {name}")


def _positive(raw: dict, key: str, kind: str, where: str, default: Any) -> Any:
    value = raw.get(key, default)
    if value is None and default is None:
        return None
    if not _is_number(value, kind) or value <= 0:
        what = "a positive integer" if kind == "int" else "a positive number"
        raise DatasetFileError(f"{where}.{key}: expected {what}, not {value!r}")
    return value


def read_tuning(raw: Any, where: str, tunable: dict[str, str]) -> TuningOptions | None:
    """The `tuning:` mapping: a search space over the trainer's `tunable` hyperparameters,
    budgets and how many trials run at once."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DatasetFileError(f"{where}: expected a mapping of {sorted(_TUNING_KEYS)}")
    check_keys(raw, _TUNING_KEYS, where)
    space = raw.get("search_space")
    if not isinstance(space, dict) or not space:
        raise DatasetFileError(
            f"{where}.search_space: name at least one of {sorted(tunable)} with its range"
        )
    unknown = sorted(str(k) for k in set(space) - set(tunable))
    if unknown:
        raise DatasetFileError(
            f"{where}.search_space: unknown hyperparameter(s) {unknown}; tunable: {sorted(tunable)}"
        )
    parsed = {
        name: _search_dimension(name, tunable[name], spec, f"{where}.search_space.{name}")
        for name, spec in space.items()
    }
    algorithm = raw.get("algorithm", "random")
    if algorithm not in TUNING_ALGORITHMS:
        raise DatasetFileError(
            f"{where}.algorithm: must be one of {list(TUNING_ALGORITHMS)}, not {algorithm!r}"
        )
    return TuningOptions(
        search_space=parsed,
        algorithm=algorithm,
        max_trials=_positive(raw, "max_trials", "int", where, TuningOptions.max_trials),
        max_minutes=_positive(raw, "max_minutes", "float", where, None),
        trial_steps=_positive(raw, "trial_steps", "int", where, None),
        parallel_trials=_positive(
            raw, "parallel_trials", "int", where, TuningOptions.parallel_trials
        ),
        trial_timeout_minutes=_positive(
            raw, "trial_timeout_minutes", "float", where, TuningOptions.trial_timeout_minutes
        ),
    )
