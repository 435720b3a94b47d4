"""What the console shows of an artifact besides its record: its properties, the files
under its URI, and which file a page may serve (never one outside the artifact)."""

from __future__ import annotations

import os
from typing import Any

from metadata.properties import prop


def property_items(node: Any) -> list[tuple[str, Any]]:
    """Every property and custom property of an artifact or execution, sorted by name."""
    keys = sorted(set(node.properties) | set(node.custom_properties))
    return [(k, prop(node, k)) for k in keys]


def artifact_files(uri: str, limit: int = 200) -> list[tuple[str, int]]:
    """(path relative to the artifact's URI, bytes) of the files under it, first `limit`."""
    out: list[tuple[str, int]] = []
    if "://" in uri or not os.path.isdir(uri):
        if os.path.isfile(uri):
            return [("", os.path.getsize(uri))]
        return out
    for root, dirs, files in os.walk(uri):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            try:
                size = os.path.getsize(full)
            except OSError:
                continue
            out.append((os.path.relpath(full, uri), size))
            if len(out) >= limit:
                return out
    return out


def resolve_file(folder: str, relative: str) -> str | None:
    """The real path of the file `relative` under `folder`, or None if it would leave it.

    `..`, absolute paths and symlinks that point outside the folder are refused,
    so a link planted in a run directory cannot serve /etc/passwd."""
    if "://" in folder or not relative or "\x00" in relative:
        return None
    parts = relative.replace("\\", "/").split("/")
    if relative.startswith("/") or any(p in ("..", "") for p in parts):
        return None
    base = os.path.realpath(folder)
    target = os.path.realpath(os.path.join(folder, *parts))
    if not target.startswith(base.rstrip(os.sep) + os.sep):
        return None
    return target if os.path.isfile(target) else None
