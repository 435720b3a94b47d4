"""`tfxp watch` end to end on the local runner, as a user leaves it running.

One module fixture, one story (few, small runs: 3,000-row spans, 40 steps):
- span 1 is there when the watcher starts; it trains and pushes (champion);
- span 2 is published (`publish_span`, atomic) while the watcher runs; the
  watcher is SIGKILLed while span 2's Trainer runs;
- span 3 (fares x10: drifted) and span 4 (columns the schema does not know)
  are published while no watcher runs; a new watcher resumes span 2, the gate
  blocks span 3, span 4 fails three times and is given up; SIGINT stops the
  watcher between runs.
A webhook server on loopback records the alerts; a second one answers 500.
"""

from __future__ import annotations

import csv
import os
import random
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import child
import pytest
from e2e_support import EMBEDDED_CSV
from webhook_server import SECRET, WebhookServer

from pipeline.config import PROJECT_ROOT, PipelineConfig
from pipeline.datasets import dataset_config
from tfxp.datasets.publish import publish_span

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

TFXP = str(Path(sys.executable).parent / "tfxp")
ROWS = 3000


def publish_drop(data_root: Path, part: int, fare_factor: float = 1.0) -> int:
    """Rows of the embedded CSV, shuffled once (so drops are alike), as the next span."""
    with EMBEDDED_CSV.open(newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    random.Random(7).shuffle(body)
    chosen = body[part * ROWS : (part + 1) * ROWS]
    fare = header.index("fare")

    def fill(folder: Path) -> None:
        with (folder / "data.csv").open("w", newline="") as out:
            w = csv.writer(out, lineterminator="\n")
            w.writerow(header)
            for row in chosen:
                row = list(row)
                if row[fare] and fare_factor != 1.0:
                    row[fare] = f"{float(row[fare]) * fare_factor:.2f}"
                w.writerow(row)

    return publish_span(data_root, fill, check=False).span


@dataclass
class WatchStory:
    config: PipelineConfig
    first_output: str
    second_output: str
    second_code: int
    alerts: list[str]
    tmp: Path


def _watcher(forkserver, config: PipelineConfig, env: dict[str, str]):
    args = [
        TFXP,
        "watch",
        "--data-root",
        config.data_root,
        "--run-dir",
        config.run_dir,
        "--interval",
        "1",
        "--backoff",
        "1",
        "--train-steps",
        "40",
        "--eval-steps",
        "2",
    ]
    return forkserver.popen(
        args,
        env=env,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture(scope="module")
def story(tmp_path_factory, forkserver) -> WatchStory:
    tmp = tmp_path_factory.mktemp("watch")
    config = dataset_config("taxi").replace(data_root=str(tmp / "data"), run_dir=str(tmp / "run"))
    hook = WebhookServer()
    broken = WebhookServer(lambda n: (500, False))
    env = {
        **os.environ,
        "TFXP_ALERT_WEBHOOKS": f"{hook.url} {broken.url}",
        "TFXP_ALERT_DEADLINE": "3",
        "PYTHONUNBUFFERED": "1",
    }
    publish_drop(Path(config.data_root), 0)
    proc = _watcher(forkserver, config, env)
    first: list[str] = []
    killed = False
    try:
        span1_done = False
        for line in child.lines(proc, timeout=900):
            first.append(line)
            if "span 1: trained" in line:
                span1_done = True
                publish_drop(Path(config.data_root), 1)  # while the watcher runs
            elif span1_done and re.search(r"\[\d+/\d+\] Trainer \.\.\.", line):
                proc.kill()  # SIGKILL, mid-run of span 2
                killed = True
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    assert killed, "".join(first)[-3000:]
    publish_drop(Path(config.data_root), 2, fare_factor=10.0)  # drifted
    publish_span(
        config.data_root, lambda folder: (folder / "data.csv").write_text("a,b\n1,2\n"), check=False
    )

    proc = _watcher(forkserver, config, env)
    second: list[str] = []
    try:
        for line in child.lines(proc, timeout=900):
            second.append(line)
            if "waiting for a new span" in line:
                proc.send_signal(signal.SIGINT)  # between runs
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
    hook.close()
    broken.close()
    return WatchStory(config, "".join(first), "".join(second), code, hook.texts(), tmp)


def _store(config: PipelineConfig):
    from metadata.store import StoreLocation, open_store

    return open_store(StoreLocation(sqlite_path=config.metadata_path))


def test_every_span_ran_exactly_once(story) -> None:
    from ml_metadata.proto import metadata_store_pb2 as pb

    from metadata.lineage import Lineage
    from metadata.watch_records import handled_spans

    store = _store(story.config)
    handled = handled_spans(store, story.config)
    assert {s: h.outcome for s, h in handled.items()} == {
        1: "trained",
        2: "trained",
        3: "blocked",
        4: "failed",
    }
    assert handled[4].attempts == 3 and "after 3 attempt(s)" in handled[4].detail
    # One record per span, however many watchers and restarts.
    ctx = store.get_context_by_type_and_name("tfxp_watch", f"taxi:{story.config.data_root}")
    assert len(store.get_executions_by_context(ctx.id)) == 4
    # Span 2's run was killed in the Trainer and resumed: one complete model per trained span.
    lineage = Lineage(store, "taxi")
    trainers = [e for e, node in lineage.node_of.items() if node == "Trainer"]
    done = [
        lineage.executions[e]
        for e in trainers
        if lineage.executions[e].last_known_state == pb.Execution.COMPLETE
    ]
    spans = sorted(s for e in done for s in lineage.run_info(lineage.run_of[e.id]).spans)
    assert spans == [1, 2]
    assert "span 1: trained" in story.first_output
    assert "span 2: new" in story.second_output and "span 1: new" not in story.second_output


def test_ctrl_c_between_runs_stops_cleanly(story) -> None:
    assert story.second_code == 130, story.second_output[-2000:]
    assert "stopped between runs" in story.second_output


def test_the_drifted_span_is_alerted_once_with_its_anomalies(story) -> None:
    blocked = [t for t in story.alerts if "validation gate blocked" in t]
    assert len(blocked) == 1, story.alerts
    assert "span 3" in blocked[0] and "drift fare" in blocked[0]
    pushed = [t for t in story.alerts if "pushed as champion" in t]
    assert pushed, story.alerts  # span 1's model at least
    assert "no baseline: the first blessed model" in pushed[0]


def test_a_failing_span_is_retried_then_alerted_once(story) -> None:
    assert story.second_output.count("span 4: attempt") == 2  # two retries, with back-off
    failed = [t for t in story.alerts if "run failed" in t]
    assert len(failed) == 1, story.alerts
    assert "CsvExampleGen" in failed[0]


def test_an_undeliverable_alert_is_logged_in_the_run_log(story) -> None:
    logs = "".join(p.read_text() for p in Path(story.config.log_dir).glob("*.log"))
    assert "not delivered to TFXP_ALERT_WEBHOOKS #2" in logs
    assert "HTTP 500" in logs


def test_push_made_the_model_champion(story) -> None:
    from metadata.lineage import Lineage
    from tfxp.models import registry

    lineage = Lineage(_store(story.config), "taxi")
    versions = registry.versions(lineage)
    champion = [v for v in versions if "champion" in v.aliases]
    assert len(champion) == 1
    link = Path(story.config.serving_dir) / "champion"
    assert os.readlink(link) == champion[0].version
    assert (link / "saved_model.pb").exists()
    assert lineage.resolve_model("champion").id == champion[0].model_id


def test_secrets_are_not_in_logs_or_ml_metadata(story) -> None:
    token = SECRET.split("/")[-1].encode()
    for path in [*Path(story.config.run_dir).rglob("*.log"), Path(story.config.metadata_path)]:
        assert token not in path.read_bytes(), path
    assert SECRET not in story.first_output + story.second_output
