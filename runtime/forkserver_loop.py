"""The fork server's loop: import once, then fork one child per connection.

Run as `python -m runtime.forkserver` (runtime/forkserver.py's client
starts it); the protocol is described there.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import sys
from collections.abc import Sequence

from runtime.forkserver_child import become, parse_command

_MAX_REQUEST = 1 << 22  # argv + environment; a few KB in practice


def serve(socket_path: str, preload: Sequence[str], kill_children: bool = False) -> None:
    """`python -m runtime.forkserver [KILL_CHILDREN] SOCKET [MODULE ...]`: imports, then
    forks per connection.

    SOCKET appears once the server listens (it is bound under another name and
    renamed), so a client waits for the path, not for a message. The server
    exits when its stdin reaches end of file (its owner closed it or died); its
    children carry on, each in its own session, unless `kill_children`.
    """
    import importlib

    os.dup2(2, 1)  # whatever the imports print goes to the server's log
    for module in preload:
        importlib.import_module(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".binding")
    listener.listen(64)
    os.rename(socket_path + ".binding", socket_path)
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection)
    while True:
        readable, _, _ = select.select([listener, sys.stdin, *children], [], [])
        # stdin's buffer is a BufferedReader (typeshed says BinaryIO, which has no read1).
        if sys.stdin in readable and not sys.stdin.buffer.read1(4096):  # type: ignore[union-attr]
            return  # the client is gone
        if listener in readable:
            conn, _ = listener.accept()
            try:
                _start_child(listener, conn, children, kill_children)
            except OSError:  # the client went away mid-request: nothing was started
                conn.close()
        for pidfd in [r for r in readable if isinstance(r, int)]:
            pid, conn = children.pop(pidfd)
            _, status = os.waitpid(pid, 0)
            os.close(pidfd)
            with contextlib.suppress(OSError):
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            conn.close()


def _start_child(
    listener: socket.socket,
    conn: socket.socket,
    children: dict[int, tuple[int, socket.socket]],
    kill_children: bool,
) -> None:
    data, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(_MAX_REQUEST)
        if not more:
            break
        data += more
    try:
        request = json.loads(data)
        request["parsed"] = parse_command(request["argv"])
        if len(fds) != 3:
            raise ValueError(f"expected stdin, stdout and stderr, got {len(fds)} descriptors")
    except ValueError as e:
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            conn.sendall(f"error {json.dumps(str(e))}\n".encode())
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    server_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        others = [c.fileno() for _, c in children.values()] + list(children)
        keep_closed = [listener.fileno(), conn.fileno(), 0, *others]
        become(request, fds, keep_closed, server_pid if kill_children else None)
    for fd in fds:
        os.close(fd)
    children[os.pidfd_open(pid)] = (pid, conn)
    conn.sendall(f"pid {pid}\n".encode())
