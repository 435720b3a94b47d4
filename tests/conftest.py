"""Shared pytest setup: quiet TensorFlow and Keras 2 (tf_keras) before any TF import."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
