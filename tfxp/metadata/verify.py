"""Checks the TFRecord shards of Examples artifacts: readable, CRC-valid, counted.

Used by `tfxp verify` and by the runner to name the corrupt shard when a
component fails on its input (TensorFlow's own error, e.g. "Error -3 while
decompressing data", names neither the file nor the artifact).
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import asdict, dataclass, field

from ml_metadata.proto import metadata_store_pb2

EXAMPLE_TYPES = ("Examples",)


@dataclass
class ShardReport:
    path: str
    records: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class ArtifactReport:
    artifact_id: int
    uri: str
    shards: list[ShardReport] = field(default_factory=list)
    # Per split: records read vs what StatisticsGen recorded for this artifact.
    expected: dict[str, int] = field(default_factory=dict)
    counted: dict[str, int] = field(default_factory=dict)

    @property
    def bad_shards(self) -> list[ShardReport]:
        return [s for s in self.shards if not s.ok]

    @property
    def count_mismatches(self) -> dict[str, tuple[int, int]]:
        return {
            split: (self.counted.get(split, 0), n)
            for split, n in self.expected.items()
            if self.counted.get(split, 0) != n
        }

    @property
    def ok(self) -> bool:
        return not self.bad_shards and not self.count_mismatches

    def render(self) -> str:
        lines = [f"Examples artifact {self.artifact_id}: {self.uri}"]
        for s in self.shards:
            status = "ok" if s.ok else f"CORRUPT: {s.error}"
            lines.append(f"  {os.path.relpath(s.path, self.uri)}: {s.records} records, {status}")
        for split, (got, want) in self.count_mismatches.items():
            lines.append(f"  split {split}: {got} records readable, statistics recorded {want}")
        lines.append("  verdict: " + ("ok" if self.ok else "CORRUPT"))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def check_shard(path: str) -> ShardReport:
    """Reads every record (GZIP and CRC checked by TensorFlow's reader)."""
    import tensorflow as tf

    compression = "GZIP" if path.endswith(".gz") else ""
    n = 0
    try:
        for _ in tf.data.TFRecordDataset(path, compression_type=compression):
            n += 1
    except (tf.errors.DataLossError, tf.errors.OpError) as e:
        message = e.message.splitlines()[0] if e.message else type(e).__name__
        # Drop TF's "{{function_node ...}} " prefix and " [Op:...]" suffix.
        message = re.sub(r"^\{\{[^}]*\}\}\s*", "", message)
        message = re.sub(r"\s*\[Op:.*$", "", message)
        return ShardReport(path, n, f"after record {n}: {message}")
    if compression == "GZIP":
        problem = _gzip_trailer_problem(path)
        if problem:
            return ShardReport(path, n, f"after record {n}: {problem}")
    return ShardReport(path, n)


def _gzip_trailer_problem(path: str) -> str | None:
    """Checks the GZIP end-of-stream marker and CRC, which TensorFlow's reader does not.

    A GZIP shard cut on a flush boundary decompresses to whole records, so
    TensorFlow reads it as a clean, shorter file; only the missing trailer
    tells.
    """
    import zlib

    import tensorflow as tf

    decomp = zlib.decompressobj(wbits=31)
    with tf.io.gfile.GFile(path, "rb") as f:
        try:
            while chunk := f.read(1 << 20):
                while chunk:
                    decomp.decompress(chunk)
                    if not decomp.eof:
                        break
                    # Concatenated GZIP members are valid: start the next one.
                    chunk = decomp.unused_data
                    decomp = zlib.decompressobj(wbits=31) if chunk else decomp
        except zlib.error as e:
            return f"GZIP stream is corrupt ({e})"
    if not decomp.eof:
        return "GZIP stream is truncated (no end-of-stream marker)"
    return None


def _split_of(uri: str, path: str) -> str:
    folder = os.path.relpath(path, uri).split(os.sep)[0]
    return folder.removeprefix("Split-")


def _recorded_counts(store, artifact_id: int) -> dict[str, int]:
    """num_examples per split from the StatisticsGen run that consumed this artifact."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    events = store.get_events_by_artifact_ids([artifact_id])
    consumers = {e.execution_id for e in events if e.type == metadata_store_pb2.Event.INPUT}
    counts: dict[str, int] = {}
    for ex_events in [store.get_events_by_execution_ids([x]) for x in consumers]:
        outs = [e.artifact_id for e in ex_events if e.type == metadata_store_pb2.Event.OUTPUT]
        for art in store.get_artifacts_by_id(outs):
            if store.get_artifact_types_by_id([art.type_id])[0].name != "ExampleStatistics":
                continue
            for stats_file in glob.glob(os.path.join(art.uri, "Split-*", "FeatureStats.pb")):
                split = os.path.basename(os.path.dirname(stats_file)).removeprefix("Split-")
                stats = statistics_pb2.DatasetFeatureStatisticsList()
                with open(stats_file, "rb") as f:
                    stats.ParseFromString(f.read())
                if stats.datasets:
                    counts[split] = int(stats.datasets[0].num_examples)
            if counts:
                return counts
    return counts


def verify_artifact(store, artifact: metadata_store_pb2.Artifact) -> ArtifactReport:
    report = ArtifactReport(artifact.id, artifact.uri)
    shards = sorted(
        p
        for p in glob.glob(os.path.join(artifact.uri, "**", "*"), recursive=True)
        if os.path.isfile(p) and not os.path.basename(p).startswith(".")
    )
    for path in shards:
        shard = check_shard(path)
        report.shards.append(shard)
        split = _split_of(artifact.uri, path)
        report.counted[split] = report.counted.get(split, 0) + shard.records
    report.expected = _recorded_counts(store, artifact.id)
    return report


def examples_artifacts(store, ids: list[int] | None = None) -> list[metadata_store_pb2.Artifact]:
    arts = [a for t in EXAMPLE_TYPES for a in store.get_artifacts_by_type(t)]
    if ids:
        known = {a.id: a for a in arts}
        missing = [i for i in ids if i not in known]
        if missing:
            raise ValueError(
                f"no Examples artifact with id {missing} in this store; "
                f"known ids: {sorted(known) or 'none'}"
            )
        return [known[i] for i in ids]
    return arts


def diagnose_inputs(store, execution_id: int) -> list[str]:
    """Corrupt shards among the inputs of a failed execution, as readable lines."""
    events = store.get_events_by_execution_ids([execution_id])
    inputs = [e.artifact_id for e in events if e.type == metadata_store_pb2.Event.INPUT]
    lines = []
    for art in store.get_artifacts_by_id(inputs):
        if store.get_artifact_types_by_id([art.type_id])[0].name not in EXAMPLE_TYPES:
            continue
        for shard in verify_artifact(store, art).bad_shards:
            lines.append(f"Examples artifact {art.id}, shard {shard.path}: {shard.error}")
    return lines
