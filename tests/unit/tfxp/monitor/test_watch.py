"""The watcher's bookkeeping with a stand-in for the run (the real runs: tests/e2e/test_watch_e2e.py):
spans recorded in ML Metadata, restarts, two watchers, retries, blocks, Ctrl-C."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from metadata.store import StoreLocation, open_store
from metadata.watch_records import handled_spans
from pipeline.dataset_sections import DatasetFileError
from pipeline.datasets import dataset_config, load_dataset_file
from tfxp.datasets.publish import publish_span
from tfxp.local.runner import PipelineRunError, RunInterruptedError, ValidationBlockedError
from tfxp.monitor.watch import BLOCKED, FAILED, TRAINED, Watcher, WatchOptions


@dataclass
class _Summary:
    run_id: str
    pushed: bool = True
    pushed_model: str = "/serving/1"
    blessed: bool = True


def _publish(root: Path) -> int:
    def fill(folder: Path) -> None:
        (folder / "data.csv").write_text("a,b\n1,2\n")

    return publish_span(root, fill, check=False).span


class FakeRuns:
    """Records each run's span; `outcomes[span]` lists what successive attempts do."""

    def __init__(self, outcomes=None) -> None:
        self.outcomes = outcomes or {}
        self.calls: list[tuple[int, bool]] = []
        self.lock = threading.Lock()

    def __call__(self, config, *, printer, alert_failures, **kwargs):
        with self.lock:
            self.calls.append((config.span, alert_failures))
            attempt = sum(1 for s, _ in self.calls if s == config.span)
        plan = self.outcomes.get(config.span, [])
        what = plan[attempt - 1] if attempt <= len(plan) else "ok"
        if what == "fail":
            raise PipelineRunError("Trainer failed: boom\n  full log: /l.log", "Trainer")
        if what == "block":
            raise ValidationBlockedError("validation gate blocked the run: 1 anomaly\n  drift x")
        if what == "interrupt":
            raise RunInterruptedError("run R interrupted during Trainer", "Trainer")
        return _Summary(run_id=f"run-{config.span}-{attempt}")


@pytest.fixture
def setup(tmp_path: Path):
    config = dataset_config("taxi").replace(
        data_root=str(tmp_path / "data"), run_dir=str(tmp_path / "run")
    )
    location = StoreLocation(sqlite_path=config.metadata_path)
    Path(config.run_dir).mkdir()
    return config, (lambda: open_store(location, create=True))


def _watcher(config, store, runs, *, sleeps=None, **options) -> Watcher:
    return Watcher(
        config,
        store,
        options=WatchOptions(**{"once": True, "backoff": 10, **options}),
        printer=lambda line: None,
        run=runs,
        sleep=(sleeps.append if sleeps is not None else lambda s: None),
    )


def test_each_span_once_recorded_in_ml_metadata(setup) -> None:
    config, store = setup
    root = Path(config.data_root)
    for _ in range(2):
        _publish(root)
    (root / ".incoming-abc").mkdir()  # a drop being written: invisible
    (root / ".incoming-abc" / "data.csv").write_text("a,b\n")
    runs = FakeRuns()
    assert _watcher(config, store, runs).run_forever() == 0
    assert [s for s, _ in runs.calls] == [1, 2]
    # A new watcher process (same store) runs only the new span.
    _publish(root)
    runs2 = FakeRuns()
    _watcher(config, store, runs2).run_forever()
    assert [s for s, _ in runs2.calls] == [3]
    handled = handled_spans(store(), config)
    assert {s: (h.outcome, h.run_id) for s, h in handled.items()} == {
        1: (TRAINED, "run-1-1"),
        2: (TRAINED, "run-2-1"),
        3: (TRAINED, "run-3-1"),
    }


def test_failures_are_retried_with_back_off_then_recorded(setup) -> None:
    config, store = setup
    for _ in range(3):
        _publish(Path(config.data_root))
    runs = FakeRuns({1: ["fail", "fail", "fail"], 2: ["fail", "ok"], 3: ["block"]})
    sleeps: list[float] = []
    _watcher(config, store, runs, sleeps=sleeps, max_attempts=3).run_forever()
    # Only the last attempt alerts on failure; the watcher went on to spans 2 and 3.
    assert runs.calls == [
        (1, False),
        (1, False),
        (1, True),
        (2, False),
        (2, False),
        (3, False),
    ]
    assert sleeps == [10, 20, 10]
    handled = handled_spans(store(), config)
    assert handled[1].outcome == FAILED and "after 3 attempt(s)" in handled[1].detail
    assert handled[2].outcome == TRAINED and handled[2].attempts == 2
    assert handled[3].outcome == BLOCKED  # blocked once: not retried, so alerted once
    again = FakeRuns()
    _watcher(config, store, again).run_forever()
    assert again.calls == []  # a blocked or failed span is not run on every poll


def test_interrupted_run_is_not_recorded_and_runs_on_restart(setup) -> None:
    config, store = setup
    _publish(Path(config.data_root))
    assert _watcher(config, store, FakeRuns({1: ["interrupt"]})).run_forever() == 130
    assert handled_spans(store(), config) == {}
    runs = FakeRuns()
    _watcher(config, store, runs).run_forever()
    assert [s for s, _ in runs.calls] == [1]


def test_ctrl_c_between_runs_stops_cleanly(setup) -> None:
    config, store = setup

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    w = Watcher(config, store, options=WatchOptions(interval=5), run=FakeRuns(), sleep=interrupt)
    assert w.run_forever() == 130


def test_two_watchers_run_each_span_once(setup) -> None:
    config, store = setup
    root = Path(config.data_root)
    for _ in range(4):
        _publish(root)
    runs = FakeRuns()
    gate = threading.Barrier(2)

    def watch() -> None:
        gate.wait()
        w = _watcher(config, store, runs)
        # Not `once`: a watcher that finds the other one busy keeps polling.
        for _ in range(200):
            w.step()
            if len(handled_spans(store(), config)) == 4:
                return

    threads = [threading.Thread(target=watch) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(s for s, _ in runs.calls) == [1, 2, 3, 4]


def _dataset(tmp_path: Path, extra: str) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir(parents=True)
    path = folder / "dataset.yaml"
    path.write_text(
        "label: y\ntask: binary\nclasses: [a, b]\nfeatures: {x: zscore}\n" + extra,
        encoding="utf-8",
    )
    return path


def test_dataset_policy_keys(tmp_path: Path) -> None:
    config = load_dataset_file(_dataset(tmp_path, "on_push: challenger\n"))
    assert config.on_push == "challenger" and config.alert_webhook_env == ()
    config = load_dataset_file(_dataset(tmp_path / "b", "alerts: {webhook_env: [TEAM_HOOK]}\n"))
    assert config.on_push == "champion" and config.alert_webhook_env == ("TEAM_HOOK",)
    with pytest.raises(
        DatasetFileError, match=r"on_push must be one of \['champion', 'challenger'\]"
    ):
        load_dataset_file(_dataset(tmp_path / "c", "on_push: production\n"))
    url = "https://hooks.slack.com/services/T0/B0/secret"
    with pytest.raises(DatasetFileError, match="webhook URL is a secret") as e:
        load_dataset_file(_dataset(tmp_path / "d", f"alerts: {{webhook_env: '{url}'}}\n"))
    assert "secret/" not in str(e.value) and "hooks.slack" not in str(e.value)
    with pytest.raises(DatasetFileError, match="unknown key"):
        load_dataset_file(_dataset(tmp_path / "e", "alerts: {url: X}\n"))


def test_next_span_ready_is_a_published_span_past_the_newest_ingested(setup) -> None:
    """The Airflow sensor's poke (airflow/taxi_dag.py)."""
    from ml_metadata.proto import metadata_store_pb2 as pb

    from tfxp.monitor.watch import next_span_ready

    config, store = setup
    assert next_span_ready(config, None) is None  # no data at all
    root = Path(config.data_root)
    _publish(root)
    assert next_span_ready(config, None) == 1  # no store yet: new
    s = store()
    examples = s.put_artifact_type(pb.ArtifactType(name="Examples"))
    ingested = pb.Artifact(type_id=examples, uri="/x")
    ingested.custom_properties["span"].int_value = 1
    s.put_artifacts([ingested])
    assert next_span_ready(config, s) is None  # span 1 was ingested
    _publish(root)
    assert next_span_ready(config, s) == 2


def test_watch_command_refuses_bad_settings(tmp_path: Path, capsys) -> None:
    from tfxp.cli import main

    code = main(["watch", "--run-dir", str(tmp_path), "--interval", "0"])
    assert code == 1
    assert "--interval must be > 0" in capsys.readouterr().err


def test_a_data_root_that_cannot_be_listed_is_retried_not_fatal(setup) -> None:
    config, store = setup
    _publish(Path(config.data_root))
    calls = {"n": 0}

    def flaky_store():
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("connection refused")
        return store()

    runs = FakeRuns()
    lines: list[str] = []
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) > 2:
            raise KeyboardInterrupt

    w = Watcher(
        config,
        flaky_store,
        options=WatchOptions(interval=7),
        printer=lines.append,
        run=runs,
        sleep=sleep,
    )
    assert w.run_forever() == 130
    assert any("cannot list the spans or read ML Metadata (connection refused)" in x for x in lines)
    assert [s for s, _ in runs.calls] == [1]  # the next look found the span and ran it


def test_skew_every_durations():
    from tfxp.monitor.watch import parse_duration

    assert parse_duration("90") == 90 and parse_duration("90s") == 90
    assert parse_duration("15m") == 900 and parse_duration("2H") == 7200
    assert parse_duration("1d") == 86400 and parse_duration("0.5h") == 1800
    for bad in ("", "0", "-5m", "soon", "5w"):
        with pytest.raises(ValueError, match="a duration such as 90s"):
            parse_duration(bad)


def test_skew_only_needs_skew_every(tmp_path, capsys):
    from tfxp.cli import main

    assert main(["watch", "--run-dir", str(tmp_path), "--skew-only"]) == 1
    assert "--skew-only needs --skew-every" in capsys.readouterr().err
    assert main(["watch", "--run-dir", str(tmp_path), "--skew-every", "soon"]) == 1
    assert "--skew-every: a duration" in capsys.readouterr().err


def test_skew_checks_run_on_their_schedule_and_alert_on_changes(tmp_path, monkeypatch):
    """The schedule and the alert transitions, with the check itself stood in for
    (the real check against a real log: tests/e2e/test_serving_log_e2e.py)."""
    from tfxp.monitor import skew

    config = dataset_config("taxi").replace(
        data_root=str(tmp_path / "data"), run_dir=str(tmp_path / "run")
    )
    states = iter([skew.SKEWED, skew.SKEWED, skew.CLEAR, skew.NO_LOG, skew.SKEWED])

    def check(config, store):
        state = next(states)
        found = ["trip_miles: Jensen-Shannon 0.3 > threshold 0.15"] if state == skew.SKEWED else []
        return skew.SkewResult(state, "2026-12-04T10:00:00+00:00", 2, "/s", "/l", None, "w", found)

    monkeypatch.setattr(skew, "check_serving_skew", check)
    now = [100.0]
    sent = []
    watcher = Watcher(
        config,
        lambda: None,
        options=WatchOptions(skew_every=60.0, spans=False),
        printer=lambda _: None,
        notify=sent.append,
        clock=lambda: now[0],
    )
    watcher._next_skew_check = now[0]
    assert watcher.skew_step().state == skew.SKEWED
    assert watcher.skew_step() is None  # not due yet
    now[0] += 59
    assert watcher.skew_step() is None
    now[0] += 1
    assert watcher.skew_step().state == skew.SKEWED  # still skewed: no second alert
    now[0] += 60
    assert watcher.skew_step().state == skew.CLEAR
    now[0] += 60
    assert watcher.skew_step().state == skew.NO_LOG
    assert skew.last_result(config).state == skew.NO_LOG
    now[0] += 60
    watcher.skew_step()
    assert [a.kind for a in sent] == ["skew", "skew-cleared", "skew"]
    assert "trip_miles" in sent[0].payload()["text"] and "span 2" in sent[0].title
