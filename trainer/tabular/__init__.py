"""The generic tabular trainer: any CSV table, driven by its dataset file.

`schema/<NAME>/dataset.yaml` names the label, the task (binary, multiclass,
regression) and each feature's treatment; the pipeline passes them to
Transform and the Trainer as `custom_config["tabular"]` (as the image path
passes `custom_config["image"]`). Modules: `features.py` (the options),
`preprocessing.py` (tf.Transform), `model.py` (Keras), `train.py` (run_fn
and the serving signature). TensorFlow and tf.Transform only.
"""
