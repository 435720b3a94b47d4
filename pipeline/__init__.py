"""What a pipeline IS: its typed config, overrides, the one definition, node ids, spans, fingerprints."""

import os

# tf.Transform and the trainer need Keras 2 (tf_keras); must precede any TF import.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
