"""Checks the TFRecord shards of Examples artifacts: readable, CRC-valid, counted.

Used by `tfxp verify` and by the runner to name the corrupt shard when a
component fails on its input (TensorFlow's own error, e.g. "Error -3 while
decompressing data", names neither the file nor the artifact). Which artifacts
to check, and the counts StatisticsGen recorded, come from
metadata/examples.py.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import asdict, dataclass, field


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


def verify_artifact(artifact_id: int, uri: str, expected: dict[str, int]) -> ArtifactReport:
    """Reads every shard under an Examples artifact's `uri`; `expected`: records per split
    as StatisticsGen counted them (metadata.examples.recorded_counts)."""
    report = ArtifactReport(artifact_id, uri, expected=dict(expected))
    shards = sorted(
        p
        for p in glob.glob(os.path.join(uri, "**", "*"), recursive=True)
        if os.path.isfile(p) and not os.path.basename(p).startswith(".")
    )
    for path in shards:
        shard = check_shard(path)
        report.shards.append(shard)
        split = _split_of(uri, path)
        report.counted[split] = report.counted.get(split, 0) + shard.records
    return report
