"""TFX's Chicago taxi example, the anchor: its files checked, copied, driven and read back."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .measure import RunResult, _fresh_dir

EXAMPLE_REL_DIR = Path("examples") / "chicago_taxi_pipeline"
EXAMPLE_PIPELINE = "taxi_pipeline_native_keras.py"
EXAMPLE_MODULE = "taxi_utils_native_keras.py"
# What this benchmark uses of the example's pipeline module and module file.
EXAMPLE_NAMES = ("_create_pipeline", "_pipeline_name", "_beam_pipeline_args")
EXAMPLE_BATCH = re.compile(
    r"_input_fn\(\s*fn_args\.train_files,\s*fn_args\.data_accessor,\s*tf_transform_output,"
    r"\s*(\d+)\s*\)"
)
# The example's configurations: as shipped; in-process with Beam's default runner; in-process
# with the FnApiRunner named (the dependency flag: see taxi_vs_tfx_example.py's docstring).
ANCHORS = ("example", "example_inprocess", "example_fnapi")
IN_PROCESS_ANCHORS = ("example_inprocess", "example_fnapi")  # the headline: the faster


def _tfx_dir() -> Path:
    """The installed tfx package folder, found without importing tfx (keeps this process light)."""
    spec = importlib.util.find_spec("tfx")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("tfx is not installed in this Python; use the project's .venv/bin/python")
    return Path(next(iter(spec.submodule_search_locations)))


def _example_paths(workdir: Path) -> dict[str, Path]:
    return {
        "data_root": workdir / "data" / "simple",
        # Its own folder: TFX packages every top-level .py next to the module file into a wheel.
        "module_file": workdir / "module" / EXAMPLE_MODULE,
        "pipeline_root": workdir / "pipeline_root",
        "serving_model_dir": workdir / "serving",
        "metadata_path": workdir / "metadata.db",
    }


def prepare_example(workdir: Path, data_files: list[Path] | None = None) -> None:
    """Copies the example's data and module file into a fresh `workdir` (outside the timing).

    `data_files` replace the example's own CSV (the scale benchmark's generated span); the
    example's CsvExampleGen reads every file in its data folder.
    """
    source = _tfx_dir() / EXAMPLE_REL_DIR
    paths = _example_paths(_fresh_dir(workdir))
    if data_files is None:
        shutil.copytree(source / "data" / "simple", paths["data_root"])
    else:
        paths["data_root"].mkdir(parents=True)
        for path in data_files:
            try:  # the same bytes without a copy; a copy across file systems
                os.link(path, paths["data_root"] / path.name)
            except OSError:
                shutil.copy2(path, paths["data_root"] / path.name)
    paths["module_file"].parent.mkdir()
    shutil.copy2(source / EXAMPLE_MODULE, paths["module_file"])


def missing_names(path: Path, names: tuple[str, ...]) -> list[str]:
    """Which of `names` the module at `path` does not define at top level (read, not imported)."""
    import ast

    tree = ast.parse(path.read_text())
    defined = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    } | {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return [name for name in names if name not in defined]


def check_example(tfx_dir: Path | None = None) -> int:
    """The example's training batch size; exits with a clear message if the example changed.

    Reads the installed files (in `tfx_dir`, default the installed tfx package's folder)
    without importing TFX (seconds, not minutes).
    """
    folder = (tfx_dir or _tfx_dir()) / EXAMPLE_REL_DIR
    pipeline_file, module_file = folder / EXAMPLE_PIPELINE, folder / EXAMPLE_MODULE
    for path in (pipeline_file, module_file, folder / "data" / "simple" / "data.csv"):
        if not path.is_file():
            raise SystemExit(f"TFX's taxi example changed: {path} is missing; update {__file__}")
    missing = missing_names(pipeline_file, EXAMPLE_NAMES)
    if missing:
        raise SystemExit(
            f"TFX's taxi example changed: {pipeline_file} no longer defines {missing}, which "
            f"this benchmark drives; update {__file__}"
        )
    batch = EXAMPLE_BATCH.search(module_file.read_text())
    if batch is None:
        raise SystemExit(
            f"TFX's taxi example changed: cannot find the training batch size "
            f"(`_input_fn(fn_args.train_files, ..., N)`) in {module_file}; update {__file__}"
        )
    return int(batch.group(1))


def _anchor_beam_args(anchor: str, example: Any, workdir: Path) -> list[str]:
    """The Beam arguments the example runs with as `anchor`."""
    if anchor == "example":
        return list(example._beam_pipeline_args)
    if anchor == "example_inprocess":
        return []  # Beam's default runner, no sdist, no worker processes
    if anchor == "example_fnapi":
        empty = workdir / "no-requirements.txt"
        empty.write_text("")
        return ["--runner=FnApiRunner", f"--requirements_file={empty}"]
    raise ValueError(f"unknown anchor {anchor!r}; one of {', '.join(ANCHORS)}")


def _drive_example(
    workdir: Path,
    anchor: str = "example",
    pipeline_file: Path | None = None,
    module_file: Path | None = None,
    beam_args: list[str] | None = None,
) -> int:
    """Subprocess body: the example's own pipeline, under LocalDagRunner.

    `pipeline_file` and `module_file` drive another TFX example with the same
    `_create_pipeline` arguments (the caller has checked it); default: the taxi example.
    `beam_args`, when given, replace the anchor's (e.g. a Spark cluster's runner flags).
    """
    from absl import logging as absl_logging
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    if pipeline_file is None:
        check_example()
        pipeline_file = _tfx_dir() / EXAMPLE_REL_DIR / EXAMPLE_PIPELINE
    spec = importlib.util.spec_from_file_location(pipeline_file.stem, pipeline_file)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {pipeline_file}")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    absl_logging.set_verbosity(absl_logging.INFO)  # as the example's __main__ does
    paths = _example_paths(workdir)
    pipeline = example._create_pipeline(
        pipeline_name=example._pipeline_name,
        pipeline_root=str(paths["pipeline_root"]),
        data_root=str(paths["data_root"]),
        module_file=str(module_file or paths["module_file"]),
        serving_model_dir=str(paths["serving_model_dir"]),
        metadata_path=str(paths["metadata_path"]),
        beam_pipeline_args=(
            beam_args if beam_args is not None else _anchor_beam_args(anchor, example, workdir)
        ),
    )
    LocalDagRunner().run(pipeline)
    return 0


def _trainer_settings(metadata_path: Path) -> tuple[int | None, dict[str, Any]]:
    """(train steps, custom_config) of the Trainer execution recorded in a run's ML Metadata."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(metadata_path)
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    store = metadata_store.MetadataStore(config)
    for type_ in store.get_execution_types():
        if not type_.name.endswith("Trainer"):
            continue
        for execution in store.get_executions_by_type(type_.name):
            props = execution.custom_properties
            train_args = json.loads(props["train_args"].string_value or "{}")
            custom = json.loads(props["custom_config"].string_value or "null") or {}
            steps = train_args.get("num_steps", train_args.get("numSteps"))
            return (int(steps) if steps is not None else None), custom
    return None, {}


@contextlib.contextmanager
def _quiet_tf() -> Iterator[None]:
    """Mutes TF/Beam import chatter while this process reads the example's outputs."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    root = logging.getLogger()
    saved_level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(saved_level)


def _custom_property(artifact: Any, key: str) -> Any:
    value = artifact.custom_properties.get(key)
    if value is None:
        return None
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def read_example_results(result: RunResult, workdir: Path) -> None:
    """Fills the example's accuracy, blessing and component times from its ML Metadata."""
    with _quiet_tf():
        _read_example_results(result, workdir)
        steps, _ = _trainer_settings(_example_paths(workdir)["metadata_path"])
    result.extra.update(train_steps=steps, train_batch=check_example())


def _read_example_results(result: RunResult, workdir: Path) -> None:
    import tensorflow_model_analysis as tfma
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(_example_paths(workdir)["metadata_path"])
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    store = metadata_store.MetadataStore(config)

    def latest(type_name: str) -> Any:
        artifacts = store.get_artifacts_by_type(type_name)
        return max(artifacts, key=lambda a: a.id) if artifacts else None

    evaluation = latest("ModelEvaluation")
    if evaluation is not None:
        eval_result = tfma.load_eval_result(evaluation.uri)
        metrics: dict[str, float] = {}
        for slice_key, per_output in eval_result.slicing_metrics:
            if slice_key != ():
                continue
            for per_sub_key in per_output.values():
                for named in per_sub_key.values():
                    for name, value in named.items():
                        if "doubleValue" in value:
                            metrics[name] = float(value["doubleValue"])
        result.binary_accuracy = metrics.get("binary_accuracy")
        result.extra["metrics"] = metrics
    if "example_count" not in result.extra.get("metrics", {}):
        # The example's eval config has no ExampleCount metric: count what its Evaluator
        # read, the eval split of its ExampleGen output.
        examples = [a for a in store.get_artifacts_by_type("Examples") if "ExampleGen/" in a.uri]
        if examples:
            import glob

            import tensorflow as tf

            eval_files = glob.glob(os.path.join(examples[0].uri, "Split-eval", "*"))
            count = sum(1 for _ in tf.data.TFRecordDataset(eval_files, compression_type="GZIP"))
            result.extra.setdefault("metrics", {})["example_count"] = float(count)
    blessing = latest("ModelBlessing")
    if blessing is not None:
        result.blessed = bool(_custom_property(blessing, "blessed"))
    pushed = latest("PushedModel")
    if pushed is not None:
        result.pushed = bool(_custom_property(pushed, "pushed"))

    states = {v: k for k, v in metadata_store_pb2.Execution.State.items()}
    node_type = store.get_context_type("node")
    node_type_id = node_type.id if node_type is not None else None
    for execution in sorted(store.get_executions(), key=lambda e: e.id):
        node = next(
            (
                c.name.split(".", 1)[-1]
                for c in store.get_contexts_by_execution(execution.id)
                if c.type_id == node_type_id
            ),
            "?",
        )
        millis = execution.last_update_time_since_epoch - execution.create_time_since_epoch
        result.components.append(
            {
                "node_id": node,
                "state": states.get(execution.last_known_state, "UNKNOWN"),
                "seconds": max(0.0, millis / 1000),
            }
        )
