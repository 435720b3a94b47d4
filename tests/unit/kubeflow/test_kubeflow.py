"""Kubeflow runner: the compiled KFP v2 spec, its golden summary, config errors, the Dockerfile.

Regenerate the golden summary after an intended change:
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/kubeflow/test_kubeflow.py -k golden
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from kubeflow.config import (
    CONTAINER_PROJECT_ROOT,
    IMAGE_NAME,
    KubeflowConfig,
    KubeflowConfigError,
    Resources,
    container_path,
    host_path,
    memory_gb,
)
from pipeline.config import PROJECT_ROOT
from pipeline.plan import plan_run

GOLDEN = Path(__file__).parent / "golden" / "kubeflow_pipeline.json"
IMAGE = f"registry.example.com/ml/{IMAGE_NAME}:golden"
ROOT = "gs://example-bucket/tfx/taxi"  # gs:// on purpose: compiling must not touch it

# The project's own code that every pod must import (the image must contain it).
CUSTOM_EXECUTORS = {
    "CsvExampleGen": "components.example_gen.csv_example_gen.Executor",
    "CuratedSchemaImporter": "components.validation.schema_importer.CuratedSchemaImporter_Executor",
}
RESOLVER_TASKS = {
    "baseline_model_resolver-model-blessing-resolver",
    "baseline_model_resolver-model-resolver",
    # The drift baseline: stock LatestArtifactStrategy on KFP (kubeflow/compiler.py).
    "previous_span_statistics_resolver",
}


def _expected_from_definition() -> dict[str, tuple[list[str], str]]:
    """Container task -> (upstream tasks, executor class), read off the TFX pipeline itself."""
    from ml_metadata.proto import metadata_store_pb2
    from tfx.dsl.components.base import base_component
    from tfx.utils import name_utils

    from pipeline.definition import create_pipeline
    from pipeline.node_ids import BASELINE_RESOLVER, PREVIOUS_STATISTICS_RESOLVER, STATISTICS_GEN

    pipeline = create_pipeline(
        plan_run(_config().pipeline_config()),
        metadata_connection_config=metadata_store_pb2.ConnectionConfig(
            fake_database=metadata_store_pb2.FakeDatabaseConfig()
        ),
    )
    # KFP splits the resolver into two query tasks; consumers read the second.
    rename = {BASELINE_RESOLVER: f"{BASELINE_RESOLVER}-model-resolver"}
    # On KFP the latest statistics must be looked up before this run's exist.
    extra = {STATISTICS_GEN: [PREVIOUS_STATISTICS_RESOLVER]}
    return {
        node.id: (
            sorted(
                [*(rename.get(u.id, u.id) for u in node.upstream_nodes), *extra.get(node.id, [])]
            ),
            name_utils.get_full_name(node.executor_spec.executor_class),
        )
        for node in pipeline.components
        if isinstance(node, base_component.BaseComponent)
    }


def _config(**changes) -> KubeflowConfig:
    return KubeflowConfig(image=IMAGE, pipeline_root=ROOT, **changes)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[dict, Path]:
    """The CLI's compile, in process: (PipelineJob dict, written file)."""
    from kubeflow.__main__ import main

    out = tmp_path_factory.mktemp("kfp") / "taxi.json"
    assert main(["compile", "--image", IMAGE, "--pipeline-root", ROOT, "-o", str(out)]) == 0
    return json.loads(out.read_text()), out


def _tasks(job: dict) -> dict:
    return job["pipelineSpec"]["root"]["dag"]["tasks"]


def _container(job: dict, task: str) -> dict:
    spec = job["pipelineSpec"]
    label = spec["components"][_tasks(job)[task]["componentRef"]["name"]]["executorLabel"]
    return spec["deploymentSpec"]["executors"][label].get("container")


def test_compiled_file_parses_as_pipeline_job_and_spec(compiled):
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    job, path = compiled
    parsed_job = json_format.ParseDict(
        json.loads(path.read_text()), pipeline_spec_pb2.PipelineJob()
    )
    spec = json_format.ParseDict(job["pipelineSpec"], pipeline_spec_pb2.PipelineSpec())
    assert parsed_job.display_name == "taxi"
    assert spec.pipeline_info.name == "taxi"
    assert spec.default_pipeline_root == ROOT
    assert job["runtimeConfig"]["gcsOutputDirectory"] == ROOT


def test_every_component_with_its_dependencies_image_and_arguments(compiled):
    job, _ = compiled
    tasks = _tasks(job)
    expected = _expected_from_definition()
    assert set(tasks) == set(expected) | RESOLVER_TASKS
    for name, executor_class in CUSTOM_EXECUTORS.items():
        assert expected[name][1] == executor_class
    for name, (upstream, executor_class) in expected.items():
        assert sorted(tasks[name].get("dependentTasks", [])) == upstream, name
        container = _container(job, name)
        assert container["image"] == IMAGE, name
        assert container["command"] == [
            "python",
            "-m",
            "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor",
        ]
        args = container["args"]
        assert args[args.index("--executor_class_path") + 1] == executor_class, name
        assert "--json_serialized_invocation_args" in args
    # The stock two-step resolver stands in for BaselineModelStrategy, same node id.
    evaluator_inputs = tasks["Evaluator"]["inputs"]["artifacts"]
    assert evaluator_inputs["baseline_model"]["taskOutputArtifact"] == {
        "producerTask": "baseline_model_resolver-model-resolver",
        "outputArtifactKey": "model",
    }
    for name in RESOLVER_TASKS:
        assert _container(job, name) is None


def test_paths_in_the_spec_are_the_containers(compiled):
    job, _ = compiled

    def param(task: str, name: str) -> str:
        return _tasks(job)[task]["inputs"]["parameters"][name]["runtimeValue"]["constant"]

    # ExampleGen reads the runtime parameter data_root; its default is the image's data.
    assert _tasks(job)["CsvExampleGen"]["inputs"]["parameters"]["input_base"] == {
        "componentInputParameter": "data_root"
    }
    root_parameters = job["pipelineSpec"]["root"]["inputDefinitions"]["parameters"]
    assert root_parameters["data_root"]["defaultValue"] == f"{CONTAINER_PROJECT_ROOT}/data/taxi"
    assert (
        param("CuratedSchemaImporter", "schema_file")
        == f"{CONTAINER_PROJECT_ROOT}/schema/taxi/schema.pbtxt"
    )
    push = json.loads(param("Pusher", "push_destination"))
    assert push["filesystem"]["base_directory"] == f"{ROOT}/serving"
    assert str(PROJECT_ROOT) not in json.dumps(job)


def test_default_resources_are_on_the_containers(compiled):
    job, _ = compiled
    assert _container(job, "Trainer")["resources"] == {
        "cpuLimit": 2,
        "memoryLimit": 8.0,
        "resourceCpuLimit": "2",
        "resourceMemoryLimit": "8G",
    }
    assert "resources" not in _container(job, "Pusher")


def test_golden_summary(compiled):
    from kubeflow.compiler import summarize

    job, _ = compiled
    summary = summarize(job)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    assert GOLDEN.exists(), "no golden file: run with UPDATE_GOLDEN=1 once"
    golden = json.loads(GOLDEN.read_text())
    assert summary == golden, (
        "the compiled Kubeflow pipeline changed; if intended, regenerate with "
        "UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/kubeflow/test_kubeflow.py -k golden"
    )


def test_summary_hides_hashes(compiled):
    from kubeflow.compiler import summarize

    text = json.dumps(summarize(compiled[0]))
    assert not re.search(r"\b[0-9a-f]{64}\b", text)
    assert "tfx_version" not in text and "sdkVersion" not in text


def test_resources_and_beam_runner_flags_reach_the_spec():
    from kubeflow.compiler import compile_pipeline

    job = compile_pipeline(
        _config(
            beam_runner="dataflow",
            extra_beam_args=("--project=p", "--region=europe-west1"),
            resources={"CsvExampleGen": Resources(cpu=4, memory="16Gi")},
        )
    )
    container = _container(job, "CsvExampleGen")
    assert container["resources"]["cpuLimit"] == 4
    assert container["resources"]["resourceMemoryLimit"] == "16Gi"
    args = container["args"]
    assert "--runner=DataflowRunner" in args
    assert f"--sdk_container_image={IMAGE}" in args
    assert f"--temp_location={ROOT}/beam-tmp" in args
    assert args[-2:] == ["--project=p", "--region=europe-west1"]
    # Non-Beam components get the pipeline's Beam args too (TFX passes them on); no resources.
    assert "resources" not in _container(job, "Trainer")


def test_the_spark_preset_runs_the_projects_runner_on_the_named_master():
    config = _config(beam_runner="spark", spark_master="spark://spark-master:7077")
    args = config.beam_args()
    assert args[:2] == (
        "--runner=beam_spark.SparkRunner",
        "--spark_master=spark://spark-master:7077",
    )
    assert f"--sdk_container_image={IMAGE}" in args  # TFX then ships no sdist of its own
    assert not any(a.startswith("--environment_type") for a in args)
    with pytest.raises(KubeflowConfigError, match="needs a Spark master: --spark-master"):
        _config(beam_runner="spark").validate()
    job_server = _config(beam_runner="spark-job-server", extra_beam_args=("--spark_master_url=m",))
    assert "--environment_type=DOCKER" in job_server.beam_args()


def test_unknown_component_in_resources():
    from kubeflow.compiler import compile_pipeline

    with pytest.raises(KubeflowConfigError, match="unknown component 'Trainr'.*Trainer"):
        compile_pipeline(_config(resources={"Trainr": Resources(cpu=1)}))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"image": ""},
            r"no container image: build it with `docker build -t REGISTRY/tfx-pipeline",
        ),
        ({"image": "My Image"}, "not an image reference"),
        ({"pipeline_root": ""}, "no pipeline root: pass --pipeline-root"),
        ({"dataset": "nope"}, "unknown dataset 'nope'; known: digits, taxi"),
        ({"beam_runner": "dask"}, "unknown Beam runner 'dask'; choose one of direct, dataflow"),
        ({"beam_runner": "dataflow"}, "needs --project, --region: add --beam-arg=--project="),
        (
            {
                "beam_runner": "flink",
                "extra_beam_args": ("--flink_master=h:8081",),
                "pipeline_root": "/mnt/x",
            },
            "cannot see the local path",
        ),
        ({"resources": {"Trainer": Resources(cpu=0)}}, "Trainer: cpu must be positive"),
        ({"resources": {"Trainer": Resources(memory="lots")}}, "is not a size"),
        ({"schema_file": "/pipeline/schema/none.pbtxt"}, "does not exist: pass --schema-file"),
        ({"train_steps": 0}, "train steps must be positive"),
    ],
)
def test_config_errors_say_what_to_do(changes, message):
    config = KubeflowConfig(**{"image": IMAGE, "pipeline_root": ROOT, **changes})
    with pytest.raises(KubeflowConfigError, match=message):
        config.validate()


def test_memory_sizes():
    assert memory_gb("8G") == 8.0
    assert memory_gb("512M") == 0.512
    assert memory_gb("1Gi") == pytest.approx(1.073741824)


def test_container_path_mapping():
    schema = PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt"
    assert container_path(str(schema)) == "/pipeline/schema/taxi/schema.pbtxt"
    assert host_path("/pipeline/schema/taxi/schema.pbtxt") == str(schema)
    assert host_path("gs://b/schema.pbtxt") == "gs://b/schema.pbtxt"


def test_cli_errors_are_one_line_without_traceback(capsys, monkeypatch):
    from kubeflow.__main__ import main

    monkeypatch.delenv("KFP_IMAGE", raising=False)
    assert main(["compile", "--pipeline-root", ROOT]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no container image") and "Traceback" not in err
    assert main(["compile", "--image", IMAGE, "--pipeline-root", ROOT, "--dataset", "x"]) == 1
    assert "unknown dataset 'x'" in capsys.readouterr().err
    assert main(["compile", "--image", IMAGE, "--pipeline-root", ROOT, "--resources", "2,8G"]) == 1
    assert "expected COMPONENT=CPU,MEMORY" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["launch"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'launch'" in capsys.readouterr().err


def test_cli_gives_the_callers_logging_and_warnings_back(monkeypatch):
    """main() quiets logging and warnings for the command only: a test or a notebook that
    calls it keeps its own level and filters."""
    import logging
    import warnings

    from kubeflow.__main__ import main

    monkeypatch.delenv("KFP_IMAGE", raising=False)
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.INFO)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        filters = list(warnings.filters)
        assert main(["compile", "--pipeline-root", ROOT]) == 1
        assert warnings.filters == filters
    assert root.level == logging.INFO


def test_dry_run_validates_without_a_server(compiled, capsys, monkeypatch):
    from kubeflow.__main__ import main

    monkeypatch.delenv("KFP_HOST", raising=False)
    _, path = compiled
    assert main(["deploy", "--package", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: PipelineSpec 'taxi' is valid (14 tasks" in out and "Nothing was sent" in out
    assert main(["deploy", "--package", str(path), "--image", "other/tfx-pipeline:1", "--dry-run"])
    assert "recompile with this --image" in capsys.readouterr().err


def test_dry_run_rejects_a_broken_package(tmp_path, capsys):
    from kubeflow.__main__ import main

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"pipelineSpec": {"root": {"dag": 3}}}))
    assert main(["deploy", "--package", str(bad), "--dry-run"]) == 1
    assert "not a KFP PipelineSpec" in capsys.readouterr().err
    assert main(["deploy", "--package", str(tmp_path / "missing.json"), "--dry-run"]) == 1
    assert "run `python -m kubeflow compile` first" in capsys.readouterr().err


# --- the image ---------------------------------------------------------------

DOCKERFILE = (PROJECT_ROOT / "Dockerfile").read_text()


def _lock_version(package: str) -> str:
    lock = (PROJECT_ROOT / "requirements.lock").read_text()
    return re.search(rf"^{re.escape(package)}==([^\s\\]+)", lock, re.MULTILINE).group(1)


def test_dockerfile_builds_from_the_locks():
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", DOCKERFILE, re.MULTILINE)
    assert "COPY requirements.lock requirements-nodeps.lock" in DOCKERFILE
    assert "--require-hashes" in DOCKERFILE
    assert "uv pip sync" in DOCKERFILE and "-r /tmp/locks/requirements-nodeps.lock" in DOCKERFILE
    setup = (PROJECT_ROOT / "scripts" / "setup.sh").read_text()
    uv_setup = re.search(r'UV_VERSION="([^"]+)"', setup).group(1)
    assert f"ARG UV_VERSION={uv_setup}" in DOCKERFILE
    assert f"ARG BEAM_VERSION={_lock_version('apache-beam')}" in DOCKERFILE


def test_dockerfile_installs_the_project_where_the_spec_expects_it():
    assert f"WORKDIR {CONTAINER_PROJECT_ROOT}" in DOCKERFILE
    assert f"COPY . {CONTAINER_PROJECT_ROOT}" in DOCKERFILE
    assert f"-e {CONTAINER_PROJECT_ROOT}" in DOCKERFILE
    assert f'org.opencontainers.image.title="{IMAGE_NAME}"' in DOCKERFILE
    ignored = [
        line.strip()
        for line in (PROJECT_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for needed in ("components", "trainer", "pipeline", "schema", "data", "pyproject.toml"):
        assert needed not in ignored
