"""TensorBoard (installed with TensorFlow) started on this stack: `python -m compat.tensorboard
--logdir DIR --host 127.0.0.1 --port N` (what `tfxp tensorboard` runs).

TensorBoard 2.16's plugin list (`tensorboard/default.py`) imports `pkg_resources` to
find plugins other packages declare; setuptools 81 and later no longer ship
`pkg_resources` (the lock has setuptools 84), so `tensorboard` does not start. Where
`pkg_resources` is missing, a stand-in module with the two functions TensorBoard calls
answers: `iter_entry_points(group)` from `importlib.metadata` (the same entry points)
and `parse_version` as `packaging`'s `Version` (what pkg_resources' was).
"""

from __future__ import annotations

import sys
import types
from importlib import metadata

from compat import check_version

LIBRARY = "tensorboard"
WRITTEN_FOR = "2.16.2"
check_version(LIBRARY, WRITTEN_FOR)


def _entry_points_module() -> types.ModuleType:
    module = types.ModuleType("pkg_resources")

    def iter_entry_points(group: str, name: str | None = None):
        for point in metadata.entry_points(group=group):
            if name is None or point.name == name:
                # TensorBoard calls `.resolve()`; importlib's entry points `.load()`.
                point_with_resolve = types.SimpleNamespace(name=point.name, resolve=point.load)
                yield point_with_resolve

    from packaging.version import Version

    module.iter_entry_points = iter_entry_points  # type: ignore[attr-defined]
    module.parse_version = Version  # type: ignore[attr-defined]
    return module


def ensure_entry_points() -> None:
    """`pkg_resources` importable: the real one, or the stand-in."""
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        sys.modules["pkg_resources"] = _entry_points_module()


def main(argv: list[str]) -> None:
    """TensorBoard's own command line (`tensorboard ARGS`)."""
    ensure_entry_points()
    from tensorboard import main as tensorboard_main

    sys.argv = ["tensorboard", *argv]
    tensorboard_main.run_main()


if __name__ == "__main__":
    main(sys.argv[1:])
