"""`tfxp data add --dvc` against real DVC repositories (git, a local remote; no pipeline run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dvc_repos import DATA_PATH, identity, make_repo, run, taxi_rows, write_csv

from components.io.content_fingerprint import files_sha256
from metadata import sources
from metadata.store import StoreLocation, open_store
from pipeline.datasets import dataset_config
from pipeline.spans import SpanError, select_spans
from tfxp.cli import main


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """v1 and v2 of data/trips.csv, bytes only in the local remote."""
    root = tmp_path_factory.mktemp("dvc")
    return make_repo(root, {"v1": taxi_rows(0, 200), "v2": taxi_rows(200, 200, fare_factor=3)})


def _flags(tmp_path: Path) -> list[str]:
    return ["--data-root", str(tmp_path / "data"), "--run-dir", str(tmp_path / "run")]


def _add(tmp_path: Path, repo: Path | str, *extra: str) -> int:
    argv = ["data", "add", "taxi", "--dvc", str(repo), "--path", DATA_PATH, *extra]
    return main([*argv, *_flags(tmp_path)])


def _records(tmp_path: Path) -> list[sources.Source]:
    path = tmp_path / "run" / "metadata.sqlite"
    if not path.exists():
        return []
    return sources.sources(open_store(StoreLocation(str(path))), str(tmp_path / "data"))


def _nothing_published(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert not data.exists() or not any(data.iterdir()), list(data.iterdir())
    assert _records(tmp_path) == []


def test_two_revisions_become_two_spans_and_the_same_one_again_is_a_cache_hit(
    tmp_path, repo, capsys
):
    assert _add(tmp_path, repo, "--rev", "v1") == 0
    assert _add(tmp_path, repo, "--rev", "v2") == 0
    out = capsys.readouterr().out
    assert "added span 1 from data/trips.csv@v1" in out and "added span 2" in out
    # The bytes are DVC's for each tag: what the remote holds, read back by DVC's own API.
    from dvc.api import read

    for span, rev in ((1, "v1"), (2, "v2")):
        got = (tmp_path / "data" / f"span-{span}" / "trips.csv").read_text()
        assert got == read(DATA_PATH, repo=str(repo), rev=rev)
    v1, v2 = _records(tmp_path)
    commit = run(repo, "git", "rev-parse", "v1").strip()
    dvc_file = run(repo, "git", "show", f"v1:{DATA_PATH}.dvc")
    assert (v1.kind, v1.span, v1.facts["rev"], v1.facts["commit"]) == ("dvc", 1, "v1", commit)
    assert f"md5: {v1.facts['dvc_md5']}" in dvc_file
    assert v1.facts["repo"] == str(repo) and v1.facts["path"] == DATA_PATH
    assert v1.facts["remote"] == str(repo.parent / "remote")
    span1 = tmp_path / "data" / "span-1" / "trips.csv"
    assert v1.content_sha256 == files_sha256([str(span1)], str(tmp_path / "data"))[0]
    assert v2.facts["rev"] == "v2" and v2.content_sha256 != v1.content_sha256

    assert _add(tmp_path, repo, "--rev", "v1") == 0
    assert "span 1 already holds data/trips.csv@v1" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["span-1", "span-2"]
    assert len(_records(tmp_path)) == 2


def test_a_changed_span_is_not_a_cache_hit(tmp_path, repo, capsys):
    assert _add(tmp_path, repo, "--rev", "v1") == 0
    with (tmp_path / "data" / "span-1" / "trips.csv").open("a") as f:
        f.write(",".join(taxi_rows(900, 1)[1]) + "\n")  # span 1 no longer holds v1's bytes
    assert _add(tmp_path, repo, "--rev", "v1") == 0
    assert "added span 2 from data/trips.csv@v1" in capsys.readouterr().out
    v1_again = (tmp_path / "data" / "span-2" / "trips.csv").read_text()
    assert v1_again == "\n".join(",".join(r) for r in taxi_rows(0, 200)) + "\n"


def test_bad_revision_is_refused_naming_it_and_the_tags(tmp_path, repo, capsys):
    assert _add(tmp_path, repo, "--rev", "v9") == 1
    err = capsys.readouterr().err
    assert f"revision 'v9' does not exist in DVC repository {repo}" in err
    assert "tags there: v1, v2" in err and "nothing was added" in err
    _nothing_published(tmp_path)


def test_a_path_not_in_the_revision_is_refused(tmp_path, repo, capsys):
    argv = ["data", "add", "taxi", "--dvc", str(repo), "--path", "data/nope.csv", "--rev", "v1"]
    assert main([*argv, *_flags(tmp_path)]) == 1
    assert "data/nope.csv at v1 in DVC repository" in capsys.readouterr().err
    _nothing_published(tmp_path)


def test_missing_remote_is_refused_naming_the_file_and_what_to_do(tmp_path, capsys):
    # The bytes were added but never pushed anywhere: a clone has only the .dvc file.
    origin = make_repo(tmp_path / "src", {"v1": taxi_rows(0, 50)}, remote=False)
    clone = tmp_path / "clone"
    run(tmp_path, "git", "clone", "-q", str(origin), str(clone))
    assert _add(tmp_path, clone, "--rev", "v1") == 1
    err = capsys.readouterr().err
    assert f"{DATA_PATH} at v1" in err and str(clone) in err
    assert "no DVC remote is configured" in err and "dvc remote add" in err
    _nothing_published(tmp_path)


def test_a_remote_without_the_bytes_is_named(tmp_path, repo, capsys):
    clone = tmp_path / "clone"
    run(tmp_path, "git", "clone", "-q", str(repo), str(clone))
    identity(clone)
    empty = tmp_path / "empty-remote"
    empty.mkdir()
    run(clone, "dvc", "remote", "modify", "storage", "url", str(empty))
    run(clone, "git", "commit", "-q", "-am", "remote moved")
    assert _add(tmp_path, clone, "--rev", "HEAD") == 1
    err = capsys.readouterr().err
    assert f"nor in its remote {empty}" in err and "dvc push" in err
    _nothing_published(tmp_path)


def test_bytes_a_remote_altered_are_refused_naming_both_md5s(tmp_path, capsys):
    """DVC hands over whatever its remote returns (no `verify` by default): an object
    altered in the remote (or garbled by the store) is refused, nothing published."""
    origin = make_repo(tmp_path / "src", {"v1": taxi_rows(0, 50)})
    md5 = next(
        line.split()[-1]
        for line in (origin / f"{DATA_PATH}.dvc").read_text().splitlines()
        if "md5:" in line
    )
    stored = tmp_path / "src" / "remote" / "files" / "md5" / md5[:2] / md5[2:]
    stored.write_bytes(bytes(b ^ 0x20 for b in stored.read_bytes()))  # same size, other bytes
    assert _add(tmp_path, origin, "--rev", "v1") == 1
    err = capsys.readouterr().err
    assert f"{DATA_PATH} at v1" in err and f"DVC records (md5 {md5})" in err, err
    assert f"its remote {tmp_path / 'src' / 'remote'} returned other bytes" in err
    _nothing_published(tmp_path)


def test_dirty_workspace_is_refused_without_a_revision(tmp_path, repo, capsys):
    clone = tmp_path / "clone"
    run(tmp_path, "git", "clone", "-q", str(repo), str(clone))
    run(clone, "dvc", "pull", "-q")
    write_csv(clone / DATA_PATH, taxi_rows(500, 20))  # edited, not `dvc add`ed
    assert _add(tmp_path, clone) == 1
    err = capsys.readouterr().err
    assert f"DVC repository {clone} has uncommitted changes" in err
    assert "data/trips.csv modified" in err and "pass --rev" in err
    _nothing_published(tmp_path)
    # A revision is read from git and DVC's records, whatever the workspace holds.
    assert _add(tmp_path, clone, "--rev", "v2") == 0


def test_files_and_dvc_together_are_refused(tmp_path, repo, capsys):
    argv = ["data", "add", "taxi", "x.csv", "--dvc", str(repo), "--path", DATA_PATH]
    assert main([*argv, *_flags(tmp_path)]) == 2
    assert "not both" in capsys.readouterr().err


def test_unknown_data_version_names_the_known_ones(tmp_path, repo, capsys):
    assert _add(tmp_path, repo, "--rev", "v1") == 0
    capsys.readouterr()
    assert main(["run", "--data-version", "v7", *_flags(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "--data-version v7: no span" in err and "known: v1 (span 1)" in err


def test_a_pinned_content_hash_is_checked_before_a_run(tmp_path):
    data = tmp_path / "data"
    write_csv(data / "span-1" / "trips.csv", taxi_rows(0, 20))
    digest = files_sha256([str(data / "span-1" / "trips.csv")], str(data))[0]
    config = dataset_config("taxi").replace(data_root=str(data), span=1)
    assert select_spans(config.replace(data_sha256=digest))[-1].span == 1
    write_csv(data / "span-1" / "trips.csv", taxi_rows(1, 20))
    with pytest.raises(SpanError, match=r"span 1 at .* is not v1 any more"):
        select_spans(config.replace(data_sha256=digest, data_version="v1"))


def test_sources_round_trip_and_lookup_by_name_or_commit(tmp_path):
    from tfxp.datasets.versions import writable_store

    store = writable_store(StoreLocation(str(tmp_path / "run" / "metadata.sqlite")))
    common = dict(pipeline="taxi", data_root=str(tmp_path / "d"), content_sha256="ab" * 32)
    sources.record(store, kind="dvc", span=1, uri="u", rev="v1", commit="c0ffee1234", **common)
    sources.record(store, kind="tag", span=1, uri="u", name="gold", examples_id=7, **common)
    assert sources.find_name(store, str(tmp_path / "d"), "gold").facts["examples_id"] == 7
    assert sources.find_name(store, str(tmp_path / "d"), "c0ffee1").facts["rev"] == "v1"
    assert sources.find_name(store, str(tmp_path / "d"), "c0f") is None  # too short a prefix
    assert sources.find_name(store, str(tmp_path / "other"), "gold") is None
    with pytest.raises(ValueError, match="not a DatasetSource property: colour"):
        sources.record(store, kind="tag", span=1, uri="u", colour="red", **common)
    assert json.loads(json.dumps(sources.sources(store, str(tmp_path / "d"))[0].to_dict()))


def _clone(tmp_path: Path, repo: Path, name: str = "clone") -> Path:
    clone = tmp_path / name
    run(tmp_path, "git", "clone", "-q", str(repo), str(clone))
    identity(clone)
    return clone


def test_publish_commits_tags_and_pushes(tmp_path, repo):
    from tfxp.datasets.dvc import publish

    clone = _clone(tmp_path, repo)
    shard = tmp_path / "shard.gz"
    shard.write_bytes(b"\x1f\x8b tfrecords")
    done = publish(str(clone), [(str(shard), "Split-train/s.gz")], "out/span-1", "t1", "msg")
    assert (done.path, done.tag, done.pushed_to) == (
        "out/span-1",
        "t1",
        str(repo.parent / "remote"),
    )
    assert run(clone, "git", "rev-parse", "t1^{commit}").strip() == done.commit
    assert "out/span-1.dvc" in run(clone, "git", "show", "--name-only", "t1")
    consumer = _clone(tmp_path, clone, "consumer")
    run(consumer, "git", "checkout", "-q", "t1")
    run(consumer, "dvc", "pull", "-q", "out/span-1")
    assert (consumer / "out/span-1/Split-train/s.gz").read_bytes() == shard.read_bytes()


def test_publish_refuses_an_existing_tag_and_leaves_the_repo_as_it_was(tmp_path, repo):
    from tfxp.datasets.dvc import DvcError, publish

    clone = _clone(tmp_path, repo)
    shard = tmp_path / "shard.gz"
    shard.write_bytes(b"x")
    head = run(clone, "git", "rev-parse", "HEAD")
    with pytest.raises(DvcError, match="tag 'v1' already exists"):
        publish(str(clone), [(str(shard), "s.gz")], "out", "v1", "msg")
    assert run(clone, "git", "rev-parse", "HEAD") == head
    assert not (clone / "out").exists() and run(clone, "git", "status", "--porcelain") == ""


def test_a_failed_push_says_what_was_committed_and_what_to_run(tmp_path, repo):
    from tfxp.datasets.dvc import DvcError, publish

    clone = _clone(tmp_path, repo)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the remote's folder should be\n")
    run(clone, "dvc", "remote", "modify", "storage", "url", str(blocked))
    run(clone, "git", "commit", "-q", "-am", "remote on a file")
    shard = tmp_path / "shard.gz"
    shard.write_bytes(b"y")
    with pytest.raises(DvcError, match=r"tagged t2 in .* but pushing it to the DVC remote"):
        publish(str(clone), [(str(shard), "s.gz")], "out", "t2", "msg")


def _dataset_with_source(tmp_path: Path, source: str) -> None:
    """A copy of the taxi dataset named `trips` whose file has a `source:` block."""
    folder = tmp_path / "datasets" / "trips"
    shutil.copytree(Path(__file__).resolve().parents[4] / "schema" / "taxi", folder)
    text = (folder / "dataset.yaml").read_text().replace("name: taxi", "name: trips")
    (folder / "dataset.yaml").write_text(f"{text}\n{source}")


def test_the_dataset_files_source_block_is_the_default_drop(tmp_path, repo, monkeypatch, capsys):
    from pipeline.datasets import DATASET_PATH_ENV

    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path / "datasets"))
    _dataset_with_source(tmp_path, f"source:\n  dvc: {repo}\n  path: {DATA_PATH}\n  rev: v1\n")
    flags = _flags(tmp_path)
    assert main(["data", "add", "trips", *flags]) == 0
    assert main(["data", "add", "trips", "--rev", "v2", *flags]) == 0
    out = capsys.readouterr().out
    assert f"added span 1 from {DATA_PATH}@v1 of {repo}" in out
    assert f"added span 2 from {DATA_PATH}@v2 of {repo}" in out
    assert [s.facts["rev"] for s in _records(tmp_path)] == ["v1", "v2"]


def test_a_bad_source_block_names_the_file_and_key(tmp_path, monkeypatch):
    from pipeline.dataset_sections import DatasetFileError
    from pipeline.datasets import DATASET_PATH_ENV, load_dataset_file

    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path / "datasets"))
    _dataset_with_source(tmp_path, "source:\n  dvc: ../repo\n  revision: v1\n")
    path = tmp_path / "datasets" / "trips" / "dataset.yaml"
    with pytest.raises(
        DatasetFileError, match=r"dataset.yaml: source: unknown key\(s\) \['revision'\]"
    ):
        load_dataset_file(path)
    _dataset_with_source(tmp_path / "b", "source:\n  dvc: ../repo\n")
    with pytest.raises(DatasetFileError, match="source: path required"):
        load_dataset_file(tmp_path / "b" / "datasets" / "trips" / "dataset.yaml")


def test_a_git_url_is_cloned_and_its_remote_serves_the_bytes(tmp_path, repo, capsys):
    from dvc.api import read

    url = f"file://{repo}"
    assert _add(tmp_path, url, "--rev", "v2") == 0
    assert f"added span 1 from {DATA_PATH}@v2 of {url}" in capsys.readouterr().out
    got = (tmp_path / "data" / "span-1" / "trips.csv").read_text()
    assert got == read(DATA_PATH, repo=str(repo), rev="v2")
    [record] = _records(tmp_path)
    assert record.facts["repo"] == url
    assert record.facts["commit"] == run(repo, "git", "rev-parse", "v2").strip()
