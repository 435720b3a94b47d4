"""A taxi Transform output for Trainer tests: the pipeline run up to Transform, once per session.

A plain module (tests/e2e is on sys.path): import the fixture into a test
module to use it. The train split is also re-cut into `TRAIN_SHARDS` files,
so multi-worker training can shard it by file (Transform writes one file
per split at this size).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import small_config, write_sample

from pipeline.config import PipelineConfig

TRAIN_SHARDS = 4
# The whole embedded span (~10k train, ~5k eval rows): on the 3,000-row sample,
# training runs that differ only in data order differ by up to 0.014 in eval
# accuracy (measured), too noisy to compare at 0.01.
ROWS = 15_000


@dataclass(frozen=True)
class TaxiTransform:
    config: PipelineConfig
    raw_eval: list[str]  # CsvExampleGen's eval split (raw tf.Examples)
    # Transformed examples as an Examples artifact folder: the train split in
    # TRAIN_SHARDS files (Split-train/), the eval split as Transform wrote it.
    examples: str


def reshard(files: list[str], out_dir: Path, shards: int) -> list[str]:
    """Records of `files` dealt round-robin into `shards` GZIP TFRecord files."""
    import tensorflow as tf

    out_dir.mkdir(parents=True)  # parents: an artifact's Split-* folder
    paths = [str(out_dir / f"part-{i:05d}-of-{shards:05d}.gz") for i in range(shards)]
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    writers = [tf.io.TFRecordWriter(p, options) for p in paths]
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    for i, record in enumerate(records.as_numpy_iterator()):
        writers[i % shards].write(record)
    for w in writers:
        w.close()
    return paths


@pytest.fixture(scope="session")
def taxi_transform(tmp_path_factory: pytest.TempPathFactory) -> TaxiTransform:
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("taxi_transform")
    write_sample(tmp / "data", rows=ROWS)
    config = small_config(tmp)
    run_local(config, to_nodes=("Transform",), printer=lambda _: None)
    root = Path(config.pipeline_root)
    raw_eval = sorted(str(p) for p in root.glob("CsvExampleGen/examples/*/Split-eval/*"))
    train = sorted(str(p) for p in root.glob("Transform/transformed_examples/*/Split-train/*"))
    assert raw_eval and train, f"no eval/train split under {root}"
    examples = tmp / "examples"
    reshard(train, examples / "Split-train", TRAIN_SHARDS)
    shutil.copytree(Path(train[0]).parent.parent / "Split-eval", examples / "Split-eval")
    return TaxiTransform(config, raw_eval, str(examples))
