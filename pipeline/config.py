"""Typed configuration of a pipeline run.

A dataset is a dataset file (schema/<NAME>/dataset.yaml, read by
pipeline/datasets.py) beside its curated schema, never a copy of the pipeline.
Runners build a `PipelineConfig` and hand it to
`pipeline.definition.create_pipeline`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from components.io.encryption import StorageEncryption
from components.io.log_policy import LogPolicy
from components.validation.serving_log import FOLDER as SERVING_LOG_FOLDER
from components.validation.serving_log import WindowOptions

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# Beam's stager builds the project's sdist from this (`python setup.py sdist`;
# pyproject.toml would need the `build` package on the driver).
SETUP_FILE = str(PROJECT_ROOT / "setup.py")
# The runner of the local Beam modes: Beam's FnApiRunner, in the component's own
# process (or, with --direct_running_mode=multi_processing, with one SDK worker
# subprocess per core). Named, not left to Beam's default DirectRunner: Beam
# 2.72's DirectRunner first tries its Prism runner for every pipeline, which
# downloads a Go binary from GitHub, and only where that fails falls back to the
# FnApiRunner (~2 CPU-s lost on every Beam component here, offline; elsewhere a
# different runner than the one this project measured).
LOCAL_RUNNER_ARG = "--runner=FnApiRunner"
# In-process Beam (pipeline/beam.py makes the other modes' arguments: `tfxp run
# --beam`). On small data Beam's start-up dominates, and the multi-process runner
# pays it per worker. Given *any* Beam argument, TFX builds an sdist of the whole
# tfx package for every Beam component (for remote workers), seconds each, unless
# a dependency flag (--setup_file, --extra_package, ...) is among them: the
# FnApiRunner stages nothing, so --setup_file only tells TFX not to.
LOCAL_BEAM_ARGS: tuple[str, ...] = (LOCAL_RUNNER_ARG, f"--setup_file={SETUP_FILE}")

# The defaults name no dataset: a dataset's values come from its dataset file
# (schema/<NAME>/dataset.yaml, pipeline/datasets.py). Without its own
# `preprocessing_fn:`/`run_fn:`, a dataset trains with the generic tabular trainer.
DEFAULT_PIPELINE_NAME = "pipeline"
GENERIC_PREPROCESSING_FN = "trainer.tabular.preprocessing.preprocessing_fn"
GENERIC_RUN_FN = "trainer.tabular.train.run_fn"


@dataclass(frozen=True)
class EvalThresholds:
    """When the Evaluator blesses a model."""

    metric: str = "BinaryAccuracy"
    # Absolute floor (a dataset file sets its own: taxi's model must beat always
    # predicting "not a big tipper").
    lower_bound: float | None = 0.6
    # A ceiling instead, for metrics where lower is better (e.g. RootMeanSquaredError).
    upper_bound: float | None = None
    # Change vs the latest blessed model: no worse than this (negative = allowed drop).
    min_change: float = -1e-10
    # Reported beside `metric`, without a threshold (AUC only makes sense for binary labels).
    extra_metrics: tuple[str, ...] = ("AUC",)
    # Classification: each class's recall and precision-recall AUC as well (TFMA
    # Recall/Specificity for binary, Recall and AUCPrecisionRecall per class otherwise).
    per_class: bool = False


@dataclass(frozen=True)
class SliceOptions:
    """Evaluation by slice (the dataset file's `slicing:`): which groups of the eval
    split get their own metrics, and what the blessing asks of each group."""

    # Each slicing is one feature or several crossed, e.g. (("payment_type",),
    # ("payment_type", "trip_miles")). A bucketed feature is sliced by its bucket.
    by: tuple[tuple[str, ...], ...] = ()
    # Numeric feature -> ascending bucket boundaries: [1, 5] makes <1, 1-5, >=5.
    buckets: dict[str, tuple[float, ...]] = field(default_factory=dict)
    # Slices with fewer eval examples than this are reported but never block a blessing.
    min_examples: int = 1
    # Each judged slice's `metric` must be at least this (at most, for a ceiling metric).
    lower_bound: float | None = None
    upper_bound: float | None = None
    # No judged slice may fall more than this below the baseline model on that slice.
    max_drop: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "by": [list(s) for s in self.by],
            "buckets": {k: list(v) for k, v in self.buckets.items()},
            "min_examples": self.min_examples,
            "lower_bound": self.lower_bound,
            "upper_bound": self.upper_bound,
            "max_drop": self.max_drop,
        }


# The image trainer's models (trainer/image/model.py): its small CNN, or a
# keras.applications network trained from scratch (weights=None).
IMAGE_MODELS = ("cnn", "mobilenet_v2", "efficientnet_b0")


@dataclass(frozen=True)
class ImageOptions:
    """Image datasets: how ExampleGen reads class folders, and the model's input size."""

    # The label folder names, span-<N>/<class>/*; a label is its folder's index here.
    class_names: tuple[str, ...]
    # ExampleGen stores each file's "encoded" bytes (PNG/JPEG, compact) or "raw" uint8 pixels.
    image_format: str = "encoded"
    # A file that does not decode: "skip" it (named in the run's report and counted),
    # or "fail" the run (naming every such file).
    on_bad_image: str = "skip"
    # Target size of a TFRecord shard, MB (components/example_gen/image_shards.py).
    shard_mb: float = 128
    # Deflate level of the GZIP shards: None picks 1, or 0 (stored) for records
    # that do not compress (encoded PNG/JPEG); 0 for raw pixels trades disk for
    # read and ingest speed.
    gzip_level: int | None = None
    # Images are decoded and resized to this in the transform graph (and at serving).
    height: int = 8
    width: int = 8
    channels: int = 1
    # The network trained on them: one of IMAGE_MODELS.
    model: str = "cnn"
    # Where images are decoded and resized: "transform" (Transform writes float
    # pixels, decoded once) or "trainer" (Transform passes the encoded files
    # through; the Trainer's tf.data input and the served model decode them: for
    # large images, whose float pixels would be several times their files' size).
    decode_in: str = "transform"

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "class_names": list(self.class_names)}


@dataclass(frozen=True)
class InferenceOptions:
    """Batch inference (`tfxp infer`, and the pipeline's BatchInference step)."""

    # Spans of rows to score, <data_root>/span-<N>/*.csv; None: the dataset's own data_root.
    data_root: str | None = None
    # Input columns copied beside each prediction (besides the file and line).
    key_columns: tuple[str, ...] = ()
    # Score the newest span there in every pipeline run, with the run's model if blessed.
    in_pipeline: bool = False
    batch_size: int = 1024


@dataclass(frozen=True)
class DataSource:
    """Where `tfxp data add NAME` takes a drop from when given no files: the dataset
    file's `source:` block, a path in a DVC repository (and a default revision)."""

    dvc: str  # a local path (made absolute) or a git URL
    path: str
    rev: str | None = None


# What a `tuning:` search space may name: the trainer's Hyperparameters
# (trainer/base.py) that change the model or its training, with their kind.
# "units" is a list of layer sizes (hidden_units); KerasTuner chooses among
# such lists as strings ("64,32").
TUNABLE: dict[str, str] = {
    "learning_rate": "float",
    "batch_size": "int",
    "hidden_units": "units",
    "train_steps": "int",
}
# The image trainer's CNN (trainer/image/train.py ImageHyperparameters): its
# convolution filters per block ("units" as well), dense layer and dropout.
IMAGE_TUNABLE: dict[str, str] = {
    "learning_rate": "float",
    "batch_size": "int",
    "train_steps": "int",
    "filters": "units",
    "dense_units": "int",
    "dropout": "float",
}
# The sequence trainer (trainer/sequence/train.py SequenceHyperparameters): its
# embedding width and dropout besides the optimiser's; the encoder's units are the
# dataset file's `sequence:` block, part of the model's definition.
SEQUENCE_TUNABLE: dict[str, str] = {
    "learning_rate": "float",
    "batch_size": "int",
    "train_steps": "int",
    "embedding_dim": "int",
    "dropout": "float",
}
TUNING_ALGORITHMS = ("random", "bayesian")


@dataclass(frozen=True)
class TuningOptions:
    """A search over hyperparameters before training (the Tuner step, trainer/tuning.py)."""

    # Hyperparameter -> {"min", "max", "sampling": linear|log, "step"} or {"choices": [...]}.
    search_space: dict[str, dict[str, Any]]
    algorithm: str = "random"
    max_trials: int = 4
    # Stop starting new trials after this many minutes (a trial under way finishes).
    max_minutes: float | None = None
    # Each trial's training steps (None: the dataset's train_steps).
    trial_steps: int | None = None
    # Trials run at once, each in a process of its own on a share of the cores
    # (trainer/parallel_trials.py); 1: one after another in the Tuner's process.
    parallel_trials: int = 1
    # A parallel trial (its worker's start included) that takes longer fails the Tuner.
    trial_timeout_minutes: float = 30.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "search_space": {k: dict(v) for k, v in self.search_space.items()},
            "algorithm": self.algorithm,
            "max_trials": self.max_trials,
            "max_minutes": self.max_minutes,
            "trial_steps": self.trial_steps,
            "parallel_trials": self.parallel_trials,
            "trial_timeout_minutes": self.trial_timeout_minutes,
        }


@dataclass(frozen=True)
class PipelineConfig:
    """Everything that varies between datasets, environments and runs."""

    pipeline_name: str = DEFAULT_PIPELINE_NAME
    # Raw data: one folder per span, data_root/span-<N>/*.csv, or, for datasets
    # whose drops get re-delivered, data_root/span-<N>/version-<V>/*.csv.
    data_root: str = str(PROJECT_ROOT / "data" / DEFAULT_PIPELINE_NAME)
    span_pattern: str = "span-{SPAN}/*.csv"
    version_pattern: str = "span-{SPAN}/version-{VERSION}/*.csv"
    # Which layout: None detects it from the data folder (local roots only).
    versioned: bool | None = None
    # Which data a run trains on: the latest span by default, or a pinned span
    # (and version; default its latest), and the `window` newest spans up to it.
    span: int | None = None
    version: int | None = None
    window: int = 1
    # A named data version (`tfxp run --data-version NAME`: a tag or a DVC revision,
    # resolved by tfxp/datasets/versions.py to `span`) and the content SHA-256 its span
    # must still have: the pre-run check and ExampleGen refuse other bytes.
    data_version: str | None = None
    data_sha256: str | None = None
    # TFRecord shards per output split; 0 sizes them for the data (see docs/data-versions.md).
    num_shards: int = 0
    # How ExampleGen reads CSV: "arrow" (pyarrow.csv + vectorised tf.Example
    # encoding; the same examples and splits as TFX's reader, measured in
    # benchmarks/csv_ingest.py) or "tfx" (TFX's CsvExampleGen reader).
    csv_reader: str = "arrow"
    # The text encoding of the dataset's CSV files (both readers, the checks,
    # `tfxp data add`, `tfxp predict`): UTF-8 (a byte-order mark is skipped) or
    # another ASCII-compatible one such as "latin-1" or "cp1252"; see components/io/csv_text.py.
    csv_encoding: str = "utf-8"
    schema_file: str = str(PROJECT_ROOT / "schema" / DEFAULT_PIPELINE_NAME / "schema.pbtxt")
    # The validation gate: drift/skew thresholds and warn-only kinds (a YAML
    # file beside the schema), extra kinds downgraded to warnings for this run,
    # and the serving requests to compare with (None: data_root/serving/*.csv;
    # "": the dataset has none, and the gate records that skew is not checked).
    validation_file: str = str(PROJECT_ROOT / "schema" / DEFAULT_PIPELINE_NAME / "validation.yaml")
    warn_only: tuple[str, ...] = ()
    serving_data: str | None = None
    # The request log `tfxp serve` writes (serving_log_dir): when it holds
    # published files, the skew check reads its latest window instead of
    # serving_data: files opened within `hours` of the newest, at most
    # `max_examples` served requests.
    serving_log_window: WindowOptions = WindowOptions()
    # Where a run writes: pipeline_root, ML Metadata and pushed models live below.
    run_dir: str = str(PROJECT_ROOT / "runs" / DEFAULT_PIPELINE_NAME)
    # Object storage (tfxp/storage/storage.py): overrides of where artifacts and
    # pushed models go (s3://..., gs://... or local). A remote run_dir puts both
    # there; ML Metadata (SQLite), logs and the run lock always stay on a local
    # disk: `state_dir`, by default run_dir, or runs/remote/... for a remote one.
    artifact_root: str | None = None
    serving_root: str | None = None
    state_dir: str | None = None
    # Trainer code, by importable path (fingerprinted for the cache key; the
    # plug-in contract is described in trainer/base.py).
    preprocessing_fn: str = GENERIC_PREPROCESSING_FN
    run_fn: str = GENERIC_RUN_FN
    # The raw label column (absent from serving requests) and the transformed
    # label key TFMA reads from the transform_features signature.
    label_key: str = "label"
    transformed_label_key: str = "label_xf"
    train_eval_hash_buckets: tuple[int, int] = (2, 1)
    train_steps: int = 200
    eval_steps: int = 5
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    thresholds: EvalThresholds = EvalThresholds()
    beam_args: tuple[str, ...] = LOCAL_BEAM_ARGS
    enable_cache: bool = True
    # "csv" (CsvExampleGen), "image" (class folders of image files, `image` options)
    # or "sequence" (event tables, `sequence` options).
    example_gen: str = "csv"
    image: ImageOptions | None = None
    # An event table's options (pipeline.dataset_sequence.SequenceOptions), or None.
    sequence: Any = None
    # The SavedModel signature the Evaluator feeds serialized tf.Examples to.
    eval_signature: str = "serving_default"
    # The generic tabular trainer's options (pipeline.dataset_sections.TabularOptions), or None.
    tabular: Any = None
    # Multi-worker training on a managed cluster: custom_config entries of
    # TFX's Vertex AI Trainer (`ai_platform_training_args` with its
    # worker_pool_specs, ...), which then replaces the Trainer. None: the
    # Trainer trains where it runs. Each replica's run_fn finds its place in
    # the cluster in TF_CONFIG (trainer/distribution.py).
    trainer_cluster: dict[str, Any] | None = None
    # Evaluation by slice and the per-slice blessing rules (None: overall only).
    slicing: SliceOptions | None = None
    # The model card's words from the dataset file: what the model is for, and
    # where it must not be trusted.
    description: str = ""
    intended_use: str = ""
    limitations: str = ""
    # Eval rows the serving check sends to the exported model (0: no serving check).
    serving_check_rows: int = 200
    # Batch inference: where the spans to score are, key columns, in the pipeline or not.
    inference: InferenceOptions = InferenceOptions()
    # The dataset file's `source:` block (`tfxp data add NAME` with no files), or None.
    data_source: DataSource | None = None
    # Hyperparameter tuning before the Trainer; None: the fixed `hyperparameters`.
    tuning: TuningOptions | None = None
    # The model registry (tfxp/models/registry.py): the alias a newly pushed version
    # gets, "champion" (served at once) or "challenger" (until promoted).
    on_push: str = "champion"
    # Alerts (runtime/alerts.py): names of environment variables holding webhook
    # URLs. Only the names live in files; the URLs are secrets.
    alert_webhook_env: tuple[str, ...] = ()
    # `storage:` (components/io/encryption.py): server-side encryption every
    # object-storage writer applies, and whether to refuse writers that cannot.
    storage: StorageEncryption = StorageEncryption()
    # `request_log:` (components/io/log_policy.py): which request columns the
    # serving log and `tfxp infer` outputs drop, hash or keep; None: all kept.
    request_log: LogPolicy | None = None

    @property
    def local_dir(self) -> str:
        """The local directory of ML Metadata, logs and the run lock."""
        if self.state_dir:
            return self.state_dir
        if "://" in self.run_dir:
            # SQLite and flock need a local disk: a run dir in a bucket keeps its
            # state in runs/remote/<scheme>/<bucket>/<path> of the project.
            uri = urlparse(self.run_dir)
            where = (uri.scheme.lower(), uri.netloc, uri.path.lstrip("/"))
            return os.path.join(str(PROJECT_ROOT), "runs", "remote", *where)
        return self.run_dir

    @property
    def pipeline_root(self) -> str:
        return self.artifact_root or os.path.join(self.run_dir, "pipeline_root")

    @property
    def metadata_path(self) -> str:
        return os.path.join(self.local_dir, "metadata.sqlite")

    @property
    def serving_dir(self) -> str:
        return self.serving_root or os.path.join(self.run_dir, "serving")

    @property
    def log_dir(self) -> str:
        return os.path.join(self.local_dir, "logs")

    @property
    def inference_data_root(self) -> str:
        return self.inference.data_root or self.data_root

    @property
    def predictions_dir(self) -> str:
        """Where `tfxp infer` publishes predictions (one folder per scoring)."""
        return os.path.join(self.run_dir, "predictions")

    @property
    def report_dir(self) -> str:
        return os.path.join(self.run_dir, "reports")

    @property
    def serving_pattern(self) -> str:
        if self.serving_data is None:
            return os.path.join(self.data_root, "serving", "*.csv")
        return self.serving_data

    def replace(self, **changes: Any) -> PipelineConfig:
        return dataclasses.replace(self, **changes)


def serving_log_dir(config: PipelineConfig) -> str:
    """The dataset's request-log folder, `<data root>/serving-log/`: where `tfxp serve`
    writes and the skew check, `tfxp watch --skew-every`, the console and
    `tfxp models compare` read."""
    return serving_log_dir_of(config.data_root)


def serving_log_dir_of(data_root: str) -> str:
    """`serving_log_dir` of a data folder (what an ExampleGen recorded as its input_base)."""
    return os.path.join(data_root.rstrip("/"), SERVING_LOG_FOLDER)
