"""Byte-range reads for the Arrow ingest (components/io/object_storage.py), without a real store.

Which filesystem and endpoint a path gets, from the same environment as every
other S3 client of the project; gs:// read end to end against a minimal fake of
the GCS JSON API on loopback (metadata + ranged media downloads). The real S3
read is tested against SeaweedFS in tests/s3/test_arrow_ingest_s3.py; Google
Cloud Storage itself is never reached from here.
"""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pyarrow.fs as pafs
import pytest

from components.example_gen import arrow_csv, csv_ingest
from components.io import object_storage

ENV_NAMES = (
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "S3_ENDPOINT",
    "S3_USE_HTTPS",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_MAX_ATTEMPTS",
    "STORAGE_EMULATOR_HOST",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def _options(filesystem: pafs.FileSystem) -> dict:
    """The options a pyarrow filesystem was built with (what it pickles)."""
    return filesystem.__reduce__()[1][0]


@pytest.mark.parametrize(
    "env,scheme,host",
    [
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:8333"}, "http", "127.0.0.1:8333"),
        (
            {"AWS_ENDPOINT_URL_S3": "https://s3.example.com", "AWS_ENDPOINT_URL": "http://x:1"},
            "https",
            "s3.example.com",
        ),
        ({"S3_ENDPOINT": "localhost:9000", "S3_USE_HTTPS": "0"}, "http", "localhost:9000"),
    ],
)
def test_s3_endpoint_comes_from_the_projects_variables(monkeypatch, env, scheme, host):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "4")
    options = object_storage.s3_options()
    assert (options["scheme"], options["endpoint_override"], options["region"]) == (
        scheme,
        host,
        "eu-west-3",
    )
    filesystem, within = object_storage.filesystem_for("s3://bucket/taxi/span-1/data.csv")
    assert filesystem.type_name == "s3" and within == "bucket/taxi/span-1/data.csv"
    built = _options(filesystem)
    assert (built["scheme"], built["endpoint_override"]) == (scheme, host)


def test_an_endpoint_with_a_path_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8333/s3")
    with pytest.raises(object_storage.RangeReadError, match="AWS_ENDPOINT_URL"):
        object_storage.filesystem_for("s3://bucket/x.csv")


def test_gcs_uses_the_emulator_variable_without_credentials(monkeypatch):
    assert object_storage.gcs_options() == {}  # Google's endpoint, default credentials
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "localhost:9023")
    filesystem, within = object_storage.filesystem_for("gs://bucket/a/b.csv")
    assert filesystem.type_name == "gcs" and within == "bucket/a/b.csv"
    built = _options(filesystem)
    assert (built["anonymous"], built["scheme"], built["endpoint_override"]) == (
        True,
        "http",
        "localhost:9023",
    )


@pytest.mark.parametrize(
    "path,message",
    [("hdfs://nn/data.csv", "not hdfs://"), ("s3:///key.csv", "no bucket")],
)
def test_paths_it_cannot_read_are_named(path, message):
    with pytest.raises(object_storage.RangeReadError, match=message):
        object_storage.open_ranges(path)


def test_a_missing_local_file_is_a_range_read_error(tmp_path):
    with pytest.raises(object_storage.RangeReadError, match="missing.csv"):
        object_storage.open_ranges(str(tmp_path / "missing.csv"))
    with pytest.raises(arrow_csv.ArrowCsvError, match="missing.csv"):
        arrow_csv.data_start(str(tmp_path / "missing.csv"))


class _FakeGcs(BaseHTTPRequestHandler):
    """Object metadata (JSON API) and media downloads with Range, as GCS answers them."""

    protocol_version = "HTTP/1.1"
    objects: dict[str, bytes] = {}
    ranges: list[str | None] = []

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-goog-generation", "1")
        self.end_headers()
        with contextlib.suppress(OSError):  # the client read what it wanted and closed
            self.wfile.write(body)

    def do_GET(self) -> None:  # http.server's name
        path = self.path.split("?", 1)[0]
        if path.startswith("/storage/v1/b/"):  # metadata: /storage/v1/b/BUCKET/o/NAME
            _, _, _, _, bucket, _, name = path.split("/", 6)
            data = self.objects.get(f"{bucket}/{unquote(name)}")
            if data is None:
                return self._send(404, b"{}", "application/json")
            meta = {"bucket": bucket, "name": unquote(name), "size": str(len(data))}
            meta |= {"generation": "1", "metageneration": "1", "kind": "storage#object"}
            return self._send(200, json.dumps(meta).encode(), "application/json")
        data = self.objects.get(unquote(path.lstrip("/")))  # media: /BUCKET/NAME
        if data is None:
            return self._send(404, b"", "text/plain")
        wanted = self.headers.get("Range")
        self.ranges.append(wanted)
        if not wanted:
            return self._send(200, data, "text/csv")
        first, _, last = wanted.removeprefix("bytes=").partition("-")
        end = min(int(last) + 1 if last else len(data), len(data))
        return self._send(206, data[int(first) : end], "text/csv")


@pytest.fixture
def fake_gcs(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeGcs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"127.0.0.1:{server.server_port}")
    _FakeGcs.objects, _FakeGcs.ranges = {}, []
    try:
        yield _FakeGcs
    finally:
        server.shutdown()
        server.server_close()


def test_gs_byte_ranges_read_the_same_blocks_as_the_local_file(tmp_path, fake_gcs):
    lines = [f"{i},{'x' * (i % 97)}\n".encode() for i in range(20000)]
    data = b"\xef\xbb\xbfa,b\n" + b"".join(lines)
    local = tmp_path / "data.csv"
    local.write_bytes(data)
    fake_gcs.objects["bucket/span-1/data.csv"] = data
    remote = "gs://bucket/span-1/data.csv"
    start = arrow_csv.data_start(remote)
    assert start == arrow_csv.data_start(str(local)) == len(b"\xef\xbb\xbfa,b\n")
    plan_local = csv_ingest.plan_tasks([(str(local), start, len(data), 0)], 3)
    plan_remote = csv_ingest.plan_tasks([(remote, start, len(data), 0)], 3)
    for ours, theirs in zip(plan_local, plan_remote, strict=True):
        (piece_local,), (piece_remote,) = ours, theirs
        assert list(csv_ingest.read_blocks(piece_remote, start, 64 * 1024)) == list(
            csv_ingest.read_blocks(piece_local, start, 64 * 1024)
        )
    # Each piece is streamed from where it starts, not downloaded whole.
    assert any(r and r.startswith("bytes=") and r != "bytes=0-" for r in fake_gcs.ranges)


def test_gs_object_that_does_not_exist_is_named(fake_gcs):
    with pytest.raises(arrow_csv.ArrowCsvError, match="gs://bucket/none.csv"):
        list(csv_ingest.read_blocks(csv_ingest.Piece("gs://bucket/none.csv", 0, 10, 0), 0))


def test_local_blocks_are_read_with_bounded_reads(tmp_path, monkeypatch):
    path = tmp_path / "data.csv"
    path.write_bytes(b"h\n" + b"".join(f"{i}\n".encode() for i in range(100000)))
    sizes: list[int] = []
    real_open = object_storage.open_ranges

    class Recording:
        def __init__(self, f) -> None:
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.f.close()

        def __getattr__(self, name):
            return getattr(self.f, name)

        def read(self, n: int) -> bytes:
            sizes.append(n)
            return self.f.read(n)

    monkeypatch.setattr(object_storage, "open_ranges", lambda p: Recording(real_open(p)))
    piece = csv_ingest.Piece(str(path), 2, path.stat().st_size, 0)
    blocks = list(csv_ingest.read_blocks(piece, 2, 4096))
    assert b"".join(blocks) == path.read_bytes()[2:]
    assert sizes and max(sizes) <= 1 << 16  # a block, or the 64 KiB line-boundary probe


def test_content_fingerprint_of_a_gs_object_is_the_local_files(tmp_path, fake_gcs):
    from components.io.content_fingerprint import files_sha256

    data = b"a,b\n" + b"".join(f"{i},{i * i}\n".encode() for i in range(300000))
    (tmp_path / "span-1").mkdir()
    (tmp_path / "span-1" / "data.csv").write_bytes(data)
    fake_gcs.objects["bucket/taxi/span-1/data.csv"] = data
    remote = files_sha256(["gs://bucket/taxi/span-1/data.csv"], "gs://bucket/taxi")
    assert remote == files_sha256([str(tmp_path / "span-1" / "data.csv")], str(tmp_path))
    assert remote[1] == len(data) > 2 * 1024 * 1024  # more than one chunk
    assert fake_gcs.ranges, "not read through Arrow's GCS client"
