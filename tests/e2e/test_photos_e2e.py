"""A generated photo dataset end to end: JPEG/PNG class folders at mixed sizes, with the broken
files real folders have, through ingest, statistics, the gate, Transform, training,
evaluation and push.

One module fixture writes 2,000 photos of ~64 px (`tfxp data generate photos`' writer) and
runs the whole pipeline once on them with the image trainer at 32x32x3 and few steps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.example_gen import image_example_gen as ieg
from data import photos
from metadata.summary import RunSummary
from pipeline import node_ids
from pipeline.config import EvalThresholds, ImageOptions
from pipeline.datasets import DATASETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

IMAGES = 2000


@dataclass
class PhotoRun:
    made: dict
    span: Path
    summary: RunSummary
    examples: metadata_store_pb2.Artifact


@pytest.fixture(scope="module")
def photo_run(tmp_path_factory) -> PhotoRun:
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("photos")
    span = tmp / "data" / "span-1"
    made = photos.write_photos(span, IMAGES, size=64, classes=10, seed=5)
    config = DATASETS["digits"].replace(
        pipeline_name="photos-e2e",
        data_root=str(tmp / "data"),
        run_dir=str(tmp / "run"),
        image=ImageOptions(class_names=tuple(made["classes"]), height=32, width=32, channels=3),
        train_steps=150,
        hyperparameters={"filters": [16, 32], "dense_units": 32, "flip": True},
        thresholds=EvalThresholds(metric="SparseCategoricalAccuracy", lower_bound=0.4),
        slicing=None,
    )
    summary = run_local(config, run_id="photos", printer=lambda _: None)
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = config.metadata_path
    store = metadata_store.MetadataStore(cfg)
    [examples] = [
        a for a in store.get_artifacts_by_type("Examples") if ieg.IMAGE_COUNT in a.custom_properties
    ]
    return PhotoRun(made, span, summary, examples)


def test_the_model_beats_the_majority_class_and_is_pushed(photo_run):
    s = photo_run.summary
    states = {c.node_id: c.state for c in s.components}
    for node in (
        node_ids.IMAGE_EXAMPLE_GEN,
        node_ids.TRANSFORM,
        node_ids.TRAINER,
        node_ids.EVALUATOR,
    ):
        assert states.get(node) == "COMPLETE", (node, states)
    per_class = json.loads(photo_run.examples.custom_properties[ieg.CLASS_COUNTS].string_value)
    majority = max(per_class["eval"].values()) / sum(per_class["eval"].values())
    accuracy = s.metrics["sparse_categorical_accuracy"]
    assert accuracy > majority + 0.3, (accuracy, majority)
    assert s.blessed is True and s.pushed is True
    assert (Path(s.pushed_model) / "saved_model.pb").is_file()


def test_the_run_report_names_every_broken_file(photo_run):
    rendered = photo_run.summary.render()
    for b in photo_run.made["broken"]:
        if b["ingest"] == "bad":
            assert f"{photo_run.span / b['path']}: " in rendered, b
    assert "4 bad file(s) left out" in rendered
    assert "3 non-image file(s) ignored" in rendered
    # The unusual but valid images (CMYK, grayscale, 16-bit) were ingested and trained on.
    assert f"ingest: {IMAGES + 3:,} images (jpeg " in rendered
