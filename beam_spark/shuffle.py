"""Executor side of the data moved between stages: GroupByKey through Spark's sort-based
shuffle on the *encoded* key, and Reshuffle as an even spread of single elements.

Keys are compared and hashed as the bytes of Beam's deterministic key coder, never as
Python objects: Python's `hash` differs per process, and two equal keys must meet in one
partition whichever executor produced them.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream

from beam_spark.harness import CHUNK_BYTES
from compat.beam import GroupingBuffer


@dataclass(frozen=True)
class GroupCoders:
    """How the elements of one GroupByKey are encoded before and after grouping."""

    pre: Any  # WindowedValue[KV[K, V]] coder, as the writing stage emits it
    post: Any  # WindowedValue[KV[K, Iterable[V]]] coder, as the reading stage takes it
    windowing: Any  # the input's Windowing (trigger, window fn) for the grouping


def key_partition(key: bytes) -> int:
    """A stable hash of the encoded key (crc32), the same in every process."""
    return zlib.crc32(key)


def keyed_elements(coders: GroupCoders, chunk: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(encoded key, encoded element) for each element of a chunk the writing stage emitted."""
    element_impl = coders.pre.get_impl()
    key_impl = coders.pre.key_coder().get_impl()
    stream = create_InputStream(chunk)
    while stream.size() > 0:
        windowed = element_impl.decode_from_stream(stream, True)
        yield key_impl.encode(windowed.value[0]), element_impl.encode_nested(windowed)


def grouped_chunks(
    coders: GroupCoders, index: int, records: Iterator[tuple[bytes, bytes]]
) -> Iterator[tuple[int, bytes]]:
    """Group records sorted by key into encoded (key, values) chunks, using Beam's own
    grouping buffer (windows and triggers as the FnApiRunner applies them). Only one
    key's values and one chunk of output are held at a time."""
    buffer = GroupingBuffer(coders.pre, coders.post, coders.windowing)
    held = 0
    for _, group in itertools.groupby(records, key=lambda record: record[0]):
        elements = [element for _, element in group]
        buffer.append(b"".join(elements))
        held += sum(len(e) for e in elements)
        if held >= CHUNK_BYTES:
            yield from ((index, chunk) for chunk in buffer if chunk)
            buffer = GroupingBuffer(coders.pre, coders.post, coders.windowing)
            held = 0
    if held:
        yield from ((index, chunk) for chunk in buffer if chunk)


def spread_elements(
    write_coder: Any, read_coder: Any, split: int, chunks: Iterator[bytes]
) -> Iterator[tuple[int, bytes]]:
    """Each element of the chunks keyed for round-robin placement, starting at this
    partition's own offset (deterministic, so a retried task places its elements as the
    first attempt did). Elements are re-encoded with the reading side's coder."""
    write_impl = write_coder.get_impl()
    read_impl = read_coder.get_impl()
    position = split
    for chunk in chunks:
        stream = create_InputStream(chunk)
        while stream.size() > 0:
            element = write_impl.decode_from_stream(stream, True)
            yield position, read_impl.encode_nested(element)
            position += 1


def rechunk(index: int, elements: Iterator[bytes]) -> Iterator[tuple[int, bytes]]:
    """Single encoded elements joined back into chunks of about CHUNK_BYTES."""
    out = create_OutputStream()
    for element in elements:
        out.write(element)
        if out.size() >= CHUNK_BYTES:
            yield index, out.get()
            out = create_OutputStream()
    if out.size():
        yield index, out.get()
