"""The model registry on a real ML Metadata store shaped like a pipeline's (no run):
aliases with who/when/why, promote, rollback, the atomic serving pointer, lineage."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as pb

from metadata import aliases
from metadata.lineage import Lineage
from metadata.store import LineageError
from pipeline.datasets import dataset_config
from serving import pointers
from tfxp.cli import main as tfxp_main
from tfxp.models import registry

PIPELINE = "taxi"


def _store(path: Path):
    cfg = pb.ConnectionConfig()
    cfg.sqlite.filename_uri = str(path)
    cfg.sqlite.connection_mode = pb.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    return metadata_store.MetadataStore(cfg)


def _key(key: str) -> pb.Event.Path:
    path = pb.Event.Path()
    path.steps.add().key = key
    path.steps.add().index = 0
    return path


class FakePipeline:
    """Records what TFX records for a run that trains and pushes one model."""

    def __init__(self, store, serving_dir: Path) -> None:
        self.store = store
        self.serving_dir = serving_dir
        t = {
            name: store.put_context_type(pb.ContextType(name=name))
            for name in ("pipeline", "node", "pipeline_run")
        }
        self.ctx_type = t
        [self.pipeline_ctx] = store.put_contexts([pb.Context(type_id=t["pipeline"], name=PIPELINE)])
        self.nodes = {}
        for node in ("Trainer", "Pusher"):
            [self.nodes[node]] = store.put_contexts(
                [pb.Context(type_id=t["node"], name=f"{PIPELINE}.{node}")]
            )
        self.exec_type = {
            n: store.put_execution_type(pb.ExecutionType(name=n)) for n in ("Trainer", "Pusher")
        }
        model_type = pb.ArtifactType(name="Model")
        self.model_type = store.put_artifact_type(model_type)
        pushed = pb.ArtifactType(name="PushedModel")
        self.pushed_type = store.put_artifact_type(pushed)
        self.runs = 0

    def _contexts(self, node: str, run_ctx: int) -> list[pb.Context]:
        return self.store.get_contexts_by_id([self.pipeline_ctx, self.nodes[node], run_ctx])

    def train_and_push(self, version: str) -> int:
        """One run: a Trainer writing a Model, a Pusher pushing it as `version`; the model id."""
        self.runs += 1
        run_id = f"20261203T10000{self.runs}-abcdef"
        [run_ctx] = self.store.put_contexts(
            [pb.Context(type_id=self.ctx_type["pipeline_run"], name=run_id)]
        )
        model = pb.Artifact(type_id=self.model_type, uri=f"/pr/Trainer/model/{self.runs}")
        model.state = pb.Artifact.LIVE
        trainer = pb.Execution(
            type_id=self.exec_type["Trainer"], last_known_state=pb.Execution.COMPLETE
        )
        _, [model_id], _ = self.store.put_execution(
            trainer,
            [(model, pb.Event(type=pb.Event.OUTPUT, path=_key("model")))],
            self._contexts("Trainer", run_ctx),
        )
        folder = self.serving_dir / version
        folder.mkdir(parents=True)
        (folder / "saved_model.pb").write_text(version)
        push = pb.Artifact(type_id=self.pushed_type, uri=f"/pr/Pusher/{self.runs}")
        push.custom_properties["pushed"].int_value = 1
        push.custom_properties["pushed_version"].string_value = version
        push.custom_properties["pushed_destination"].string_value = str(folder)
        pusher = pb.Execution(
            type_id=self.exec_type["Pusher"], last_known_state=pb.Execution.COMPLETE
        )
        self.store.put_execution(
            pusher,
            [
                (
                    self.store.get_artifacts_by_id([model_id])[0],
                    pb.Event(type=pb.Event.INPUT, path=_key("model")),
                ),
                (push, pb.Event(type=pb.Event.OUTPUT, path=_key("pushed_model"))),
            ],
            self._contexts("Pusher", run_ctx),
        )
        return model_id


@pytest.fixture
def world(tmp_path: Path):
    store = _store(tmp_path / "metadata.sqlite")
    config = dataset_config("taxi").replace(run_dir=str(tmp_path), data_root=str(tmp_path / "data"))
    fake = FakePipeline(store, Path(config.serving_dir))
    return config, store, fake


def test_promote_points_the_alias_and_records_who_when_why(world, monkeypatch) -> None:
    config, store, fake = world
    m1 = fake.train_and_push("100")
    fake.train_and_push("200")
    monkeypatch.setenv("TFXP_USER", "ana")
    out = registry.promote(config, Lineage(store, PIPELINE), "100", why="first good one")
    assert out.previous_version is None
    assert (out.change.alias, out.change.model_id, out.change.who) == ("champion", m1, "ana")
    link = Path(config.serving_dir) / "champion"
    assert os.readlink(link) == "100"  # relative: the serving folder may move
    assert (link / "saved_model.pb").read_text() == "100"
    pointer = pointers.read_pointer(config.serving_dir, "champion")
    assert pointer["version"] == "100" and pointer["why"] == "first good one"
    assert pointer["changed_by"] == "ana"

    out = registry.promote(config, Lineage(store, PIPELINE), "200", why="better AUC")
    assert out.previous_version == "100"
    assert os.readlink(link) == "200"
    versions = {v.version: v.aliases for v in registry.versions(Lineage(store, PIPELINE))}
    assert versions == {"100": [], "200": ["champion"]}


def test_rollback_walks_back_and_a_promote_after_it_is_undone_next(world) -> None:
    config, store, fake = world
    for v in ("1", "2", "3", "4"):
        fake.train_and_push(v)

    def lin():
        return Lineage(store, PIPELINE)

    for v in ("1", "2", "3"):
        registry.promote(config, lin(), v)
    assert registry.rollback(config, lin()).version.version == "2"
    assert registry.rollback(config, lin()).version.version == "1"  # back, not back and forth
    registry.promote(config, lin(), "4")
    assert registry.rollback(config, lin()).version.version == "1"  # what 4 replaced
    assert os.readlink(Path(config.serving_dir) / "champion") == "1"
    actions = [c.action for c in aliases.history(store, PIPELINE, "champion")]
    assert actions == ["promote"] * 3 + ["rollback"] * 2 + ["promote", "rollback"]


def _state(config, store):
    link = Path(config.serving_dir) / "champion"
    return (
        [c.execution_id for c in aliases.history(store, PIPELINE)],
        os.readlink(link) if link.is_symlink() else None,
        pointers.read_pointer(config.serving_dir, "champion"),
    )


def test_bad_requests_are_clear_and_change_nothing(world) -> None:
    config, store, fake = world
    fake.train_and_push("100")
    with pytest.raises(LineageError, match="never set, so there is nothing to roll back"):
        registry.rollback(config, Lineage(store, PIPELINE))
    registry.promote(config, Lineage(store, PIPELINE), "100")
    before = _state(config, store)
    with pytest.raises(LineageError, match=r"only version 100 \(no earlier champion"):
        registry.rollback(config, Lineage(store, PIPELINE))
    with pytest.raises(LineageError, match=r"no pushed version 999 .* \(newest versions: 100\)"):
        registry.promote(config, Lineage(store, PIPELINE), "999")
    with pytest.raises(LineageError, match="'Champion!' is not a valid name"):
        registry.promote(config, Lineage(store, PIPELINE), "100", "Champion!")
    with pytest.raises(LineageError, match="'staging' of pipeline 'taxi' was never set"):
        registry.rollback(config, Lineage(store, PIPELINE), "staging")
    assert _state(config, store) == before


def test_a_reader_never_sees_a_half_changed_alias(world) -> None:
    config, store, fake = world
    for v in ("1", "2"):
        fake.train_and_push(v)
    registry.promote(config, Lineage(store, PIPELINE), "1")
    link = Path(config.serving_dir) / "champion"
    pointer = Path(pointers.pointer_path(config.serving_dir, "champion"))
    seen, bad = set(), []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                seen.add((link / "saved_model.pb").read_text())
                json.loads(pointer.read_text())
            except (OSError, ValueError) as e:  # a missing link or a torn pointer file
                bad.append(repr(e))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(60):
            registry.promote(config, Lineage(store, PIPELINE), "2" if i % 2 == 0 else "1")
    finally:
        stop.set()
        reader.join()
    assert bad == []
    assert seen == {"1", "2"}


def test_lineage_follows_the_alias(world) -> None:
    config, store, fake = world
    fake.train_and_push("100")
    m2 = fake.train_and_push("200")
    registry.promote(config, Lineage(store, PIPELINE), "100")
    registry.promote(config, Lineage(store, PIPELINE), "200", why="new data")
    lin = Lineage(store, PIPELINE)
    assert lin.resolve_model("champion").id == m2
    changes = [
        c for c in aliases.history(store, PIPELINE) if m2 in (c.model_id, c.previous_model_id)
    ]
    assert [(c.alias, c.why) for c in changes] == [("champion", "new data")]
    # The alias change is an execution with INPUT events on both models.
    events = store.get_events_by_execution_ids([changes[0].execution_id])
    assert sorted(e.artifact_id for e in events) == sorted([m2, changes[0].previous_model_id])


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = tfxp_main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_models_commands(world, capsys, monkeypatch) -> None:
    config, store, fake = world
    fake.train_and_push("100")
    fake.train_and_push("200")
    monkeypatch.setenv("TFXP_USER", "ops")
    flags = ["--run-dir", config.run_dir, "--data-root", config.data_root]
    code, out, err = _cli(capsys, "models", "promote", "100", "--why", "canary ok", *flags)
    assert code == 0, err
    assert "promoted version 100" in out and "serving path:" in out
    code, out, err = _cli(capsys, "models", "promote", "200", *flags)
    assert code == 0 and "(was 100)" in out
    code, out, _ = _cli(capsys, "models", "list", *flags)
    assert code == 0
    assert "champion" in out and "canary ok" in out and "by ops" in out
    code, out, _ = _cli(capsys, "models", "rollback", "--why", "bad p99", *flags)
    assert code == 0 and "rolled back version 100" in out and "(was 200)" in out
    code, out, _ = _cli(capsys, "models", "list", "--json", *flags)
    listed = json.loads(out)
    assert {v["version"]: v["aliases"] for v in listed["versions"]} == {
        "100": ["champion"],
        "200": [],
    }
    code, _, err = _cli(capsys, "models", "promote", "7", *flags)
    assert code == 1 and "ERROR: no pushed version 7" in err


def test_a_refused_model_is_alerted_with_its_component_and_reason(world) -> None:
    """Any executed component whose output has blessed = 0 refused the model (the
    Evaluator here; a serving check the same way)."""
    from types import SimpleNamespace

    from tfxp.local import notify

    config, store, fake = world
    fake.train_and_push("100")
    run_ctx = store.get_context_by_type_and_name("pipeline_run", "20261203T100001-abcdef")
    [node] = store.put_contexts([pb.Context(type_id=fake.ctx_type["node"], name="taxi.Evaluator")])
    ex_type = store.put_execution_type(pb.ExecutionType(name="Evaluator"))
    blessing_type = store.put_artifact_type(pb.ArtifactType(name="ModelBlessing"))
    blessing = pb.Artifact(type_id=blessing_type, uri="/pr/Evaluator/blessing/1")
    blessing.custom_properties["blessed"].int_value = 0
    store.put_execution(
        pb.Execution(type_id=ex_type, last_known_state=pb.Execution.COMPLETE),
        [(blessing, pb.Event(type=pb.Event.OUTPUT, path=_key("blessing")))],
        store.get_contexts_by_id([fake.pipeline_ctx, node, run_ctx.id]),
    )
    summary = SimpleNamespace(run_id=run_ctx.name, metrics={"BinaryAccuracy": 0.55})
    [alert] = notify.after_run(store, config, summary, None)
    assert alert.kind == "refused"
    text = alert.payload()["text"]
    assert "Evaluator refused the model: not pushed" in text
    assert "BinaryAccuracy 0.5500 is below the lower bound 0.6" in text
