"""Real DVC repositories for the tests: git with DVC initialised, a local-directory remote,
tagged revisions of a CSV. No network: DVC's analytics and update checks are off."""

from __future__ import annotations

import csv
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

EMBEDDED_CSV = Path(__file__).resolve().parents[2] / "data" / "taxi" / "span-1" / "data.csv"
ENV = {**os.environ, "DVC_NO_ANALYTICS": "1", "DVC_NO_UPDATE": "1", "GIT_TERMINAL_PROMPT": "0"}
DATA_PATH = "data/trips.csv"


def run(cwd: Path, *argv: str) -> str:
    """git or dvc (this interpreter's) in `cwd`; a failure shows its output."""
    cmd = [sys.executable, "-m", "dvc", *argv[1:]] if argv[0] == "dvc" else list(argv)
    done = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True)
    if done.returncode:
        raise AssertionError(f"{' '.join(argv)} failed in {cwd}:\n{done.stdout}{done.stderr}")
    return done.stdout


def identity(repo: Path) -> None:
    """CI has no global git identity: each test repository has its own."""
    run(repo, "git", "config", "user.email", "tests@example.com")
    run(repo, "git", "config", "user.name", "tfxp tests")


def taxi_rows(start: int, rows: int, fare_factor: float = 1.0) -> list[list[str]]:
    """The embedded CSV's header and rows start..start+rows, fares scaled."""
    with EMBEDDED_CSV.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        body = list(itertools.islice(reader, start, start + rows))
    fare = header.index("fare")
    for row in body:
        if row[fare] and fare_factor != 1.0:
            row[fare] = f"{float(row[fare]) * fare_factor:.2f}"
    return [header, *body]


def write_csv(path: Path, rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


def init_repo(repo: Path) -> Path:
    """`repo`: a new git repository (branch main, its own identity) with DVC initialised,
    analytics and update checks off."""
    repo.mkdir(parents=True)
    run(repo, "git", "init", "-q", "-b", "main")
    identity(repo)
    run(repo, "dvc", "init", "-q")
    run(repo, "dvc", "config", "core.analytics", "false")
    run(repo, "dvc", "config", "core.check_update", "false")
    return repo


def make_repo(root: Path, revisions: dict[str, list[list[str]]], *, remote: bool = True) -> Path:
    """`root/repo`: one commit and tag per revision of data/trips.csv (in order), pushed to
    the local remote `root/remote`, and the repository's own cache emptied, so reading a
    revision has to fetch it from the remote."""
    repo = init_repo(root / "repo")
    if remote:
        (root / "remote").mkdir()
        run(repo, "dvc", "remote", "add", "-d", "storage", str(root / "remote"))
    for tag, rows in revisions.items():
        write_csv(repo / DATA_PATH, rows)
        run(repo, "dvc", "add", "-q", DATA_PATH)
        run(repo, "git", "add", "-A")
        run(repo, "git", "commit", "-q", "-m", f"trips {tag}")
        run(repo, "git", "tag", tag)
    if remote:
        run(repo, "dvc", "push", "-q", "--all-tags")
        shutil.rmtree(repo / ".dvc" / "cache")
    return repo
