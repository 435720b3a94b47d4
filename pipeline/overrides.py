"""The one way a runner turns its overrides into a `PipelineConfig`.

`tfxp run` flags, the Airflow DAG's TFXP_* environment and the Kubeflow
compile options all name the same fields of `PipelineConfig`; each runner
reads its own source and hands the values here. `None` keeps the dataset's
default, so a runner passes every override it knows and need not test which
were given.
"""

from __future__ import annotations

from typing import Any

from pipeline.beam import BeamOptions, beam_args
from pipeline.config import PipelineConfig
from pipeline.datasets import DEFAULT_DATASET, dataset_config

# What a runner may override: the config's own field names.
OVERRIDABLE = (
    "data_root",
    "run_dir",
    "artifact_root",
    "serving_root",
    "state_dir",
    "schema_file",
    "train_steps",
    "eval_steps",
    "enable_cache",
    "warn_only",
    "span",
    "version",
    "window",
    "data_version",
    "data_sha256",
    "num_shards",
    "beam_args",
    # A BeamOptions (pipeline/beam.py): its mode's arguments become beam_args.
    "beam",
    "trainer_cluster",
    # A StorageEncryption (components/io/encryption.py): `--sse` and friends.
    "storage",
)


def pipeline_config(dataset: str = DEFAULT_DATASET, **overrides: Any) -> PipelineConfig:
    """The dataset's config with every override that is not None (ValueError for
    an unknown dataset or a field no runner may set)."""
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ValueError(f"not a pipeline setting a runner overrides: {', '.join(unknown)}")
    changes = {k: v for k, v in overrides.items() if v is not None}
    if "warn_only" in changes:
        changes["warn_only"] = tuple(changes["warn_only"])
    beam: BeamOptions | None = changes.pop("beam", None)
    if beam is not None:
        if "beam_args" in changes:
            raise ValueError("give Beam options or raw beam_args, not both")
        changes["beam_args"] = beam_args(beam)
    return dataset_config(dataset).replace(**changes)
