"""The Chicago taxi trainer: the worked example of a dataset with its own model code.

Taxi's label ("big tipper": the tip was more than 20% of the fare) is derived
from two columns, which the generic tabular trainer does not do, so
schema/taxi/dataset.yaml names this package's functions by dotted path
(`preprocessing_fn: trainer.taxi.preprocessing.preprocessing_fn`,
`run_fn: trainer.taxi.train.run_fn`), the plug-in contract described in
trainer/base.py. Modules: `features.py` (names and treatments),
`preprocessing.py` (tf.Transform), `model.py` (wide-and-deep Keras),
`train.py` (run_fn and the serving signature).
"""
