"""The Tuner step's search, shared by the trainers: a dataset file's `tuning:` as KerasTuner's.

A trainer that can be tuned exposes `tuner_fn(fn_args)` beside its `run_fn`
(the pipeline calls `<run_fn's module>.tuner_fn`), and builds its search with
`search_result`: a function from a `Hyperparameters` (the dataset file's
values with one trial's choices put in) to a compiled Keras model, and the
dataset function its run_fn uses. Each trial trains `trial_steps` steps on the
train split (its own batch size, when that is tuned) and is scored by its loss
on the eval split (`val_loss`, lower is better: every trainer has a loss).
KerasTuner's BaseTuner runs the loop and its oracle picks the values; `_Search`
builds and trains each trial.

The search space arrives through custom_config["tuning"] (pipeline/config.py's
TuningOptions, checked when the dataset file loads). With `parallel_trials`
above 1, the trials run in worker processes (trainer/parallel_trials.py),
each of which builds this same search from `custom_config["tuner_fn"]` and
scores the trials the oracle, kept here, hands it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import keras_tuner as kt
import tensorflow as tf
import tf_keras as keras
from keras_tuner.engine import base_tuner

from trainer import parallel_trials
from trainer.base import Hyperparameters, tuned_values, units_choice
from trainer.curves import TRAIN_LOGS, training_curves

# The custom config's folder for each trial's TensorBoard logs, which the Tuner's
# executor sets (components/tuner/component.py's TENSORBOARD_KEY: named, not
# imported, as components and trainer import each other nowhere; a test checks it).
TRIAL_LOGS_KEY = "trial_tensorboard_dir"

OBJECTIVE = kt.Objective("val_loss", direction="min")
# kt's oracles: both stop after max_trials; Bayesian also stops on an exhausted space.
_ORACLES = {
    "random": kt.oracles.RandomSearchOracle,
    "bayesian": kt.oracles.BayesianOptimizationOracle,
}

# (patterns, batch_size, training) -> dataset of (features, label) batches.
DatasetFn = Callable[[Any, int, bool], tf.data.Dataset]


class TunerFnResult(NamedTuple):
    """What TFX's Tuner executor reads from a tuner_fn's result: the fields of
    tfx.components.tuner.component.TunerFnResult. Defined here because importing
    that module imports every TFX component (seconds of each parallel trial
    worker's start-up), and the executor only reads these two attributes."""

    tuner: base_tuner.BaseTuner
    fit_kwargs: dict[str, Any]


def declare(hp: kt.HyperParameters, space: dict[str, dict[str, Any]]) -> None:
    """Declares each dimension of a search space in `hp` (types as pipeline/datasets.py checked)."""
    for name, spec in space.items():
        if "choices" in spec:
            choices = spec["choices"]
            if choices and isinstance(choices[0], list):
                choices = [units_choice(c) for c in choices]
            hp.Choice(name, choices, ordered=False)
        elif isinstance(spec["min"], int) and isinstance(spec["max"], int):
            hp.Int(name, spec["min"], spec["max"], step=spec.get("step"), sampling=spec["sampling"])
        else:
            hp.Float(
                name, spec["min"], spec["max"], step=spec.get("step"), sampling=spec["sampling"]
            )


def trial_hyperparameters(base: Any, hp: kt.HyperParameters) -> Any:
    """The dataset file's hyperparameters (a trainer's dataclass) with this trial's choices put in."""
    values = tuned_values(hp.get_config())
    values.pop("train_steps", None)
    return dataclasses.replace(base, **values)


class _Search(base_tuner.BaseTuner):
    """KerasTuner's search loop, each trial built and trained here with tf_keras.

    KerasTuner's own Tuner builds through Keras 3 (installed beside tf_keras) and
    refuses the tf_keras models this project trains; its BaseTuner only asks
    `run_trial` for the objective's value. With `workers`, `search` hands the
    trials to worker processes instead (trainer/parallel_trials.py).
    """

    def __init__(
        self,
        fn_args: Any,
        build_model,
        dataset: DatasetFn,
        base: Any,
        workers: parallel_trials.TrialWorkers | None = None,
        **kw,
    ):
        super().__init__(hypermodel=None, **kw)
        self._fn_args = fn_args
        self._build_model = build_model
        self._dataset = dataset
        self._base = base
        self._workers = workers

    def search(self, *fit_args, **fit_kwargs) -> None:
        if self._workers is None:
            return super().search(*fit_args, **fit_kwargs)
        self.on_search_begin()
        parallel_trials.run_trials(self.oracle, self._workers, OBJECTIVE.name)
        self.on_search_end()
        return None

    def run_trial(self, trial, *args, **kwargs) -> float:
        return self.score(trial.hyperparameters, trial.trial_id)

    def trial_log_dir(self, trial_id: str | None) -> str | None:
        """`<the Tuner's tensorboard/>/trial-<n>` for this trial, or None (no folder named)."""
        root = (self._fn_args.custom_config or {}).get(TRIAL_LOGS_KEY)
        if not root or trial_id is None:
            return None
        return f"{root}/trial-{int(trial_id) if trial_id.isdigit() else trial_id}"

    def score(self, hp: kt.HyperParameters, trial_id: str | None = None) -> float:
        """Trains one trial's model and returns its eval loss; with a log folder, writes
        its curves (train/, validation/) and its hyperparameters (a text summary)."""
        log_dir = self.trial_log_dir(trial_id)
        values = trial_hyperparameters(self._base, hp)
        steps = int(hp.values.get("train_steps", self._fn_args.train_steps))
        keras.backend.clear_session()
        keras.utils.set_random_seed(values.seed)
        model = self._build_model(values)
        history = model.fit(
            self._dataset(self._fn_args.train_files, values.batch_size, True),
            epochs=1,
            steps_per_epoch=steps,
            validation_data=self._dataset(self._fn_args.eval_files, values.eval_batch_size, False),
            validation_steps=self._fn_args.eval_steps,
            verbose=2,
            # The Trainer's curves, one folder per trial (trainer/curves.py).
            callbacks=training_curves(log_dir, folder=""),
        )
        if log_dir:
            _write_hyperparameters(f"{log_dir}/{TRAIN_LOGS}", hp.values)
        return float(min(history.history[OBJECTIVE.name]))


def _write_hyperparameters(log_dir: str, values: dict[str, Any]) -> None:
    """The trial's hyperparameters as TensorBoard text (its Text tab): a table."""
    rows = "\n".join(f"| {name} | {value} |" for name, value in sorted(values.items()))
    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default():
        tf.summary.text("hyperparameters", f"| name | value |\n|---|---|\n{rows}", step=0)
    writer.close()


def _with_deadline(oracle_class: type, max_minutes: float | None) -> type:
    """The oracle, ending the search once `max_minutes` have passed (a started trial finishes)."""
    if not max_minutes:
        return oracle_class
    deadline = time.monotonic() + 60 * max_minutes

    class Deadline(oracle_class):
        def create_trial(self, tuner_id):
            if time.monotonic() > deadline:
                # kt stops when as many trials exist as max_trials allows; one
                # trial always runs, or there would be no best hyperparameters.
                self.max_trials = max(1, len(self.trials))
            return super().create_trial(tuner_id)

    return Deadline


def search_result(
    fn_args: Any,
    build_model: Callable[[Any], keras.Model],
    dataset: DatasetFn,
    base: Any = None,
) -> TunerFnResult:
    """TFX's TunerFnResult for a dataset file's `tuning:` (in fn_args.custom_config).

    `base`: the trainer's fixed hyperparameters (a dataclass with `seed`,
    `batch_size` and `eval_batch_size`); by default trainer.base.Hyperparameters'.
    """
    tuning = dict(fn_args.custom_config["tuning"])
    if base is None:
        base = Hyperparameters.from_custom_config(fn_args.custom_config)
    hp = kt.HyperParameters()
    declare(hp, tuning["search_space"])
    oracle = _with_deadline(_ORACLES[tuning["algorithm"]], tuning.get("max_minutes"))(
        objective=OBJECTIVE,
        max_trials=int(tuning["max_trials"]),
        hyperparameters=hp,
        seed=base.seed,
        # Only the declared dimensions: nothing else may appear mid-search.
        allow_new_entries=False,
        tune_new_entries=False,
    )
    tuner = _Search(
        fn_args,
        build_model,
        dataset,
        base,
        parallel_trials.workers_for(fn_args, tuning),
        oracle=oracle,
        directory=fn_args.working_dir,
        project_name="search",
        # The Tuner's working dir is its own per execution; nothing to resume.
        overwrite=True,
    )
    return TunerFnResult(tuner=tuner, fit_kwargs={})
