"""A component that crashes is recorded FAILED in ML Metadata and publishes nothing.

docs/reliability.md: "A failed component publishes nothing: its execution is
recorded as failed in ML Metadata and no artifact of it is live." The
ExampleGen side is in test_bad_input.py; this is a crash inside Transform's
user code (the preprocessing_fn raises), with everything upstream complete.
"""

from __future__ import annotations

import pytest
from e2e_support import failed_executions, small_config, write_sample
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tfxp.local.runner import PipelineRunError, run_local

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_crash_in_transform_is_recorded_failed_and_publishes_nothing(tmp_path):
    write_sample(tmp_path / "data", rows=500)
    # TFX re-imports the module by name (a monkeypatched attribute would not survive).
    config = small_config(tmp_path, preprocessing_fn="crashing_preprocessing.preprocessing_fn")
    with pytest.raises(PipelineRunError) as info:
        run_local(config, to_nodes=["Transform"], printer=lambda _: None)
    assert str(info.value).startswith("Transform failed")
    assert "preprocessing exploded on purpose" in str(info.value)

    assert failed_executions(config.metadata_path, "Transform") == ["FAILED"]
    assert failed_executions(config.metadata_path, "CsvExampleGen") == ["COMPLETE"]
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = config.metadata_path
    store = metadata_store.MetadataStore(cfg)
    for kind in ("TransformGraph", "Examples"):
        live_of_transform = [
            a
            for a in store.get_artifacts_by_type(kind)
            if a.state == metadata_store_pb2.Artifact.LIVE and "/Transform/" in a.uri
        ]
        assert live_of_transform == [], f"the failed Transform published a live {kind}"
