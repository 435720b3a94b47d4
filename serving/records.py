"""The request log's bytes, built without protobuf or TensorFlow in the loop: tf.Example
metadata features, the label dropped from a serialized example, and TFRecord framing.

The log writer runs in the server's process, beside the event loop: every
microsecond of Python it spends holds the interpreter lock the requests need.
Building the metadata features as protobuf wire bytes (the ones that are the
same for every record of a version, label and role once), and framing records
with the C crc32c, costs a few microseconds a record where protobuf messages
and TensorFlow's writer (one call per record) cost tens.
tests/unit/serving/test_serving_units.py checks the bytes against TensorFlow's own parsers.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import google_crc32c
import numpy as np

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


_SMALL = [bytes((i,)) for i in range(128)]


def varint(n: int) -> bytes:
    if 0 <= n < 128:
        return _SMALL[n]
    n &= 0xFFFFFFFFFFFFFFFF  # int64 on the wire: a negative is its two's complement
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    return _SMALL[tag] + varint(len(payload)) + payload


def _entry(name: str, feature: bytes) -> bytes:
    # Features.feature map entry {key: name, value: Feature}, as a Features field.
    return _field(0x0A, _field(0x0A, name.encode()) + _field(0x12, feature))


def bytes_feature(name: str, values: Iterable[bytes]) -> bytes:
    return _entry(name, _field(0x0A, b"".join([_field(0x0A, v) for v in values])))


def float_feature(name: str, values) -> bytes:
    packed = np.asarray(values, dtype="<f4").tobytes()
    return _entry(name, _field(0x12, _field(0x0A, packed)))


def int64_feature(name: str, values: Iterable[int]) -> bytes:
    return _entry(name, _field(0x1A, _field(0x0A, b"".join([varint(v) for v in values]))))


class Prefixes:
    """A feature's bytes before its value, by the value's shape (computed once each): a
    record's varying features are then one concatenation each."""

    def __init__(self) -> None:
        self._cache: dict[tuple, bytes] = {}

    def bytes1(self, name: str, value: bytes) -> bytes:
        key = ("b", name, len(value))
        prefix = self._cache.get(key)
        if prefix is None:
            prefix = self._cache[key] = bytes_feature(name, [value])[: -len(value) or None]
        return prefix + value

    def int1(self, name: str, value: int) -> bytes:
        encoded = varint(value)
        key = ("i", name, len(encoded))
        prefix = self._cache.get(key)
        if prefix is None:
            prefix = self._cache[key] = int64_feature(name, [value])[: -len(encoded)]
        return prefix + encoded

    def floats(self, name: str, values: np.ndarray) -> bytes:
        packed = np.asarray(values, dtype="<f4").tobytes()
        key = ("f", name, len(packed))
        prefix = self._cache.get(key)
        if prefix is None:
            prefix = self._cache[key] = float_feature(name, values)[: -len(packed) or None]
        return prefix + packed

    def constant(self, key: tuple, build) -> bytes:
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = build()
        return value


def example(features: Iterable[bytes]) -> bytes:
    """A serialized tf.Example of the given feature entries."""
    return _field(0x0A, b"".join(features))


def without_feature(serialized: bytes, name: str) -> bytes:
    """The serialized tf.Example without feature `name` (parsed only when it may be there:
    protobuf's C parser, ~3 us for a taxi row)."""
    if name.encode() not in serialized:
        return serialized
    from tensorflow.core.example import example_pb2

    try:
        ex = example_pb2.Example.FromString(serialized)
    except Exception:  # noqa: BLE001 - no tf.Example: logged as it came
        return serialized
    if name not in ex.features.feature:
        return serialized
    del ex.features.feature[name]
    return ex.SerializeToString()


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data: bytes) -> bytes:
    """One TFRecord: length, its masked crc32c, the data, its masked crc32c."""
    length = _U64.pack(len(data))
    return (
        length
        + _U32.pack(_masked(google_crc32c.value(length)))
        + data
        + _U32.pack(_masked(google_crc32c.value(data)))
    )
