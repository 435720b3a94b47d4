"""Alerts: what a run did, posted to webhooks as Slack-compatible JSON.

Where alerts go: every URL in the environment variable TFXP_ALERT_WEBHOOKS
(separated by spaces or commas), plus those in the variables a dataset file
names (`alerts: {webhook_env: [TEAM_WEBHOOK]}`). A webhook URL is a secret:
only variable names are ever in files, and a webhook is named in messages by
its variable and position ("TFXP_ALERT_WEBHOOKS #1"), never by its URL.

The body is `{"text": ..., "blocks": [...]}`: Slack's incoming webhooks and
Teams' Slack-compatible ones show it as is; anything else gets plain JSON
with the same text.

Delivery never blocks or fails a run. Each alert is posted from a daemon
thread, retried with back-off until a deadline (TFXP_ALERT_DEADLINE seconds,
default 30); one that could not be delivered is written to the run's log.
`wait_for_deliveries` lets a command that is about to exit give the threads
up to their deadline.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

WEBHOOKS_ENV = "TFXP_ALERT_WEBHOOKS"
DEADLINE_ENV = "TFXP_ALERT_DEADLINE"
DEFAULT_DEADLINE = 30.0
# One attempt may take at most this long (a slow server gets retried, not waited on).
ATTEMPT_TIMEOUT = 5.0
FIRST_BACKOFF = 0.5
TOP_ANOMALIES = 5

BLOCKED = "blocked"
FAILED = "failed"
PUSHED = "pushed"
REFUSED = "refused"
SKEW = "skew"
SKEW_CLEARED = "skew-cleared"


@dataclass(frozen=True)
class Webhook:
    label: str  # where it came from, safe to print
    url: str  # a secret: never printed, logged or stored

    def __repr__(self) -> str:  # dataclass's repr would show the URL
        return f"Webhook({self.label})"


@dataclass
class Alert:
    """One event: a one-line title and detail lines."""

    kind: str
    pipeline: str
    run_id: str
    title: str
    lines: list[str] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        emoji = {
            BLOCKED: ":no_entry:",
            FAILED: ":x:",
            PUSHED: ":rocket:",
            REFUSED: ":warning:",
            SKEW: ":chart_with_downwards_trend:",
            SKEW_CLEARED: ":white_check_mark:",
        }
        head = f"{emoji.get(self.kind, '')} [{self.pipeline}] {self.title}".strip()
        body = "\n".join(self.lines)
        text = head + (f"\n{body}" if body else "") + f"\nrun {self.run_id}"
        blocks: list[dict[str, Any]] = [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{head}*"}}
        ]
        if body:
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": body}})
        blocks.append(
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"run `{self.run_id}` · event `{self.kind}`"}
                ],
            }
        )
        return {"text": text, "blocks": blocks}


def webhooks(env_names: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> list:
    """The webhooks of TFXP_ALERT_WEBHOOKS and of the named variables, each URL once."""
    env = os.environ if environ is None else environ
    found: list[Webhook] = []
    seen: set[str] = set()
    for name in (WEBHOOKS_ENV, *env_names):
        urls = [u for u in re.split(r"[\s,]+", env.get(name, "")) if u]
        for i, url in enumerate(urls, 1):
            if url not in seen:
                seen.add(url)
                found.append(Webhook(f"{name} #{i}", url))
    return found


def deadline_seconds(environ: Mapping[str, str] | None = None) -> float:
    env = os.environ if environ is None else environ
    try:
        return float(env.get(DEADLINE_ENV, DEFAULT_DEADLINE))
    except ValueError:
        return DEFAULT_DEADLINE


def _redact(text: str, hook: Webhook) -> str:
    return text.replace(hook.url, hook.label)


def post(hook: Webhook, payload: dict[str, Any], deadline: float) -> str | None:
    """Posts until a 2xx answer or `deadline` (monotonic); None, or why it failed."""
    # urllib would also open file:// and ftp:// URLs: a webhook is HTTP, nothing else.
    if urllib.parse.urlsplit(hook.url).scheme not in ("http", "https"):
        return "not an http:// or https:// URL"
    body = json.dumps(payload).encode()
    backoff = FIRST_BACKOFF
    attempts = 0
    reason = "no attempt before the deadline"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return f"{reason} ({attempts} attempt(s))"
        attempts += 1
        request = urllib.request.Request(  # noqa: S310 - http(s) only, checked above
            hook.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=min(ATTEMPT_TIMEOUT, remaining)) as r:  # noqa: S310 - as above
                if 200 <= r.status < 300:
                    return None
                reason = f"HTTP {r.status}"
        except urllib.error.HTTPError as e:
            reason = f"HTTP {e.code}"
        except (urllib.error.URLError, OSError, ValueError) as e:
            cause = getattr(e, "reason", None) or e
            reason = _redact(str(cause) or type(e).__name__, hook)
        pause = min(backoff, deadline - time.monotonic())
        if pause > 0:
            time.sleep(pause)
        backoff *= 2


_pending: set[threading.Thread] = set()
_pending_lock = threading.Lock()


def wait_for_deliveries(timeout: float | None = None) -> None:
    """Waits for alerts still being delivered (each gives up at its own deadline)."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        with _pending_lock:
            threads = list(_pending)
        if not threads:
            return
        for t in threads:
            t.join(None if end is None else max(0.0, end - time.monotonic()))
        if end is not None and time.monotonic() >= end:
            return


class Notifier:
    """Sends a run's alerts; `log` gets one line per undeliverable alert (the run's log)."""

    def __init__(
        self,
        hooks: list[Webhook],
        log: Callable[[str], None],
        *,
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        self.hooks = hooks
        self.log = log
        self.deadline = deadline

    def send(self, alert: Alert) -> list[threading.Thread]:
        """Starts delivering `alert` to every webhook; returns at once."""
        payload = alert.payload()
        deadline = time.monotonic() + self.deadline
        started = []
        for hook in self.hooks:
            t = threading.Thread(
                target=self._deliver,
                args=(hook, alert, payload, deadline),
                name=f"alert-{alert.kind}",
                daemon=True,
            )
            with _pending_lock:
                _pending.add(t)
            t.start()
            started.append(t)
        return started

    def _deliver(self, hook: Webhook, alert: Alert, payload: dict, deadline: float) -> None:
        try:
            failure = post(hook, payload, deadline)
        except Exception as e:  # noqa: BLE001 - an alert must never take anything down
            failure = _redact(f"{type(e).__name__}: {e}", hook)
        try:
            if failure:
                self.log(
                    f"alert '{alert.kind}' of run {alert.run_id} not delivered to {hook.label} "
                    f"within {self.deadline:.0f}s: {failure}"
                )
        finally:
            with _pending_lock:
                _pending.discard(threading.current_thread())


def file_logger(log_path: str | None) -> Callable[[str], None]:
    """Appends a timestamped line to the run's log (stderr when there is none)."""

    def log(line: str) -> None:
        stamp = dt.datetime.now().isoformat(sep=" ", timespec="seconds")
        text = f"{stamp} WARNING runtime.alerts: {line}\n"
        if log_path:
            try:
                with open(log_path, "a") as f:
                    f.write(text)
                return
            except OSError:
                pass
        import sys

        sys.stderr.write(text)

    return log


# ---------------------------------------------------------------------------
# The events.


def blocked(pipeline: str, run_id: str, span: str, message: str) -> Alert:
    """The gate stopped the run: its message has a head line, then one anomaly per line."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    head = lines[0] if lines else "validation gate blocked the run"
    skip = ("full log:", "note:", "Nothing downstream")
    anomalies = [a for a in lines[1:] if not a.startswith(skip)]
    shown = anomalies[:TOP_ANOMALIES]
    more = len(anomalies) - len(shown)
    count = head.split(": ", 1)[1] if ": " in head else head
    body = [f"• {a}" for a in shown] + ([f"… and {more} more"] if more > 0 else [])
    return Alert(BLOCKED, pipeline, run_id, f"validation gate blocked {span} ({count})", body)


def failed(pipeline: str, run_id: str, component: str | None, error: str) -> Alert:
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    log = [ln.strip() for ln in error.splitlines() if ln.strip().startswith("full log:")]
    return Alert(
        FAILED, pipeline, run_id, f"run failed in {component or 'the pipeline'}", [first, *log]
    )


def _metric_lines(metrics: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> list[str]:
    def num(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else f"{v:.4f}"

    def diff(v: float) -> str:
        return f"{int(v):+d}" if float(v).is_integer() else f"{v:+.4f}"

    lines = []
    for name, value in sorted(metrics.items()):
        # TFMA's own `<metric>_diff` entries repeat what the baseline column says.
        if not isinstance(value, int | float) or name.endswith("_diff"):
            continue
        base = (baseline or {}).get(name)
        if isinstance(base, int | float):
            lines.append(f"{name} {num(value)} (baseline {num(base)}, {diff(value - base)})")
        else:
            lines.append(f"{name} {num(value)}")
    if baseline is None and lines:
        lines.append("no baseline: the first blessed model")
    return lines


def pushed(
    pipeline: str,
    run_id: str,
    version: str,
    alias: str | None,
    metrics: Mapping[str, Any],
    baseline: Mapping[str, Any] | None,
) -> Alert:
    title = f"model version {version} pushed" + (f" as {alias}" if alias else "")
    return Alert(PUSHED, pipeline, run_id, title, _metric_lines(metrics, baseline))


def refused(
    pipeline: str,
    run_id: str,
    component: str,
    reasons: list[str],
    metrics: Mapping[str, Any],
    baseline: Mapping[str, Any] | None,
) -> Alert:
    return Alert(
        REFUSED,
        pipeline,
        run_id,
        f"{component} refused the model: not pushed",
        [*reasons, *_metric_lines(metrics, baseline)],
    )


def skew_appeared(pipeline: str, check_id: str, span: int | None, window: str, found: list[str]):
    """Live traffic no longer looks like the training data (tfxp watch --skew-every)."""
    shown = found[:TOP_ANOMALIES]
    more = len(found) - len(shown)
    body = [f"• skew {f}" for f in shown] + ([f"… and {more} more"] if more > 0 else [])
    on = f"span {span}" if span is not None else "the latest span"
    title = f"serving skew: {len(found)} feature(s) of logged requests differ from {on}"
    return Alert(SKEW, pipeline, check_id, title, [*body, f"window: {window}"])


def skew_cleared(pipeline: str, check_id: str, span: int | None, window: str) -> Alert:
    on = f"span {span}" if span is not None else "the latest span"
    title = f"serving skew cleared: logged requests match {on} again"
    return Alert(SKEW_CLEARED, pipeline, check_id, title, [f"window: {window}"])
