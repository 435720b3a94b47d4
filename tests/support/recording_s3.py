"""A loopback S3 endpoint that records every request and forwards it to a real store.

Clients point at it as they would at the store. It forwards each request
unchanged (the Host header included, so a SigV4 signature made for this
endpoint still verifies at the store) and keeps (method, path, headers), so a
test can check what a writer sent with every PUT and multipart upload.
"""

from __future__ import annotations

import http.client
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query, keep_blank_values=True)

    @property
    def writes_object(self) -> bool:
        """PutObject / CopyObject, or the start of a multipart upload."""
        bucket_and_key = urlsplit(self.path).path.lstrip("/")
        if self.method == "PUT":
            return "/" in bucket_and_key and not {"partNumber", "tagging", "acl"} & set(self.query)
        return self.method == "POST" and "uploads" in self.query


class RecordingS3:
    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        self.requests: list[Recorded] = []
        lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args) -> None:
                pass

            def _forward(self) -> None:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body = _read_chunked(self)
                else:
                    body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                with lock:
                    recorder.requests.append(
                        Recorded(
                            self.command, self.path, {k.lower(): v for k, v in headers.items()}
                        )
                    )
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                try:
                    if body or self.command in ("PUT", "POST"):
                        headers["Content-Length"] = str(len(body))
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                finally:
                    conn.close()
                self.send_response(response.status)
                for k, v in response.getheaders():
                    if k.lower() not in _HOP:
                        self.send_header(k, v)
                length = response.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def object_writes(self) -> list[Recorded]:
        return [r for r in self.requests if r.writes_object]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _read_chunked(h: BaseHTTPRequestHandler) -> bytes:
    parts = []
    while True:
        size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            h.rfile.readline()
            return b"".join(parts)
        parts.append(h.rfile.read(size))
        h.rfile.readline()
