"""A functional Keras model whose train/test/predict functions skip AutoGraph."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras


def _without_autograph(fn):
    """The tf.function Keras built around a single step, rebuilt with AutoGraph off
    (anything else unchanged: the eager function of `run_eagerly`, or the lambda a
    ParameterServerStrategy's coordinator schedules)."""
    if not isinstance(fn, tf.types.experimental.PolymorphicFunction):
        return fn
    return tf.function(fn.python_function, reduce_retracing=True, autograph=False)


class FastStepModel(keras.Model):
    """`keras.Model` (functional: `FastStepModel(inputs, outputs)`) minus AutoGraph.

    Keras' `fit` wraps its generic step functions in `tf.function`, and AutoGraph
    then converts them and everything they call (over a hundred tf_keras
    functions, none with tensor-dependent Python control flow) on first use.
    Measured on this project's 2-core machine: 12 s of pure conversion per
    process for the taxi model, 21.5 s of the digits Trainer's 43.6 s. Every
    trainer here builds its model on this class.

    The steps themselves are marked not to convert, and the one-step functions
    around them (`train_function` -> `step_function` -> `reduce_per_replica`,
    the same for test and predict) are rebuilt with AutoGraph off: converting
    those alone cost ~2 CPU-s of every taxi Trainer run. Keras' multi-step
    functions (`steps_per_execution` > 1) loop over `tf.range` and keep it.
    """

    train_step = tf.autograph.experimental.do_not_convert(keras.Model.train_step)
    test_step = tf.autograph.experimental.do_not_convert(keras.Model.test_step)
    predict_step = tf.autograph.experimental.do_not_convert(keras.Model.predict_step)

    def _one_step_per_execution(self) -> bool:
        # Keras' own test for its single-step functions (tf_keras engine/training.py).
        steps = self._steps_per_execution
        return steps is None or (
            steps.numpy().item() == 1 and not self.autotune_steps_per_execution
        )

    def _unconverted(self, attr: str, make, force: bool):
        """Keras' `make` (a make_*_function) once, its one-step function rebuilt without
        AutoGraph; cached in `attr` as Keras caches it."""
        if getattr(self, attr) is None or force:
            make(force)
            if self._one_step_per_execution():
                setattr(self, attr, _without_autograph(getattr(self, attr)))
        return getattr(self, attr)

    def make_train_function(self, force=False):
        fn = self._unconverted("train_function", super().make_train_function, force)
        if isinstance(fn, tf.types.experimental.PolymorphicFunction):
            self.train_tf_function = fn  # Keras keeps the tf.function here too
        return fn

    def make_test_function(self, force=False):
        return self._unconverted("test_function", super().make_test_function, force)

    def make_predict_function(self, force=False):
        return self._unconverted("predict_function", super().make_predict_function, force)
