"""The README and the docs site describe the software as it is now.

Fast checks of what `mkdocs build --strict` (run by `make test`) does not see:
no development history in a page, a README that stays a short guide, links
from the README that resolve, and a performance page that is exactly what
benchmarks/render_results.py renders from the committed benchmarks/results/.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md"))
README_MAX_LINES = 250

# Wording that narrates how the project was developed instead of what it does.
# "session" only as a work session: a boto3 session or a session-scoped pytest
# fixture is the software.
HISTORY = [
    re.compile(
        r"\b(?:this|that|the|previous|next|last|same|latest|earlier|first|second|third|"
        r"\d+(?:st|nd|rd|th)|[a-z]+th)\s+session(?:'s|s)?\b(?![-\s](?:scoped|fixture|scope|token))",
        re.IGNORECASE,
    ),
    re.compile(r"\btried and not kept\b", re.IGNORECASE),
    re.compile(r"\bthis morning\b|\bearlier the same\b|\bthat morning\b", re.IGNORECASE),
    re.compile(r"\bused to\b", re.IGNORECASE),
]


def _history(text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in HISTORY:
            match = pattern.search(line)
            if match:
                found.append(f"line {number}: {match.group(0)!r} in {line.strip()[:100]!r}")
    return found


def test_the_history_check_catches_what_it_should():
    assert _history("The 8th session took this out.")
    assert _history("Tried and not kept: a cache.")
    assert _history("Training used to shuffle single records.")
    assert _history("Measured this morning, before the change.")
    assert not _history("Beam builds a new boto3 session for every file operation.")
    assert not _history("Tests that share a session-scoped fixture run on one worker.")


def test_the_site_has_pages():
    names = {p.name for p in PAGES}
    assert {"index.md", "getting-started.md", "own-data.md", "performance.md"} <= names


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_development_history(path):
    found = _history(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{path.relative_to(ROOT)} narrates history; say what it does now:\n" + "\n".join(found)
    )


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_placeholders_in_pages(path):
    text = path.read_text(encoding="utf-8")
    assert "TODO" not in text and "RUN_OUTPUT" not in text, path


def test_readme_is_a_short_guide():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    )
    assert "TODO" not in text and "RUN_OUTPUT" not in text
    # The two commands stay exactly these.
    assert "make run " in text and "make test " in text
    # Nothing dated: dates belong to the results the performance page renders.
    dates = re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not dates, f"README.md has dates: {dates}"


def test_readme_links_resolve():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local, "README.md links into docs/"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def _renderer():
    spec = importlib.util.spec_from_file_location(
        "render_results", ROOT / "benchmarks" / "render_results.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_performance_page_is_rendered_from_the_results():
    render = _renderer()
    page = render.PAGE.read_text(encoding="utf-8")
    assert page == render.page_with(page, render.render()), (
        "docs/performance.md differs from benchmarks/results/: run "
        ".venv/bin/python benchmarks/render_results.py"
    )


def test_every_result_names_its_command_commit_date_and_machine():
    render = _renderer()
    for name, record in render.load_results():
        for key in ("command", "commit", "date", "machine", "result"):
            assert record.get(key), f"benchmarks/results/{name}: no {key}"
        assert record["command"].startswith(".venv/bin/python benchmarks/"), name
        assert {"cpu_count", "cpu_model", "memory_gb"} <= set(record["machine"]), name


def test_the_renderer_refuses_a_result_it_cannot_render(tmp_path):
    render = _renderer()
    (tmp_path / "mystery.json").write_text('{"benchmark": "mystery"}')
    with pytest.raises(SystemExit, match="no renderer"):
        render.render(tmp_path)


def _contract_rows(page: str) -> list[str]:
    """The first cell of each row of architecture.md's contract table."""
    text = (ROOT / "docs" / page).read_text()
    start = text.index("| contract (its name in `pyproject.toml`)")
    rows = text[start:].split("\n\n", 1)[0].splitlines()[2:]
    return [row.split("|")[1].strip() for row in rows]


def test_the_architecture_page_lists_every_import_contract():
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    names = [c["name"] for c in contracts["contracts"]]
    rows = _contract_rows("architecture.md")
    assert sorted(rows) == sorted(names), (
        "docs/architecture.md's contract table must name exactly the contracts in pyproject.toml"
    )


# The layout pages: what they name must exist, and what exists must be named.
LAYOUT_PAGES = ("docs/architecture.md", "docs/tour.md")
# `path/`, `path/file.py`, `file.py` in backticks; globs and placeholders are not paths.
PATH = re.compile(r"`([A-Za-z_][\w./-]*(?:/|\.py))`")
# Folders the software writes as it runs (`tfxp serve`'s request log), not code.
WRITTEN_AT_RUN_TIME = {"serving-log/"}


def _readme_layout() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Where code lives")
    return text[start : text.index("\n## ", start + 1)]


def _named_paths(text: str) -> set[str]:
    found = {m for m in PATH.findall(text) if "<" not in m and "*" not in m}
    return found - WRITTEN_AT_RUN_TIME


def _exists(name: str) -> bool:
    """A path from the root, or a file of a package the page is talking about."""
    if (ROOT / name).exists():
        return True
    return any(p.exists() for p in ROOT.glob(f"*/{name}")) or any(
        p.exists() for p in ROOT.glob(f"*/*/{name}")
    )


@pytest.mark.parametrize("page", LAYOUT_PAGES)
def test_the_layout_pages_name_paths_that_exist(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    missing = sorted(n for n in _named_paths(text) if not _exists(n))
    assert not missing, f"{page} names paths that do not exist: {missing}"


def test_the_readme_layout_names_paths_that_exist():
    missing = sorted(n for n in _named_paths(_readme_layout()) if not _exists(n))
    assert not missing, f"README.md's 'Where code lives' names missing paths: {missing}"


def _packages() -> list[str]:
    """Every top-level folder of code (a package, or airflow/'s DAG folder)."""
    return sorted(
        p.name
        for p in ROOT.iterdir()
        if p.is_dir() and ((p / "__init__.py").exists() or p.name == "airflow")
    )


def _operations_rooms() -> list[str]:
    """tfxp/'s rooms: its subpackages and its modules loose at its root."""
    tfxp = ROOT / "tfxp"
    rooms = [p.name for p in tfxp.iterdir() if (p / "__init__.py").exists()]
    rooms += [p.stem for p in tfxp.glob("*.py") if p.name != "__init__.py"]
    return sorted(rooms)


def test_every_room_is_on_the_architecture_page_and_in_the_readme():
    diagram = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    diagram = diagram[diagram.index("```") : diagram.index("```", diagram.index("```") + 3)]
    readme = _readme_layout()
    for name in _packages():
        assert f"{name}/" in diagram, f"docs/architecture.md's floors do not show {name}/"
        assert f"`{name}/`" in readme, f"README.md's 'Where code lives' does not name {name}/"
    for room in _operations_rooms():
        shown = f"{room}/" if (ROOT / "tfxp" / room).is_dir() else f"{room}.py"
        assert shown in diagram, f"docs/architecture.md's floors do not show tfxp/{shown}"
        assert shown in readme, f"README.md's 'Where code lives' does not name tfxp/{shown}"


def test_the_tour_is_in_the_site():
    assert "tour.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
