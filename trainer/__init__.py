"""Model code for the Chicago taxi dataset: features, preprocessing, model, input, run_fn.

Only TensorFlow and tf.Transform are imported here (never `pipeline`), so each
module can be tested alone and shipped to any orchestrator's workers.
"""

import os

# tf.Transform's serving layer is Keras 2 (tf_keras); the model must be too, or
# the transform graph cannot be tracked into the exported SavedModel. This must
# be set before TensorFlow is first imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
