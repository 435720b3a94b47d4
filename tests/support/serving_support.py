"""`tfxp serve` test support: one small taxi pipeline with two pushed versions for every
serving test (a session fixture, imported by tests/conftest.py), and servers in-process."""

from __future__ import annotations

import base64
import csv
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]  # tests/


@dataclass
class ServingRun:
    config: object  # PipelineConfig
    old: str  # the first pushed version
    new: str  # the second, the champion after the run
    csv_path: Path  # rows to score (the sample's first rows)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def serving_run(tmp_path_factory: pytest.TempPathFactory) -> ServingRun:
    """Two runs on one store (fresh, then `--no-cache`): two pushed versions, the
    second the champion (the dataset's on_push policy)."""
    sys.path.insert(0, str(TESTS / "e2e"))
    from e2e_support import small_config, write_sample

    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("serving")
    sample = write_sample(tmp / "data")
    config = small_config(tmp)
    first = run_local(config, printer=lambda _: None)
    second = run_local(config.replace(enable_cache=False), printer=lambda _: None)
    old, new = Path(first.pushed_model).name, Path(second.pushed_model).name
    assert int(new) > int(old), (old, new)
    rows = tmp / "rows.csv"
    with sample.open() as src, rows.open("w") as dst:
        dst.writelines(src.readline() for _ in range(41))  # the header and 40 rows
    return ServingRun(config, old, new, rows)


class Running:
    """`tfxp serve` in this process (uvicorn in a thread, gRPC in its pool)."""

    def __init__(self, config, **options) -> None:
        import uvicorn

        from serving.server import ServeOptions, Server

        options.setdefault("port", free_port())
        options.setdefault("grpc_port", free_port())
        self.options = ServeOptions(**options)
        self.server = Server(config, self.options, "taxi")
        self.server.load()
        self.server.start_grpc()
        self.uv = uvicorn.Server(self.server.uvicorn_config())
        self.thread = threading.Thread(target=self.uv.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.uv.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.options.port}"
        self.grpc = f"127.0.0.1:{self.server.grpc_port}"

    def close(self) -> None:
        self.uv.should_exit = True
        self.thread.join(20)
        self.server.close()


def raw_rows(config, csv_path: Path) -> tuple[list[bytes], list[dict]]:
    """The CSV's rows as `tfxp predict` sends them (serialized tf.Examples) and as JSON
    feature objects typed by the schema."""
    from components.batch_inference import serving
    from components.validation.schema_importer import load_schema, schema_column_types

    types = schema_column_types(load_schema(config.schema_file))
    header, rows, _ = serving.csv_rows(str(csv_path))
    encode = serving.RowEncoder(header, types)
    examples, objects = [], []
    for _, row in rows:
        examples.append(encode(row))
        obj = {}
        for name, cell in zip(header, row, strict=True):
            if not cell or name == config.label_key or name not in types:
                continue
            kind = types[name]
            obj[name] = int(cell) if kind == "INT" else float(cell) if kind == "FLOAT" else cell
        objects.append(obj)
    return examples, objects


def b64(data: bytes) -> dict:
    return {"b64": base64.b64encode(data).decode()}


def read_log(path: str) -> list:
    """Every record of a request-log file, parsed (raises on a corrupt file)."""
    import tensorflow as tf

    return [
        tf.train.Example.FromString(r.numpy())
        for r in tf.data.TFRecordDataset(path, compression_type="GZIP")
    ]


def header_rows(csv_path: Path) -> list[list[str]]:
    with csv_path.open(newline="") as f:
        return list(csv.reader(f))
