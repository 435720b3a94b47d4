"""DVC in and out end to end: two tagged revisions of a CSV in a real DVC repository (local
remote), added as spans, trained on by name, drift between them found by the gate, the
span's TFRecords published back to DVC and pulled by another clone."""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from dvc_repos import DATA_PATH, make_repo, run, taxi_rows, write_csv

from components.io.content_fingerprint import files_sha256
from tfxp.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ROWS = 1000


@dataclass
class DvcRuns:
    tmp: Path
    repo: Path
    flags: list[str]
    outputs: dict[str, tuple[int, str, str]]  # step -> (exit code, stdout, stderr)
    lineage: dict  # `tfxp lineage model latest --json` after the v1 run


def _cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _run_flags(flags: list[str]) -> list[str]:
    return [*flags, "--train-steps", "20", "--eval-steps", "2", "--beam", "in-process"]


@pytest.fixture(scope="module")
def dvc_runs(tmp_path_factory) -> DvcRuns:
    tmp = tmp_path_factory.mktemp("dvc-e2e")
    # v2: the same trips with fares x10, drifted past the gate's threshold.
    repo = make_repo(tmp, {"v1": taxi_rows(0, ROWS), "v2": taxi_rows(ROWS, ROWS, fare_factor=10.0)})
    flags = ["--data-root", str(tmp / "data"), "--run-dir", str(tmp / "run")]
    add = ["data", "add", "taxi", "--dvc", str(repo), "--path", DATA_PATH]
    steps = {
        "add v1": [*add, "--rev", "v1", *flags],
        "add v2": [*add, "--rev", "v2", *flags],
        "run v1": ["run", "--data-version", "v1", "--json", *_run_flags(flags)],
        "run v2": ["run", "--data-version", "v2", *_run_flags(flags)],
        "run v1 again": ["run", "--data-version", "v1", "--json", *_run_flags(flags)],
        "lineage": ["lineage", "model", "latest", "--run-dir", str(tmp / "run")],
        "tag": ["data", "tag", "taxi", "1", "--dvc", str(repo), "--tag", "v1-examples", *flags],
    }
    outputs = {}
    with _Capture() as cap:
        for name, argv in steps.items():
            code = main(argv)
            outputs[name] = (code, *cap.take())
        code = main(["lineage", "model", "latest", "--json", "--run-dir", str(tmp / "run")])
        lineage_json = cap.take()[0]
    assert code == 0, outputs
    return DvcRuns(tmp, repo, flags, outputs, json.loads(lineage_json))


class _Capture:
    """stdout/stderr of in-process commands, step by step (module fixtures have no capsys)."""

    def __enter__(self):
        import io

        self._saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        return self

    def take(self) -> tuple[str, str]:
        out, err = sys.stdout.getvalue(), sys.stderr.getvalue()
        for stream in (sys.stdout, sys.stderr):
            stream.seek(0)
            stream.truncate()
        return out, err

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self._saved


def test_each_revision_is_added_as_a_span(dvc_runs):
    for step, span in (("add v1", 1), ("add v2", 2)):
        code, out, err = dvc_runs.outputs[step]
        assert code == 0, err
        assert f"added span {span} from {DATA_PATH}@v{span}" in out


def test_a_run_on_v1_trains_on_exactly_dvcs_v1_bytes(dvc_runs):
    code, out, err = dvc_runs.outputs["run v1"]
    assert code == 0, err + out
    assert "data version v1: span 1" in out
    assert _summary(out)["model_uri"]
    # The hash our ExampleGen recorded is the hash of the bytes DVC serves for v1,
    # laid out as span 1, computed here independently of the pipeline.
    from dvc.api import read

    fresh = dvc_runs.tmp / "independent" / "span-1" / "trips.csv"
    fresh.parent.mkdir(parents=True)
    fresh.write_text(read(DATA_PATH, repo=str(dvc_runs.repo), rev="v1"))
    expected = files_sha256([str(fresh)], str(fresh.parent.parent))[0]
    [data] = dvc_runs.lineage["data"]
    assert (data["span"], data["fingerprint"]) == (1, expected)


def test_lineage_shows_the_dvc_origin(dvc_runs):
    commit = run(dvc_runs.repo, "git", "rev-parse", "v1").strip()
    md5 = run(dvc_runs.repo, "git", "show", f"v1:{DATA_PATH}.dvc").split("md5: ")[1].split()[0]
    [data] = dvc_runs.lineage["data"]
    [origin] = [o for o in data["origins"] if o["kind"] == "dvc"]
    assert (origin["repo"], origin["path"], origin["rev"]) == (str(dvc_runs.repo), DATA_PATH, "v1")
    assert (origin["commit"], origin["dvc_md5"]) == (commit, md5)
    assert origin["content_sha256"] == data["fingerprint"]
    code, out, _ = dvc_runs.outputs["lineage"]
    assert code == 0
    assert f"origin dvc {dvc_runs.repo} {DATA_PATH}@v1 (commit {commit[:12]}, dvc md5 {md5})" in out


def test_the_gate_finds_drift_between_v1_and_v2(dvc_runs):
    code, out, err = dvc_runs.outputs["run v2"]
    assert code == 1
    assert "data version v2: span 2" in out
    assert "drift" in (out + err) and "fare" in (out + err)


def _summary(out: str) -> dict:
    """The run's JSON summary, printed after its progress lines."""
    return json.loads(out[out.index("\n{") :])


def test_v1_again_reproduces_the_v1_model(dvc_runs):
    code, out, err = dvc_runs.outputs["run v1 again"]
    assert code == 0, err
    first, again = _summary(dvc_runs.outputs["run v1"][1]), _summary(out)
    assert again["model_uri"] == first["model_uri"]
    # The same bytes: every step is a cache hit of the first v1 run (resolvers resolve).
    states = {c["node_id"]: c["state"] for c in again["components"]}
    assert set(states.values()) <= {"CACHED", "RESOLVED"}, states
    assert states["CsvExampleGen"] == states["Trainer"] == "CACHED"


def test_tagged_examples_round_trip_through_dvc(dvc_runs):
    code, out, err = dvc_runs.outputs["tag"]
    assert code == 0, err
    assert "as v1-examples" in out and "pushed to " in out
    clone = dvc_runs.tmp / "consumer"
    run(dvc_runs.tmp, "git", "clone", "-q", str(dvc_runs.repo), str(clone))
    run(clone, "git", "checkout", "-q", "v1-examples")
    run(clone, "dvc", "pull", "-q")
    folder = clone / "taxi" / "span-1"
    manifest = json.loads((folder / "tfxp-examples.json").read_text())
    shards = manifest["shards_sha256"]
    assert shards and all(name.startswith("Split-") for name in shards)
    for name, digest in shards.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
    [data] = dvc_runs.lineage["data"]
    assert manifest["raw_content_sha256"] == data["fingerprint"]
    assert manifest["examples_id"] == data["examples_id"]
    # The tag is a data version name too.
    from metadata.store import StoreLocation
    from pipeline.datasets import dataset_config
    from tfxp.datasets.versions import resolve_version

    config = dataset_config("taxi").replace(data_root=str(dvc_runs.tmp / "data"))
    location = StoreLocation(str(dvc_runs.tmp / "run" / "metadata.sqlite"))
    resolved = resolve_version(config, location, "v1-examples")
    assert (resolved["span"], resolved["data_sha256"]) == (1, data["fingerprint"])


def test_tag_refuses_a_dirty_repository_and_tags_nothing(dvc_runs, capsys):
    head = run(dvc_runs.repo, "git", "rev-parse", "HEAD")
    (dvc_runs.repo / "notes.txt").write_text("work in progress\n")
    try:
        argv = ["data", "tag", "taxi", "1", "--dvc", str(dvc_runs.repo), "--tag", "dirty-tag"]
        code, _, err = _cli(capsys, [*argv, *dvc_runs.flags])
    finally:
        (dvc_runs.repo / "notes.txt").unlink()
    assert code == 1
    assert f"DVC repository {dvc_runs.repo} has uncommitted changes (notes.txt (git))" in err
    assert "dirty-tag" not in run(dvc_runs.repo, "git", "tag")
    assert run(dvc_runs.repo, "git", "rev-parse", "HEAD") == head  # no commit
    assert "dirty-tag" not in [s.name for s in _tag_records(dvc_runs)]


def _tag_records(dvc_runs):
    from metadata import sources
    from metadata.store import StoreLocation, open_store

    store = open_store(StoreLocation(str(dvc_runs.tmp / "run" / "metadata.sqlite")))
    return [s for s in sources.sources(store, str(dvc_runs.tmp / "data")) if s.kind == "tag"]


def test_changed_bytes_are_refused_before_and_inside_the_run(dvc_runs, capsys, monkeypatch):
    span1 = dvc_runs.tmp / "data" / "span-1" / "trips.csv"
    original = span1.read_bytes()
    write_csv(span1, taxi_rows(5000, ROWS))
    try:
        code, _, err = _cli(capsys, ["run", "--data-version", "v1", *_run_flags(dvc_runs.flags)])
        assert code == 1
        assert f"span 1 at {span1.parent} is not v1 any more" in err
        # Past the pre-run check (as when the files change after an Airflow DAG was parsed),
        # ExampleGen itself refuses the bytes.
        import pipeline.spans as spans

        monkeypatch.setattr(spans, "check_content", lambda config, span: None)
        argv = ["run", "--data-version", "v1", "--to-node", "CsvExampleGen"]
        code, out, err = _cli(capsys, [*argv, *_run_flags(dvc_runs.flags)])
        assert code == 1
        assert "not" in err and "as recorded for the data version" in err + out
    finally:
        span1.write_bytes(original)


def test_a_plain_tag_names_a_span_for_runs(dvc_runs, capsys):
    code, out, err = _cli(capsys, ["data", "tag", "taxi", "1", "--tag", "gold", *dvc_runs.flags])
    assert code == 0, err
    assert "tagged span 1" in out and "as gold" in out and "DVC:" not in out
    [gold] = [s for s in _tag_records(dvc_runs) if s.name == "gold"]
    [data] = dvc_runs.lineage["data"]
    assert (gold.span, gold.content_sha256) == (1, data["fingerprint"])
    assert gold.facts["examples_id"] == data["examples_id"] and "repo" not in gold.facts
    # A name already given to another span is refused; a span never ingested too.
    code, _, err = _cli(capsys, ["data", "tag", "taxi", "2", "--tag", "gold", *dvc_runs.flags])
    assert code == 1 and "data version 'gold' already names span 1" in err
    code, _, err = _cli(capsys, ["data", "tag", "taxi", "7", "--tag", "x", *dvc_runs.flags])
    assert code == 1 and "span 7 of" in err and "was never ingested" in err


def test_data_list_shows_each_spans_origin(dvc_runs, capsys):
    argv = ["data", "list", "--dataset", "taxi", *dvc_runs.flags]
    code, out, err = _cli(capsys, [*argv, "--json"])
    assert code == 0, err
    spans = {s["span"]: s for s in json.loads(out)["taxi"]["spans"]}
    [v1] = spans[1]["ingestions"]
    [v2] = spans[2]["ingestions"]
    assert any(o.startswith(f"dvc {dvc_runs.repo} {DATA_PATH}@v1 ") for o in v1["origins"])
    assert any(o.startswith(f"dvc {dvc_runs.repo} {DATA_PATH}@v2 ") for o in v2["origins"])
    code, out, _ = _cli(capsys, argv)
    assert code == 0 and f"origin dvc {dvc_runs.repo} {DATA_PATH}@v1 (commit" in out
