"""No side doors: a name is imported from the module that defines it.

A module that imports a name and is then imported *for* that name (a re-export) is a
second address for it: readers and `grep` find the wrong home, and moving the name
breaks callers that never used the re-exporting module's own code. The scan covers
`from M import N` and `M.N` (M a module of ours) in the production packages, the
tests and the benchmarks, and follows N to where it is defined.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = (
    *("airflow", "beam_spark", "compat", "components", "data", "kubeflow", "metadata"),
    *("pipeline", "runtime", "serving", "tfxp", "trainer"),
)
SCANNED = (*PACKAGES, "benchmarks", "tests")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _source(node: ast.ImportFrom, path: Path) -> str:
    if not node.level:
        return node.module or ""
    base = _module_name(path).split(".")
    base = base if path.name == "__init__.py" else base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


class _Modules:
    """Each module of ours: the names it defines, and the names it imports (from where)."""

    def __init__(self) -> None:
        self.paths = {_module_name(p): p for d in PACKAGES for p in (ROOT / d).rglob("*.py")}
        self.defined: dict[str, set[str]] = {}
        self.imported: dict[str, dict[str, tuple[str, str | None]]] = {}
        for name, path in self.paths.items():
            defined, imported = set(), {}
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    defined.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    defined.add(node.id)
                elif isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        src = _source(node, path)
                        imported[alias.asname or alias.name] = (src, alias.name)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        imported[alias.asname or alias.name.split(".")[0]] = (alias.name, None)
            self.defined[name], self.imported[name] = defined, imported

    def home(self, module: str, name: str) -> str:
        """The module that defines `module.name` (itself, or where it imported it from)."""
        for _ in range(10):
            if f"{module}.{name}" in self.paths or name in self.defined.get(module, ()):
                return module
            src, original = self.imported.get(module, {}).get(name, (module, None))
            if original is None or src not in self.paths:
                return module if original is None else src
            module, name = src, original
        return module


@functools.cache
def _modules() -> _Modules:
    return _Modules()


def _side_doors(path: Path, modules: _Modules) -> list[str]:
    tree = ast.parse(path.read_text())
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            src = _source(node, path)
            if src not in modules.paths:
                continue
            for alias in node.names:
                if f"{src}.{alias.name}" in modules.paths:
                    aliases[alias.asname or alias.name] = f"{src}.{alias.name}"
                elif (home := modules.home(src, alias.name)) != src:
                    found.append(f"line {node.lineno}: from {src} import {alias.name} ({home})")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules.paths:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            if module and (home := modules.home(module, node.attr)) != module:
                found.append(f"line {node.lineno}: {module}.{node.attr} ({home})")
    return found


def test_the_scan_finds_a_re_exported_name(tmp_path):
    modules = _modules()
    # pipeline.definition imports VALIDATION_GATE from pipeline.node_ids, and uses it.
    assert modules.home("pipeline.definition", "VALIDATION_GATE") == "pipeline.node_ids"
    assert modules.home("pipeline.definition", "create_pipeline") == "pipeline.definition"
    user = tmp_path / "user.py"
    user.write_text(
        "from pipeline import definition as d\n"
        "from pipeline.definition import VALIDATION_GATE, create_pipeline\n"
        "x = d.VALIDATION_GATE, d.create_pipeline\n"
    )
    assert _side_doors(user, modules) == [
        "line 2: from pipeline.definition import VALIDATION_GATE (pipeline.node_ids)",
        "line 3: pipeline.definition.VALIDATION_GATE (pipeline.node_ids)",
    ]


def test_every_name_is_imported_from_its_home():
    modules = _modules()
    files = [p for d in SCANNED for p in (ROOT / d).rglob("*.py")] + list(ROOT.glob("*.py"))
    found = {str(p.relative_to(ROOT)): doors for p in files if (doors := _side_doors(p, modules))}
    assert found == {}, "import these from the module named in parentheses"
