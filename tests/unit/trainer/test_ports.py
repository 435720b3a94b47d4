"""trainer/ports.py: free ports below the kernel's ephemeral range, distinct within a call."""

from __future__ import annotations

import socket
import subprocess
import sys

from pipeline.config import PROJECT_ROOT
from trainer import ports


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    low, _ = ports.ephemeral_range()
    picked = ports.free_ports(20)
    assert len(set(picked)) == 20
    assert all(ports.LOWEST <= p < low for p in picked)
    with socket.socket() as s:
        s.bind(("127.0.0.1", picked[0]))


def test_a_port_in_use_is_never_picked(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports.free_port()))
        taken.listen()
        port = taken.getsockname()[1]
        # The taken port is the only one below the range: the kernel's pick replaces it.
        monkeypatch.setattr(ports, "LOWEST", port)
        monkeypatch.setattr(ports, "ephemeral_range", lambda: (port + 1, 60999))
        picked = ports.free_ports(1)
        assert picked != [port] and picked[0] > 0


def test_without_room_below_the_range_the_kernel_picks(monkeypatch):
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (ports.LOWEST, 60999))
    picked = ports.free_ports(3)
    assert len(set(picked)) == 3 and all(p >= ports.LOWEST for p in picked)


def test_the_kernels_range_is_read_and_a_missing_file_falls_back(monkeypatch, tmp_path):
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", tmp_path / "range")
    (tmp_path / "range").write_text("40000\t50000\n")
    assert ports.ephemeral_range() == (40000, 50000)
    (tmp_path / "range").unlink()
    assert ports.ephemeral_range() == (32768, 60999)


def test_the_command_prints_that_many_ports_with_any_python3():
    out = subprocess.run(
        [sys.executable, "-I", str(PROJECT_ROOT / "trainer" / "ports.py"), "4"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert len(set(out)) == 4 and all(p.isdigit() for p in out)
