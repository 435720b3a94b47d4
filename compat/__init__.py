"""The one door to other libraries' private names.

The project's fast paths reuse TFMA's, tf.Transform's, TFDV's, TFX's, tfx_bsl's and Beam's
own internals instead of copying them. Every such name is taken here, one module per
library, and nowhere else (tests/unit/compat/test_compat.py scans the project for private imports and
`module._name` uses outside this package). Each module checks at import that the library
is the version its names were read from: an upgrade then fails in one place, with a message
that says which library and where the list of names to re-check is
(`python -m compat` prints it; docs/limitations.md shows it).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import metadata
from typing import Any

REGISTRY: list[PrivateName] = []


class CompatError(ImportError):
    """An installed library is not the version the project's use of its internals was
    written against."""


@dataclass(frozen=True)
class PrivateName:
    library: str  # the distribution, as pip names it
    path: str  # dotted: module, then attributes (an instance attribute: Class.attr)
    why: str
    instance_attribute: bool = False


def check_version(distribution: str, written_for: str) -> None:
    found = metadata.version(distribution)
    if found != written_for:
        raise CompatError(
            f"{distribution} {found} is installed, but the project uses internals of "
            f"{distribution} {written_for} (compat/). Install {distribution}=={written_for} "
            "(requirements.lock), or re-check every name `python -m compat` lists for it."
        )


def resolve(path: str) -> Any:
    """The object at a dotted path: the longest importable module, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            found = getattr(found, name)
        return found
    raise ImportError(f"no module in {path!r}")


def private(library: str, path: str, why: str) -> Any:
    """The library's private object at `path`, recorded for the upgrade list."""
    REGISTRY.append(PrivateName(library, path, why))
    return resolve(path)


def private_attribute(library: str, path: str, why: str) -> str:
    """The name of a private instance attribute (`module.Class._attr`), recorded; the caller
    reads it from its instance."""
    REGISTRY.append(PrivateName(library, path, why, instance_attribute=True))
    return path.rsplit(".", 1)[1]
