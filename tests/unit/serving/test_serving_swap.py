"""`tfxp serve` under load (loopback, bounded in count and time): three hot swaps
(promote, rollback, a new push) with 0 failed requests, every answer naming its
version; and request logs written under load survive a SIGKILL of the server."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import grpc
import httpx
import pytest
from serving_support import Running, b64, free_port, raw_rows, read_log

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[3]
CLIENTS = 6  # REST clients, each one request at a time (constant concurrency)
MAX_SECONDS = 120  # the load stops by then whatever happens (a hang guard, not a target)


@pytest.fixture()
def own_run(serving_run, tmp_path):
    """The shared run's serving folder and ML Metadata store, copied: swaps here move
    aliases that other tests read."""
    config = serving_run.config.replace(run_dir=str(tmp_path / "run"))
    shutil.copytree(serving_run.config.serving_dir, config.serving_dir, symlinks=True)
    shutil.copy(serving_run.config.metadata_path, config.metadata_path)
    return config


class Load:
    """Clients sending one-example :predict requests until stopped; every outcome kept."""

    def __init__(self, url: str, grpc_address: str | None, example: bytes) -> None:
        self.url, self.grpc_address, self.example = url, grpc_address, example
        self.versions: list[str] = []  # every answer's version, in order of arrival
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._rest) for _ in range(CLIENTS)]
        if grpc_address:
            self.threads.append(threading.Thread(target=self._grpc))
        self.deadline = time.monotonic() + MAX_SECONDS

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _record(self, version: str | None, failure: str | None) -> None:
        with self.lock:
            if failure:
                self.failures.append(failure)
            else:
                self.versions.append(version)

    def _running(self) -> bool:
        return not self.stop.is_set() and time.monotonic() < self.deadline

    def _rest(self) -> None:
        body = {"instances": [b64(self.example)]}
        with httpx.Client(base_url=self.url, timeout=60) as c:
            while self._running():
                try:
                    r = c.post("/v1/models/taxi:predict", json=body)
                except httpx.HTTPError as e:
                    self._record(None, f"REST {type(e).__name__}: {e}")
                    continue
                ok = r.status_code == 200 and "x-model-version" in r.headers
                self._record(
                    r.headers.get("x-model-version"),
                    None if ok else f"REST {r.status_code} {r.text}",
                )

    def _grpc(self) -> None:
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

        req = predict_pb2.PredictRequest()
        req.model_spec.name = "taxi"
        req.inputs["examples"].CopyFrom(tf.make_tensor_proto([self.example], dtype=tf.string))
        with grpc.insecure_channel(self.grpc_address) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            while self._running():
                try:
                    resp = stub.Predict(req, timeout=60)
                    self._record(str(resp.model_spec.version.value), None)
                except grpc.RpcError as e:
                    self._record(None, f"gRPC {e.code()}: {e.details()}")

    def wait_for(self, version: str, after: int) -> int:
        """Waits until an answer after the `after`-th names `version`; returns its index."""
        while self._running():
            with self.lock:
                for i in range(after, len(self.versions)):
                    if self.versions[i] == version:
                        return i
            time.sleep(0.05)
        raise AssertionError(f"version {version} never answered; failures: {self.failures[:3]}")


def _push_copy(config, source: str) -> str:
    """A new version as the Pusher publishes one (a hidden folder renamed into place),
    and the champion pointed at it as `mark_push` points it (tfxp.models.registry.point)."""
    from metadata.aliases import AliasChange
    from tfxp.models import registry

    version = str(int(source) + 1)
    tmp = Path(config.serving_dir, f".incoming-{uuid.uuid4().hex}")
    shutil.copytree(Path(config.serving_dir, source), tmp)
    final = Path(config.serving_dir, version)
    os.rename(tmp, final)
    change = AliasChange(0, "champion", "push", 0, version, None, source, "test", "a push", "now")
    registry.point(config.serving_dir, change, registry.ModelVersion(version, 0, str(final), None))
    return version


def test_three_hot_swaps_under_load_fail_no_request(serving_run, own_run) -> None:
    from metadata.lineage import Lineage
    from metadata.store import location_from, open_store
    from tfxp.models import registry

    def lineage() -> Lineage:
        store = open_store(location_from(run_dir=own_run.local_dir), writable=True)
        return Lineage(store, own_run.pipeline_name)

    old, new = serving_run.old, serving_run.new
    examples, _ = raw_rows(own_run, serving_run.csv_path)
    server = Running(own_run, poll_seconds=0.2, log_fraction=0)
    try:
        repository = server.server.repository

        def champion_is(version: str) -> None:
            # Some of the load asks for the newest version, which may already be `version`
            # before the champion moves: each swap is applied before the next one starts.
            deadline = time.monotonic() + 60
            while repository.state.labels.get("champion") != int(version):
                assert time.monotonic() < deadline, f"champion never became {version}"
                time.sleep(0.05)

        with Load(server.url, server.grpc, examples[0]) as load:
            at = load.wait_for(new, 0)
            registry.promote(own_run, lineage(), old, why="swap 1: promote")
            champion_is(old)
            at = load.wait_for(old, at)
            registry.rollback(own_run, lineage(), why="swap 2: rollback")
            champion_is(new)
            at = load.wait_for(new, at)
            pushed = _push_copy(own_run, new)
            champion_is(pushed)
            at = load.wait_for(pushed, at)
            time.sleep(0.5)  # answers after the last swap, too
        page = httpx.get(f"{server.url}/monitoring/prometheus/metrics").text
    finally:
        server.close()
    assert load.failures == []
    seen = Counter(load.versions)
    assert set(seen) == {old, new, pushed}, seen
    assert sum(seen.values()) > 100, seen
    assert server.server.repository.swaps >= 4  # the first load and three swaps
    assert 'code="5' not in page


def _serve_command(config, port: int, log_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "tfxp.cli", "serve",
        "--run-dir", config.run_dir, "--data-root", config.data_root,
        "--port", str(port), "--grpc-port", "0",
        "--log-dir", str(log_dir), "--log-max-seconds", "1",
    ]  # fmt: skip


def test_request_logs_written_under_load_survive_a_sigkill(serving_run, forkserver, tmp_path):
    log_dir = tmp_path / "serving-log"
    port = free_port()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
    proc = forkserver.popen(
        _serve_command(serving_run.config, port, log_dir),
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, "tfxp serve exited"
            assert time.monotonic() < deadline, "tfxp serve never became ready"
            try:
                if httpx.get(f"{url}/v1/health/ready").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        examples, _ = raw_rows(serving_run.config, serving_run.csv_path)
        with Load(url, None, examples[0]) as load:
            while len(load.versions) < 300 or not list(log_dir.glob("requests-*")):
                assert time.monotonic() < load.deadline, load.failures[:3]
                time.sleep(0.2)
            proc.send_signal(signal.SIGKILL)  # mid-write: no chance to publish anything
            proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    published = sorted(log_dir.glob("requests-*.tfrecord.gz"))
    assert published
    records = [r for p in published for r in read_log(str(p))]  # raises on a corrupt file
    assert records and all(
        r.features.feature["__version"].int64_list.value == [int(serving_run.new)] for r in records
    )

    from serving.request_log import published_files, salvage

    salvaged = salvage(str(log_dir))  # what the next server does at start
    assert not [p for p in os.listdir(log_dir) if p.startswith(".")]
    for path in salvaged:
        assert read_log(path)
    assert len(published_files(str(log_dir))) == len(published) + len(salvaged)


def test_shadow_scores_with_the_challenger_and_split_is_sticky(serving_run, own_run, tmp_path):
    from metadata.lineage import Lineage
    from metadata.store import location_from, open_store
    from tfxp.models import registry

    old, new = serving_run.old, serving_run.new
    store = open_store(location_from(run_dir=own_run.local_dir), writable=True)
    registry.promote(own_run, Lineage(store, own_run.pipeline_name), old, "challenger")
    examples, _ = raw_rows(own_run, serving_run.csv_path)
    body = {"instances": [b64(e) for e in examples[:3]]}

    shadow = Running(own_run, shadow=True, log_dir=str(tmp_path / "log"), grpc_port=None)
    try:
        r = httpx.post(
            f"{shadow.url}/v1/models/taxi:predict", json=body, headers={"x-request-id": "abc"}
        )
        assert r.status_code == 200 and r.headers["x-model-version"] == new
        deadline = time.monotonic() + 30
        logged = shadow.server.metrics.registry.get_sample_value
        while (logged("tfxp_serving_logged_examples_total", {"model": "taxi"}) or 0) < 6:
            assert time.monotonic() < deadline, "the shadow answer was never logged"
            time.sleep(0.05)
        shadow.server.request_log.rotate()
        records = [x for p in shadow.server.request_log.published for x in read_log(p)]
    finally:
        shadow.close()
    roles = Counter(
        (
            x.features.feature["__role"].bytes_list.value[0],
            x.features.feature["__version"].int64_list.value[0],
            x.features.feature["__request_id"].bytes_list.value[0],
        )
        for x in records
    )
    assert roles == {(b"served", int(new), b"abc"): 3, (b"shadow", int(old), b"abc"): 3}

    split = Running(own_run, split="challenger=50", log_fraction=0, grpc_port=None)
    try:
        with httpx.Client(base_url=split.url) as c:

            def label(key: str) -> str:
                r = c.post("/v1/models/taxi:predict", json=body, headers={"x-request-key": key})
                assert r.status_code == 200
                return r.headers["x-model-label"]

            sides = {k: label(k) for k in map(str, range(40))}
            assert {k: label(k) for k in sides} == sides  # sticky
            assert set(sides.values()) == {"champion", "challenger"}
            r = c.post(f"/v1/models/taxi/versions/{new}:predict", json=body)
            assert r.headers["x-model-label"] == ""  # a named version is never split
    finally:
        split.close()
