"""Benchmarks import no test code: what they share with the tests lives in benchmarks/support/."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _test_modules() -> set[str]:
    return {p.stem for p in (ROOT / "tests").rglob("*.py") if p.stem != "__init__"}


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _benchmark_files() -> list[Path]:
    return sorted((ROOT / "benchmarks").rglob("*.py"))


@pytest.mark.timeout(60)
def test_no_benchmark_imports_a_test_module_or_puts_tests_on_its_path():
    tests = _test_modules()
    found = []
    for path in _benchmark_files():
        found += [f"{path.relative_to(ROOT)}: import {m}" for m in _imported(path) & tests]
        if '"tests"' in path.read_text():
            found.append(f"{path.relative_to(ROOT)}: names the tests folder (sys.path?)")
    assert found == []


@pytest.mark.timeout(60)
def test_the_check_sees_a_test_import(tmp_path):
    fake = tmp_path / "bench.py"
    fake.write_text("import sys\nsys.path.insert(0, 'x')\nfrom e2e_support import write_span\n")
    assert "e2e_support" in _imported(fake) & _test_modules()
