"""Free TCP ports for local servers: the tf.data service, multi-worker training, test servers.

A port from `bind((host, 0))` comes out of the kernel's ephemeral range, the range
every outgoing connection on the machine also takes its local port from. Between
picking such a port and the server binding it, any connection can take it: a CI
run lost its S3 server that way ("bind: address already in use"). So the ports
are picked below the ephemeral range, where only explicit binds land, and all of
one call's ports are held at once, so they are distinct.

`python trainer/ports.py N` prints N such ports (scripts/seaweedfs.sh uses it; no
dependency beyond the standard library, so any python3 runs it).
"""

from __future__ import annotations

import random
import socket
import sys
from contextlib import ExitStack
from pathlib import Path

# Below: well-known and registered ports, often taken by system services.
LOWEST = 10000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ports it hands out itself (Linux's default elsewhere)."""
    try:
        low, high = EPHEMERAL_RANGE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count: int = 1, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports free on `host` a moment ago, outside the ephemeral range."""
    low, _ = ephemeral_range()
    candidates = list(range(LOWEST, low))
    random.shuffle(candidates)
    ports: list[int] = []
    with ExitStack() as held:
        for port in candidates:
            if len(ports) == count:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                # No SO_REUSEADDR: a port with a connection lingering in TIME_WAIT is skipped.
                s.bind((host, port))
            except OSError:
                s.close()
                continue
            held.enter_context(s)
            ports.append(port)
        while len(ports) < count:  # an ephemeral range reaching down to LOWEST: the kernel's pick
            s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind((host, 0))
            ports.append(s.getsockname()[1])
    return ports


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


if __name__ == "__main__":
    count = sys.argv[1] if len(sys.argv) > 1 else "1"
    if len(sys.argv) > 2 or not count.isdigit() or int(count) < 1:
        sys.exit(f"usage: python trainer/ports.py [COUNT] (a number >= 1), got {sys.argv[1:]}")
    print(" ".join(str(p) for p in free_ports(int(count))))
