"""tf.Transform's internals behind the in-process Transform writing (components/fast/transform/)."""

from __future__ import annotations

from compat import check_version, private

LIBRARY = "tensorflow-transform"
WRITTEN_FOR = "1.16.0"
check_version(LIBRARY, WRITTEN_FOR)

_IMPL = "tensorflow_transform.beam.impl"

GraphStateCompatV1 = private(
    LIBRARY,
    f"{_IMPL}._RunMetaGraphDoFn._GraphStateCompatV1",
    "the transform graph loaded as TFT's own DoFn loads it",
)
FIXED_PARALLELISM_TF_CONFIG = private(
    LIBRARY,
    f"{_IMPL}._FIXED_PARALLELISM_TF_CONFIG",
    "the TensorFlow config TFT runs its graph with on local runners",
)
convert_to_record_batch = private(
    LIBRARY,
    f"{_IMPL}._convert_to_record_batch",
    "the graph's outputs to Arrow, as TFT converts them",
)
