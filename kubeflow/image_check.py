"""Is every piece of code the compiled spec names importable inside the image?

A KFP task imports, by dotted path, its entrypoint (`python -m ...`), its
executor class (`--executor_class_path`), the trainer functions it is given
(`run_fn`, `preprocessing_fn`, ...) and the classes of custom artifact types
(by schema title). The image has the project at /pipeline (what the
Dockerfile copies, minus `.dockerignore`) made importable by a `.pth` entry,
and nothing else of this checkout. `image_tree` lays out that folder from the
checkout; `unimportable` imports every name in a fresh interpreter that sees
only that folder, the way a pod would.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from pipeline.config import PROJECT_ROOT

# Task parameters that TFX resolves to code by dotted path.
CODE_PARAMETERS = ("run_fn", "preprocessing_fn", "trainer_fn", "stats_options_updater_fn")


def spec_code_paths(spec: dict[str, Any]) -> list[str]:
    """Every dotted path of code the compiled PipelineSpec names, sorted."""
    paths: set[str] = set()
    for executor in spec["deploymentSpec"]["executors"].values():
        container = executor.get("container")
        if not container:
            continue
        parts = [container, container.get("lifecycle", {}).get("preCacheCheck", {})]
        for part in parts:
            command = list(part.get("command", [])) + list(part.get("args", []))
            for flag, value in zip(command, command[1:], strict=False):
                if flag in ("-m", "--executor_class_path"):
                    paths.add(value)
    for task in spec["root"]["dag"]["tasks"].values():
        for name, param in task.get("inputs", {}).get("parameters", {}).items():
            value = param.get("runtimeValue", {}).get("constant")
            if name in CODE_PARAMETERS and isinstance(value, str) and value:
                paths.add(value)
    for component in spec.get("components", {}).values():
        for side in ("inputDefinitions", "outputDefinitions"):
            for artifact in component.get(side, {}).get("artifacts", {}).values():
                schema = artifact.get("artifactType", {}).get("instanceSchema")
                title = yaml.safe_load(schema).get("title", "") if schema else ""
                if title and not title.startswith("tfx."):  # tfx.* map to TFX's own classes
                    paths.add(title)
    return sorted(paths)


def _dockerignore(project_root: Path) -> list[str]:
    path = project_root / ".dockerignore"
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line.rstrip("/") for line in lines if line and not line.startswith("#")]


def image_tree(destination: Path, project_root: Path = PROJECT_ROOT) -> Path:
    """`COPY . /pipeline` of the Dockerfile, into `destination`: the checkout minus .dockerignore.

    Supports the pattern forms the project's .dockerignore uses: top-level
    names and globs, and `**/name` anywhere.
    """
    patterns = _dockerignore(project_root)

    def ignored(rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]
        for pattern in patterns:
            if pattern.startswith("**/"):
                if fnmatch.fnmatch(name, pattern[3:]):
                    return True
            elif fnmatch.fnmatch(rel, pattern):
                return True
        return False

    def ignore(folder: str, names: list[str]) -> set[str]:
        base = Path(folder).relative_to(project_root).as_posix()
        rel = (lambda n: n) if base == "." else (lambda n: f"{base}/{n}")
        return {n for n in names if ignored(rel(n))}

    shutil.copytree(project_root, destination, ignore=ignore, symlinks=True)
    return destination


_CHECK = """
import importlib, json, sys
root, project = sys.argv[1], sys.argv[2]
# The venv's .pth entry for this checkout stands in for the image's /pipeline entry.
sys.path[:] = [p for p in sys.path if p and p.rstrip("/") != project]
sys.path.insert(0, root)
missing = {}
for path in json.loads(sys.stdin.read()):
    parts, error = path.split("."), None
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError as e:
            error = f"{type(e).__name__}: {e}"
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
            error = None
        except AttributeError as e:
            # The deeper module's import error says more than the missing attribute.
            error = error or f"AttributeError: {e}"
        break
    if error:
        missing[path] = error
for name, module in list(sys.modules.items()):
    where = getattr(module, "__file__", None) or ""
    if where.startswith(project + "/") and "/.venv/" not in where:
        missing[name] = f"imported from the checkout ({where}), not from the image's {root}"
print(json.dumps(missing))
"""


def unimportable(paths: list[str], root: Path, python: str = sys.executable) -> dict[str, str]:
    """Dotted path -> error, for each path a fresh interpreter cannot import from `root` alone."""
    from kubeflow.local.task_handler import image_environment

    proc = subprocess.run(  # noqa: S603 - this interpreter, isolated, on a fixed probe script
        # -I: no PYTHONPATH, no user site, no current directory on sys.path.
        [python, "-I", "-c", _CHECK, str(root), str(PROJECT_ROOT)],
        input=json.dumps(paths),
        capture_output=True,
        text=True,
        cwd=root,
        env=image_environment(python),
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"import check failed to run: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
