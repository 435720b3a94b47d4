"""scripts/seaweedfs.sh start: a port taken between its pick and weed's bind.

A CI run lost its S3 server to this ("listen tcp ...: bind: address already in
use"): a new server now picks other ports, and a server that cannot move says
which port is taken.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from seaweedfs_server import SCRIPT, ports

from trainer.ports import free_ports

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@contextmanager
def listening(port: int = 0) -> Iterator[int]:
    with socket.socket() as s:
        # A stopped server's port lingers in TIME_WAIT: take it all the same.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        yield s.getsockname()[1]


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=150
    )


def write_ports(directory: Path, s3: int, s3_arg: str, volume: int) -> None:
    names = ["MASTER_PORT", "FILER_PORT", "MASTER_GRPC", "VOLUME_GRPC", "FILER_GRPC", "S3_GRPC"]
    lines = [f"S3_PORT={s3}", f"S3_PORT_ARG={s3_arg}", "ACCESS_KEY=k", "SECRET_KEY=s"]
    lines += [f"{n}={p}" for n, p in zip(names, free_ports(len(names)), strict=True)]
    lines.append(f"VOLUME_PORT={volume}")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ports").write_text("\n".join(lines) + "\n")


@pytest.fixture
def stop_after(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "weed"
    try:
        yield directory
    finally:
        script("stop", directory)


def test_a_new_server_moves_off_a_port_taken_before_weed_binds_it(stop_after):
    with listening() as taken:
        write_ports(stop_after, free_ports(1)[0], "auto", volume=taken)
        started = script("start", stop_after)
        assert started.returncode == 0, started.stderr
        assert f"listen tcp 127.0.0.1:{taken} is taken (attempt 1)" in started.stderr
        moved = ports(stop_after)
        assert int(moved["VOLUME_PORT"]) != taken
        assert f"AWS_ENDPOINT_URL=http://127.0.0.1:{moved['S3_PORT']}" in started.stdout
        assert script("status", stop_after).returncode == 0


def test_a_restart_keeps_its_ports_and_names_the_one_taken(stop_after):
    assert script("start", stop_after, "auto").returncode == 0
    assert script("stop", stop_after).returncode == 0
    before = ports(stop_after)
    with listening(int(before["VOLUME_PORT"])) as taken:
        started = script("start", stop_after)
    assert started.returncode == 1
    assert f"127.0.0.1:{taken}: bind: address already in use" in started.stderr
    assert "is taken" not in started.stderr  # no second try on other ports
    assert ports(stop_after) == before


def test_a_given_s3_port_that_is_taken_is_named(stop_after):
    with listening(free_ports(1)[0]) as taken:
        started = script("start", stop_after, taken)
    assert started.returncode == 1
    assert f"127.0.0.1:{taken}: bind: address already in use" in started.stderr
    assert ports(stop_after)["S3_PORT"] == str(taken)
