"""The sequence trainer: a GRU or a 1-D convolution over masked, variable-length steps.

Sequence datasets (`kind: sequence` in the dataset file) get it by default
(`preprocessing_fn: trainer.sequence.preprocessing.preprocessing_fn`,
`run_fn: trainer.sequence.train.run_fn`); the pipeline passes the dataset's
`sequence:` options as `custom_config["sequence"]`. Modules: `features.py` (the
options and transformed names), `preprocessing.py` (tf.Transform over the ragged
feature lists of raw SequenceExamples), `model.py` (Keras), `train.py` (run_fn,
length-bucketed tf.data input, the serialized-SequenceExample signatures).
"""
