"""TF Serving's REST API as a plain ASGI app (run by uvicorn): same paths, same JSON.

    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]              status
    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]/metadata     signature_def
    POST /v1/models/{name}[/versions/{v}|/labels/{l}]:predict      instances | inputs
    POST /v1/models/{name}[/versions/{v}|/labels/{l}]:classify     examples, context
    POST /v1/models/{name}[/versions/{v}|/labels/{l}]:regress      examples, context
    GET  /v1/health/live, /v1/health/ready, /monitoring/prometheus/metrics

No framework routing: one regular expression over the path (nothing in a URL
is ever used as a file name) and orjson, because the per-request overhead is
what this server adds over calling the model in-process. Every answer names
the version that answered (`X-Model-Version`, `X-Model-Label`) and the request
id (`X-Request-Id`, the client's or a new one). Client faults are 4xx with
`{"error": "..."}`; a 500 means a fault of the server's.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from runtime.access import log_refused
from serving import security
from serving.codec import (
    ClientError,
    example_list,
    predict_inputs,
    predict_response,
)
from serving.metrics import CONTENT_TYPE
from serving.repository import Resolved
from serving.service import PREDICT, Answer, Payload, Service, client_fault
from serving.status import metadata_json, status_json

log = logging.getLogger("serving")
MODEL_PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
    r"(?P<tail>/metadata|:predict|:classify|:regress)?$"
)
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
JSON = b"application/json"


@dataclass
class Reply:
    """An HTTP answer, with what the metrics count it under: the API and the version
    that answered (None: no model was resolved)."""

    status: int
    body: Any
    headers: list = field(default_factory=list)
    content_type: bytes = JSON
    api: str = "other"
    resolved: Resolved | None = None


class EarlyReply(Exception):
    """An answer before any model work (auth, a bad path, a body too large)."""

    def __init__(self, status: int, body: dict[str, Any], headers: list | None = None) -> None:
        super().__init__(status)
        self.reply = Reply(status, body, headers or [])


class RestApp:
    def __init__(
        self,
        service: Service,
        *,
        token: str | None = None,
        loopback: bool = True,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.service = service
        self.token = token
        self.loopback = loopback
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        try:
            reply = await self._handle(scope, receive)
        except EarlyReply as e:
            reply = e.reply
        except Exception as e:
            log.exception("error answering %s %s", scope.get("method"), scope.get("path"))
            reply = Reply(500, {"error": f"internal error: {e}"})
        data = reply.body if isinstance(reply.body, bytes) else orjson.dumps(reply.body)
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [
                    (b"content-type", reply.content_type),
                    (b"content-length", str(len(data)).encode()),
                    *reply.headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})
        if reply.api != "other":
            resolved = reply.resolved
            self.service.metrics.answered(
                self.service.model,
                str(resolved.version.version) if resolved else "",
                resolved.label if resolved else "",
                reply.api,
                reply.status,
                time.perf_counter() - started,
            )

    async def _handle(self, scope, receive) -> Reply:
        path, method = scope["path"], scope["method"]
        request_headers = dict(scope["headers"])
        # Health needs no token: it tells nothing but "up" (load balancers' probes).
        if path == "/v1/health/live" or path == "/healthz":
            return Reply(200, {"status": "alive"})
        if path == "/v1/health/ready" or path == "/readyz":
            ready = self.service.repository.ready
            return Reply(200 if ready else 503, {"ready": ready})
        problem = security.check(request_headers, self.token, self.loopback)
        if problem:
            client = scope.get("client") or ("?", 0)
            log_refused(log, problem[0], method, path, str(client[0]))
            raise EarlyReply(*problem)
        if path == "/monitoring/prometheus/metrics":
            return Reply(200, self.service.metrics.render(), content_type=CONTENT_TYPE.encode())
        m = MODEL_PATH.match(path)
        if not m:
            raise EarlyReply(404, {"error": f"no such path: {path} (the API is under /v1/models/)"})
        tail = m["tail"] or ""
        api = {"": "status", "/metadata": "metadata"}.get(tail, tail[1:])
        want = "POST" if tail.startswith(":") else "GET"
        if method != want:
            return Reply(405, {"error": f"{path} takes {want}, not {method}"}, api=api)
        resolved = None
        try:
            resolved = self.service.resolve(
                m["name"], m["version"], m["label"], _header(request_headers, b"x-request-key")
            )
            if want == "GET":
                return self._describe(tail, resolved, m["version"] is None and m["label"] is None)
            body = await self._json(receive, request_headers)
            payload, row_format = self._decode(api, body, request_headers)
            answer = await self.service.score(api, resolved, payload)
            encoded = self._encode(answer, row_format)
            return Reply(200, encoded, _named(answer), api=api, resolved=resolved)
        except EarlyReply as e:  # a body too large: counted under the API it was for
            return replace(e.reply, api=api, resolved=resolved)
        except Exception as e:
            fault = client_fault(e)
            if fault is None:
                raise  # the server's own fault: a 500 (__call__)
            headers = _named(resolved) if resolved is not None else []
            return Reply(fault[0], {"error": fault[1]}, headers, api=api, resolved=resolved)

    def _describe(self, tail: str, resolved: Resolved, whole_model: bool) -> Reply:
        """GET: a version's (or the model's) status, or a version's metadata."""
        if tail == "/metadata":
            body = metadata_json(resolved.version)
            return Reply(200, body, _named(resolved), api="metadata", resolved=resolved)
        if whole_model:
            versions = self.service.repository.state.versions
            return Reply(200, status_json(versions), api="status", resolved=resolved)
        body = status_json({0: resolved.version})
        return Reply(200, body, _named(resolved), api="status", resolved=resolved)

    def _decode(self, api: str, body: Any, headers: dict) -> tuple[Payload, bool]:
        """(the request as the service's Payload, whether :predict answers in rows:
        TF Serving's "instances" in, "predictions" out)."""
        rid = _header(headers, b"x-request-id")
        signature = body.get("signature_name") if isinstance(body, dict) else None
        if api == PREDICT:
            encoder = self.service.encoder

            def inputs(sig) -> tuple[dict, int]:
                decoded, rows, _ = predict_inputs(body, sig, encoder)
                return decoded, rows

            payload = Payload(signature, inputs=inputs, request_id=rid)
            return payload, isinstance(body, dict) and "instances" in body
        if self.service.encoder is None:
            raise ClientError(f":{api} needs a dataset whose schema types the features")
        examples = example_list(body, self.service.encoder)
        return Payload(signature, examples=examples, request_id=rid), False

    @staticmethod
    def _encode(answer: Answer, row_format: bool) -> dict:
        if answer.results is not None:
            return {"results": answer.results}
        return predict_response(answer.outputs, row_format)

    async def _json(self, receive, headers: dict) -> Any:
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise EarlyReply(413, {"error": self._too_large()})
        chunks, size = [], 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise EarlyReply(413, {"error": self._too_large()})
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        try:
            return orjson.loads(b"".join(chunks))
        except orjson.JSONDecodeError as e:
            raise ClientError(f"the request body is not valid JSON: {e}") from None

    def _too_large(self) -> str:
        return (
            f"the request body is larger than the limit of {self.max_body_bytes} bytes "
            "(`tfxp serve --max-request-bytes`)"
        )


def _header(headers: dict, name: bytes) -> str | None:
    value = headers.get(name)
    return value.decode("latin-1") if value else None


def _named(answered: Resolved | Answer) -> list:
    """The headers naming the version that answered (and the request id, once scored)."""
    if isinstance(answered, Answer):
        version, label, request_id = answered.version, answered.label, answered.request_id
    else:
        version, label, request_id = answered.version, answered.label, None
    out = [
        (b"x-model-version", str(version.version).encode()),
        (b"x-model-label", label.encode()),
    ]
    if request_id:
        out.append((b"x-request-id", request_id.encode("latin-1", "replace")))
    return out
