"""Beam SDK workers in separate processes that get the project as a cluster's workers do.

A portable Beam job (`tfxp run --beam portable`, pipeline/beam.py) sends its
work to SDK harness processes that a worker pool starts on request
(`--environment_type=EXTERNAL --environment_config=HOST:PORT`). Beam's own
Python worker pool (`apache_beam.runners.worker.worker_pool_main`) starts each
harness as `python -c ...` on the pool's sys.path: it never fetches or installs
the job's staged packages, so the workers would import the project from the
driver's checkout. In a real cluster the SDK container's boot program does that
step (Beam's Go `boot`: provision info, artifacts, `pip install`, then the harness).

`WorkerPool` runs Beam's worker pool servicer with `boot` below as its container
executable (the hook Beam gives for exactly this), and `boot` does what the
container's boot program does, here:
1. asks the runner's provision service for the job's options and dependencies;
2. downloads the staged artifacts from the runner's artifact service (the
   project's sdist that `--setup_file` built, and any `--extra_package`);
3. `pip install --no-deps --target` them into a directory of its own, once per
   distinct artifact (cached by content hash: a machine-wide cache a container
   does not have, so the same package is not rebuilt for every worker);
4. starts the SDK harness (`sdk_worker_main`) in a new process whose working
   directory is its own, with that directory first on PYTHONPATH and the
   project checkout's editable-install path removed from sys.path, so every
   project module comes from the staged package (the harness records where
   each was loaded from in `<work_dir>/workers/<id>/modules.json`).

Warm workers (the default; `tfxp beam workers --fresh-workers` turns them off):
step 4's process is forked from a zygote the pool starts once
(runtime/forkserver.py), which has imported the third-party modules every worker
imports (Beam's harness, TensorFlow, TFDV, tf.Transform, TFMA, TFX's
components: `WORKER_PRELOAD`) and nothing of the project. A fresh harness
spends ~10 s of CPU on those imports before its first bundle; a forked one
starts in a fraction of a second. The project's modules are still imported
by the harness, from the staged package (the zygote's own `runtime.forkserver`
module is dropped from the child's `sys.modules` first). The trade: a module
a worker imports reads its environment at the zygote's import, not the job's
(the zygote gets `WORKER_ENV`, as every worker does).

What it does not do: the third-party packages (TensorFlow, TFX, Beam) are this
machine's virtualenv, as they are the image's in a real cluster; only the
project's own code travels.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import time
from pathlib import Path

# The environment every worker gets, as the project's image (Dockerfile) sets it.
WORKER_ENV = {"TF_USE_LEGACY_KERAS": "1", "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
# The project's top-level packages (pyproject.toml), whose origin the harness records.
PROJECT_PACKAGES = ("pipeline", "tfxp", "components", "trainer", "kubeflow")
# Third-party modules whose presence in a worker shows what ran there.
WORK_MODULES = ("tensorflow_transform", "tensorflow_model_analysis", "tensorflow_data_validation")
# What the warm workers' zygote imports: what the SDK harness and the TFX
# components' Beam work import anyway. Third-party only: a project module
# imported here would not come from the job's staged package.
WORKER_PRELOAD = (
    "apache_beam.runners.worker.sdk_worker_main",
    "tensorflow",
    "tensorflow_data_validation",
    "tensorflow_transform.beam",
    "tensorflow_model_analysis",
    "tfx.components",
)
INSTALL_TIMEOUT_S = 600


class WorkerPool:
    """Beam's worker pool servicer, serving on `host`, with `boot` as its container executable."""

    def __init__(
        self, work_dir: str, host: str = "127.0.0.1", port: int = 0, warm: bool = True
    ) -> None:
        """`warm`: fork each worker from a zygote (see the module's docstring)."""
        import grpc
        from apache_beam.portability.api import beam_fn_api_pb2_grpc
        from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer
        from apache_beam.utils import thread_pool_executor

        from runtime.forkserver import ForkServer

        os.makedirs(work_dir, exist_ok=True)
        self.work_dir = os.path.abspath(work_dir)
        self._server = grpc.server(thread_pool_executor.shared_unbounded_instance())
        try:
            bound = self._server.add_insecure_port(f"{host}:{port}")
        except RuntimeError:  # grpc: "Failed to bind to address"
            bound = 0
        if not bound:
            raise OSError(
                f"cannot listen on {host}:{port}: in use, or not this machine's address; "
                "choose another --port (0: any free one)"
            )
        self.zygote: ForkServer | None = None
        if warm:  # started now: it imports while the pool waits for its first job
            self.zygote = ForkServer(
                WORKER_PRELOAD,
                cwd=self.work_dir,
                env=worker_base_env(),
                log_path=os.path.join(self.work_dir, "zygote.log"),
            )
        boot = write_boot_script(self.work_dir, self.zygote.address() if self.zygote else None)
        self._servicer = BeamFnExternalWorkerPoolServicer(
            use_process=True, container_executable=boot
        )
        beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(
            self._servicer, self._server
        )
        self._server.start()
        self.address = f"{host}:{bound}"

    def stop(self) -> None:
        """Stops serving and ends the workers still running (a job cut short)."""
        from apache_beam.runners.worker.worker_pool_main import kill_process_gracefully

        from compat import beam as beam_internals

        self._server.stop(0)
        for proc in list(beam_internals.worker_processes(self._servicer).values()):
            kill_process_gracefully(proc)  # a warm worker's boot passes the signal on
        if self.zygote is not None:
            self.zygote.close()


class BeamServiceError(ValueError):
    """A Beam service a run needs does not answer; the message says which and what to do."""


SERVICE_PROBE_S = 10.0


def check_services(
    beam_args: tuple[str, ...] | list[str], timeout: float = SERVICE_PROBE_S
) -> None:
    """Before any component runs: the job service and an EXTERNAL worker pool answer.

    Otherwise the first Beam component would wait a minute in Beam's client and
    fail with a gRPC error deep in its log.
    """
    flags = dict(a.split("=", 1) for a in beam_args if a.startswith("--") and "=" in a)
    services = []
    if flags.get("--job_endpoint"):
        services.append(("Beam job service", flags["--job_endpoint"], _JOB_SERVICE_HINT))
    if flags.get("--environment_type", "").upper() == "EXTERNAL" and flags.get(
        "--environment_config"
    ):
        services.append(("Beam worker pool", flags["--environment_config"], _POOL_HINT))
    if not services:  # local Beam: nothing to reach
        return
    import grpc

    for what, address, hint in services:
        with grpc.insecure_channel(address) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=timeout)
            except grpc.FutureTimeoutError:
                raise BeamServiceError(
                    f"the {what} at {address} does not answer within {timeout:.0f} s; {hint}"
                ) from None


_JOB_SERVICE_HINT = (
    "start one (python -m apache_beam.runners.portability.local_job_service_main --port PORT, "
    "or a Flink/Spark job server) or fix --job-endpoint"
)
_POOL_HINT = "start one (tfxp beam workers --port PORT) or fix --environment-config"


def write_boot_script(work_dir: str, zygote: str | None = None) -> str:
    """The container executable Beam's pool runs per worker: this module's `boot`
    (with `zygote`, the address of the server it forks the harness from)."""
    path = os.path.join(work_dir, "boot")
    module = Path(__file__).resolve()
    warm = f' --zygote "{zygote}"' if zygote else ""
    with open(path + ".tmp", "w") as f:
        f.write(
            f'#!/bin/sh\nexec "{sys.executable}" "{module}" --work-dir "{work_dir}"{warm} "$@"\n'
        )
    os.chmod(path + ".tmp", 0o755)  # noqa: S103 - a boot script Beam's pool executes; nothing secret in it
    os.replace(path + ".tmp", path)
    return path


def _provision_info(endpoint: str, worker_id: str):
    import grpc
    from apache_beam.portability.api import beam_provision_api_pb2, beam_provision_api_pb2_grpc

    with grpc.insecure_channel(endpoint) as channel:
        stub = beam_provision_api_pb2_grpc.ProvisionServiceStub(channel)
        response = stub.GetProvisionInfo(
            beam_provision_api_pb2.GetProvisionInfoRequest(), metadata=[("worker_id", worker_id)]
        )
    return response.info


def fetch_artifacts(endpoint: str, dependencies, dest: str) -> list[str]:
    """Downloads each staged artifact into `dest` under its staged name; returns the paths."""
    import grpc
    from apache_beam.portability import common_urns
    from apache_beam.portability.api import (
        beam_artifact_api_pb2,
        beam_artifact_api_pb2_grpc,
        beam_runner_api_pb2,
    )

    os.makedirs(dest, exist_ok=True)
    paths = []
    with grpc.insecure_channel(endpoint) as channel:
        stub = beam_artifact_api_pb2_grpc.ArtifactRetrievalServiceStub(channel)
        for dep in dependencies:
            if dep.role_urn != common_urns.artifact_roles.STAGING_TO.urn:
                continue
            role = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(dep.role_payload)
            path = os.path.join(dest, os.path.basename(role.staged_name))
            with open(path, "wb") as out:
                request = beam_artifact_api_pb2.GetArtifactRequest(artifact=dep)
                for chunk in stub.GetArtifact(request):
                    out.write(chunk.data)
            paths.append(path)
    return paths


def packages_to_install(staged: list[str]) -> list[str]:
    """The staged Python packages, in the order Beam's boot installs them.

    `extra_packages.txt` lists --extra_package files; `workflow.tar.gz` is the
    --setup_file sdist. Requirements, the pickled main session and the list of
    the submission environment's packages are not code to install.
    """
    by_name = {os.path.basename(p): p for p in staged}
    ordered = []
    if "extra_packages.txt" in by_name:
        with open(by_name["extra_packages.txt"]) as f:
            ordered += [by_name[n.strip()] for n in f if n.strip() in by_name]
    if "workflow.tar.gz" in by_name:
        ordered.append(by_name["workflow.tar.gz"])
    return ordered


def content_key(path: str) -> bytes:
    """A digest of what a package contains: its members' names and bytes, not their
    timestamps (Beam rebuilds the sdist for every job, so its bytes differ each time)."""
    import tarfile
    import zipfile

    digest = hashlib.sha256()
    if tarfile.is_tarfile(path):
        with tarfile.open(path) as tar:
            for m in sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name):
                member = tar.extractfile(m)  # a file (isfile above): never None
                data = member.read() if member is not None else b""
                digest.update(m.name.encode() + b"\0" + data + b"\0")
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            for name in sorted(z.namelist()):
                digest.update(name.encode() + b"\0" + z.read(name) + b"\0")
    else:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.digest()


def install(packages: list[str], cache_dir: str) -> str:
    """pip-installs `packages` (no dependencies) into a directory keyed by their content."""
    digest = hashlib.sha256()
    for p in packages:
        digest.update(content_key(p))
    target = os.path.join(cache_dir, digest.hexdigest()[:16])
    if os.path.isdir(target):
        return target
    os.makedirs(cache_dir, exist_ok=True)
    partial = f"{target}.{os.getpid()}.partial"
    if packages:
        subprocess.run(  # noqa: S603 - pip of this interpreter on the packages Beam's options name, no shell
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
            + ["--no-build-isolation", "--disable-pip-version-check", "--target", partial]
            + packages,
            check=True,
            timeout=INSTALL_TIMEOUT_S,
            cwd=cache_dir,  # never the checkout: the package must build from itself
        )
    else:
        os.makedirs(partial)
    try:
        os.rename(partial, target)  # atomic: a concurrent worker's install may have won
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def editable_paths() -> list[str]:
    """The directories editable installs (`__editable__*.pth`) add to every interpreter's path."""
    found = []
    for sp in site.getsitepackages():
        for pth in glob.glob(os.path.join(sp, "__editable__*.pth")):
            with open(pth) as f:
                found += [
                    line.strip() for line in f if line.strip() and not line.startswith("import")
                ]
    return found


# The harness process: the checkout's paths out, then Beam's SDK worker main;
# at the end, where each project module and the work modules were loaded from.
# Forked from the zygote, the project modules its server imported (runtime.forkserver)
# are dropped first: the harness imports the project from the staged package only.
HARNESS = """
import json, os, sys
hidden = set(json.loads(os.environ.pop("TFXP_HIDDEN_PATHS")))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") not in hidden]
record = os.environ.pop("TFXP_WORKER_RECORD")
packages, work = json.loads(os.environ.pop("TFXP_RECORD_MODULES"))
for name in [n for n in sys.modules if n.split(".")[0] in packages]:
    del sys.modules[name]
try:
    from apache_beam.runners.worker import sdk_worker_main
    sdk_worker_main.main(sys.argv)
finally:
    modules = {n: getattr(m, "__file__", None) for n, m in list(sys.modules.items())
               if n.split(".")[0] in packages}
    with open(record + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "cwd": os.getcwd(), "sys_path": sys.path,
                   "modules": modules, "work_modules": [w for w in work if w in sys.modules]}, f)
    os.replace(record + ".tmp", record)
"""


def worker_base_env() -> dict[str, str]:
    """This machine's environment as a worker's starts: no PYTHONPATH, `WORKER_ENV` set."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(WORKER_ENV)
    return env


def harness_env(info, args: argparse.Namespace, site_dir: str, worker_dir: str) -> dict[str, str]:
    """What Beam's boot program hands the SDK harness, plus the record's settings."""
    from apache_beam.portability.api import endpoints_pb2
    from google.protobuf import json_format, text_format

    def descriptor(url: str) -> str:
        return text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=url))

    env = worker_base_env()
    env.update(
        PYTHONPATH=site_dir,
        PIPELINE_OPTIONS=json_format.MessageToJson(info.pipeline_options),
        CONTROL_API_SERVICE_DESCRIPTOR=descriptor(args.control_endpoint),
        LOGGING_API_SERVICE_DESCRIPTOR=descriptor(args.logging_endpoint),
        WORKER_ID=args.id,
        SEMI_PERSISTENT_DIRECTORY=worker_dir,
        RUNNER_CAPABILITIES=" ".join(info.runner_capabilities),
        TFXP_HIDDEN_PATHS=json.dumps([os.path.abspath(p) for p in editable_paths()]),
        TFXP_WORKER_RECORD=os.path.join(worker_dir, "modules.json"),
        TFXP_RECORD_MODULES=json.dumps([PROJECT_PACKAGES, WORK_MODULES]),
    )
    if info.status_endpoint.url:
        env["STATUS_API_SERVICE_DESCRIPTOR"] = descriptor(info.status_endpoint.url)
    return env


def boot(argv: list[str]) -> None:
    """The container executable: provision, fetch, install, then become the SDK harness."""
    p = argparse.ArgumentParser()
    for name in ("work-dir", "id", "logging_endpoint", "artifact_endpoint"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--provision_endpoint", required=True)
    p.add_argument("--control_endpoint", required=True)
    p.add_argument("--zygote", help="fork the harness from this server (warm workers)")
    args = p.parse_args(argv)
    # Worker ids restart with each job service: the pid keeps every worker apart.
    worker_dir = os.path.join(args.work_dir, "workers", f"{args.id}-{os.getpid()}")
    os.makedirs(worker_dir, exist_ok=True)
    # Beam's pool gives the worker a pipe it never reads: everything goes to a file.
    log = os.open(os.path.join(worker_dir, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    started = time.monotonic()
    info = _provision_info(args.provision_endpoint, args.id)
    staged = fetch_artifacts(args.artifact_endpoint, info.dependencies, worker_dir + "/staged")
    packages = packages_to_install(staged)
    site_dir = install(packages, os.path.join(args.work_dir, "packages"))
    print(
        f"worker {args.id} pid {os.getpid()}: staged {sorted(map(os.path.basename, staged))}, "
        f"installed {[os.path.basename(p) for p in packages]} into {site_dir} "
        f"in {time.monotonic() - started:.1f}s",
        flush=True,
    )
    env = harness_env(info, args, site_dir, worker_dir)
    harness = [sys.executable, "-c", HARNESS]
    if args.zygote:
        # Beam's pool stops a worker by signalling the process it started: this one
        # passes the signal on to the forked harness.
        from runtime.forkserver import ForkServer

        ForkServer.attach(args.zygote).exec(harness, cwd=worker_dir, env=env)
    os.chdir(worker_dir)
    os.execve(sys.executable, harness, env)  # noqa: S606 - becomes this interpreter's harness, argv built here


if __name__ == "__main__":
    boot(sys.argv[1:])
