"""Webhook alerts against real HTTP servers on loopback: one that records what it got,
one that is slow, one that answers 500, one that is down."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from webhook_server import SECRET, WebhookServer

from runtime import alerts


@pytest.fixture
def hook_factory():
    made = []

    def make(behaviour):
        h = WebhookServer(behaviour)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(alerts, "ATTEMPT_TIMEOUT", 0.5)
    monkeypatch.setattr(alerts, "FIRST_BACKOFF", 0.05)


def _notifier(url: str, log: Path, deadline: float = 2.0) -> alerts.Notifier:
    hooks = alerts.webhooks(environ={alerts.WEBHOOKS_ENV: url})
    return alerts.Notifier(hooks, alerts.file_logger(str(log)), deadline=deadline)


def _blocked() -> alerts.Alert:
    message = (
        "validation gate blocked the run: 2 anomalies\n"
        "  drift fare: L-infinity 0.91 > 0.2 (span 3 vs span 2)\n"
        "  schema company: unexpected string values\n"
        "  note: skew not checked\n"
        "  Nothing downstream ran. Fix the data ...\n"
        "  full log: /runs/x.log"
    )
    return alerts.blocked("taxi", "R1", "span 3", message)


def test_delivered_json_is_slack_compatible(hook_factory, tmp_path: Path) -> None:
    hook = hook_factory(lambda n: (200, False))
    log = tmp_path / "run.log"
    for t in _notifier(hook.url, log).send(_blocked()):
        t.join()
    [body] = hook.bodies
    assert hook.paths == [f"/services/{SECRET}"]
    assert set(body) == {"text", "blocks"}
    assert body["text"].startswith(":no_entry: [taxi] validation gate blocked span 3 (2 anomalies)")
    assert "drift fare: L-infinity 0.91 > 0.2" in body["text"]
    assert "note:" not in body["text"] and "Nothing downstream" not in body["text"]
    assert [b["type"] for b in body["blocks"]] == ["section", "section", "context"]
    assert body["blocks"][1]["text"]["type"] == "mrkdwn"
    assert not log.exists()  # delivered: nothing to log


def test_500_is_retried_and_then_delivered(hook_factory, tmp_path: Path) -> None:
    hook = hook_factory(lambda n: (500, False) if n < 2 else (200, False))
    log = tmp_path / "run.log"
    alert = alerts.pushed("taxi", "R2", "17", "champion", {"AUC": 0.8}, {"AUC": 0.75})
    for t in _notifier(hook.url, log).send(alert):
        t.join()
    assert len(hook.bodies) == 3
    assert "AUC 0.8000 (baseline 0.7500, +0.0500)" in hook.bodies[-1]["text"]
    assert not log.exists()


def _undeliverable(log: Path) -> str:
    text = log.read_text()
    assert SECRET not in text and "127.0.0.1" not in text  # the URL is a secret
    return text


def test_always_500_gives_up_at_the_deadline_and_logs_it(hook_factory, tmp_path) -> None:
    hook = hook_factory(lambda n: (500, False))
    log = tmp_path / "run.log"
    for t in _notifier(hook.url, log, deadline=1.0).send(_blocked()):
        t.join()
    assert len(hook.bodies) >= 2  # retried
    text = _undeliverable(log)
    assert "alert 'blocked' of run R1 not delivered to TFXP_ALERT_WEBHOOKS #1" in text
    assert "HTTP 500" in text


def test_a_slow_server_does_not_hold_up_the_sender(hook_factory, tmp_path) -> None:
    hook = hook_factory(lambda n: (200, True))
    log = tmp_path / "run.log"
    threads = _notifier(hook.url, log, deadline=1.5).send(_blocked())
    # send() returned while the server still holds the first request.
    assert any(t.is_alive() for t in threads)
    for t in threads:
        t.join()
    assert hook.bodies  # it was tried
    text = _undeliverable(log)
    assert "not delivered" in text and "timed out" in text


def test_a_server_that_is_down(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "run.log"
    url = f"http://127.0.0.1:{port}/services/{SECRET}"
    for t in _notifier(url, log, deadline=0.5).send(_blocked()):
        t.join()
    text = _undeliverable(log)
    assert "Connection refused" in text


def test_a_webhook_that_is_not_http_is_not_opened(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for a webhook")
    log = tmp_path / "run.log"
    for t in _notifier(secret.as_uri(), log, deadline=5).send(_blocked()):
        t.join()
    text = _undeliverable(log)
    assert "not an http:// or https:// URL" in text and "1 attempt" not in text


def test_wait_for_deliveries_waits_for_pending_ones(hook_factory, tmp_path) -> None:
    hook = hook_factory(lambda n: (200, False))
    _notifier(hook.url, tmp_path / "log").send(_blocked())
    alerts.wait_for_deliveries(10)
    assert len(hook.bodies) == 1


def test_webhooks_from_the_environment_and_named_variables() -> None:
    env = {
        alerts.WEBHOOKS_ENV: "http://a/1, http://b/2",
        "TEAM_HOOK": "http://c/3 http://a/1",
    }
    hooks = alerts.webhooks(["TEAM_HOOK", "UNSET"], environ=env)
    assert [h.label for h in hooks] == [
        "TFXP_ALERT_WEBHOOKS #1",
        "TFXP_ALERT_WEBHOOKS #2",
        "TEAM_HOOK #1",
    ]
    assert "http" not in repr(hooks)  # never printed by accident
    assert alerts.webhooks(environ={}) == []


def test_event_texts() -> None:
    failed = alerts.failed("taxi", "R", "Trainer", "Trainer failed: OOM\n  full log: /x.log")
    assert failed.title == "run failed in Trainer"
    assert failed.lines == ["Trainer failed: OOM", "full log: /x.log"]
    refused = alerts.refused(
        "taxi", "R", "Evaluator", ["BinaryAccuracy 0.5 is below 0.6"], {"BinaryAccuracy": 0.5}, None
    )
    text = refused.payload()["text"]
    assert "Evaluator refused the model: not pushed" in text
    assert "no baseline: the first blessed model" in text
    many = "validation gate blocked the run: 7 anomalies\n" + "\n".join(
        f"  drift f{i}: big" for i in range(7)
    )
    lines = alerts.blocked("taxi", "R", "span 9", many).lines
    assert len(lines) == alerts.TOP_ANOMALIES + 1 and lines[-1] == "… and 2 more"


def test_metrics_against_the_baseline() -> None:
    metrics = {"auc": 0.9456, "auc_diff": 0.0156, "example_count": 993.0}
    baseline = {"auc": 0.93, "example_count": 1026.0}
    lines = alerts.pushed("taxi", "R", "7", "champion", metrics, baseline).lines
    assert lines == [
        "auc 0.9456 (baseline 0.9300, +0.0156)",
        "example_count 993 (baseline 1026, -33)",
    ]
