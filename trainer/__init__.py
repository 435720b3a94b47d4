"""Model code: one package per trainer on a shared base.

`base.py` holds what every trainer shares (hyperparameters, input options,
signatures and export, the epoch timer) and describes how a dataset's own
model code plugs in. Trainers: `taxi/` (the Chicago taxi data's own code),
`tabular/` (any CSV table, from its dataset file), `image/` (class folders of
images). Shared infrastructure: `input.py`, `input_wait.py`,
`distribution.py`, `data_service.py`, `fast_steps.py`, `ports.py`.

Only TensorFlow and tf.Transform are imported here (never `pipeline`), so each
module can be tested alone and shipped to any orchestrator's workers.
"""

import os

# tf.Transform's serving layer is Keras 2 (tf_keras); the model must be too, or
# the transform graph cannot be tracked into the exported SavedModel. This must
# be set before TensorFlow is first imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
