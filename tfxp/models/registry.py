"""The model registry: pushed versions by name (champion, challenger), promote and rollback.

A pushed version is a numbered folder the Pusher wrote under the serving
directory (components/release/atomic_pusher.py). An alias names one of them; its
record lives in ML Metadata (metadata/aliases.py, who/when/why, in
lineage), and its *serving path* is what a model server reads:

- local disk: `<serving>/<alias>`, a symbolic link to the version folder,
  replaced with one rename (`os.replace` of a new link over the old), and
  `<serving>/<alias>.json`, a pointer file written beside and renamed over the
  old one. A reader sees the old target or the new one, never neither.
- object storage (s3://, gs://): `<serving>/<alias>.json`, one object written
  with one PUT, which S3 makes visible whole or not at all.

The ML Metadata record is written first and the serving path second: when the
second fails the error says so, and the same command again rewrites it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from metadata import aliases
from metadata.aliases import AliasChange
from metadata.lineage import Lineage
from metadata.store import LineageError
from pipeline.config import PipelineConfig
from serving import pointers
from serving.pointers import CHAMPION


class RegistryError(LineageError):
    """An alias or version that does not exist, or a rollback with nowhere to go."""


@dataclass
class ModelVersion:
    """One pushed version: which model, from which run and span, and its aliases."""

    version: str
    model_id: int
    path: str
    run_id: str | None
    spans: list[int] = field(default_factory=list)
    blessed: bool | None = None
    aliases: list[str] = field(default_factory=list)
    pushed_at: str | None = None


def versions(lineage: Lineage) -> list[ModelVersion]:
    """Every pushed version of the pipeline, oldest first, with its current aliases."""
    out: dict[str, ModelVersion] = {}
    for model in lineage.models():
        for push in lineage.pushes(model.id):
            if not push.pushed or not push.version:
                continue
            info = lineage.run_info(push.run_id) if push.run_id in lineage.runs else None
            blessing = lineage.blessing(model.id)
            out[push.version] = ModelVersion(
                version=push.version,
                model_id=model.id,
                path=push.destination or "",
                run_id=push.run_id,
                spans=list(info.spans) if info else [],
                blessed=blessing.blessed if blessing else None,
                pushed_at=info.started if info else None,
            )
    held = aliases.current_aliases(lineage.store, lineage.pipeline)
    for name, change in sorted(held.items()):
        if change.version in out:
            out[change.version].aliases.append(name)
    return sorted(out.values(), key=lambda v: int(v.version) if v.version.isdigit() else 0)


def _version(lineage: Lineage, version: str) -> ModelVersion:
    known = versions(lineage)
    for v in known:
        if v.version == str(version):
            return v
    listed = ", ".join(v.version for v in known[-5:]) or "none yet"
    raise RegistryError(
        f"no pushed version {version} of pipeline '{lineage.pipeline}' in {lineage.where} "
        f"(newest versions: {listed}); `tfxp models list` shows them"
    )


# ---------------------------------------------------------------------------
# The serving path an alias points to.


def _pointer(change: AliasChange, version: ModelVersion) -> dict[str, Any]:
    return {
        "alias": change.alias,
        "version": version.version,
        "path": version.path,
        "model_id": version.model_id,
        "changed_by": change.who,
        "changed_at": change.when,
        "why": change.why,
    }


def point(serving_dir: str, change: AliasChange, version: ModelVersion) -> str:
    """Makes the alias's serving path point at `version`, atomically; returns the path."""
    target = version.path if os.path.basename(version.path.rstrip("/")) else version.version
    return pointers.write_pointer(serving_dir, change.alias, target, _pointer(change, version))


def _point(config: PipelineConfig, change: AliasChange, version: ModelVersion) -> str:
    try:
        return point(config.serving_dir, change, version)
    except Exception as e:  # noqa: BLE001 - OSError locally, TensorFlow's errors on s3://
        raise RegistryError(
            f"{change.alias} -> version {version.version} is recorded in ML Metadata, but its "
            f"serving path under {config.serving_dir} could not be changed ({e}); fix that and "
            f"run `tfxp models promote {version.version} --alias {change.alias}` to rewrite it"
        ) from None


# ---------------------------------------------------------------------------
# Changes.


@dataclass
class Outcome:
    change: AliasChange
    version: ModelVersion
    serving_path: str
    previous_version: str | None


def promote(
    config: PipelineConfig,
    lineage: Lineage,
    version: str,
    alias: str = CHAMPION,
    *,
    why: str = "",
    action: str = "promote",
) -> Outcome:
    """Gives `alias` to pushed `version`: the record in ML Metadata, then the serving path."""
    aliases.check_alias(alias)
    target = _version(lineage, version)
    previous = aliases.current(lineage.store, lineage.pipeline, alias)
    change = aliases.record_change(
        lineage.store,
        lineage.pipeline,
        alias,
        action=action,
        model_id=target.model_id,
        version=target.version,
        previous=previous,
        why=why,
    )
    path = _point(config, change, target)
    return Outcome(change, target, path, previous.version if previous else None)


def rollback(
    config: PipelineConfig, lineage: Lineage, alias: str = CHAMPION, *, why: str = ""
) -> Outcome:
    """Gives `alias` back to the model that held it before; RegistryError when none did."""
    aliases.check_alias(alias)
    now = aliases.current(lineage.store, lineage.pipeline, alias)
    if now is None:
        raise RegistryError(
            f"alias {alias!r} of pipeline '{lineage.pipeline}' was never set, so there is "
            f"nothing to roll back; `tfxp models promote VERSION --alias {alias}` sets it"
        )
    earlier = aliases.earlier_holder(lineage.store, lineage.pipeline, alias)
    if earlier is None:
        raise RegistryError(
            f"alias {alias!r} has had only version {now.version} (no earlier {alias} to roll "
            "back to); nothing was changed"
        )
    target = _version(lineage, earlier.version or "")
    change = aliases.record_change(
        lineage.store,
        lineage.pipeline,
        alias,
        action="rollback",
        model_id=target.model_id,
        version=target.version,
        previous=now,
        why=why,
    )
    path = _point(config, change, target)
    return Outcome(change, target, path, now.version)


def mark_push(config: PipelineConfig, store: Any, run_id: str) -> Outcome | None:
    """After a run that pushed: the dataset's `on_push` alias goes to the new version.

    Returns None when the run pushed nothing. `champion` puts the new model in
    service at once; `challenger` leaves the champion until someone promotes.
    """
    lineage = Lineage(store, config.pipeline_name)
    if run_id not in lineage.runs:
        return None
    info = lineage.run_info(run_id)
    if info.model_id is None:
        return None
    pushed = [p for p in lineage.pushes(info.model_id) if p.pushed and p.run_id == run_id]
    if not pushed or not pushed[-1].version:
        return None
    alias = config.on_push
    return promote(
        config,
        lineage,
        pushed[-1].version,
        alias,
        why=f"pushed by run {run_id} (dataset policy on_push: {alias})",
        action="push",
    )
