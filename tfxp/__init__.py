"""Operations on the pipeline: the `tfxp` commands, ML Metadata readers, object storage, the local run.

Floor 2 of the house (docs/architecture.md): imports `pipeline`, `components` and
`trainer`, never the runners above it.
"""

import pipeline  # noqa: F401 - sets TF_USE_LEGACY_KERAS before any TensorFlow import
