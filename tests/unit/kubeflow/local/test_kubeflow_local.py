"""run-local's pieces without running a pipeline: spec fixes, arguments, registry, image environment.

The whole runs are in tests/e2e/test_kubeflow_local_e2e.py; the image import
check (slow: it imports every executor) is at the end of this file.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from kubeflow.config import IMAGE_NAME
from pipeline.config import PROJECT_ROOT

IMAGE = f"registry.example.com/ml/{IMAGE_NAME}:test"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[dict, Path]:
    from kubeflow.__main__ import main

    tmp = tmp_path_factory.mktemp("kfp-local")
    out = tmp / "taxi.json"
    assert (
        main(["compile", "--image", IMAGE, "--pipeline-root", str(tmp / "root"), "-o", str(out)])
        == 0
    )
    return json.loads(out.read_text()), out


# --- the compiled spec, as run-local found it needed ---------------------------


def test_spec_uses_schema_2_1_so_tfx_reads_kfps_parameter_values(compiled):
    job, _ = compiled
    spec = job["pipelineSpec"]
    assert spec["schemaVersion"] == "2.1.0"
    # Without the inputs spec TFX's entrypoint reads the deprecated `parameters`
    # field, which KFP (and kfp.local) no longer fill: no exec properties at all.
    executor = spec["deploymentSpec"]["executors"]["Trainer_executor"]["container"]
    assert "--json_serialized_inputs_spec_args" in executor["args"]


def test_every_task_depends_on_the_producers_of_what_it_reads(compiled):
    tasks = compiled[0]["pipelineSpec"]["root"]["dag"]["tasks"]
    for name, task in tasks.items():
        for artifact in task.get("inputs", {}).get("artifacts", {}).values():
            producer = artifact["taskOutputArtifact"]["producerTask"]
            assert producer in task.get("dependentTasks", []), (name, producer)
    # The one TFX leaves out: the model query reads the blessing query's output.
    assert tasks["baseline_model_resolver-model-resolver"]["dependentTasks"] == [
        "baseline_model_resolver-model-blessing-resolver"
    ]


def test_add_missing_dependencies_reports_what_it_added():
    from kubeflow.spec_fixes import add_missing_dependencies

    spec = {
        "root": {
            "dag": {
                "tasks": {
                    "a": {},
                    "b": {
                        "inputs": {
                            "artifacts": {
                                "x": {
                                    "taskOutputArtifact": {
                                        "producerTask": "a",
                                        "outputArtifactKey": "y",
                                    }
                                }
                            }
                        }
                    },
                }
            }
        }
    }
    assert add_missing_dependencies(spec) == [("b", "a")]
    assert spec["root"]["dag"]["tasks"]["b"]["dependentTasks"] == ["a"]
    assert add_missing_dependencies(spec) == []


def test_data_root_is_a_runtime_parameter_with_the_images_default(compiled):
    spec = compiled[0]["pipelineSpec"]
    declared = spec["root"]["inputDefinitions"]["parameters"]
    assert declared == {
        "data_root": {
            "defaultValue": "/pipeline/data/taxi",
            "isOptional": True,
            "parameterType": "STRING",
        }
    }
    example_gen = spec["root"]["dag"]["tasks"]["CsvExampleGen"]["inputs"]["parameters"]
    assert example_gen["input_base"] == {"componentInputParameter": "data_root"}


def test_custom_artifact_types_are_named_by_import_path(compiled):
    from tfx.utils import import_utils

    from components.validation.gate import ValidationResult

    gate = compiled[0]["pipelineSpec"]["components"]["ValidationGate"]
    schema = gate["outputDefinitions"]["artifacts"]["result"]["artifactType"]["instanceSchema"]
    title = schema.splitlines()[0].removeprefix("title: ")
    # What TFX's V2 entrypoint does with a non-TFX title.
    assert import_utils.import_class_by_path(title) is ValidationResult
    # ML Metadata of local runs keeps the type name.
    assert ValidationResult.TYPE_NAME == "tfxp.ValidationResult"


# --- arguments, as kfp.Client passes them --------------------------------------


def test_arguments_are_checked_converted_and_defaulted(compiled):
    from kubeflow.local.job import LocalRunError, load_job, resolve_arguments

    _, spec = load_job(str(compiled[1]))
    assert resolve_arguments(spec, {}) == {"data_root": "/pipeline/data/taxi"}
    assert resolve_arguments(spec, {"data_root": "/d"}) == {"data_root": "/d"}
    with pytest.raises(
        LocalRunError, match=r"unknown runtime parameter\(s\) train_steps.*data_root"
    ):
        resolve_arguments(spec, {"train_steps": "5"})


def test_cli_refuses_a_remote_root_and_bad_arguments(compiled, tmp_path, capsys):
    from kubeflow.__main__ import main

    remote = tmp_path / "remote.json"
    job = json.loads(json.dumps(compiled[0]))
    job["pipelineSpec"]["defaultPipelineRoot"] = "gs://bucket/tfx"
    remote.write_text(json.dumps(job))
    assert main(["run-local", "--package", str(remote)]) == 1
    err = capsys.readouterr().err
    assert "recompile with a local folder" in err and "Traceback" not in err
    args = ["run-local", "--package", str(compiled[1]), "--arg", "nope"]
    assert main(args) == 1
    assert "expected NAME=VALUE" in capsys.readouterr().err
    assert main([*args[:-1], "span=3"]) == 1
    assert "unknown runtime parameter(s) span" in capsys.readouterr().err
    assert main(["run-local", "--package", str(tmp_path / "none.json")]) == 1
    assert "run `python -m kubeflow compile` first" in capsys.readouterr().err


# --- the registry standing in for ML Metadata ------------------------------------


def test_registry_answers_the_resolver_filters_tfx_compiles(tmp_path):
    from kubeflow.local.artifacts import ArtifactRegistry
    from kubeflow.local.job import LocalRunError

    registry = ArtifactRegistry(str(tmp_path))
    assert registry.latest('schema_title="tfx.ExampleStatistics" AND state=LIVE') is None

    def entry(name, title, **metadata):
        return {"name": name, "type": title, "uri": f"/r/{name}", "metadata": metadata}

    registry.record(
        [
            entry("r1.StatisticsGen.statistics", "tfx.ExampleStatistics"),
            entry("r1.Evaluator.blessing", "tfx.ModelBlessing", blessed=1.0, current_model_id="m1"),
            entry("m1", "tfx.Model"),
            entry("r2.StatisticsGen.statistics", "tfx.ExampleStatistics"),
            entry("r2.Evaluator.blessing", "tfx.ModelBlessing", blessed=0.0),
        ]
    )
    latest = registry.latest('schema_title="tfx.ExampleStatistics" AND state=LIVE')
    assert latest["name"] == "r2.StatisticsGen.statistics"
    blessed = registry.latest(
        'schema_title="tfx.ModelBlessing" AND state=LIVE AND metadata.blessed.number_value=1'
    )
    assert blessed["name"] == "r1.Evaluator.blessing"
    model = registry.latest('schema_title="tfx.Model" AND state=LIVE AND name="m1"')
    assert model["uri"] == "/r/m1"
    with pytest.raises(LocalRunError, match="not supported locally"):
        registry.latest("create_time > 3")


# --- the image's environment ---------------------------------------------------------


def test_task_environment_is_the_dockerfiles():
    from kubeflow.local.task_handler import dockerfile_env, dockerfile_workdir, image_environment

    env = dockerfile_env()
    assert env["TF_USE_LEGACY_KERAS"] == "1" and env["VIRTUAL_ENV"] == "/opt/venv"
    assert dockerfile_workdir() == "/pipeline"
    task_env = image_environment()
    assert task_env["TF_USE_LEGACY_KERAS"] == "1"
    assert task_env["VIRTUAL_ENV"] == sys.prefix
    assert task_env["PATH"].startswith(f"{sys.prefix}/bin:")
    assert task_env["PYTHONPATH"] == str(PROJECT_ROOT)


def test_image_paths_map_to_the_checkout_and_nothing_else():
    from kubeflow.local.task_handler import ImageEnvTaskHandler, to_host_paths

    args = [
        "/pipeline/data/taxi",
        '{"x": "/pipeline/schema/taxi/schema.pbtxt"}',
        "gs://bucket/pipeline/x",
        "/tmp/run/pipeline/x",
        "/pipeline_root/x",
    ]
    assert to_host_paths(args) == [
        f"{PROJECT_ROOT}/data/taxi",
        f'{{"x": "{PROJECT_ROOT}/schema/taxi/schema.pbtxt"}}',
        *args[2:],
    ]
    handler = ImageEnvTaskHandler("img", ["python", "-m", "x"], "/tmp/root")
    assert handler.command() == [sys.executable, "-m", "x"]


def test_docker_handler_replaces_the_entrypoint_and_mounts_the_root():
    from kubeflow.local.task_handler import DockerImageTaskHandler

    handler = DockerImageTaskHandler(
        "img", ["python", "-m", "x"], "/tmp/root", mounts={"/data/taxi": "/data/taxi"}
    )
    assert handler.volumes() == {
        "/data/taxi": {"bind": "/data/taxi", "mode": "rw"},
        "/tmp/root": {"bind": "/tmp/root", "mode": "rw"},
    }


def test_image_tree_leaves_out_what_dockerignore_does(tmp_path):
    from kubeflow.image_check import image_tree

    (tmp_path / "src" / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "mod.py").write_text("")
    (tmp_path / "src" / "pkg" / "__pycache__" / "mod.pyc").write_text("")
    (tmp_path / "src" / "tests").mkdir()
    (tmp_path / "src" / ".dockerignore").write_text("# c\ntests\n**/__pycache__\n")
    tree = image_tree(tmp_path / "image", tmp_path / "src")
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")) == [
        ".dockerignore",
        "pkg",
        "pkg/mod.py",
    ]


def test_spec_code_paths_name_the_projects_code(compiled):
    from kubeflow.image_check import spec_code_paths

    paths = spec_code_paths(compiled[0]["pipelineSpec"])
    for expected in (
        "components.example_gen.csv_example_gen.Executor",
        "components.validation.schema_importer.CuratedSchemaImporter_Executor",
        "components.validation.gate.ValidationGateExecutor",
        "components.validation.gate.ValidationResult",
        "components.release.atomic_pusher.Executor",
        "trainer.taxi.preprocessing.preprocessing_fn",
        "trainer.taxi.train.run_fn",
        "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor",
        "tfx.orchestration.kubeflow.v2.file_based_example_gen.driver",
    ):
        assert expected in paths


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_module_the_specs_name_imports_in_the_image(tmp_path):
    """From the image's /pipeline (the checkout minus .dockerignore) and its environment alone."""
    from kubeflow.compiler import compile_pipeline
    from kubeflow.config import KubeflowConfig
    from kubeflow.image_check import image_tree, spec_code_paths, unimportable

    paths = set()
    for dataset in ("taxi", "digits"):
        config = KubeflowConfig(image=IMAGE, pipeline_root="gs://b/r", dataset=dataset)
        paths.update(spec_code_paths(compile_pipeline(config)["pipelineSpec"]))
    assert "trainer.image.train.run_fn" in paths and "trainer.taxi.train.run_fn" in paths
    # The Dockerfile's build-time import check covers the project's modules the specs name,
    # so a broken image fails `docker build`, not a pod.
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text().replace("\\\n", "")
    [checked] = [
        m for m in re.findall(r'python -c "import ([^"]+)"', dockerfile) if "components." in m
    ]
    checked_modules = {m.strip() for m in checked.split(",")}
    for path in paths:
        if path.startswith(("components.", "trainer.")):
            module = path.rsplit(".", 1)[0]
            assert module in checked_modules, f"add {module} to the Dockerfile's import check"
    tree = image_tree(tmp_path / "pipeline")
    # Every name imports; and the check catches one the image does not have.
    assert unimportable([*sorted(paths), "trainer.missing_module.run_fn"], tree) == {
        "trainer.missing_module.run_fn": "ModuleNotFoundError: No module named "
        "'trainer.missing_module'"
    }


@pytest.mark.slow  # one interpreter importing TFX (~12 s)
@pytest.mark.timeout(300)
def test_subprocess_handler_runs_the_entrypoint_fresh_in_the_image_env(tmp_path):
    """The default runner's handler (`--runner subprocess`): the spec's own entrypoint
    command starts in a fresh interpreter in the image's environment and its exit code
    and output are the task's. (The e2e jobs fork their tasks: `--runner forked`.)"""
    from kfp.local import status

    from kubeflow.local.task_handler import ImageEnvTaskHandler

    entrypoint = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"
    log = tmp_path / "help.log"
    handler = ImageEnvTaskHandler(
        "img", ["python", "-m", entrypoint, "--help"], str(tmp_path), log_path=str(log)
    )
    assert handler.run() == status.Status.SUCCESS and handler.returncode == 0
    assert "--executor_class_path" in log.read_text()
    missing = ImageEnvTaskHandler(
        "img", ["python", "-m", "components.no_such_module"], str(tmp_path), log_path=str(log)
    )
    assert missing.run() == status.Status.FAILURE and missing.returncode == 1
    assert "No module named components.no_such_module" in log.read_text()
