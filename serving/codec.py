"""TF Serving's REST JSON to model inputs and back, with a clear 400 for every client fault.

- `:predict` takes the row format (`instances`) or the columnar one (`inputs`);
  bytes are `{"b64": "..."}`. For a signature of serialized tf.Examples
  (`examples`) an instance may also be a dict of raw features, encoded with
  the dataset's schema types.
- `:classify` and `:regress` take TF Serving's JSON Example format: `examples`,
  a list of feature dicts, and an optional `context` merged into each.
- A sequence model's examples are SequenceExamples (SequenceExampleEncoder): `{"b64":
  ...}`, or context values with one list per per-step feature.
Every error names what is wrong and where (`instances[3].trip_miles`).
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np

INT, FLOAT, BYTES = "INT", "FLOAT", "BYTES"


class ClientError(ValueError):
    """The request is at fault; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def decode_b64(value: dict, where: str) -> bytes:
    if set(value) != {"b64"} or not isinstance(value["b64"], str):
        raise ClientError(f'{where}: an object value must be {{"b64": "<base64 string>"}}')
    try:
        return base64.b64decode(value["b64"], validate=True)
    except (binascii.Error, ValueError) as e:
        raise ClientError(f"{where}: not valid base64 ({e})") from None


class ExampleEncoder:
    """Raw feature dicts -> serialized tf.Examples, typed by the dataset's schema."""

    def __init__(self, types: dict[str, str], label: str | None) -> None:
        self.types = dict(types)
        self.label = label

    def __call__(self, features: Any, where: str) -> bytes:
        from tensorflow.core.example import example_pb2

        if not isinstance(features, dict):
            raise ClientError(f"{where}: an example must be an object of feature values")
        example = example_pb2.Example()
        fmap = example.features.feature
        for name, value in features.items():
            kind = self.types.get(name)
            if kind is None:
                known = ", ".join(sorted(n for n in self.types if n != self.label))
                raise ClientError(f"{where}: unknown feature {name!r} (the model takes: {known})")
            if value is None or name == self.label:
                continue  # missing, as an empty CSV cell; the label is never an input
            values = value if isinstance(value, list) else [value]
            at = f"{where}.{name}"
            if kind == INT:
                fmap[name].int64_list.value.extend(_ints(values, at))
            elif kind == FLOAT:
                fmap[name].float_list.value.extend(_floats(values, at))
            else:
                fmap[name].bytes_list.value.extend(_bytes(values, at))
        return example.SerializeToString()


class SequenceExampleEncoder:
    """A sequence model's requests -> serialized tf.train.SequenceExamples.

    An example is `{"b64": ...}` (a serialized SequenceExample, passed as it is), or an
    object of context values and per-step lists (`"action": ["view", "cart"]`; null for
    a step without a value), typed by the dataset's schema.
    """

    def __init__(self, context: dict[str, str], steps: dict[str, str], label: str | None) -> None:
        self.types = {**context, **steps}
        self.context = dict(context)
        self.steps = dict(steps)
        self.label = label

    def __call__(self, features: Any, where: str) -> bytes:
        from tensorflow.core.example import example_pb2

        if isinstance(features, dict) and "b64" in features:
            return decode_b64(features, where)
        if not isinstance(features, dict):
            raise ClientError(f"{where}: a sequence is an object of context values and step lists")
        example = example_pb2.SequenceExample()
        for name, value in features.items():
            at = f"{where}.{name}"
            if name in self.steps:
                if not isinstance(value, list):
                    raise ClientError(f"{at}: a per-step feature is a list, one value per step")
                steps = example.feature_lists.feature_list[name].feature
                for i, v in enumerate(value):
                    _fill(steps.add(), [] if v is None else [v], self.steps[name], f"{at}[{i}]")
            elif name in self.context:
                if value is None or name == self.label:
                    continue  # missing; the label is never an input
                values = value if isinstance(value, list) else [value]
                _fill(example.context.feature[name], values, self.context[name], at)
            else:
                known = ", ".join(sorted(n for n in self.types if n != self.label))
                raise ClientError(f"{where}: unknown feature {name!r} (the model takes: {known})")
        return example.SerializeToString()


def _fill(feature, values: list, kind: str, where: str) -> None:
    if kind == INT:
        feature.int64_list.value.extend(_ints(values, where))
    elif kind == FLOAT:
        feature.float_list.value.extend(_floats(values, where))
    else:
        feature.bytes_list.value.extend(_bytes(values, where))


def _ints(values: list, where: str) -> list[int]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise ClientError(f"{where}: {v!r} is not an integer (schema type INT)")
        if not -(2**63) <= v < 2**63:
            raise ClientError(f"{where}: {v!r} does not fit a 64-bit integer")
        out.append(v)
    return out


def _floats(values: list, where: str) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ClientError(f"{where}: {v!r} is not a number (schema type FLOAT)")
        if isinstance(v, float) and math.isinf(v):
            raise ClientError(f"{where}: {v!r} is not a finite number")
        out.append(float(v))
    return out


def _bytes(values: list, where: str) -> list[bytes]:
    out = []
    for v in values:
        if isinstance(v, str):
            out.append(v.encode())
        elif isinstance(v, dict):
            out.append(decode_b64(v, where))
        else:
            raise ClientError(f"{where}: {v!r} is not a string (schema type BYTES)")
    return out


def _value(value: Any, dtype: str, where: str) -> Any:
    """One JSON value of a tensor element, checked against the input's dtype."""
    if dtype == "string":
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, dict):
            return decode_b64(value, where)
        raise ClientError(f'{where}: expected a string or {{"b64": ...}}, got {value!r}')
    if isinstance(value, list):
        return [_value(v, dtype, f"{where}[{i}]") for i, v in enumerate(value)]
    if dtype == "bool":
        if not isinstance(value, bool):
            raise ClientError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ClientError(f"{where}: expected a number ({dtype}), got {value!r}")
    if dtype.startswith("int") and not float(value).is_integer():
        raise ClientError(f"{where}: expected an integer ({dtype}), got {value!r}")
    return value


def _array(values: list, dtype: str, where: str) -> np.ndarray:
    if dtype == "string":
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr
    try:
        return np.asarray(values, dtype=np.dtype(dtype))
    except (ValueError, TypeError, OverflowError) as e:
        raise ClientError(f"{where}: the values do not form a {dtype} tensor ({e})") from None


# What turns a request's examples into serialized records: tf.Examples or SequenceExamples.
Encoder = ExampleEncoder | SequenceExampleEncoder


def predict_inputs(
    body: Any, signature, encode: Encoder | None
) -> tuple[dict[str, np.ndarray], int, bool]:
    """(inputs, rows, row format?) of a :predict body for `signature`."""
    if not isinstance(body, dict):
        raise ClientError("the request body must be a JSON object")
    has_rows, has_cols = "instances" in body, "inputs" in body
    if has_rows == has_cols:
        raise ClientError('the request body needs exactly one of "instances" or "inputs"')
    if has_rows:
        return (*_rows(body["instances"], signature, encode), True)
    return (*_columns(body["inputs"], signature), False)


def _rows(instances: Any, signature, encode) -> tuple[dict[str, np.ndarray], int]:
    if not isinstance(instances, list) or not instances:
        raise ClientError('"instances" must be a non-empty list')
    names = list(signature.inputs)
    single = names[0] if len(names) == 1 else None
    columns: dict[str, list] = {n: [] for n in names}
    for i, inst in enumerate(instances):
        where = f"instances[{i}]"
        if single is not None and not (isinstance(inst, dict) and set(inst) == {single}):
            if isinstance(inst, dict) and "b64" not in inst:
                if encode is None or not signature.takes_examples:
                    raise ClientError(
                        f"{where}: this signature takes one input, {single!r}, not an object "
                        f"of features"
                    )
                columns[single].append(encode(inst, where))
                continue
            columns[single].append(_value(inst, signature.inputs[single].dtype.name, where))
            continue
        if not isinstance(inst, dict):
            raise ClientError(f"{where}: expected an object with the inputs {names}")
        unknown = set(inst) - set(names)
        if unknown or set(inst) != set(names):
            raise ClientError(
                f"{where}: inputs {sorted(inst)} do not match the signature's {sorted(names)}"
            )
        for n in names:
            columns[n].append(_value(inst[n], signature.inputs[n].dtype.name, f"{where}.{n}"))
    arrays = {
        n: _array(v, signature.inputs[n].dtype.name, f"instances (input {n!r})")
        for n, v in columns.items()
    }
    return arrays, len(instances)


def _columns(inputs: Any, signature) -> tuple[dict[str, np.ndarray], int]:
    names = list(signature.inputs)
    if not isinstance(inputs, dict):
        if len(names) != 1:
            raise ClientError(f'"inputs" must be an object with the inputs {names}')
        inputs = {names[0]: inputs}
    unknown = set(inputs) - set(names)
    if unknown:
        raise ClientError(
            f'"inputs": unknown input(s) {sorted(unknown)} (the signature takes {names})'
        )
    missing = set(names) - set(inputs)
    if missing:
        raise ClientError(f'"inputs": missing input(s) {sorted(missing)}')
    arrays, rows = {}, None
    for n in names:
        where = f"inputs.{n}"
        values = inputs[n]
        if not isinstance(values, list) or not values:
            raise ClientError(f"{where}: expected a non-empty list (one value per example)")
        dtype = signature.inputs[n].dtype.name
        arrays[n] = _array(
            [_value(v, dtype, f"{where}[{i}]") for i, v in enumerate(values)], dtype, where
        )
        if rows is not None and len(values) != rows:
            raise ClientError('"inputs": every input needs the same number of examples')
        rows = len(values)
    return arrays, rows or 0


def example_list(body: Any, encode: Encoder) -> list[bytes]:
    """The serialized tf.Examples of a :classify / :regress body (JSON Example format)."""
    if not isinstance(body, dict):
        raise ClientError("the request body must be a JSON object")
    examples = body.get("examples")
    if not isinstance(examples, list) or not examples:
        raise ClientError('"examples" must be a non-empty list of feature objects')
    context = body.get("context", {})
    if not isinstance(context, dict):
        raise ClientError('"context" must be an object of feature values')
    out = []
    for i, ex in enumerate(examples):
        if not isinstance(ex, dict):
            raise ClientError(f"examples[{i}]: an example must be an object of feature values")
        out.append(encode({**context, **ex}, f"examples[{i}]"))
    return out


def _json_value(v: Any, name: str) -> Any:
    if isinstance(v, bytes):
        if name.endswith("_bytes"):
            return {"b64": base64.b64encode(v).decode()}
        try:
            return v.decode()
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(v).decode()}
    return v


def _tolist(name: str, arr: np.ndarray) -> list:
    if arr.dtype == object or arr.dtype.kind == "S":
        flat = [_json_value(v, name) for v in arr.reshape(-1)]
        return np.array(flat, dtype=object).reshape(arr.shape).tolist()
    return arr.tolist()


def predict_response(outputs: dict[str, np.ndarray], row_format: bool) -> dict:
    """TF Serving's :predict answer: `predictions` (rows) or `outputs` (columns)."""
    names = sorted(outputs)
    if not row_format:
        if len(names) == 1:
            return {"outputs": _tolist(names[0], outputs[names[0]])}
        return {"outputs": {n: _tolist(n, outputs[n]) for n in names}}
    if len(names) == 1:
        return {"predictions": _tolist(names[0], outputs[names[0]])}
    cols = {n: _tolist(n, outputs[n]) for n in names}
    rows = len(next(iter(cols.values())))
    return {"predictions": [{n: cols[n][i] for n in names} for i in range(rows)]}


def model_error(message: str) -> str:
    """The line of a TensorFlow error that says what is wrong with the input."""
    for line in message.splitlines():
        line = line.strip()
        if not line or line.startswith(("Graph execution error", "Detected at node", "<", "[[")):
            continue
        return "the model rejected the input: " + line.removeprefix("Name: <unknown>, ")
    return "the model rejected the input"
