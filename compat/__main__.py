"""`python -m compat`: the private names the project relies on, as a Markdown table
(docs/limitations.md carries it; a test keeps the two equal)."""

from __future__ import annotations

import importlib

from compat import REGISTRY

LIBRARIES = ("tfma", "tft", "tfdv", "tfx", "tfx_bsl", "beam", "sklearn", "tf", "pyspark")


def table() -> str:
    versions = {}
    for name in LIBRARIES:
        module = importlib.import_module(f"compat.{name}")
        versions[module.LIBRARY] = module.WRITTEN_FOR
    lines = ["| library | private name | what it is for |", "|---|---|---|"]
    # By library in LIBRARIES' order, whatever order the modules were imported in.
    order = list(versions)
    for entry in sorted(REGISTRY, key=lambda e: order.index(e.library)):
        lib = f"{entry.library} {versions[entry.library]}"
        kind = " (instance attribute)" if entry.instance_attribute else ""
        lines.append(f"| {lib} | `{entry.path}`{kind} | {entry.why} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
