"""A real webhook receiver on loopback for alert tests: records each POSTed JSON body.

`WebhookServer(behaviour)`: `behaviour(n)` -> (HTTP status, slow) for the n-th
request; a slow one holds the request until the server closes (longer than
any attempt of a sender may take).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The path part of a Slack webhook URL is its secret; tests check it never leaks.
SECRET = "T000/B000/s3cr3t-t0ken"


class WebhookServer:
    def __init__(self, behaviour=lambda n: (200, False)) -> None:
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server API
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                status, slow = behaviour(len(hook.bodies))
                hook.bodies.append(body)
                hook.paths.append(self.path)
                if slow:
                    hook.release.wait(30)
                try:
                    self.send_response(status)
                    self.end_headers()
                    self.wfile.write(b"ok" if status == 200 else b"no")
                except OSError:
                    pass  # the client gave up on us

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/services/{SECRET}"

    def texts(self) -> list[str]:
        return [b["text"] for b in self.bodies]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
