"""ML Metadata is queried in one place: metadata/.

A command, the console, the local run, the watcher or a runner that needs a
question answered asks a named function of metadata/ (so every reader can
use it and a store change is made once). The check scans the source for calls
of ML Metadata's `MetadataStore` query and write methods (their names taken
from the installed class, so a new MLMD method is covered too).

Scope: tfxp/ (but metadata/), kubeflow/, airflow/, pipeline/ and the
top-level runner. Not components/: a component runs inside TFX, which hands
its resolver strategies and drivers a store of its own (TFX's resolver API,
e.g. the gate's previous-span statistics), and floor 0 cannot import tfxp/.
Not trainer/ either (it never sees a store), nor tests/ and benchmarks/, which
build stores on purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("tfxp", "kubeflow", "airflow", "pipeline")
ALLOWED = ROOT / "tfxp" / "metadata"


def store_methods() -> set[str]:
    from ml_metadata.metadata_store import MetadataStore

    return {m for m in dir(MetadataStore) if m.startswith(("get_", "put_"))}


def store_calls(source: str, methods: set[str]) -> list[tuple[int, str]]:
    """(line, method) of every `x.<MLMD method>` in `source`."""
    return [
        (node.lineno, node.attr)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in methods
    ]


def _scanned_files() -> list[Path]:
    files = [ROOT / "local_runner.py"]
    for folder in SCANNED:
        files += sorted((ROOT / folder).rglob("*.py"))
    return [f for f in files if ALLOWED not in f.parents]


def test_the_check_knows_mlmds_methods_and_finds_a_call():
    methods = store_methods()
    assert {"get_artifacts_by_type", "get_executions_by_context", "put_execution"} <= methods
    # S3's put_object is no MLMD method: the check does not flag it.
    source = "def f(store, s3):\n    s3.put_object(Bucket='b')\n    return store.get_events_by_execution_ids([1])\n"
    assert store_calls(source, methods) == [(3, "get_events_by_execution_ids")]


def test_no_ml_metadata_query_outside_tfxp_metadata():
    methods = store_methods()
    files = _scanned_files()
    assert any(f.name == "taxi_dag.py" for f in files) and len(files) > 100
    found = [
        f"{f.relative_to(ROOT)}:{line}: {name}"
        for f in files
        for line, name in store_calls(f.read_text(), methods)
    ]
    assert found == [], "move these into a named function of metadata/:\n" + "\n".join(found)


def test_no_module_of_tfxp_imports_another_ones_private_name():
    # A name one module needs from another is public there (e.g. event_key, become).
    found = []
    for f in sorted((ROOT / "tfxp").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
                "tfxp",
                "pipeline",
                "components",
            ):
                found += [
                    f"{f.relative_to(ROOT)}:{node.lineno}: {a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
    assert found == []
