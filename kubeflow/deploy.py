"""Uploads a compiled pipeline to Kubeflow Pipelines and starts a run, with kfp.Client.

KFP's API servers take a bare PipelineSpec (the IR YAML `kfp.compiler` writes),
not TFX's PipelineJob wrapper, so the job's `pipelineSpec` is uploaded as
YAML; the pipeline root travels in the spec (`defaultPipelineRoot`) and in the
run's runtime config.

A pipeline of the same name gets a new version; otherwise the pipeline is
created. Every failure becomes a `KubeflowDeployError` whose message says what
to do.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import io
import json
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import yaml

from kubeflow.config import IMAGE_NAME

HEALTHZ_PATH = "/apis/v2beta1/healthz"


class KubeflowDeployError(RuntimeError):
    """Deployment failed; the message says what went wrong and what to do."""


@dataclass(frozen=True)
class DeployTarget:
    host: str
    namespace: str | None = None
    token: str | None = None
    experiment: str | None = None  # default: the pipeline's name
    run_name: str | None = None
    version_name: str | None = None
    timeout_s: float = 10.0


@dataclass(frozen=True)
class DeployResult:
    pipeline_id: str
    pipeline_created: bool
    version_id: str
    version_name: str
    experiment_id: str
    run_id: str
    run_url: str


def spec_digest(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def container_images(spec: dict[str, Any]) -> set[str]:
    return {
        e["container"].get("image", "")
        for e in spec["deploymentSpec"]["executors"].values()
        if "container" in e
    }


def check_package(job: dict[str, Any], *, image: str | None = None) -> list[str]:
    """Validates a compiled job for deployment; returns warnings, raises on errors."""
    spec = job["pipelineSpec"]
    images = container_images(spec)
    if not images or "" in images:
        raise KubeflowDeployError(
            "the compiled spec has a container without an image: recompile with --image"
        )
    if image and images != {image}:
        raise KubeflowDeployError(
            f"the compiled spec runs {', '.join(sorted(images))}, not {image}: "
            "recompile with this --image or drop --image"
        )
    warnings = []
    for img in sorted(images):
        name = img.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
        if name != IMAGE_NAME:
            warnings.append(
                f"image {img} is not named {IMAGE_NAME!r} (the Dockerfile's image); tasks "
                "import the project's modules, so the image must be built from this repository"
            )
        if "/" not in img.split("@", 1)[0]:
            warnings.append(
                f"image {img} has no registry: a cluster can pull only pushed images "
                "(e.g. us-docker.pkg.dev/PROJECT/REPO/tfx-pipeline:TAG)"
            )
    if not spec.get("defaultPipelineRoot") and not job.get("runtimeConfig", {}).get(
        "gcsOutputDirectory"
    ):
        raise KubeflowDeployError("the compiled spec has no pipeline root: recompile it")
    return warnings


def write_upload_file(spec: dict[str, Any], directory: str) -> str:
    """The PipelineSpec as KFP IR YAML (what the API server and kfp's own compiler use)."""
    path = os.path.join(directory, f"{spec['pipelineInfo']['name']}.pipeline.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(spec, f, sort_keys=True)
    return path


def _normalize_host(host: str) -> str:
    host = host.strip().rstrip("/")
    if not host:
        raise KubeflowDeployError(
            "no Kubeflow Pipelines endpoint: pass --host https://KFP-HOST (or set KFP_HOST); "
            "for a cluster without ingress: `kubectl port-forward -n kubeflow "
            "svc/ml-pipeline-ui 8080:80` and --host http://localhost:8080"
        )
    if not host.startswith(("http://", "https://")):
        host = "https://" + host
    return host


def check_reachable(host: str, token: str | None, timeout_s: float) -> None:
    """Fails fast with a clear message (kfp.Client retries healthz for ~25 s otherwise)."""
    request = urllib.request.Request(host + HEALTHZ_PATH)  # noqa: S310 - http(s): _normalize_host
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):  # noqa: S310 - http(s) as above
            return
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            raise KubeflowDeployError(
                f"Kubeflow Pipelines at {host} refused the request (HTTP {e.code}): pass a valid "
                "token with --token or KFP_TOKEN"
            ) from None
        return  # reachable; the API calls below report anything else
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise KubeflowDeployError(
            f"cannot reach Kubeflow Pipelines at {host} ({reason}). Check --host / KFP_HOST, "
            "that the cluster is up, and any port-forward (`kubectl port-forward -n kubeflow "
            "svc/ml-pipeline-ui 8080:80`)"
        ) from None


def _api_error(action: str, host: str, e: Exception) -> KubeflowDeployError:
    import kfp_server_api

    if isinstance(e, kfp_server_api.ApiException):
        detail = ""
        try:
            body = json.loads(e.body or "{}")
            detail = body.get("message") or body.get("error") or ""
        except (ValueError, AttributeError):
            detail = (e.body or "").strip()[:300] if isinstance(e.body, str) else ""
        hint = {
            400: "the server rejected the pipeline; check the message, recompile and retry",
            401: "pass a valid token with --token or KFP_TOKEN",
            403: "your account may not write to this namespace: check --namespace / KFP_NAMESPACE",
            404: "is --host the KFP API (…/pipeline) with the v2beta1 API (KFP >= 2.0)?",
            409: "a version of that name exists: pass another --version-name",
        }.get(e.status, "check the server's logs (ml-pipeline deployment) and retry")
        return KubeflowDeployError(
            f"{action} failed: HTTP {e.status} {e.reason}"
            + (f": {detail}" if detail else "")
            + f". {hint[0].upper()}{hint[1:]}."
        )
    name = type(e).__name__
    if "MaxRetryError" in name or "NewConnectionError" in name or isinstance(e, OSError):
        return KubeflowDeployError(
            f"{action} failed: lost the connection to {host} ({e}); check the endpoint and retry"
        )
    return KubeflowDeployError(f"{action} failed: {name}: {e}")


class _Progress:
    """The server call under way, which an error message names ("uploading pipeline ... failed")."""

    def __init__(self) -> None:
        self.step = "connecting"


def deploy(job: dict[str, Any], target: DeployTarget) -> DeployResult:
    """Uploads `job`'s PipelineSpec (new pipeline or new version) and starts a run."""
    import kfp

    spec = job["pipelineSpec"]
    check_package(job)
    name = spec["pipelineInfo"]["name"]
    host = _normalize_host(target.host)
    check_reachable(host, target.token, target.timeout_s)

    now = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    version_name = target.version_name or f"{name}-{now}-{spec_digest(spec)[:8]}"
    run_name = target.run_name or f"{name} {now}"
    pipeline_root = spec.get("defaultPipelineRoot") or job["runtimeConfig"]["gcsOutputDirectory"]

    # kfp prints its own "... details: URL" lines; we print ours.
    quiet = contextlib.redirect_stdout(io.StringIO())
    progress = _Progress()
    try:
        with quiet, tempfile.TemporaryDirectory() as tmp:
            client = kfp.Client(
                host=host,
                namespace=target.namespace or "kubeflow",
                existing_token=target.token,
            )
            upload = write_upload_file(spec, tmp)
            pipeline_id, created, version = _upload(
                client, upload, spec, name, version_name, target.namespace, progress
            )
            progress.step = "creating the experiment"
            experiment = client.create_experiment(
                target.experiment or name, namespace=target.namespace
            )
            progress.step = "starting the run"
            run = client.run_pipeline(
                experiment_id=experiment.experiment_id,
                job_name=run_name,
                pipeline_id=pipeline_id,
                version_id=version.pipeline_version_id,
                pipeline_root=pipeline_root,
            )
    except KubeflowDeployError:
        raise
    except Exception as e:  # noqa: BLE001 - kfp raises ApiException, urllib3 errors, ValueError
        raise _api_error(progress.step, host, e) from None
    if not run.run_id:
        raise KubeflowDeployError("the server accepted the run but returned no run id")
    return DeployResult(
        pipeline_id=pipeline_id,
        pipeline_created=created,
        version_id=version.pipeline_version_id,
        version_name=version.display_name or version_name,
        experiment_id=experiment.experiment_id,
        run_id=run.run_id,
        run_url=f"{host}/#/runs/details/{run.run_id}",
    )


def _upload(
    client,
    upload: str,
    spec: dict[str, Any],
    name: str,
    version_name: str,
    namespace: str | None,
    progress: _Progress,
) -> tuple[str, bool, Any]:
    """(pipeline id, whether it was created, its new version): a new pipeline the
    first time, a new version of it afterwards."""
    progress.step = f"looking up pipeline {name!r}"
    pipeline_id = client.get_pipeline_id(name)
    if pipeline_id is not None:
        progress.step = f"uploading a new version of pipeline {name!r}"
        version = client.upload_pipeline_version(
            upload,
            pipeline_version_name=version_name,
            pipeline_id=pipeline_id,
            description=f"spec sha256 {spec_digest(spec)[:12]}",
        )
        return pipeline_id, False, version
    progress.step = f"uploading pipeline {name!r}"
    pipeline = client.upload_pipeline(
        upload,
        pipeline_name=name,
        description=f"TFX pipeline {name!r} ({version_name})",
        namespace=namespace,
    )
    pipeline_id = pipeline.pipeline_id
    progress.step = f"finding the first version of pipeline {name!r}"
    versions = client.list_pipeline_versions(
        pipeline_id, page_size=1, sort_by="created_at desc"
    ).pipeline_versions
    if not versions:
        raise KubeflowDeployError(
            f"the server created pipeline {pipeline_id} but lists no version of it"
        )
    return pipeline_id, True, versions[0]
