"""The registry's pointer format: what an alias (`champion`, `challenger`) points at.

One small module that both sides read: `tfxp models` writes pointers through it
(tfxp/models/registry.py, after recording the change in ML Metadata) and the
server reads them (serving/repository.py), so the server needs nothing of the
registry's lineage queries to learn which version an alias names.

- local disk: `<serving>/<alias>`, a symbolic link to the version folder,
  replaced with one rename, and `<serving>/<alias>.json` beside it, renamed over
  the old one. A reader sees the old target or the new one, never neither.
- object storage (s3://, gs://): `<serving>/<alias>.json`, one object written with
  one PUT, which S3 makes visible whole or not at all.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

CHAMPION = "champion"
CHALLENGER = "challenger"


def pointer_path(serving_dir: str, alias: str) -> str:
    return f"{serving_dir.rstrip('/')}/{alias}.json"


def link_path(serving_dir: str, alias: str) -> str:
    return os.path.join(serving_dir, alias)


def write_pointer(serving_dir: str, alias: str, version_path: str, record: dict[str, Any]) -> str:
    """Points `alias` at the version folder `version_path`, atomically; returns the serving path."""
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    pointer = pointer_path(serving_dir, alias)
    if "://" in serving_dir:
        from tfx.dsl.io import fileio

        with fileio.open(pointer, "w") as f:  # one PUT: the whole object or the old one
            f.write(text)
        return pointer
    os.makedirs(serving_dir, exist_ok=True)
    tmp = os.path.join(serving_dir, f".{alias}.{uuid.uuid4().hex[:8]}")
    # The link is relative, so the serving folder can be moved or mounted elsewhere.
    os.symlink(os.path.basename(version_path.rstrip("/")), tmp)
    os.replace(tmp, link_path(serving_dir, alias))
    with open(tmp + ".json", "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp + ".json", pointer)
    return link_path(serving_dir, alias)


def read_pointer(serving_dir: str, alias: str) -> dict[str, Any] | None:
    """The alias's pointer as a server or script reads it (None: not set)."""
    from tfx.dsl.io import fileio

    path = pointer_path(serving_dir, alias)
    if not fileio.exists(path):
        return None
    with fileio.open(path, "r") as f:
        return json.loads(f.read())
