"""pipeline.fingerprint.code_fingerprint: a content hash of user code and its project imports."""

from __future__ import annotations

import hashlib
import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.fingerprint import code_fingerprint

PKG = "fp_testpkg"


def _forget_pkg() -> None:
    for name in [n for n in sys.modules if n == PKG or n.startswith(PKG + ".")]:
        del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    """A package: a imports b (absolute) and d (relative, via b); c is unrelated."""
    root = tmp_path / PKG
    root.mkdir()
    files = {
        "__init__.py": '"""Test package."""\n',
        "a.py": """
            import json

            from fp_testpkg import b
            from fp_testpkg.b import helper

            def fn():
                return json.dumps(b.helper() + helper())
            """,
        "b.py": """
            from . import d

            def helper():
                return d.VALUE
            """,
        "c.py": """
            def unrelated():
                return 1
            """,
        "d.py": "VALUE = 1\n",
    }
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    _forget_pkg()
    yield root
    _forget_pkg()


def _fp(path: str = f"{PKG}.a.fn") -> str:
    return code_fingerprint(path, project_packages=(PKG,))


def _edit(path: Path, extra: str = "\n# edited\n") -> None:
    path.write_text(path.read_text() + extra)
    _forget_pkg()


def test_fingerprint_is_a_stable_sha256(pkg):
    first = _fp()
    assert len(first) == 64 and int(first, 16) >= 0
    assert _fp() == first
    assert first != hashlib.sha256(b"").hexdigest()


def test_changes_when_the_module_itself_changes(pkg):
    before = _fp()
    _edit(pkg / "a.py")
    assert _fp() != before


def test_changes_when_an_imported_project_module_changes(pkg):
    before = _fp()
    _edit(pkg / "b.py")
    assert _fp() != before


def test_changes_when_a_transitive_relative_import_changes(pkg):
    before = _fp()
    _edit(pkg / "d.py", "VALUE = 2\n")
    assert _fp() != before


def test_changes_when_the_package_init_changes(pkg):
    before = _fp()
    _edit(pkg / "__init__.py")
    assert _fp() != before


def test_unchanged_when_an_unrelated_module_changes(pkg):
    before = _fp()
    _edit(pkg / "c.py", "def more():\n    return 2\n")
    assert _fp() == before


def test_module_path_and_function_path_agree(pkg):
    assert _fp(f"{PKG}.a") == _fp(f"{PKG}.a.fn")
    assert _fp(f"{PKG}.c.unrelated") != _fp(f"{PKG}.a.fn")


def test_unrelated_module_fingerprint_ignores_a(pkg):
    before = _fp(f"{PKG}.c.unrelated")
    _edit(pkg / "a.py")
    _edit(pkg / "b.py")
    assert _fp(f"{PKG}.c.unrelated") == before
    _edit(pkg / "c.py")
    assert _fp(f"{PKG}.c.unrelated") != before


def test_function_outside_project_packages_is_still_hashed(pkg):
    before = code_fingerprint(f"{PKG}.a.fn")
    _edit(pkg / "a.py")
    assert code_fingerprint(f"{PKG}.a.fn") != before


def test_unknown_module_raises_value_error():
    with pytest.raises(ValueError, match="no_such_package_xyz"):
        code_fingerprint("no_such_package_xyz.module.fn", project_packages=("no_such_package_xyz",))


def test_unknown_submodule_raises_value_error(pkg):
    with pytest.raises(ValueError, match="cannot find the module"):
        _fp(f"{PKG}.missing.fn")


def test_real_trainer_functions():
    pre = code_fingerprint("trainer.taxi.preprocessing.preprocessing_fn")
    run = code_fingerprint("trainer.taxi.train.run_fn")
    assert pre != run
    assert code_fingerprint("trainer.taxi.preprocessing.preprocessing_fn") == pre
    assert code_fingerprint("trainer.taxi.train.run_fn") == run


def _digest(root: Path, modules: list[str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(modules):
        parts = name.split(".")
        path = root.joinpath(*parts[:-1], parts[-1] + ".py")
        if not path.exists():
            path = root.joinpath(*parts, "__init__.py")
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def test_real_fingerprints_cover_exactly_the_imported_trainer_modules():
    root = Path(__file__).resolve().parents[3]
    # preprocessing_fn does not import model/input/train: editing them must not
    # invalidate Transform's cache, but must invalidate Trainer's.
    assert code_fingerprint("trainer.taxi.preprocessing.preprocessing_fn") == _digest(
        root, ["trainer", "trainer.taxi", "trainer.taxi.features", "trainer.taxi.preprocessing"]
    )
    assert code_fingerprint("trainer.taxi.train.run_fn") == _digest(
        root,
        [
            "trainer",
            "trainer.base",
            "trainer.checkpoints",
            "trainer.curves",
            "trainer.distribution",
            "trainer.fast_steps",
            "trainer.input",
            "trainer.input_wait",
            "trainer.taxi",
            "trainer.taxi.features",
            "trainer.taxi.model",
            "trainer.taxi.train",
            # The search shared by the trainers (tuner_fn beside run_fn), and its
            # worker processes for parallel trials.
            "trainer.parallel_trials",
            "trainer.tuning",
        ],
    )
