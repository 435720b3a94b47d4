"""The Arrow ingest on a bucket-resident span (SeaweedFS on loopback), against the same drop on disk.

`tfxp run --to-node CsvExampleGen`, as a user runs it, once with the span on
local disk and once with the same files in a bucket (pipeline root local for
both, so the shards can be compared byte for byte): the bucket run must take
the Arrow path (the Examples artifact's `csv_reader` property says which reader
wrote them; TFX's reader is the fallback) and write the very same GZIP shards.
The drop has two files, one with a UTF-8 byte-order mark, cut into three
tasks, so byte ranges cross files and lines. A malformed row in a bucket file
stops the run naming the s3:// object and line, and a gzip-compressed object
is refused naming it, as for local files; neither publishes anything.
"""

from __future__ import annotations

import gzip
import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components import example_gen
from components.example_gen import csv_ingest, csv_options, driver
from components.io import object_storage
from pipeline.config import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TFXP = str(Path(sys.executable).parent / "tfxp")
EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"
BUCKET = "arrow-ingest"
BOM = b"\xef\xbb\xbf"


def _drop(folder: Path) -> list[Path]:
    """Span 1 of two files: rows 0-1499 behind a byte-order mark, rows 1500-2999 plain."""
    span = folder / "span-1"
    span.mkdir(parents=True)
    with EMBEDDED_CSV.open("rb") as src:
        header = src.readline()
        rows = list(itertools.islice(src, 3000))
    (span / "part-a.csv").write_bytes(BOM + header + b"".join(rows[:1500]))
    (span / "part-b.csv").write_bytes(header + b"".join(rows[1500:]))
    return sorted(span.iterdir())


def _bad_drops(folder: Path) -> dict[str, Path]:
    """200 rows: line 57 lost its last three fields ("bad"); gzip bytes under .csv ("gz")."""
    with EMBEDDED_CSV.open() as src:
        lines = list(itertools.islice(src, 201))
    good = "".join(lines).encode()
    lines[56] = lines[56].rsplit(",", 3)[0] + "\n"
    drops = {"bad": "".join(lines).encode(), "gz": gzip.compress(good)}
    for name, data in drops.items():
        (folder / name / "span-1").mkdir(parents=True)
        (folder / name / "span-1" / "data.csv").write_bytes(data)
    return {name: folder / name / "span-1" / "data.csv" for name in drops}


def _ingest(forkserver, data_root: str, run_dir: Path, env: dict) -> subprocess.CompletedProcess:
    """`tfxp run --to-node CsvExampleGen`, forked from the session's fork server."""
    args = ["run", "--data-root", data_root, "--run-dir", str(run_dir)]
    args += ["--to-node", "CsvExampleGen", "--num-shards", "3"]
    return forkserver.run(
        [TFXP, *args], env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600
    )


def _examples_artifacts(run_dir: Path) -> list:
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = str(run_dir / "metadata.sqlite")
    cfg.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(cfg).get_artifacts_by_type("Examples")


def _shards(run_dir: Path) -> dict[str, bytes]:
    root = run_dir / "pipeline_root" / "CsvExampleGen" / "examples"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob("*/Split-*/*"))}


@pytest.fixture(scope="module")
def ingests(seaweedfs, tmp_path_factory, forkserver):
    tmp = tmp_path_factory.mktemp("arrow-s3")
    files = _drop(tmp / "local")
    bad = _bad_drops(tmp / "bad")
    seaweedfs.create_bucket(BUCKET)
    client = seaweedfs.client()
    for f in files:
        client.upload_file(str(f), BUCKET, f"taxi/span-1/{f.name}")
    for name, f in bad.items():
        client.upload_file(str(f), BUCKET, f"{name}/span-1/data.csv")
    env = seaweedfs.env()
    runs = {
        "local": _ingest(forkserver, str(tmp / "local"), tmp / "run-local", env),
        "s3": _ingest(forkserver, f"s3://{BUCKET}/taxi", tmp / "run-s3", env),
    }
    for name in bad:
        runs[name] = _ingest(forkserver, f"s3://{BUCKET}/{name}", tmp / f"run-{name}", env)
    return {"tmp": tmp, **runs}


def test_bucket_span_is_ingested_by_the_arrow_reader(ingests):
    tmp = ingests["tmp"]
    for name in ("local", "s3"):
        done = ingests[name]
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    [local] = _examples_artifacts(tmp / "run-local")
    [remote] = _examples_artifacts(tmp / "run-s3")
    props = {k: v.string_value or v.int_value for k, v in remote.custom_properties.items()}
    assert props[csv_options.CSV_READER] == "arrow", "the bucket span fell back to TFX"
    assert props[driver.INPUT_BASE] == f"s3://{BUCKET}/taxi"
    assert props[driver.ROW_COUNT] == 3000
    assert props[driver.TFRECORD_SHARDS] == 6  # 3 tasks x 2 splits
    assert local.custom_properties[csv_options.CSV_READER].string_value == "arrow"
    logs = "".join(p.read_text() for p in (tmp / "run-s3" / "logs").glob("*.log"))
    assert "Arrow CSV reader declined" not in logs


def test_bucket_ingest_writes_the_local_ingests_bytes(ingests):
    tmp = ingests["tmp"]
    local, remote = _shards(tmp / "run-local"), _shards(tmp / "run-s3")
    assert len(local) == 6 and all(name.endswith(".gz") for name in local), sorted(local)
    assert sorted(remote) == sorted(local)
    for name, data in local.items():
        assert remote[name] == data, f"{name} differs from the local ingest's"


@pytest.mark.parametrize(
    "case,expected",
    [
        ("bad", f"s3://{BUCKET}/bad/span-1/data.csv:57"),
        ("gz", f"s3://{BUCKET}/gz/span-1/data.csv: the file is gzip-compressed"),
    ],
)
def test_bad_bucket_input_names_the_object_and_publishes_nothing(ingests, case, expected):
    done = ingests[case]
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    assert expected in done.stderr, done.stderr[-3000:]
    live = [
        a
        for a in _examples_artifacts(ingests["tmp"] / f"run-{case}")
        if a.state == metadata_store_pb2.Artifact.LIVE
    ]
    assert live == [], "a failed ingest published Examples"


def test_byte_ranges_of_an_object_are_the_files_and_reads_stay_bounded(
    seaweedfs, tmp_path, monkeypatch
):
    """In process, pyarrow's S3 client only (no tensorflow-io): every block the
    same as the local file's, and no single read larger than a block."""
    for name, value in seaweedfs.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    [local, _] = _drop(tmp_path)
    seaweedfs.create_bucket("arrow-ranges")
    seaweedfs.client().upload_file(str(local), "arrow-ranges", "span-1/part-a.csv")
    remote = "s3://arrow-ranges/span-1/part-a.csv"
    sizes: list[int] = []
    real_open = object_storage.open_ranges

    def recording(path: str):
        f = real_open(path)
        read = f.read

        class Recorded:
            def __enter__(self):
                return self

            def __exit__(self, *exc) -> None:
                f.close()

            def __getattr__(self, name):
                return getattr(f, name)

            def read(self, n: int) -> bytes:
                sizes.append(n)
                return read(n)

        return Recorded()

    monkeypatch.setattr(object_storage, "open_ranges", recording)
    size = local.stat().st_size
    start = example_gen.arrow_csv.data_start(remote)
    with EMBEDDED_CSV.open("rb") as f:
        assert start == len(BOM) + len(f.readline())
    block = 64 * 1024
    for pieces in csv_ingest.plan_tasks([(remote, start, size, 0)], 4):
        for piece in pieces:
            local_piece = csv_ingest.Piece(str(local), piece.start, piece.end, 0)
            ours = list(csv_ingest.read_blocks(piece, start, block))
            assert ours and ours == list(csv_ingest.read_blocks(local_piece, start, block))
    assert max(sizes) <= block < size
