"""Pusher executor that publishes a model version atomically.

Model servers (TF Serving and friends) load any new numbered version
directory that appears under the serving path. TFX's Pusher copies the model
file by file straight into `<base>/<version>/`, so a crash mid-copy leaves a
partial version there forever, and two pushes in the same second share a
version directory. This executor copies into a hidden temporary directory
beside it and renames it into place: on a local or POSIX filesystem the new
version appears complete or not at all.

Object storage (s3://, gs://) has no rename: a "rename" is a copy of every
object and a delete, and a reader can list a prefix while it fills. There the
push (1) uploads the model under a hidden `.incoming-<uuid>/` prefix, which no
server or reader takes for a version; (2) copies it server-side into
`<version>/` with `saved_model.pb` last, so a model server polling the base
(TF Serving needs saved_model.pb to load a version) never loads a partial one;
(3) writes `<version>/PUSH_COMPLETE` last: a version without it is incomplete
(`is_complete_version`), and is removed on failure when the store still
answers. A version number is never reused, complete or not.
"""

from __future__ import annotations

import os
import time
import uuid

from absl import logging
from tfx import types
from tfx.components.pusher import component as tfx_pusher_component
from tfx.components.pusher import executor as tfx_pusher
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.proto import pusher_pb2
from tfx.types import standard_component_specs
from tfx.utils import io_utils, proto_utils

from components.base import component
from components.release.serving_check import warmup

TMP_PREFIX = ".incoming-"
# Written last into a version on object storage: the version is complete.
COMPLETE_MARKER = "PUSH_COMPLETE"
SAVED_MODEL_PB = "saved_model.pb"


def next_version(base_directory: str, now: float | None = None) -> str:
    """A Unix-timestamp version, bumped past any existing one so none is reused."""
    version = int(now if now is not None else time.time())
    if fileio.exists(base_directory):
        taken = [
            int(d.rstrip("/")) for d in fileio.listdir(base_directory) if d.rstrip("/").isdigit()
        ]
        if taken:
            version = max(version, max(taken) + 1)
    return str(version)


def _relative_files(root: str) -> list[str]:
    root = root.rstrip("/")
    found: list[str] = []
    for directory, _, files in fileio.walk(root):
        rel_dir = directory.rstrip("/")[len(root) :].strip("/")
        found.extend(f"{rel_dir}/{f}" if rel_dir else f for f in files)
    return sorted(found)


def is_complete_version(version_path: str) -> bool:
    """A pushed version is complete: on object storage, when its marker exists."""
    if "://" not in version_path:
        return fileio.isdir(version_path)
    return fileio.exists(f"{version_path.rstrip('/')}/{COMPLETE_MARKER}")


def _add_extras(model_copy: str, extras: dict[str, str] | None) -> None:
    """Files added to the pushed copy (relative path -> source), e.g. the warmup requests."""
    for rel, source in (extras or {}).items():
        target = f"{model_copy.rstrip('/')}/{rel}"
        fileio.makedirs(os.path.dirname(target))
        fileio.copy(source, target, overwrite=True)


def _publish_to_object_store(
    model_path: str, base_directory: str, extras: dict[str, str] | None = None
) -> tuple[str, str]:
    base = base_directory.rstrip("/")
    tmp = f"{base}/{TMP_PREFIX}{uuid.uuid4().hex}"
    serving_path = None
    try:
        io_utils.copy_dir(model_path, tmp)
        _add_extras(tmp, extras)
        version = next_version(base)
        serving_path = f"{base}/{version}"
        # saved_model.pb last: servers load a version only once it is there.
        for rel in sorted(_relative_files(tmp), key=lambda r: r == SAVED_MODEL_PB):
            fileio.copy(f"{tmp}/{rel}", f"{serving_path}/{rel}", overwrite=True)
        with fileio.open(f"{serving_path}/{COMPLETE_MARKER}", "w") as f:
            f.write(f"{model_path}\n")
    except BaseException:
        for leftover in (serving_path, tmp):
            try:
                if leftover and fileio.exists(leftover):
                    fileio.rmtree(leftover)
            except Exception as e:  # noqa: BLE001 - the store may be what failed; keep the first error
                logging.warning("could not remove the partial push %s: %s", leftover, e)
        raise
    try:
        fileio.rmtree(tmp)
    except Exception as e:  # noqa: BLE001 - the version is complete; a hidden leftover is harmless
        logging.warning("could not remove %s: %s", tmp, e)
    return serving_path, version


def publish_model(
    model_path: str, base_directory: str, extras: dict[str, str] | None = None
) -> tuple[str, str]:
    """Copies `model_path` (and `extras`: relative path -> source file) to `<base>/<version>`
    atomically; returns (path, version)."""
    if "://" in base_directory:
        return _publish_to_object_store(model_path, base_directory, extras)
    fileio.makedirs(base_directory)
    tmp = os.path.join(base_directory, f"{TMP_PREFIX}{uuid.uuid4().hex}")
    try:
        io_utils.copy_dir(model_path, tmp)
        _add_extras(tmp, extras)
        version = next_version(base_directory)
        serving_path = os.path.join(base_directory, version)
        fileio.rename(tmp, serving_path)
    except BaseException:
        if fileio.exists(tmp):
            fileio.rmtree(tmp)
        raise
    return serving_path, version


class Executor(component.Executor, tfx_pusher.Executor):
    """TFX's Pusher, with an atomic filesystem push."""

    def run(self, execution: component.Execution) -> None:
        input_dict = execution.inputs
        self._log_startup(*execution.args)
        model_push = execution.output(standard_component_specs.PUSHED_MODEL_KEY)
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(model_push)
            return
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(
            execution.properties[standard_component_specs.PUSH_DESTINATION_KEY], destination
        )
        if destination.WhichOneof("destination") != "filesystem":
            # Other destinations keep TFX's behaviour.
            return tfx_pusher.Executor.Do(self, *execution.args)
        model_path = self.GetModelPath(input_dict)
        serving_path, version = publish_model(
            model_path, destination.filesystem.base_directory, _warmup_extras(input_dict)
        )
        logging.info("Model published atomically to %s.", serving_path)
        io_utils.copy_dir(model_path, model_push.uri)
        self._MarkPushed(model_push, pushed_destination=serving_path, pushed_version=version)


def _warmup_extras(input_dict: dict[str, list[types.Artifact]]) -> dict[str, str]:
    """The serving check's warmup requests, to go into the version as TF Serving expects them."""
    infra = input_dict.get(standard_component_specs.INFRA_BLESSING_KEY) or []
    found = warmup.blessing_warmup(infra[0].uri) if infra else None
    return {warmup.IN_MODEL: found} if found else {}


class Pusher(tfx_pusher_component.Pusher):
    """TFX's Pusher component with the atomic executor above.

    A subclass rather than `custom_executor_spec=`, which TFX deprecates with a
    warning printed on every pipeline construction.
    """

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
