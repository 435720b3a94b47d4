"""Loaded model versions: signatures, their batchers, warmup, and what they are called.

A `LoadedVersion` is one pushed version folder (`<serving>/<version>`, as the
Pusher wrote it) loaded with TensorFlow: each signature with its input and
output specs, its `SignatureDef` as TF Serving prints it, and a `Batcher`.
Before a version is reported AVAILABLE, the requests in its
`assets.extra/tf_serving_warmup_requests` (TF Serving's warmup file:
PredictionLog records) are replayed through it, so the first real request
does not pay for TensorFlow's first-call tracing.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from components.release.serving_check import warmup
from serving.batching import Batcher

WARMUP_FILE = warmup.IN_MODEL  # written by the serving check, copied by the Pusher
# Warmup replays at most this many records (TF Serving's own limit is 1000).
MAX_WARMUP_RECORDS = 1000
INIT_OP = "__saved_model_init_op"


class ModelLoadError(RuntimeError):
    """A version folder that is not a servable SavedModel."""


@dataclass
class TensorInfo:
    name: str
    dtype: Any  # tf.DType
    shape: tuple[int | None, ...]


@dataclass
class Signature:
    name: str
    function: Callable
    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]
    method_name: str
    batcher: Batcher | None = None

    @property
    def takes_examples(self) -> bool:
        """One string input of serialized tf.Examples (what :classify and :regress need)."""
        if len(self.inputs) != 1:
            return False
        (info,) = self.inputs.values()
        return info.name == "examples" and info.dtype.name == "string"

    def call(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import tensorflow as tf

        tensors = {k: tf.constant(v, dtype=self.inputs[k].dtype) for k, v in inputs.items()}
        return {k: v.numpy() for k, v in self.function(**tensors).items()}


@dataclass
class LoadedVersion:
    model: str
    version: int
    path: str
    signatures: dict[str, Signature]
    signature_defs: Any  # tensorflow.core.protobuf.meta_graph_pb2 SignatureDef map owner
    loaded_at: float = field(default_factory=time.time)
    warmup_records: int = 0
    # The loaded SavedModel: its signatures' variables live as long as this object.
    saved_model: object = None

    def close(self) -> None:
        for sig in self.signatures.values():
            if sig.batcher is not None:
                sig.batcher.close()


def version_folders(serving_dir: str) -> dict[int, str]:
    """version -> folder of each complete pushed version (hidden names are pushes under way)."""
    if not os.path.isdir(serving_dir):
        return {}
    out = {}
    for entry in os.scandir(serving_dir):
        complete = os.path.isfile(os.path.join(entry.path, "saved_model.pb"))
        if entry.name.isdigit() and entry.is_dir(follow_symlinks=False) and complete:
            out[int(entry.name)] = entry.path
    return out


def _spec_info(name: str, spec) -> TensorInfo:
    return TensorInfo(name, spec.dtype, tuple(spec.shape.as_list()) if spec.shape.rank else ())


def _signature_defs(model_dir: str):
    """The serving MetaGraph's SignatureDefs (saved_model.pb), as TF Serving reports them."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString(Path(model_dir, "saved_model.pb").read_bytes())
    for meta in saved.meta_graphs:
        if "serve" in meta.meta_info_def.tags:
            return meta
    return saved.meta_graphs[0]


def load_version(
    model: str,
    version: int,
    path: str,
    *,
    max_batch_size: int,
    timeout_ms: float,
    observe: Callable[[str, int], None] | None = None,
) -> LoadedVersion:
    """Loads `path`, starts a batcher per signature and replays the warmup requests."""
    import tensorflow as tf

    try:
        loaded = tf.saved_model.load(path)
        meta = _signature_defs(path)
    except Exception as e:  # any reason a folder is not a model
        raise ModelLoadError(f"{path}: not a loadable SavedModel ({e})") from e
    signatures = {}
    for name, fn in loaded.signatures.items():
        inputs = {k: _spec_info(k, s) for k, s in fn.structured_input_signature[1].items()}
        outputs = {k: _spec_info(k, s) for k, s in fn.structured_outputs.items()}
        method = meta.signature_def[name].method_name if name in meta.signature_def else ""
        signatures[name] = Signature(name, fn, inputs, outputs, method)
    lv = LoadedVersion(model, version, path, signatures, meta, saved_model=loaded)
    for sig in signatures.values():
        sig.batcher = Batcher(
            sig.call,
            max_batch_size=max_batch_size,
            timeout_ms=timeout_ms,
            observe=functools.partial(observe, sig.name) if observe else None,
            name=f"batch-{model}-{version}-{sig.name}",
        )
    lv.warmup_records = warm_up(lv)
    return lv


def warm_up(lv: LoadedVersion) -> int:
    """Replays `assets.extra/tf_serving_warmup_requests`; returns how many records ran."""
    path = os.path.join(lv.path, WARMUP_FILE)
    if not os.path.isfile(path):
        return 0
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    count = 0
    for raw in tf.data.TFRecordDataset(path).take(MAX_WARMUP_RECORDS).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog.FromString(raw)
        kind = log.WhichOneof("log_type")
        if kind == "predict_log":
            req = log.predict_log.request
            sig = lv.signatures.get(req.model_spec.signature_name or "serving_default")
            if sig is None:
                continue
            sig.call({k: tf.make_ndarray(v) for k, v in req.inputs.items()})
        elif kind in ("classify_log", "regress_log"):
            req = getattr(log, kind).request
            sig = lv.signatures.get(req.model_spec.signature_name or "serving_default")
            examples = [e.SerializeToString() for e in req.input.example_list.examples]
            if sig is None or not sig.takes_examples or not examples:
                continue
            (name,) = sig.inputs
            sig.call({name: np.array(examples, dtype=object)})
        else:
            continue
        count += 1
    return count
