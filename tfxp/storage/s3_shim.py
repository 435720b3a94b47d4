"""A loopback relay between TensorFlow's S3 client (tensorflow-io) and the real store.

Why it exists: tensorflow-io 0.37.1, the last release for TensorFlow 2.16,
crashes the process (SIGSEGV) whenever a read starts at or past the end of
an object. S3 answers such a ranged GET with `416 Range Not Satisfiable`, and
the plugin's `ReadS3Client` then dereferences the body of the failed response.
TensorFlow reads at the end of a file all the time: every vocabulary table
(`TextFileInitializer`, via `InputBuffer::ReadLine`) does, so Transform, the
Trainer and the Evaluator die as soon as their artifacts live in a bucket. Its
other read path (multi-part download) returns the store's XML error body, or
zeros, as file content: silently wrong data. Both were reproduced here
against SeaweedFS; tests/s3/test_storage_s3.py keeps them honest.

The relay listens on 127.0.0.1 and forwards every request of TensorFlow's
client to the configured endpoint, re-signed (SigV4) with boto3's credentials
for that endpoint's host, so it works for any S3 endpoint, https included.
It changes two things: a 416 becomes an empty 206, which the plugin reads
as a clean end of file; and an object write (PUT, CopyObject, the start of a
multipart upload) gets the server-side encryption headers of `storage:`
(components/io/encryption.py), which tensorflow-io's client cannot send. Beam and our own code talk to the store
directly through boto3.

The relay adds credentials, so it must not serve anyone else on the machine:
it forwards only requests whose SigV4 signature verifies against the same
secret key (TensorFlow's client signs with it too), answers 403 otherwise,
and lives only as long as the `tfxp` process that started it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

# Headers that describe one hop or that the relay signs afresh.
_DROP = {
    "host",
    "authorization",
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",
    "expect",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
}
_DROP_RESPONSE = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class S3Relay:
    """The running relay; `endpoint` is what TensorFlow's client should use."""

    def __init__(self, upstream: str, region: str) -> None:
        import boto3
        import urllib3

        from components.io.encryption import from_env

        self.upstream = upstream.rstrip("/")
        self.region = region
        # Read once: the parent exported it before starting the relay (storage.py).
        self.sse_headers = from_env().s3_headers()
        self._session = boto3.session.Session()
        self._pool = urllib3.PoolManager(maxsize=32, retries=False, timeout=urllib3.Timeout(300))
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 300  # a client that stops sending mid-request frees its thread

            def log_message(self, fmt: str, *args) -> None:  # quiet: TF's client is chatty
                log.debug("s3 relay: " + fmt, *args)

            def _forward(self) -> None:
                relay.forward(self)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="s3-relay", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def forward(self, h: BaseHTTPRequestHandler) -> None:
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest

        if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = _read_chunked(h)
        else:
            length = int(h.headers.get("Content-Length") or 0)
            body = h.rfile.read(length) if length else b""
        credentials = self._session.get_credentials()
        frozen = credentials.get_frozen_credentials() if credentials is not None else None
        if frozen is None or not signature_matches(h, body, frozen.secret_key):
            _plain_reply(
                h, 403, b"s3 relay: request not signed with this process's AWS credentials"
            )
            return
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _DROP}
        if self.sse_headers and writes_object(h.command, h.path):
            present = {k.lower() for k in headers}
            headers.update({k: v for k, v in self.sse_headers.items() if k not in present})
        url = self.upstream + h.path
        request = AWSRequest(method=h.command, url=url, data=body, headers=headers)
        try:
            S3SigV4Auth(frozen, "s3", self.region).add_auth(request)
            prepared = request.prepare()
            response = self._pool.request(
                h.command,
                url,
                body=body or None,
                headers=dict(prepared.headers.items()),
                preload_content=True,
                redirect=False,
            )
        except Exception as e:  # noqa: BLE001 - upstream down: a 503 the SDK retries, then reports
            _plain_reply(h, 503, f"s3 relay: {self.upstream} unreachable: {e}".encode())
            return
        status, data = response.status, response.data
        if status == 416 and h.command == "GET":
            # The one change: past the end is an empty read, not an error.
            h.send_response(206)
            h.send_header("Content-Length", "0")
            h.send_header("Content-Type", "application/octet-stream")
            h.end_headers()
            return
        h.send_response(status)
        for k, v in response.headers.items():
            if k.lower() not in _DROP_RESPONSE:
                h.send_header(k, v)
        if h.command == "HEAD":
            h.send_header("Content-Length", response.headers.get("Content-Length", "0"))
            h.end_headers()
            return
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


def writes_object(method: str, path: str) -> bool:
    """PutObject and CopyObject (PUT without partNumber) or CreateMultipartUpload
    (POST ?uploads): the requests that decide how an object is stored."""
    from urllib.parse import parse_qs

    query = parse_qs(path.partition("?")[2], keep_blank_values=True)
    if method == "PUT":
        subresource = {"partNumber", "tagging", "acl", "retention", "legal-hold"} & set(query)
        return not subresource and "/" in path.partition("?")[0].lstrip("/")
    return method == "POST" and "uploads" in query


def _plain_reply(h: BaseHTTPRequestHandler, status: int, message: bytes) -> None:
    """The relay's own answer (not upstream's): a status and a line of text."""
    h.send_response(status)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Length", str(len(message)))
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(message)


def _sha256(data: bytes | str) -> str:
    import hashlib

    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def signature_matches(h: BaseHTTPRequestHandler, body: bytes, secret_key: str) -> bool:
    """True when the request's AWS SigV4 signature was made with `secret_key`."""
    import hmac
    import re
    from urllib.parse import parse_qsl, quote

    auth = h.headers.get("Authorization", "")
    m = re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
        r"SignedHeaders=([^,]+),\s*Signature=([0-9a-f]+)",
        auth.strip(),
    )
    amz_date = h.headers.get("X-Amz-Date")
    if not m or not amz_date:
        return False
    _, date, region, service, signed, signature = m.groups()
    path, _, query = h.path.partition("?")
    canonical_query = "&".join(
        sorted(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
            for k, v in parse_qsl(query, keep_blank_values=True)
        )
    )
    names = signed.split(";")
    canonical_headers = "".join(
        f"{n}:{' '.join(str(h.headers.get(n, '')).split())}\n" for n in names
    )
    payload = h.headers.get("X-Amz-Content-Sha256") or _sha256(body)
    canonical = "\n".join(
        [h.command, path or "/", canonical_query, canonical_headers, signed, payload]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{_sha256(canonical)}"
    key = f"AWS4{secret_key}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), "sha256").digest()
    expected = hmac.new(key, to_sign.encode(), "sha256").hexdigest()
    return hmac.compare_digest(expected, signature)


def _read_chunked(h: BaseHTTPRequestHandler) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            h.rfile.readline()
            return b"".join(parts)
        parts.append(h.rfile.read(size))
        h.rfile.readline()


_relay: subprocess.Popen | None = None
_endpoint: str | None = None
RELAY_START_TIMEOUT = 60.0  # seconds; it only imports boto3 and binds a port


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    """The child's first line of stdout, or "" if it says nothing within `timeout`."""
    got: list[str] = []
    reader = threading.Thread(
        target=lambda: got.append(proc.stdout.readline() if proc.stdout else ""), daemon=True
    )
    reader.start()
    reader.join(timeout)
    return got[0].strip() if got else ""


def start_relay(upstream: str, region: str) -> str:
    """Starts the process's relay once; returns the endpoint TensorFlow should use.

    The relay runs in a child process, not a thread: some TensorFlow calls
    (e.g. reading a SavedModel's fingerprint) hold the GIL while their S3
    request waits, which would deadlock a relay served by Python threads here.
    The child exits when its stdin closes, i.e. when this process ends however
    it ends (os._exit and SIGKILL included).
    """
    global _relay, _endpoint
    if _relay is not None and _relay.poll() is None and _endpoint:
        return _endpoint
    if not urlsplit(upstream).scheme:
        raise ValueError(f"S3 endpoint {upstream!r} needs a scheme (http:// or https://)")
    _relay = subprocess.Popen(  # noqa: S603 - this interpreter on the relay's own module, no shell
        [sys.executable, "-m", "tfxp.storage.s3_shim", upstream, region],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    line = _first_line(_relay, RELAY_START_TIMEOUT)
    if not line.startswith("http://"):
        _relay.kill()
        raise RuntimeError(
            f"the S3 relay for TensorFlow did not start within {RELAY_START_TIMEOUT:.0f} s "
            f"(said {line!r})"
        )
    _endpoint = line
    return _endpoint


def _serve(upstream: str, region: str) -> None:
    relay = S3Relay(upstream, region)
    print(relay.endpoint, flush=True)
    sys.stdin.read()  # until the parent goes away
    os._exit(0)


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
