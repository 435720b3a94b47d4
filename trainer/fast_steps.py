"""A functional Keras model whose train/test/predict steps skip AutoGraph."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras


class FastStepModel(keras.Model):
    """`keras.Model` (functional: `FastStepModel(inputs, outputs)`) minus AutoGraph.

    Keras' `fit` wraps its generic step functions in `tf.function`, and AutoGraph
    then converts them and everything they call (over a hundred tf_keras
    functions, none with tensor-dependent Python control flow) on first use.
    Measured on this project's 2-core machine: 12 s of pure conversion per
    process for the taxi model, 21.5 s of the digits Trainer's 43.6 s. Every
    trainer here builds its model on this class.
    """

    train_step = tf.autograph.experimental.do_not_convert(keras.Model.train_step)
    test_step = tf.autograph.experimental.do_not_convert(keras.Model.test_step)
    predict_step = tf.autograph.experimental.do_not_convert(keras.Model.predict_step)
