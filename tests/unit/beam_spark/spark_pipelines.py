"""Pipelines the runner tests run on both beam_spark and Beam's FnApiRunner, and how their
outputs are read back for comparison. Module-level DoFns, so executors unpickle them by
reference from this module (the runner puts the driver's source directories on their path).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.utils import shared

# The master the session's Spark context uses (default local[2]); test_on_standalone_cluster.py
# sets it to a real cluster's for a child pytest.
MASTER_VARIABLE = "BEAM_SPARK_TEST_MASTER"
WORDS = [f"w{i % 37}" for i in range(3000)]


class _Lookup(dict):  # type: ignore[type-arg]
    """A dict that Shared can hold (Shared needs a weak-referenceable object)."""


class SharedLookup(beam.DoFn):
    def __init__(self, handle: shared.Shared) -> None:
        self._handle = handle
        self._table: Any = None

    def setup(self) -> None:
        self._table = self._handle.acquire(lambda: _Lookup((f"w{i}", i * 10) for i in range(37)))

    def process(self, word: str) -> Any:
        yield word, self._table[word]


class Measured(beam.DoFn):
    """Counters and a distribution, to compare the merged metrics."""

    def __init__(self) -> None:
        self.seen = Metrics.counter("beam_spark_test", "seen")
        self.sizes = Metrics.distribution("beam_spark_test", "sizes")

    def process(self, word: str) -> Any:
        self.seen.inc()
        self.sizes.update(len(word))
        yield word


class Tagged(beam.DoFn):
    def process(self, n: int) -> Any:
        if n % 2:
            yield beam.pvalue.TaggedOutput("odd", n)
        else:
            yield n


class FailOnce(beam.DoFn):
    """Fails the first attempt of the task that meets element 7, then succeeds: a marker file
    (shared by every executor process on this machine) says whether it already failed."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.seen = Metrics.counter("beam_spark_test", "fail_once_seen")

    def process(self, n: int) -> Any:
        self.seen.inc()
        if n == 7 and not os.path.exists(self.marker):
            Path(self.marker).write_text("failed once")
            raise RuntimeError("fail once on purpose")
        yield n * 2


def explode_on_purpose(n: int) -> int:
    raise ValueError(f"element {n} is not welcome")


def labelled(label: str) -> Callable[[Any], str]:
    def to_line(value: Any) -> str:
        return f"{label}\t{json.dumps(value, sort_keys=True, default=str)}"

    return to_line


def _sorted_values(kv: Any) -> Any:
    key, values = kv
    return key, sorted(values)


def _cogrouped(kv: Any) -> Any:
    key, groups = kv
    return key, {name: sorted(values) for name, values in sorted(groups.items())}


def build_main(p: beam.Pipeline, out_dir: str) -> None:
    """Every feature the runner must match the FnApiRunner on, in one pipeline."""
    words = p | "words" >> beam.Create(WORDS) | "measure" >> beam.ParDo(Measured())
    numbers = p | "numbers" >> beam.Create(list(range(200)))
    pairs = words | "pair" >> beam.Map(lambda w: (w, 1))
    outputs = {
        "combine": pairs | beam.CombinePerKey(sum),
        "gbk": (
            numbers
            | "mod" >> beam.Map(lambda n: (n % 3, n))
            | beam.GroupByKey()
            | "sorted" >> beam.Map(_sorted_values)
        ),
    }
    small = p | "small" >> beam.Create([("a", 1), ("b", 2), ("c", 3)])
    outputs["side"] = numbers | "side inputs" >> beam.Map(
        lambda n, single, it, d, lst: (n, single, sum(it), d.get("b"), len(lst)),
        single=beam.pvalue.AsSingleton(p | "one" >> beam.Create([42])),
        it=beam.pvalue.AsIter(small | "vals" >> beam.Values()),
        d=beam.pvalue.AsDict(small),
        lst=beam.pvalue.AsList(numbers),
    )
    left = numbers | "left" >> beam.Map(lambda n: (n % 5, n))
    right = small | "right" >> beam.Map(lambda kv: (kv[1], kv[0]))
    outputs["cogroup"] = {"l": left, "r": right} | beam.CoGroupByKey() | beam.Map(_cogrouped)
    tagged = numbers | beam.ParDo(Tagged()).with_outputs("odd", main="even")
    outputs["even"] = tagged.even
    outputs["odd"] = tagged.odd
    outputs["reshuffle"] = numbers | beam.Reshuffle() | "plus" >> beam.Map(lambda n: n + 1000)
    outputs["batches"] = (
        numbers
        | beam.BatchElements(min_batch_size=8, max_batch_size=8)
        | "unbatch" >> beam.FlatMap(lambda batch: [(len(batch) <= 8, n) for n in batch])
    )
    outputs["shared"] = words | beam.ParDo(SharedLookup(shared.Shared()))
    outputs["global"] = numbers | beam.CombineGlobally(sum)
    lines = [pcoll | f"label {name}" >> beam.Map(labelled(name)) for name, pcoll in outputs.items()]
    _ = lines | beam.Flatten() | "write" >> beam.io.WriteToText(os.path.join(out_dir, "main"))
    records = numbers | "encode" >> beam.Map(lambda n: f"record-{n}".encode())
    _ = records | beam.io.WriteToTFRecord(os.path.join(out_dir, "records"), num_shards=3)
    _ = (
        numbers
        | "as text" >> beam.Map(lambda n: f"line {n}")
        | "text" >> beam.io.WriteToText(os.path.join(out_dir, "text"), num_shards=4)
    )


def build_read(p: beam.Pipeline, out_dir: str) -> None:
    """Read back what build_main wrote: text (split across tasks) and TFRecord."""
    text = p | "read text" >> beam.io.ReadFromText(os.path.join(out_dir, "text*"))
    records = p | "read records" >> beam.io.ReadFromTFRecord(os.path.join(out_dir, "records*"))
    lines = [
        text | "label text" >> beam.Map(labelled("text")),
        records
        | "decode" >> beam.Map(bytes.decode)
        | "label records" >> beam.Map(labelled("records")),
    ]
    _ = lines | beam.Flatten() | beam.io.WriteToText(os.path.join(out_dir, "read"))


def read_lines(out_dir: str, prefix: str) -> dict[str, list[str]]:
    """The labelled lines a pipeline wrote, by label, sorted (order is the runner's)."""
    by_label: dict[str, list[str]] = {}
    for path in sorted(Path(out_dir).glob(f"{prefix}-*")):
        for line in path.read_text().splitlines():
            label, _, value = line.partition("\t")
            by_label.setdefault(label, []).append(value)
    return {label: sorted(values) for label, values in by_label.items()}
