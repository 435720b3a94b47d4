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

import asyncio
import logging
import re
import time
from typing import Any

import orjson

from runtime.access import log_refused
from serving import security
from serving.codec import (
    ClientError,
    example_list,
    model_error,
    predict_inputs,
    predict_response,
)
from serving.metrics import CONTENT_TYPE
from serving.repository import NotFound
from serving.service import Service, classify_results, regress_results
from serving.status import metadata_json, status_json

log = logging.getLogger("serving")
MODEL_PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
    r"(?P<tail>/metadata|:predict|:classify|:regress)?$"
)
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
JSON = b"application/json"


class Answer(Exception):
    """An early answer: status and JSON body."""

    def __init__(self, status: int, body: dict[str, Any], headers: list | None = None) -> None:
        self.status, self.body, self.headers = status, body, headers or []


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
        labels = ["", "", "other"]  # version, label, api of the metrics
        headers: list = []
        try:
            status, body, headers, content_type = await self._handle(scope, receive, labels)
        except Answer as a:
            status, body, headers, content_type = a.status, a.body, a.headers, JSON
        except Exception as e:  # noqa: BLE001 - the server's own fault: say so, keep serving
            log.exception("error answering %s %s", scope.get("method"), scope.get("path"))
            status, body, content_type = 500, {"error": f"internal error: {e}"}, JSON
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type),
                    (b"content-length", str(len(data)).encode()),
                    *headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})
        if labels[2] != "other":
            self.service.metrics.answered(
                self.service.model,
                labels[0],
                labels[1],
                labels[2],
                status,
                time.perf_counter() - started,
            )

    async def _handle(self, scope, receive, labels: list):
        path, method = scope["path"], scope["method"]
        request_headers = dict(scope["headers"])
        # Health needs no token: it tells nothing but "up" (load balancers' probes).
        if path == "/v1/health/live" or path == "/healthz":
            return 200, {"status": "alive"}, [], JSON
        if path == "/v1/health/ready" or path == "/readyz":
            ready = self.service.repository.ready
            return (200 if ready else 503), {"ready": ready}, [], JSON
        problem = security.check(request_headers, self.token, self.loopback)
        if problem:
            client = scope.get("client") or ("?", 0)
            log_refused(log, problem[0], method, path, str(client[0]))
            raise Answer(*problem)
        if path == "/monitoring/prometheus/metrics":
            return 200, self.service.metrics.render(), [], CONTENT_TYPE.encode()
        m = MODEL_PATH.match(path)
        if not m:
            raise Answer(404, {"error": f"no such path: {path} (the API is under /v1/models/)"})
        tail = m["tail"] or ""
        labels[2] = {"": "status", "/metadata": "metadata"}.get(tail, tail[1:])
        want = "POST" if tail.startswith(":") else "GET"
        if method != want:
            raise Answer(405, {"error": f"{path} takes {want}, not {method}"})
        try:
            resolved = self.service.resolve(
                m["name"], m["version"], m["label"], _header(request_headers, b"x-request-key")
            )
            labels[0], labels[1] = str(resolved.version.version), resolved.label
            if want == "GET":
                if tail == "/metadata":
                    return 200, metadata_json(resolved.version), _named(resolved), JSON
                if m["version"] is None and m["label"] is None:
                    return 200, status_json(self.service.repository.state.versions), [], JSON
                return 200, status_json({0: resolved.version}), _named(resolved), JSON
            body = await self._json(receive, request_headers)
            rid = _header(request_headers, b"x-request-id")
            answer = await self._score(tail[1:], resolved, body, rid)
            return 200, answer[0], _named(resolved, answer[1]), JSON
        except NotFound as e:
            raise Answer(404, {"error": str(e)}) from None
        except ClientError as e:
            raise Answer(e.status, {"error": str(e)}, _named_maybe(labels)) from None

    async def _score(self, api: str, resolved, body: Any, request_id: str | None):
        svc = self.service
        if api == "predict":
            if not isinstance(body, dict):
                raise ClientError("the request body must be a JSON object")
            sig = svc.signature(resolved.version, body.get("signature_name"))
            inputs, rows, row_format = predict_inputs(body, sig, svc.encoder)
        else:
            if svc.encoder is None:
                raise ClientError(f":{api} needs a dataset whose schema types the features")
            sig = svc.examples_signature(
                resolved.version, body.get("signature_name") if isinstance(body, dict) else None
            )
            examples = example_list(body, svc.encoder)
            inputs, rows = {next(iter(sig.inputs)): _objects(examples)}, len(examples)
        call = svc.submit(resolved, sig, inputs, rows, request_id)
        outputs = await _await(call.future)
        svc.done(call, outputs)
        if api == "predict":
            answer = predict_response(outputs, row_format)
        elif api == "classify":
            answer = {"results": classify_results(outputs, rows, svc.class_names)}
        else:
            answer = {"results": regress_results(outputs, rows)}
        return answer, call.request_id

    async def _json(self, receive, headers: dict) -> Any:
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise Answer(413, {"error": self._too_large()})
        chunks, size = [], 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise Answer(413, {"error": self._too_large()})
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


async def _await(future):
    import tensorflow as tf

    try:
        return await asyncio.wrap_future(future)
    except tf.errors.InvalidArgumentError as e:
        # The model refused the input (e.g. bytes that are no tf.Example): the client's fault.
        raise ClientError(model_error(e.message)) from None


def _objects(values: list[bytes]):
    import numpy as np

    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _header(headers: dict, name: bytes) -> str | None:
    value = headers.get(name)
    return value.decode("latin-1") if value else None


def _named(resolved, request_id: str | None = None) -> list:
    out = [
        (b"x-model-version", str(resolved.version.version).encode()),
        (b"x-model-label", resolved.label.encode()),
    ]
    if request_id:
        out.append((b"x-request-id", request_id.encode("latin-1", "replace")))
    return out


def _named_maybe(labels: list) -> list:
    if not labels[0]:
        return []
    return [(b"x-model-version", labels[0].encode()), (b"x-model-label", labels[1].encode())]
