"""Content fingerprints of user code referenced by importable path.

TFX's cache key covers a `module_file`'s contents, but a component given an
importable path (`preprocessing_fn="trainer.taxi.preprocessing.preprocessing_fn"`)
is keyed by the path string only: an edit to the code would be served from
cache. We hash the module and every project module it imports (transitively)
and pass the hash as a component parameter, so exactly the components whose
code changed are re-executed.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from pathlib import Path


def _module_file(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None  # e.g. `pkg.module.function`: a parent is a module, not a package
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return None
    return Path(spec.origin)


def _imported_modules(path: Path, module: str) -> set[str]:
    """Absolute names of the modules `path` imports (including `from x import y` as x.y)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def code_fingerprint(dotted_path: str, project_packages: tuple[str, ...] = ()) -> str:
    """SHA-256 over the source of the module holding `dotted_path` and its project imports.

    Args:
      dotted_path: `package.module.function` (or a module name).
      project_packages: top-level packages whose modules count as project code,
        besides the one holding `dotted_path`; third-party imports are pinned by
        the lock, not hashed here.
    """
    module = dotted_path
    if _module_file(module) is None:
        module = dotted_path.rpartition(".")[0]
    if _module_file(module) is None:
        raise ValueError(f"cannot find the module of {dotted_path!r}; is the project installed?")

    packages = {*project_packages, module.split(".")[0]}
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or name.split(".")[0] not in packages:
            continue
        path = _module_file(name)
        if path is None or path.suffix != ".py":
            continue  # `from pkg import CONSTANT` names an attribute, not a module
        seen[name] = path
        todo.extend(_imported_modules(path, name))
        # A module's package __init__ runs on import too.
        parent = name.rpartition(".")[0]
        if parent:
            todo.append(parent)

    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(name.encode() + b"\0" + seen[name].read_bytes() + b"\0")
    return digest.hexdigest()


def defines(dotted_path: str) -> bool:
    """Whether the module of `dotted_path` defines it at top level (read, not imported)."""
    module, _, name = dotted_path.rpartition(".")
    path = _module_file(module)
    if path is None:
        return False
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
        for node in tree.body
    )
