"""Where a task of the compiled spec runs under `python -m kubeflow run-local`.

Each handler implements `kfp.local`'s `ITaskHandler` and run the task's exact
`command + args` after KFP's placeholder resolution:

* `ImageEnvTaskHandler` (the default; what runs without a Docker engine): a
  subprocess in the environment the `Dockerfile` builds, reproduced from this
  checkout: the image's `ENV` lines (read from the Dockerfile itself), the
  project's venv as the image's `/opt/venv`, the image's `WORKDIR` as the
  working directory and the project on `PYTHONPATH` (the image installs it
  with a `.pth` entry). Paths under the image's project root (`/pipeline/...`,
  where the spec finds the embedded data and schema) are mapped to this
  checkout: the one thing a subprocess cannot reproduce without a mount.
* `ForkedTaskHandler` (`--runner forked`): the same command, environment and
  working directory, forked from a server that imported TFX once
  (`kubeflow/local/forked_tasks.py`): ~10 s less per task, no fresh interpreter.
* `DockerImageTaskHandler`: the task in the built image, with the pipeline
  root (and any local folder passed as a runtime argument) mounted at the same
  path. `kfp.local`'s own `DockerTaskHandler` passes the command as the
  container's CMD, behind the image's ENTRYPOINT (Beam's boot program here);
  on a cluster KFP sets the pod's `command`, which *replaces* the entrypoint,
  so this handler does the same.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kfp.local import status, task_handler_interface

from kubeflow.config import CONTAINER_PROJECT_ROOT
from pipeline.config import PROJECT_ROOT

DOCKERFILE = PROJECT_ROOT / "Dockerfile"
# The venv the Dockerfile creates (its VIRTUAL_ENV); here: the interpreter running us.
_IMAGE_VENV = "/opt/venv"
# Host variables a pod would also have in some form (home, temp, locale); nothing else leaks in.
_HOST_PASSTHROUGH = ("HOME", "TMPDIR", "LANG", "LC_ALL", "USER")
# `/pipeline` as a whole path segment (not part of gs://bucket/pipeline/... or /x/pipeline).
_CONTAINER_ROOT_RE = re.compile(r"(?<![\w.:/-])" + re.escape(CONTAINER_PROJECT_ROOT) + r"(?=/|\b)")


def dockerfile_env(dockerfile: Path = DOCKERFILE) -> dict[str, str]:
    """The `ENV` variables the Dockerfile sets (KEY=VALUE form, continuation lines joined)."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.upper().startswith("ENV "):
            continue
        for item in shlex.split(line[4:]):
            key, sep, value = item.partition("=")
            if sep:
                env[key] = value
    return env


def dockerfile_workdir(dockerfile: Path = DOCKERFILE) -> str:
    workdirs = re.findall(r"^WORKDIR\s+(\S+)", dockerfile.read_text(), re.MULTILINE)
    return workdirs[-1] if workdirs else "/"


def image_workdir() -> str:
    """The image's WORKDIR, as this checkout: where every task starts."""
    return to_host_paths([dockerfile_workdir()])[0]


def image_environment(python: str = sys.executable) -> dict[str, str]:
    """The task environment of the image, with this machine's venv standing for /opt/venv."""
    venv = str(Path(python).parent.parent)
    env = {k: os.environ[k] for k in _HOST_PASSTHROUGH if k in os.environ}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    for key, value in dockerfile_env().items():
        value = value.replace("$PATH", env["PATH"]).replace("${PATH}", env["PATH"])
        env[key] = value.replace(_IMAGE_VENV, venv)
    # The image makes /pipeline importable through a .pth entry; here the checkout.
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    return env


def to_host_paths(args: Sequence[str], project_root: Path = PROJECT_ROOT) -> list[str]:
    """`/pipeline/...` (the project inside the image) -> the same file in this checkout."""
    return [_CONTAINER_ROOT_RE.sub(str(project_root), a) for a in args]


class ImageEnvTaskHandler(task_handler_interface.ITaskHandler):
    """Runs a task's resolved command as a subprocess in the image's environment."""

    def __init__(
        self,
        image: str,
        full_command: list[str],
        pipeline_root: str,
        runner: object = None,
        *,
        log_path: str | None = None,
        echo: bool = False,
    ) -> None:
        self.image = image
        self.full_command = list(full_command)
        self.pipeline_root = pipeline_root
        self.runner = runner
        self.log_path = log_path
        self.echo = echo
        self.returncode: int | None = None

    def command(self) -> list[str]:
        command = to_host_paths(self.full_command)
        # The image's PATH puts /opt/venv/bin first: `python` is the venv's.
        if command and command[0] in ("python", "python3"):
            command[0] = sys.executable
        return command

    def run(self) -> status.Status:
        workdir = image_workdir()
        log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
        try:
            proc = subprocess.Popen(  # noqa: S603 - the task's command from the compiled spec this process wrote, no shell
                self.command(),
                cwd=workdir,
                env=image_environment(),
                stdout=subprocess.PIPE if self.echo else (log or subprocess.DEVNULL),
                stderr=subprocess.STDOUT,
            )
            if self.echo:
                for line in proc.stdout or ():
                    sys.stdout.buffer.write(line)
                    if log is not None:
                        log.write(line)
            self.returncode = proc.wait()
        finally:
            if log is not None:
                log.close()
        return status.Status.SUCCESS if self.returncode == 0 else status.Status.FAILURE


class ForkedTaskHandler(ImageEnvTaskHandler):
    """Runs a `python -m <module>` task as a fork of a warm server (others as subprocesses)."""

    def __init__(self, *args, server: Any, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.server = server

    def run(self) -> status.Status:
        command = self.command()
        if len(command) < 3 or command[:2] != [sys.executable, "-m"]:
            return super().run()
        from runtime.forkserver import ForkServerError

        echo = sys.stdout.buffer if self.echo else None
        try:
            self.returncode = self.server.run(command[2], command[3:], self.log_path, echo)
        except ForkServerError as e:
            # The task failed with the server: say so where its log is read.
            if self.log_path:
                with open(self.log_path, "a") as log:
                    log.write(f"\n{e}\n")
            self.returncode = -1
        return status.Status.SUCCESS if self.returncode == 0 else status.Status.FAILURE


class DockerImageTaskHandler(ImageEnvTaskHandler):
    """Runs a task in the built image (needs a Docker engine and the `docker` package)."""

    def __init__(self, *args, mounts: Mapping[str, str] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mounts = dict(mounts or {})

    def volumes(self) -> dict[str, dict[str, str]]:
        paths = {os.path.abspath(self.pipeline_root), *self.mounts}
        return {p: {"bind": p, "mode": "rw"} for p in sorted(paths)}

    def run(self) -> status.Status:  # pragma: no cover - no Docker engine where this is tested
        import docker

        client = docker.from_env()
        log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
        try:
            container = client.containers.run(
                image=self.image,
                # As on a cluster: the task's command replaces the image's ENTRYPOINT.
                entrypoint=self.full_command[:1],
                command=self.full_command[1:],
                volumes=self.volumes(),
                detach=True,
            )
            for chunk in container.logs(stream=True):
                if self.echo:
                    sys.stdout.buffer.write(chunk)
                if log:
                    log.write(chunk)
            self.returncode = container.wait()["StatusCode"]
            container.remove()
        finally:
            if log:
                log.close()
            client.close()
        return status.Status.SUCCESS if self.returncode == 0 else status.Status.FAILURE
