"""`python -m kubeflow deploy` against a test double of the KFP v2beta1 REST API.

The double (an in-process `http.server` on loopback) implements the requests
kfp 2.13's Client makes to upload a pipeline or a new version and start a run,
and checks that what it receives is the compiled spec. It stands in for a KFP
cluster, which these tests cannot reach.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from pipeline.config import PROJECT_ROOT

IMAGE = "registry.example.com/ml/tfx-pipeline:test"
ROOT = "gs://example-bucket/tfx/taxi"
API = "/apis/v2beta1"


class FakeKfp(ThreadingHTTPServer):
    """The KFP API server's pipeline, version, experiment and run endpoints, in memory."""

    daemon_threads = True

    def __init__(self, expected_spec: dict):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.expected_spec = expected_spec
        self.pipelines: dict[str, dict] = {}
        self.versions: dict[str, list[dict]] = {}
        self.experiments: dict[str, dict] = {}
        self.runs: list[dict] = []
        self.uploads: list[dict] = []  # every spec received, parsed
        self.requests: list[str] = []
        self.fail: dict[str, tuple[int, str]] = {}  # path suffix -> (status, message)
        self._ids = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def new_id(self, kind: str) -> str:
        self._ids += 1
        return f"{kind}-{self._ids:04d}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeKfp

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": message, "message": message, "code": status})

    def _route(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        path = url.path
        self.server.requests.append(f"{method} {path}")
        for suffix, (status, message) in self.server.fail.items():
            if path.endswith(suffix):
                return self._error(status, message)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        handler = {
            ("GET", f"{API}/healthz"): lambda: self._send(200, {"multi_user": False}),
            ("GET", f"{API}/pipelines"): lambda: self._list_pipelines(query),
            ("POST", f"{API}/pipelines/upload"): lambda: self._upload(query, body),
            ("POST", f"{API}/pipelines/upload_version"): lambda: self._upload_version(query, body),
            ("GET", f"{API}/experiments"): lambda: self._list_experiments(query),
            ("POST", f"{API}/experiments"): lambda: self._create_experiment(body),
            ("POST", f"{API}/runs"): lambda: self._create_run(body),
        }.get((method, path))
        if handler is None and method == "GET" and path.endswith("/versions"):
            pipeline_id = path.split("/")[-2]
            handler = lambda: self._list_versions(pipeline_id)  # noqa: E731
        if handler is None:
            return self._error(404, f"no route {method} {path}")
        return handler()

    def do_GET(self) -> None:  # http.server API
        self._route("GET")

    def do_POST(self) -> None:  # http.server API
        self._route("POST")

    # --- endpoints -----------------------------------------------------------

    def _received_spec(self, body: bytes) -> dict | None:
        """The multipart 'uploadfile', parsed and compared with the compiled spec."""
        message = email.parser.BytesParser(policy=email.policy.default).parsebytes(
            f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + body
        )
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "uploadfile":
                spec = yaml.safe_load(part.get_payload(decode=True))
                self.server.uploads.append(spec)
                if spec != self.server.expected_spec:
                    self._error(400, "uploaded spec differs from the compiled one")
                    return None
                return spec
        self._error(400, "no uploadfile in the request")
        return None

    def _version(self, pipeline_id: str, name: str) -> dict:
        version = {
            "pipeline_id": pipeline_id,
            "pipeline_version_id": self.server.new_id("version"),
            "display_name": name,
            "created_at": "2026-01-01T00:00:00Z",
        }
        self.server.versions.setdefault(pipeline_id, []).append(version)
        return version

    def _list_pipelines(self, query: dict) -> None:
        name = json.loads(query["filter"])["predicates"][0]["stringValue"]
        found = [p for p in self.server.pipelines.values() if p["display_name"] == name]
        self._send(200, {"pipelines": found, "total_size": len(found)} if found else {})

    def _upload(self, query: dict, body: bytes) -> None:
        spec = self._received_spec(body)
        if spec is None:
            return
        if spec["pipelineInfo"]["name"] != query["name"]:
            return self._error(400, "pipeline name differs from the spec's")
        pipeline = {
            "pipeline_id": self.server.new_id("pipeline"),
            "display_name": query["name"],
            "created_at": "2026-01-01T00:00:00Z",
        }
        self.server.pipelines[pipeline["pipeline_id"]] = pipeline
        self._version(pipeline["pipeline_id"], query["name"])
        self._send(200, pipeline)

    def _upload_version(self, query: dict, body: bytes) -> None:
        if query.get("pipelineid") not in self.server.pipelines:
            return self._error(404, f"pipeline {query.get('pipelineid')} not found")
        if self._received_spec(body) is not None:
            self._send(200, self._version(query["pipelineid"], query["name"]))

    def _list_versions(self, pipeline_id: str) -> None:
        versions = list(reversed(self.server.versions.get(pipeline_id, [])))  # newest first
        self._send(200, {"pipeline_versions": versions[:1], "total_size": len(versions)})

    def _list_experiments(self, query: dict) -> None:
        name = json.loads(query["filter"])["predicates"][0]["stringValue"]
        found = [e for e in self.server.experiments.values() if e["display_name"] == name]
        self._send(200, {"experiments": found} if found else {})

    def _create_experiment(self, body: bytes) -> None:
        request = json.loads(body)
        experiment = {"experiment_id": self.server.new_id("experiment"), **request}
        self.server.experiments[experiment["experiment_id"]] = experiment
        self._send(200, experiment)

    def _create_run(self, body: bytes) -> None:
        request = json.loads(body)
        ref = request.get("pipeline_version_reference") or {}
        known = {
            v["pipeline_version_id"] for v in self.server.versions.get(ref.get("pipeline_id"), [])
        }
        if ref.get("pipeline_version_id") not in known:
            return self._error(400, f"unknown pipeline version {ref}")
        if request.get("experiment_id") not in self.server.experiments:
            return self._error(400, "unknown experiment")
        run = {"run_id": self.server.new_id("run"), "state": "PENDING", **request}
        self.server.runs.append(run)
        self._send(200, run)


# --- fixtures ------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli(forkserver, home):
    """`python -m kubeflow ARGS`, forked from the session's fork server (a fresh
    interpreter would spend ~10 CPU-s importing TFX and kfp for each of these)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KFP_", "KF_PIPELINES"))}
    env["HOME"] = str(home)  # kfp reads ~/.config/kfp/context.json

    def run(*args: str) -> subprocess.CompletedProcess:
        return forkserver.run(
            [sys.executable, "-m", "kubeflow", *args],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def package(tmp_path_factory, cli) -> tuple[Path, dict]:
    """Compiled once by the CLI itself: (file, its pipelineSpec)."""
    out = tmp_path_factory.mktemp("kfp") / "taxi.json"
    result = cli("compile", "--image", IMAGE, "--pipeline-root", ROOT, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stdout
    return out, json.loads(out.read_text())["pipelineSpec"]


@pytest.fixture()
def kfp_server(package):
    server = FakeKfp(expected_spec=package[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def deploy(cli):
    def run(package: Path, host: str, *extra: str) -> subprocess.CompletedProcess:
        return cli("deploy", "--package", str(package), "--host", host, *extra)

    return run


# --- tests -----------------------------------------------------------------------


def test_deploy_creates_the_pipeline_then_new_versions(package, kfp_server, deploy):
    path, spec = package
    first = deploy(path, kfp_server.url)
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    run = kfp_server.runs[-1]
    assert f"run id: {run['run_id']}" in first.stdout
    assert f"run url: {kfp_server.url}/#/runs/details/{run['run_id']}" in first.stdout
    assert "created pipeline pipeline-" in first.stdout
    assert kfp_server.uploads == [spec]  # the compiled spec, unchanged
    assert run["runtime_config"]["pipeline_root"] == ROOT
    assert kfp_server.experiments[run["experiment_id"]]["display_name"] == "taxi"

    second = deploy(path, kfp_server.url, "--version-name", "v2", "--run-name", "again")
    assert second.returncode == 0, second.stderr
    assert "new version of pipeline" in second.stdout and "(version v2:" in second.stdout
    assert len(kfp_server.pipelines) == 1
    (pipeline_id,) = kfp_server.pipelines
    assert [v["display_name"] for v in kfp_server.versions[pipeline_id]] == ["taxi", "v2"]
    run = kfp_server.runs[-1]
    assert f"run id: {run['run_id']}" in second.stdout
    assert run["display_name"] == "again"
    assert (
        run["pipeline_version_reference"]["pipeline_version_id"]
        == (kfp_server.versions[pipeline_id][-1]["pipeline_version_id"])
    )
    assert kfp_server.uploads == [spec, spec]
    assert len(kfp_server.experiments) == 1  # reused by name


def test_server_checks_the_spec(package, kfp_server, tmp_path, deploy):
    """The double really compares: a different spec is refused, and the CLI says so."""
    path, spec = package
    job = json.loads(path.read_text())
    job["pipelineSpec"]["pipelineInfo"]["description"] = "edited"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(job))
    result = deploy(edited, kfp_server.url)
    assert result.returncode == 1
    assert "HTTP 400" in result.stderr and "differs from the compiled one" in result.stderr
    assert kfp_server.runs == []


def test_unreachable_endpoint(package, deploy):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = deploy(package[0], f"http://127.0.0.1:{port}", "--timeout", "3")
    assert result.returncode == 1
    assert f"error: cannot reach Kubeflow Pipelines at http://127.0.0.1:{port}" in result.stderr
    assert "Check --host / KFP_HOST" in result.stderr
    assert "Traceback" not in result.stderr


def test_rejected_upload(package, kfp_server, deploy):
    kfp_server.fail["/pipelines/upload"] = (500, "object store unavailable")
    result = deploy(package[0], kfp_server.url)
    assert result.returncode == 1
    assert "uploading pipeline 'taxi' failed: HTTP 500" in result.stderr
    assert "object store unavailable" in result.stderr
    assert "Traceback" not in result.stderr
    assert kfp_server.runs == []


def test_rejected_credentials(package, kfp_server, deploy):
    kfp_server.fail["/healthz"] = (401, "unauthenticated")
    result = deploy(package[0], kfp_server.url, "--token", "wrong")
    assert result.returncode == 1
    assert "refused the request (HTTP 401): pass a valid token" in result.stderr


def test_rejected_run(package, kfp_server, deploy):
    kfp_server.fail["/runs"] = (400, "pipeline root not writable")
    result = deploy(package[0], kfp_server.url)
    assert result.returncode == 1
    assert "starting the run failed: HTTP 400" in result.stderr
    assert "pipeline root not writable" in result.stderr


def test_deploy_without_host(package, cli):
    result = cli("deploy", "--package", str(package[0]))
    assert result.returncode == 1
    assert "no Kubeflow Pipelines endpoint: pass --host" in result.stderr
