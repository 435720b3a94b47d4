"""`python -m kubeflow compile --trainer-workers N`: the Trainer as a Vertex AI custom job of N replicas."""

from __future__ import annotations

import json

import pytest

from kubeflow.config import IMAGE_NAME, KubeflowConfig, KubeflowConfigError, vertex_trainer_config

IMAGE = f"registry.example.com/ml/{IMAGE_NAME}:workers"
ROOT = "gs://example-bucket/tfx/taxi"
VERTEX = {"vertex_project": "my-project", "vertex_region": "europe-west4"}


def _config(**changes) -> KubeflowConfig:
    return KubeflowConfig(image=IMAGE, pipeline_root=ROOT, **changes)


def _trainer_task(job: dict) -> tuple[dict, dict]:
    """(custom_config, container) of the compiled Trainer task."""
    spec = job["pipelineSpec"]
    task = spec["root"]["dag"]["tasks"]["Trainer"]
    custom = json.loads(task["inputs"]["parameters"]["custom_config"]["runtimeValue"]["constant"])
    label = spec["components"][task["componentRef"]["name"]]["executorLabel"]
    return custom, spec["deploymentSpec"]["executors"][label]["container"]


def test_one_worker_is_the_plain_trainer():
    assert vertex_trainer_config(_config()) is None
    assert _config().pipeline_config().trainer_cluster is None


def test_n_workers_compile_to_a_vertex_trainer_with_n_replicas(tmp_path):
    from kubeflow.__main__ import main

    out = tmp_path / "taxi.json"
    argv = ["compile", "--image", IMAGE, "--pipeline-root", ROOT, "-o", str(out)]
    argv += ["--trainer-workers", "3", "--vertex-project", "my-project"]
    argv += ["--vertex-region", "europe-west4", "--trainer-machine-type", "n1-highmem-8"]
    assert main(argv) == 0
    custom, container = _trainer_task(json.loads(out.read_text()))
    # TFX's Vertex AI Trainer: its executor submits the custom job and waits.
    assert (
        "tfx.extensions.google_cloud_ai_platform.trainer.executor.GenericExecutor"
        in container["args"]
    )
    assert custom["ai_platform_enable_vertex"] is True
    assert custom["ai_platform_vertex_region"] == "europe-west4"
    args = custom["ai_platform_training_args"]
    assert args["project"] == "my-project"
    pools = args["job_spec"]["worker_pool_specs"]
    # Pool 0 is the chief, pool 1 the other workers: 3 training tasks in TF_CONFIG.
    assert [p["replica_count"] for p in pools] == [1, 2]
    assert {p["container_spec"]["image_uri"] for p in pools} == {IMAGE}
    assert {p["machine_spec"]["machine_type"] for p in pools} == {"n1-highmem-8"}
    # The run_fn and hyperparameters still reach every replica.
    assert "hyperparameters" in custom and "code_fingerprint" in custom


def test_the_custom_job_tfx_would_submit_runs_our_run_fn_on_every_replica():
    """What TFX's Vertex client builds from that custom_config (offline: no API call)."""
    from tfx.extensions.google_cloud_ai_platform.training_clients import VertexJobClient

    custom = vertex_trainer_config(_config(trainer_workers=2, **VERTEX))
    client = VertexJobClient.__new__(VertexJobClient)  # no credentials needed to build the job
    job = client.create_training_job(
        {},
        {},
        {"custom_config": json.dumps(custom), "run_fn": "trainer.taxi.train.run_fn"},
        "tfx.components.trainer.executor.GenericExecutor",
        dict(custom["ai_platform_training_args"]),
        None,  # job id: TFX makes one
        None,  # labels
    )
    pools = job["job_spec"]["worker_pool_specs"]
    assert [p["replica_count"] for p in pools] == [1, 1]
    for pool in pools:
        command = " ".join(pool["container_spec"]["command"])
        assert pool["container_spec"]["image_uri"] == IMAGE
        assert "tfx.scripts.run_executor" in command
        assert "tfx.components.trainer.executor.GenericExecutor" in command
        assert "trainer.taxi.train.run_fn" in command


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"trainer_workers": 0}, "trainer workers must be >= 1"),
        ({"trainer_workers": 2}, "add --vertex-project and --vertex-region"),
        ({"trainer_workers": 2, "vertex_project": "p"}, "add --vertex-region"),
        (
            {"trainer_workers": 2, "pipeline_root": "/mnt/runs", **VERTEX},
            "cannot see the local path '/mnt/runs'",
        ),
    ],
)
def test_worker_settings_errors_say_what_to_do(changes, message):
    config = _config(**{k: v for k, v in changes.items() if k != "pipeline_root"})
    if "pipeline_root" in changes:
        config = KubeflowConfig(image=IMAGE, **changes)
    with pytest.raises(KubeflowConfigError, match=message):
        config.validate()
