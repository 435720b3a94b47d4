"""What the REST and gRPC front ends share: resolve, score, answer, log, A/B.

A front end decodes a request, then asks the service:
- `Service.resolve`: the model/version/label it names (with the A/B split
  applied to requests that name neither);
- `Service.score(api, resolved, payload)`: the signature the API uses, the
  payload decoded for it, queued on that version's batcher; awaited (REST) or
  waited for (gRPC), it gives an `Answer(outputs, version, request_id)` after
  the answer is counted, logged (sampled by `--log-fraction`) and, in shadow
  mode, the same inputs queued on the challenger, whose outputs are logged with
  role `shadow` and never returned.
The front end encodes the Answer. `client_fault` is the one mapping of a
request's faults (NotFound, ClientError, the model refusing its input) to a
status, which REST answers as is and gRPC as its status code.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
import uuid
from collections.abc import Callable, Generator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from serving.batching import Batcher
from serving.codec import ClientError, ExampleEncoder, SequenceExampleEncoder, model_error
from serving.metrics import Metrics
from serving.models import LoadedVersion, Signature
from serving.pointers import CHALLENGER
from serving.repository import NotFound, Repository, Resolved
from serving.request_log import SERVED, SHADOW, Entry, RequestLog, main_output

DEFAULT_SIGNATURE = "serving_default"


@dataclass(frozen=True)
class Split:
    """`--split challenger=10`: this share (percent) of unaddressed requests go to `label`."""

    label: str
    percent: float

    @classmethod
    def parse(cls, text: str) -> Split:
        label, _, share = text.partition("=")
        try:
            percent = float(share)
        except ValueError:
            percent = -1.0
        if not label or not 0 <= percent <= 100:
            raise ValueError(
                f"--split {text!r}: expected LABEL=PERCENT with PERCENT from 0 to 100 "
                "(e.g. challenger=10)"
            )
        return cls(label, percent)

    def chooses(self, key: str | None) -> bool:
        if key:  # sticky: the same key always lands on the same side
            digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
            return int.from_bytes(digest, "big") % 10_000 < self.percent * 100
        return random.random() * 100 < self.percent  # noqa: S311 - a traffic split, not a secret


# The APIs `Service.score` answers: :predict takes the signature's own inputs,
# :classify and :regress serialized tf.Examples.
PREDICT, CLASSIFY, REGRESS = "predict", "classify", "regress"
APIS = (PREDICT, CLASSIFY, REGRESS)


@dataclass(frozen=True)
class Payload:
    """A decoded request. :predict: `inputs`, a function of the signature the service
    picks -> (inputs, rows), since which inputs exist depends on it; :classify and
    :regress: `examples`, serialized tf.Examples."""

    signature_name: str | None = None
    inputs: Callable[[Signature], tuple[dict[str, np.ndarray], int]] | None = None
    examples: list[bytes] | None = None
    request_id: str | None = None


@dataclass(frozen=True)
class Answer:
    """What answered and how: the outputs, the version (and label) that gave them,
    the request id, and for :classify/:regress the results in TF Serving's shape."""

    outputs: dict[str, np.ndarray]
    version: LoadedVersion
    request_id: str
    label: str
    signature: str
    rows: int
    results: list | None = None


def client_fault(e: BaseException) -> tuple[int, str] | None:
    """A request's fault as (HTTP status, message); None: the server's own fault."""
    if isinstance(e, NotFound):
        return 404, str(e)
    if isinstance(e, ClientError):
        return e.status, str(e)
    return None


@dataclass
class Call:
    resolved: Resolved
    signature: Signature
    inputs: dict[str, np.ndarray]
    rows: int
    future: Future
    request_id: str
    started: float

    @property
    def version(self) -> LoadedVersion:
        return self.resolved.version


class Service:
    def __init__(
        self,
        repository: Repository,
        metrics: Metrics,
        encoder: ExampleEncoder | SequenceExampleEncoder | None,
        *,
        request_log: RequestLog | None = None,
        shadow: bool = False,
        split: Split | None = None,
        class_names: list[str] | None = None,
        log_inputs: dict[str, str] | None = None,
    ) -> None:
        self.repository = repository
        self.metrics = metrics
        self.encoder = encoder
        self.request_log = request_log
        self.shadow = shadow
        self.split = split
        self.class_names = class_names
        # A signature input -> the raw column it is logged as (image_bytes -> image).
        self.log_inputs = log_inputs or {}

    @property
    def model(self) -> str:
        return self.repository.model

    def resolve(
        self, model: str, version: str | None, label: str | None, key: str | None = None
    ) -> Resolved:
        if version is None and label is None and self.split is not None:
            self.repository.resolve(model)  # unknown model: its 404 first
            if self.split.chooses(key):
                challenger = self.repository.label_of(self.split.label)
                if challenger is not None:
                    return Resolved(challenger, self.split.label)
        return self.repository.resolve(model, version, label)

    @staticmethod
    def signature(version: LoadedVersion, name: str | None) -> Signature:
        name = name or DEFAULT_SIGNATURE
        sig = version.signatures.get(name)
        if sig is None:
            known = ", ".join(sorted(version.signatures))
            raise ClientError(
                f"signature {name!r} not found in version {version.version} (it has: {known})",
                404,
            )
        return sig

    def examples_signature(self, version: LoadedVersion, name: str | None) -> Signature:
        """The signature :classify/:regress use: one that takes serialized tf.Examples."""
        if name:
            sig = self.signature(version, name)
            if not sig.takes_examples:
                raise ClientError(f"signature {name!r} does not take serialized tf.Examples")
            return sig
        for sig in sorted(version.signatures.values(), key=lambda s: s.name != DEFAULT_SIGNATURE):
            if sig.takes_examples:
                return sig
        raise ClientError(f"version {version.version} has no signature that takes tf.Examples")

    def score(self, api: str, resolved: Resolved, payload: Payload) -> Scoring:
        """Queues `payload` on the version `resolved` names, for `api` (APIS). The
        returned Scoring is awaited (`await service.score(...)`) or waited for
        (`.result()`); either gives the Answer. ClientError for what the request lacks."""
        if api == PREDICT:
            sig = self.signature(resolved.version, payload.signature_name)
            if payload.inputs is None:
                raise ClientError(":predict needs inputs")
            inputs, rows = payload.inputs(sig)
        elif api in (CLASSIFY, REGRESS):
            sig = self.examples_signature(resolved.version, payload.signature_name)
            if not payload.examples:
                raise ClientError(f":{api} needs a non-empty list of examples")
            examples = np.empty(len(payload.examples), dtype=object)
            examples[:] = payload.examples
            inputs, rows = {next(iter(sig.inputs)): examples}, len(payload.examples)
        else:
            raise ClientError(f"no such API :{api} (the APIs: {', '.join(APIS)})", 404)
        future = _batcher(sig).submit(inputs, rows)
        call = Call(
            resolved,
            sig,
            inputs,
            rows,
            future,
            payload.request_id or uuid.uuid4().hex,
            time.monotonic(),
        )
        return Scoring(self, api, call)

    def answer(self, api: str, call: Call, outputs: dict[str, np.ndarray]) -> Answer:
        """A scored call's Answer, after it is counted and logged (`done`)."""
        results: list | None = None
        if api == CLASSIFY:
            results = classify_results(outputs, call.rows, self.class_names)
        elif api == REGRESS:
            results = regress_results(outputs, call.rows)
        self.done(call, outputs)
        return Answer(
            outputs=outputs,
            version=call.version,
            request_id=call.request_id,
            label=call.resolved.label,
            signature=call.signature.name,
            rows=call.rows,
            results=results,
        )

    def done(self, call: Call, outputs: dict[str, np.ndarray]) -> None:
        """After a call's answer: counts, the request log, the shadow challenger."""
        v = call.version
        self.metrics.examples.labels(v.model, str(v.version), call.resolved.label).inc(call.rows)
        if self.request_log is not None and self.request_log.sampled():
            self.request_log.add(self._entry(call, outputs, SERVED))
            if self.shadow:
                self._shadow(call)

    def _shadow(self, call: Call) -> None:
        challenger = self.repository.label_of(CHALLENGER)
        if challenger is None or challenger is call.version:
            return
        sig = challenger.signatures.get(call.signature.name)
        if sig is None:
            return
        shadow_call = Call(
            Resolved(challenger, CHALLENGER),
            sig,
            call.inputs,
            call.rows,
            _batcher(sig).submit(call.inputs, call.rows),
            call.request_id,
            call.started,
        )

        def logged(f: Future) -> None:
            if f.exception() is None and self.request_log is not None:
                self.request_log.add(self._entry(shadow_call, f.result(), SHADOW))

        shadow_call.future.add_done_callback(logged)

    def _entry(self, call: Call, outputs: dict[str, np.ndarray], role: str) -> Entry:
        return Entry(
            request_id=call.request_id,
            logged_at_us=time.time_ns() // 1000,
            model=call.version.model,
            version=call.version.version,
            label=call.resolved.label,
            role=role,
            raw=self.raw_examples(call.signature, call.inputs, call.rows),
            outputs=outputs,  # the main output is picked in the writer's thread
        )

    def raw_examples(self, sig: Signature, inputs: dict[str, np.ndarray], rows: int) -> Any:
        if sig.takes_examples:
            return next(iter(inputs.values()))  # the serialized examples themselves
        from tensorflow.core.example import example_pb2

        out = []
        for i in range(rows):
            ex = example_pb2.Example()
            for name, arr in inputs.items():
                column = self.log_inputs.get(name, name)
                values = np.asarray(arr[i]).reshape(-1)
                if arr.dtype == object:
                    ex.features.feature[column].bytes_list.value.extend(values)
                elif arr.dtype.kind in "iub":
                    ex.features.feature[column].int64_list.value.extend(int(x) for x in values)
                else:
                    ex.features.feature[column].float_list.value.extend(float(x) for x in values)
            out.append(ex.SerializeToString())
        return out


class Scoring:
    """A queued call: `await` it on an event loop (REST), or `result()` it in a thread
    (gRPC); the model refusing its input (TensorFlow's InvalidArgumentError) becomes
    a ClientError naming why, either way."""

    def __init__(self, service: Service, api: str, call: Call) -> None:
        self._service, self._api, self._call = service, api, call

    def __await__(self) -> Generator[Any, None, Answer]:
        try:
            outputs = yield from asyncio.wrap_future(self._call.future).__await__()
        except Exception as e:
            _raise_if_refused(e)
            raise
        return self._service.answer(self._api, self._call, outputs)

    def result(self, timeout: float | None = None) -> Answer:
        try:
            outputs = self._call.future.result(timeout)
        except Exception as e:
            _raise_if_refused(e)
            raise
        return self._service.answer(self._api, self._call, outputs)


def _batcher(sig: Signature) -> Batcher:
    """The signature's batcher; a version gets them when it is loaded."""
    if sig.batcher is None:
        raise RuntimeError(f"signature {sig.name!r} has no batcher: its version is not loaded")
    return sig.batcher


def _raise_if_refused(e: Exception) -> None:
    """The model refused the input (e.g. bytes that are no tf.Example): the client's
    fault, raised as a ClientError; any other error stays the server's."""
    import tensorflow as tf

    if isinstance(e, tf.errors.InvalidArgumentError):
        raise ClientError(model_error(e.message)) from None


def classify_results(outputs: dict[str, np.ndarray], rows: int, classes: list[str] | None):
    """TF Serving's classification results: per example, [[class, score], ...]."""
    scores = main_output(outputs, rows)
    if scores.shape[1] == 1:  # one probability: the positive class's
        names = classes if classes and len(classes) == 2 else ["0", "1"]
        return [[[names[0], 1.0 - float(p)], [names[1], float(p)]] for p in scores[:, 0]]
    matches = classes and len(classes) == scores.shape[1]
    names = classes if classes and matches else [str(i) for i in range(scores.shape[1])]
    return [[[n, float(s)] for n, s in zip(names, row, strict=True)] for row in scores]


def regress_results(outputs: dict[str, np.ndarray], rows: int) -> list[float]:
    values = main_output(outputs, rows)
    if values.shape[1] != 1:
        raise ClientError(
            f"this model gives {values.shape[1]} scores per example, not one value: "
            "use :classify or :predict"
        )
    return [float(v) for v in values[:, 0]]
