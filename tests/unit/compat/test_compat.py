"""compat/: every private name of another library goes through it, and it lists them."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import compat
from compat import __main__ as compat_main

ROOT = Path(__file__).resolve().parents[3]
PROJECT = {
    "compat",
    "components",
    "tfxp",
    "pipeline",
    "trainer",
    "kubeflow",
    "data",
    "schema",
    "metadata",
    "serving",
    "runtime",
    "beam_spark",
}
# Every production package (the libraries too: runtime/ and beam_spark/ reach private names
# through compat/ like the rest).
SCANNED = [
    *("components", "tfxp", "pipeline", "trainer", "kubeflow", "airflow"),
    *("metadata", "serving", "runtime", "beam_spark"),
]


def _modules() -> None:
    for name in compat_main.LIBRARIES:
        importlib.import_module(f"compat.{name}")


def _external(module: str) -> bool:
    top = module.split(".")[0]
    return top not in PROJECT and top not in sys.stdlib_module_names and top != "__future__"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source: str) -> list[str]:
    """`from lib import _x` and `lib._x` / `lib.mod._x` of a third-party library in `source`."""
    tree = ast.parse(source)
    imported: dict[str, str] = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _external(alias.name):
                    imported[(alias.asname or alias.name).split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if not _external(node.module):
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in imported:
                found.append(f"line {node.lineno}: {imported[base.id]}...{node.attr}")
    return found


def test_the_scan_finds_private_imports_and_module_attributes():
    source = (
        "import tensorflow_transform.beam.impl as impl\n"
        "from apache_beam.io.tfrecordio import _TFRecordUtil\n"
        "from tensorflow_model_analysis.metrics import metric_util\n"
        "x = impl._RunMetaGraphDoFn\n"
        "y = metric_util._LOGITS\n"
        "z = metric_util.__name__\n"
        "import os\n"
        "os._exit\n"
    )
    assert len(private_uses(source)) == 3


def test_no_private_name_of_another_library_outside_compat():
    files = [p for folder in SCANNED for p in (ROOT / folder).rglob("*.py")]
    files += list(ROOT.glob("*.py"))
    found = {str(p.relative_to(ROOT)): uses for p in files if (uses := private_uses(p.read_text()))}
    assert found == {}, "use compat/ for these (one module per library)"


def _entries() -> list[compat.PrivateName]:
    _modules()
    return list(compat.REGISTRY)


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e.path.rsplit(".", 2)[-1])
def test_each_private_name_is_where_compat_says(entry):
    if not entry.instance_attribute:
        assert compat.resolve(entry.path) is not None
        return
    owner, attribute = entry.path.rsplit(".", 1)
    cls = compat.resolve(owner)
    # Set in the class's own module (an instance attribute has no class-level value).
    assert f"self.{attribute}" in inspect.getsource(inspect.getmodule(cls)) or hasattr(
        cls, attribute
    )


def test_tfma_attributes_are_read_only_when_registered():
    from compat import tfma

    class Combiner(tfma.CalibrationHistogramCombiner):
        def __init__(self) -> None:  # no TFMA set-up: only the attributes read below
            self._num_buckets = 7
            self._unlisted = 1

    combiner = Combiner()
    assert tfma.attribute(combiner, "_num_buckets") == 7  # registered on a base class
    with pytest.raises(AttributeError, match="Combiner._unlisted is not a TFMA attribute"):
        tfma.attribute(combiner, "_unlisted")
    with pytest.raises(AttributeError, match="_num_buckets"):  # registered, but on another class
        tfma.attribute(object(), "_num_buckets")


def test_a_library_of_another_version_is_refused_with_what_to_do(monkeypatch):
    monkeypatch.setattr(compat.metadata, "version", lambda _: "9.9.9")
    with pytest.raises(compat.CompatError, match=r"tfx 9\.9\.9 is installed.*tfx==1\.16\.0"):
        compat.check_version("tfx", "1.16.0")


def test_the_limitations_page_lists_exactly_the_private_names():
    _modules()
    page = (ROOT / "docs" / "limitations.md").read_text()
    listed = page.split("<!-- compat table: start -->\n", 1)[1].split("\n<!-- compat", 1)[0]
    assert listed.strip() == compat_main.table(), "regenerate it with `python -m compat`"


def test_python_m_compat_prints_the_table():
    done = subprocess.run(
        [sys.executable, "-m", "compat"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "`apache_beam.io.tfrecordio._TFRecordUtil`" in done.stdout
