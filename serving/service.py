"""What the REST and gRPC front ends share: resolve, batch, answer, log, A/B.

`Service.submit` resolves the model/version/label a request names (with the
A/B split applied to requests that name neither), queues its inputs on that
version's batcher and returns a `Call`; `Service.done` logs the answered call
(sampled by `--log-fraction`) and, in shadow mode, queues the same inputs on
the challenger, whose outputs are logged with role `shadow` and never
returned. Both front ends turn `ClientError`/`NotFound` into 4xx answers.
"""

from __future__ import annotations

import hashlib
import random
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from serving.batching import Batcher
from serving.codec import ClientError, ExampleEncoder
from serving.metrics import Metrics
from serving.models import LoadedVersion, Signature
from serving.repository import Repository, Resolved
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
        encoder: ExampleEncoder | None,
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

    def submit(
        self,
        resolved: Resolved,
        sig: Signature,
        inputs: dict[str, np.ndarray],
        rows: int,
        request_id: str | None = None,
    ) -> Call:
        future = _batcher(sig).submit(inputs, rows)
        return Call(
            resolved, sig, inputs, rows, future, request_id or uuid.uuid4().hex, time.monotonic()
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
        challenger = self.repository.label_of("challenger")
        if challenger is None or challenger is call.version:
            return
        sig = challenger.signatures.get(call.signature.name)
        if sig is None:
            return
        shadow_call = Call(
            Resolved(challenger, "challenger"),
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


def _batcher(sig: Signature) -> Batcher:
    """The signature's batcher; a version gets them when it is loaded."""
    if sig.batcher is None:
        raise RuntimeError(f"signature {sig.name!r} has no batcher: its version is not loaded")
    return sig.batcher


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
