"""Typed configuration of a Kubeflow Pipelines deployment of the pipeline.

Paths here are as seen *inside the container* (or remote URIs): the compiled
spec runs on a cluster, not on the machine that compiles it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pipeline.beam import BeamConfigError, BeamOptions, beam_args
from pipeline.config import PROJECT_ROOT, PipelineConfig
from pipeline.datasets import DEFAULT_DATASET, dataset_config
from pipeline.overrides import pipeline_config

# The image the Dockerfile builds (its `org.opencontainers.image.title` label).
# Push it as <registry>/tfx-pipeline:<tag> and pass that as --image / KFP_IMAGE.
IMAGE_NAME = "tfx-pipeline"
# Where the Dockerfile puts the project inside the image (WORKDIR, importable).
CONTAINER_PROJECT_ROOT = "/pipeline"
DEFAULT_OUTPUT_FILE = "build/kubeflow/{pipeline_name}_pipeline.json"

# Beam runners for the Beam-powered components (ExampleGen, StatisticsGen,
# Transform, Evaluator): pipeline/beam.py's modes, with the project's image as
# every remote worker's SDK container (so no --setup_file package is needed).
# "direct" is Beam's in-process FnApiRunner inside each task's pod (pipeline/config.py).
BEAM_PRESETS: dict[str, str] = {
    "direct": "in-process",
    "dataflow": "dataflow",
    "spark": "spark",
    "flink": "flink",
    "spark-job-server": "spark-job-server",
}

REMOTE_SCHEMES = ("gs://", "s3://", "minio://", "hdfs://", "abfs://", "az://")


class KubeflowConfigError(ValueError):
    """A configuration the Kubeflow runner cannot use; the message says what to do."""


IMAGE_RE = re.compile(
    r"^[a-z0-9][a-z0-9._-]*(:[0-9]+)?(/[a-z0-9][a-z0-9._-]*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)
_MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?)?\s*$", re.IGNORECASE)


def memory_gb(text: str) -> float:
    """'8G', '512M', '1.5Gi' -> gigabytes (KFP's ResourceSpec.memory_limit unit)."""
    m = _MEMORY_RE.match(text)
    if not m:
        raise KubeflowConfigError(f"memory {text!r} is not a size: use e.g. 512M, 8G or 1.5Gi")
    value, unit = float(m.group(1)), (m.group(2) or "").upper()
    if unit.endswith("I"):
        powers = {"KI": 1, "MI": 2, "GI": 3, "TI": 4}
        return value * 1024 ** powers[unit] / 1e9
    return value * {"": 1e-9, "K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}[unit]


@dataclass(frozen=True)
class Resources:
    """CPU and memory limits of one component's pod (None: the cluster's default)."""

    cpu: float | None = None
    memory: str | None = None  # Kubernetes-style size: 512M, 8G, 1.5Gi

    def validate(self, component: str) -> None:
        if self.cpu is not None and self.cpu <= 0:
            raise KubeflowConfigError(f"{component}: cpu must be positive, got {self.cpu}")
        if self.memory is not None and memory_gb(self.memory) <= 0:
            raise KubeflowConfigError(f"{component}: memory must be positive, got {self.memory}")

    @classmethod
    def parse(cls, text: str) -> Resources:
        """'CPU,MEMORY', either part optional: '2,8G', '4', ',16G'."""
        cpu_text, _, memory = text.partition(",")
        try:
            cpu = float(cpu_text) if cpu_text.strip() else None
        except ValueError:
            raise KubeflowConfigError(
                f"resources {text!r}: expected CPU,MEMORY such as 2,8G (cpu a number)"
            ) from None
        return cls(cpu=cpu, memory=memory.strip() or None)


# Sized for the embedded taxi data; raise them for real datasets.
DEFAULT_RESOURCES: Mapping[str, Resources] = {
    "Transform": Resources(cpu=2, memory="8G"),
    "Trainer": Resources(cpu=2, memory="8G"),
    "Evaluator": Resources(cpu=2, memory="8G"),
}

# Vertex AI machine of each Trainer replica with --trainer-workers > 1.
DEFAULT_TRAINER_MACHINE = "n1-standard-4"


def container_path(host_path: str) -> str:
    """A path under the project on this machine -> the same file inside the image."""
    try:
        rel = Path(host_path).resolve().relative_to(PROJECT_ROOT)
    except ValueError:
        return host_path
    return str(PurePosixPath(CONTAINER_PROJECT_ROOT, *rel.parts))


def host_path(path_in_container: str) -> str:
    """Inverse of `container_path`; remote URIs and other paths are returned as they are."""
    prefix = CONTAINER_PROJECT_ROOT + "/"
    if path_in_container.startswith(prefix):
        return str(PROJECT_ROOT / path_in_container[len(prefix) :])
    return path_in_container


@dataclass(frozen=True)
class KubeflowConfig:
    """Everything that varies between Kubeflow deployments of the pipeline."""

    # The container image every task runs: the Dockerfile's image, pushed to a
    # registry the cluster can pull from (e.g. us-docker.pkg.dev/p/r/tfx-pipeline:0.1.0).
    image: str
    # Where tasks write artifacts (gs://..., s3://..., or a path every pod
    # mounts). Pushed models go to <pipeline_root>/serving.
    pipeline_root: str
    dataset: str = DEFAULT_DATASET
    # As seen inside the container; None: the dataset's default, mapped into the image.
    data_root: str | None = None
    schema_file: str | None = None
    beam_runner: str = "direct"
    # beam_runner "spark": the master of a Spark cluster the pods reach (spark://HOST:PORT),
    # whose executors run the same image (the project's code and libraries).
    spark_master: str | None = None
    # Appended after the preset's flags (later flags win in Beam).
    extra_beam_args: tuple[str, ...] = ()
    resources: Mapping[str, Resources] = field(default_factory=lambda: dict(DEFAULT_RESOURCES))
    train_steps: int | None = None
    enable_cache: bool = True
    output_file: str | None = None
    # Multi-worker training (vertex_trainer_config): N > 1 runs the Trainer as
    # a Vertex AI custom job of N replicas.
    trainer_workers: int = 1
    vertex_project: str | None = None
    vertex_region: str | None = None
    trainer_machine_type: str = DEFAULT_TRAINER_MACHINE

    @property
    def base(self) -> PipelineConfig:
        try:
            return dataset_config(self.dataset)
        except ValueError as e:
            raise KubeflowConfigError(str(e)) from None

    @property
    def container_data_root(self) -> str:
        return self.data_root or container_path(self.base.data_root)

    @property
    def container_schema_file(self) -> str:
        return self.schema_file or container_path(self.base.schema_file)

    @property
    def output_path(self) -> str:
        return self.output_file or str(
            PROJECT_ROOT / DEFAULT_OUTPUT_FILE.format(pipeline_name=self.base.pipeline_name)
        )

    @property
    def serving_dir(self) -> str:
        return self.pipeline_root.rstrip("/") + "/serving"

    def beam_options(self) -> BeamOptions:
        mode = BEAM_PRESETS[self.beam_runner]
        return BeamOptions(
            mode=mode,
            # Beam's job servers start each SDK worker as a container of the image.
            environment_type="DOCKER" if mode in ("flink", "spark-job-server") else None,
            spark_master=self.spark_master,
            temp_location=self.pipeline_root.rstrip("/") + "/beam-tmp",
            sdk_container_image=self.image,
            extra_args=tuple(self.extra_beam_args),
        )

    def beam_args(self) -> tuple[str, ...]:
        try:
            return beam_args(self.beam_options())
        except BeamConfigError as e:
            raise KubeflowConfigError(str(e)) from None

    @property
    def image_repository_name(self) -> str:
        """Last path segment of the image without tag/digest: 'tfx-pipeline' for ours."""
        name = self.image.split("@", 1)[0].rsplit("/", 1)[-1]
        return name.split(":", 1)[0]

    def validate(self) -> None:
        """Raises KubeflowConfigError naming the problem and the fix."""
        if not self.image or not self.image.strip():
            raise KubeflowConfigError(
                f"no container image: build it with `docker build -t REGISTRY/{IMAGE_NAME}:TAG .` "
                f"at the repository root, push it, then pass --image REGISTRY/{IMAGE_NAME}:TAG "
                "(or set KFP_IMAGE)"
            )
        if not IMAGE_RE.match(self.image):
            raise KubeflowConfigError(
                f"image {self.image!r} is not an image reference: expected lower-case "
                f"REGISTRY/{IMAGE_NAME}:TAG (optionally @sha256:DIGEST), no spaces"
            )
        if not self.pipeline_root:
            raise KubeflowConfigError(
                "no pipeline root: pass --pipeline-root gs://BUCKET/PATH (or s3://..., or a "
                "path every pod mounts), or set KFP_PIPELINE_ROOT"
            )
        self.base  # noqa: B018 - raises for an unknown dataset
        if self.beam_runner not in BEAM_PRESETS:
            raise KubeflowConfigError(
                f"unknown Beam runner {self.beam_runner!r}; choose one of "
                f"{', '.join(BEAM_PRESETS)} (extra flags go in --beam-arg)"
            )
        self.beam_args()  # raises for what the runner's preset lacks
        if self.beam_runner != "direct" and not self.pipeline_root.startswith(REMOTE_SCHEMES):
            raise KubeflowConfigError(
                f"the {self.beam_runner!r} Beam runner's workers cannot see the local path "
                f"{self.pipeline_root!r}: use an object-store pipeline root (gs://, s3://)"
            )
        for component, res in self.resources.items():
            res.validate(component)
        self._validate_trainer_workers()
        if self.train_steps is not None and self.train_steps <= 0:
            raise KubeflowConfigError(f"train steps must be positive, got {self.train_steps}")
        schema = host_path(self.container_schema_file)
        if not schema.startswith(REMOTE_SCHEMES) and not os.path.isfile(schema):
            raise KubeflowConfigError(
                f"schema {self.container_schema_file} (read at compile time from {schema}) "
                "does not exist: pass --schema-file with a path under "
                f"{CONTAINER_PROJECT_ROOT}/ (the project inside the image) or a gs:// / s3:// URI"
            )

    def pipeline_config(self) -> PipelineConfig:
        """The definition's config for this deployment."""
        return pipeline_config(
            self.dataset,
            # This machine's copies of files baked into the image (the
            # definition reads them while building); kubeflow.compiler points
            # the compiled spec at the image's paths.
            data_root=host_path(self.container_data_root),
            schema_file=host_path(self.container_schema_file),
            # Artifacts at the pipeline root; serving_dir = <pipeline_root>/serving.
            run_dir=self.pipeline_root.rstrip("/"),
            artifact_root=self.pipeline_root,
            beam_args=self.beam_args(),
            enable_cache=self.enable_cache,
            train_steps=self.train_steps,
            trainer_cluster=vertex_trainer_config(self),
        )

    def _validate_trainer_workers(self) -> None:
        if self.trainer_workers < 1:
            raise KubeflowConfigError(f"trainer workers must be >= 1, got {self.trainer_workers}")
        missing = [
            flag
            for flag, value in (
                ("--vertex-project", self.vertex_project),
                ("--vertex-region", self.vertex_region),
            )
            if not value
        ]
        if self.trainer_workers > 1 and missing:
            raise KubeflowConfigError(
                f"--trainer-workers {self.trainer_workers} trains on a Vertex AI custom job: "
                f"add {' and '.join(missing)}"
            )
        if self.trainer_workers > 1 and not self.pipeline_root.startswith(REMOTE_SCHEMES):
            raise KubeflowConfigError(
                f"the Trainer's {self.trainer_workers} Vertex AI workers cannot see the local "
                f"path {self.pipeline_root!r}: use a gs:// pipeline root"
            )


def vertex_trainer_config(config: KubeflowConfig) -> dict | None:
    """custom_config of TFX's Vertex AI Trainer for `config.trainer_workers` replicas, or None.

    Vertex AI's worker pool 0 is the chief (one replica), pool 1 the other
    workers; it sets each replica's TF_CONFIG (cluster `chief` + `worker`),
    from which the run_fn trains under MultiWorkerMirroredStrategy. Every
    replica runs our image, so it imports the same run_fn.
    """
    if config.trainer_workers <= 1:
        return None
    from tfx.extensions.google_cloud_ai_platform import constants
    from tfx.extensions.google_cloud_ai_platform.trainer import executor

    def pool(replicas: int) -> dict:
        return {
            "machine_spec": {"machine_type": config.trainer_machine_type},
            "replica_count": replicas,
            "container_spec": {"image_uri": config.image},
        }

    return {
        constants.ENABLE_VERTEX_KEY: True,
        constants.VERTEX_REGION_KEY: config.vertex_region,
        executor.TRAINING_ARGS_KEY: {
            "project": config.vertex_project,
            "job_spec": {"worker_pool_specs": [pool(1), pool(config.trainer_workers - 1)]},
        },
    }
