"""`tfxp data add|generate|list` on a scratch dataset (no pipeline run)."""

from __future__ import annotations

import json
from pathlib import Path

from tfxp.cli import main

EMBEDDED = Path(__file__).resolve().parents[4] / "data" / "taxi" / "span-1" / "data.csv"


def _flags(tmp_path: Path) -> list[str]:
    return ["--data-root", str(tmp_path / "data"), "--run-dir", str(tmp_path / "run")]


def _head(tmp_path: Path, rows: int, name: str = "drop.csv") -> Path:
    lines = EMBEDDED.read_text().splitlines(keepends=True)[: rows + 1]
    out = tmp_path / name
    out.write_text("".join(lines))
    return out


def test_add_then_list(tmp_path, capsys):
    drop = _head(tmp_path, 50)
    assert main(["data", "add", "taxi", str(drop), *_flags(tmp_path)]) == 0
    assert main(["data", "add", "taxi", str(drop), *_flags(tmp_path)]) == 0
    assert (tmp_path / "data" / "span-2" / "drop.csv").read_text() == drop.read_text()
    out = capsys.readouterr().out
    assert "added span 2" in out
    assert main(["data", "list", "--dataset", "taxi", "--json", *_flags(tmp_path)]) == 0
    listed = json.loads(capsys.readouterr().out)["taxi"]["spans"]
    assert [(s["span"], s["files"], s["ingestions"]) for s in listed] == [(1, 1, []), (2, 1, [])]
    assert main(["data", "list", "--dataset", "taxi", *_flags(tmp_path)]) == 0
    assert "not ingested" in capsys.readouterr().out


def test_add_rejects_a_bad_file_and_adds_nothing(tmp_path, capsys):
    bad = _head(tmp_path, 20)
    lines = bad.read_text().splitlines(keepends=True)
    lines[5] = lines[5].rsplit(",", 2)[0] + "\n"
    bad.write_text("".join(lines))
    assert main(["data", "add", "taxi", str(bad), *_flags(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{bad.name}:6" in err and "nothing was added" in err
    assert not any((tmp_path / "data").iterdir())


def test_add_rejects_files_with_different_columns(tmp_path, capsys):
    a = _head(tmp_path, 10, "a.csv")
    b = tmp_path / "b.csv"
    b.write_text("\n".join(",".join(line.split(",")[:-1]) for line in a.read_text().splitlines()))
    assert main(["data", "add", "taxi", str(a), str(b), *_flags(tmp_path)]) == 1
    assert "different columns" in capsys.readouterr().err
    assert not any((tmp_path / "data").iterdir())


def test_generate_publishes_a_checked_span(tmp_path, capsys):
    code = main(
        ["data", "generate", "taxi", "--rows", "3000", "--seed", "2", "--check"]
        + ["--nulls", "company=0.5", *_flags(tmp_path)]
    )
    assert code == 0
    files = list((tmp_path / "data" / "span-1").glob("*.csv"))
    assert len(files) == 1
    assert sum(1 for _ in files[0].open()) == 3001
    assert "added span 1" in capsys.readouterr().out
