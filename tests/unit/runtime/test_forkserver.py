"""runtime/forkserver.py: commands forked from a preloaded server behave as processes of their own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import child  # tests/support/child.py: reads with a deadline
import pytest

from runtime.forkserver import ForkServer, ForkServerError, running
from runtime.forkserver_child import parse_command

PY = sys.executable
SUPPORT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "support"
)


@pytest.fixture(scope="module")
def server():
    # A cheap preload: what is shared is tested, not TensorFlow's import time. The
    # server itself buffered, so the children's own buffering is what is seen.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = SUPPORT  # for forkserver_probe
    # Started with SIGINT as a terminal's foreground command has it: a process whose
    # SIGINT is ignored (anything a non-interactive shell started with `&`) would
    # pass that on to the server and its children, as to any child process, and
    # the Ctrl-C test below would see a child that ignores SIGINT.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        s = ForkServer(["json", "textwrap", "forkserver_probe"], env=env)
        s.start()
    finally:
        signal.signal(signal.SIGINT, previous)
    yield s
    s.close()


def test_argv_cwd_environment_and_exit_status_are_the_commands(server, tmp_path):
    script = tmp_path / "tool.py"
    script.write_text(
        "import os, sys\n"
        "print(sys.argv, os.getcwd(), os.environ.get('ONLY'), 'HOME' in os.environ)\n"
        "print(sys.path[0])\n"
        "import tempfile; print(tempfile.gettempdir())\n"
        "print('to stderr', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    done = server.run(
        [PY, str(script), "a", "b"],
        cwd=tmp_path,
        env={"ONLY": "this", "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    first, second, temp = done.stdout.splitlines()
    assert first == f"[{str(script)!r}, 'a', 'b'] {tmp_path} this False"
    assert second == str(tmp_path)  # sys.path[0]: the script's folder, as python sets it
    assert temp == str(tmp_path)  # from the child's TMPDIR, not the server's cached one
    assert done.stderr == "to stderr\n"
    assert done.returncode == 3


def test_module_and_code_commands_and_preloaded_modules_are_shared(server):
    done = server.run(
        [PY, "-m", "json.tool", "--compact"],
        input='{"a": [1, 2]}',
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, '{"a":[1,2]}\n')
    probe = "import sys; print('textwrap' in sys.modules, 'this' in sys.modules)"
    done = server.run([PY, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.stdout == "True False\n"  # imported by the server, not by the child


def test_errors_exit_as_python_does(server):
    raised = server.run(
        [PY, "-c", "raise ValueError('boom')"], capture_output=True, text=True, timeout=30
    )
    assert raised.returncode == 1
    assert raised.stderr.startswith('Traceback (most recent call last):\n  File "<string>"')
    assert raised.stderr.endswith("ValueError: boom\n")
    message = server.run(
        [PY, "-c", "import sys; sys.exit('bad input')"], capture_output=True, text=True, timeout=30
    )
    assert (message.returncode, message.stderr) == (1, "bad input\n")


def test_signals_reach_the_child_alone_and_end_it_as_a_fresh_process(server):
    sleeper = "import time\nprint('up', flush=True)\ntime.sleep(60)"
    for sig, expected in ((signal.SIGINT, -signal.SIGINT), (signal.SIGKILL, -signal.SIGKILL)):
        proc = server.popen([PY, "-c", sleeper], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert child.readline(proc, timeout=30) == b"up\n"
        assert os.getsid(proc.pid) == proc.pid  # a session of its own, not the server's
        proc.send_signal(sig)
        assert proc.wait(30) == expected
        proc.stdout.close()
        proc.stderr.close()
    # The server survived both and still forks.
    assert server.run([PY, "-c", "pass"], timeout=30).returncode == 0


def test_unbuffered_output_arrives_before_the_child_exits(server):
    code = "import time\nprint('first')\ntime.sleep(60)"
    proc = server.popen(
        [PY, "-c", code],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.readline(proc, timeout=30) == "first\n"
    assert proc.poll() is None
    proc.kill()
    proc.wait(30)
    proc.stdout.close()
    probe = "import sys; print(type(sys.stdout.buffer).__name__, type(sys.stderr.buffer).__name__)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    buffered = server.run([PY, "-c", probe], env=env, capture_output=True, text=True, timeout=30)
    assert buffered.stdout == "BufferedWriter BufferedWriter\n"  # as a fresh python to a pipe


def test_concurrent_children_report_their_own_status(server):
    # The first waits for its stdin to close, so the order of exits is the test's.
    waiting = server.popen(
        [PY, "-c", "import sys; sys.stdin.read(); sys.exit(7)"], stdin=subprocess.PIPE
    )
    quick = server.popen([PY, "-c", "import sys; sys.exit(5)"])
    assert quick.wait(30) == 5
    assert waiting.poll() is None
    waiting.stdin.close()
    assert waiting.wait(30) == 7


def test_run_kills_the_child_at_its_timeout(server, tmp_path):
    pid_file, ended = tmp_path / "pid", tmp_path / "ended"
    sleeper = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        f"time.sleep(60); open({str(ended)!r}, 'w').close()"
    )
    with pytest.raises(subprocess.TimeoutExpired):
        server.run([PY, "-c", sleeper], timeout=1)
    # Raised before the child's own end, with the child gone: it never ends its sleep.
    # (A child killed before it wrote its pid is gone too: nothing to look up.)
    assert not ended.exists()
    pid = pid_file.read_text() if pid_file.exists() else ""
    assert not (pid and running(int(pid)))


def test_what_it_cannot_run_is_refused_before_anything_starts(tmp_path):
    assert parse_command([PY, "-m", "x", "y"]) == ("module", "x", ["x", "y"])
    for argv in (["/bin/ls"], [PY], [PY, "-u", "x.py"], [PY, "-m"], []):
        with pytest.raises(ValueError):
            parse_command(argv)
    console = tmp_path / "tool"
    console.write_text(f"#!{PY}\nprint('hi')\n")
    assert parse_command([str(console), "--x"]) == ("script", str(console), [str(console), "--x"])
    unused = ForkServer(["json"])
    with pytest.raises(ValueError, match="not a Python command"):
        unused.popen(["/bin/ls"])
    assert unused._proc is None  # never started for it
    unused.close()


def test_a_server_that_cannot_start_or_dies_is_an_error_naming_its_log(tmp_path):
    broken = ForkServer(["no_such_module_here"], log_path=str(tmp_path / "server.log"))
    with pytest.raises(ForkServerError, match="server.log"):
        broken.popen([PY, "-c", "pass"])
    assert "No module named 'no_such_module_here'" in (tmp_path / "server.log").read_text()
    broken.close()

    dying = ForkServer(["json"])
    proc = dying.popen([PY, "-c", "import time; time.sleep(60)"])
    dying._proc.kill()
    dying._proc.wait()
    with pytest.raises(ForkServerError, match="died"):
        proc.wait(30)
    os.kill(proc.pid, signal.SIGKILL)  # its own session: it outlived the server
    dying.close()


@pytest.mark.parametrize("end", ["owner closes it", "server killed"])
def test_a_server_that_kills_its_children_on_exit_takes_them_along(end):
    owned = ForkServer(["json"], kill_children_on_exit=True)
    procs = [owned.popen([PY, "-c", "import time; time.sleep(120)"]) for _ in range(2)]
    assert all(running(p.pid) for p in procs)
    if end == "server killed":  # as when its owner's process tree is SIGKILLed
        owned._proc.kill()
        owned._proc.wait()
    else:
        owned.close()
    deadline = time.monotonic() + 30
    while any(running(p.pid) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(running(p.pid) for p in procs)
    owned.close()


def test_closing_a_server_still_importing_stops_it_there(tmp_path):
    """It has no children before it listens: close() need not wait out its imports."""
    import threading

    hold = tmp_path / "hold"
    env = {
        **os.environ,
        "PYTHONPATH": SUPPORT,
        "FORKSERVER_PROBE_HOLD": str(hold),
    }
    importing = ForkServer(["forkserver_probe"], env=env)
    importing.start()
    # The import would go on (and write its marker) once `hold` exists: 2 s from now, a
    # time a close() that waits for the import would still be waiting.
    threading.Timer(2.0, hold.touch).start()
    importing.close()
    time.sleep(3.0)
    assert hold.exists() and not (tmp_path / "hold.imported").exists()


def test_other_processes_attach_to_a_running_server(server):
    attached = ForkServer.attach(server.address())
    done = attached.run(
        [PY, "-c", "import sys; print('textwrap' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.stdout == "True\n"  # forked by the same preloaded server
    attached.close()  # forgets it; only the owner stops it
    assert server.run([PY, "-c", "pass"], timeout=30).returncode == 0


STAND_IN = (
    "import sys; from runtime.forkserver import ForkServer; "
    "ForkServer.attach(sys.argv[1]).exec([sys.executable, '-c', sys.argv[2]])"
)


def test_exec_stands_in_for_the_command_its_streams_exit_and_signals(server, tmp_path):
    code = "import sys; print(sys.stdin.readline().upper(), end=''); sys.exit(3)"
    done = subprocess.run(
        [PY, "-c", STAND_IN, server.address(), code],
        input="through the stand-in\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (3, "THROUGH THE STAND-IN\n"), done.stderr

    pid_file = tmp_path / "pid"
    sleeper = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    )
    stand_in = subprocess.Popen([PY, "-c", STAND_IN, server.address(), sleeper])
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    forked = int(pid_file.read_text())
    assert forked != stand_in.pid
    stand_in.terminate()  # as Beam's pool stops a worker: the signal reaches the command
    assert stand_in.wait(30) == -signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        for _ in range(100):  # the server reaps it a moment later
            os.kill(forked, 0)
            time.sleep(0.05)


def test_attaching_to_a_dead_server_is_an_error_naming_its_log():
    gone = ForkServer(["json"])
    address = gone.address()
    gone.wait_ready()
    gone._proc.kill()
    gone._proc.wait()
    with pytest.raises(ForkServerError, match="server.log"):
        ForkServer.attach(address).popen([PY, "-c", "pass"])
    gone.close()


def test_a_client_that_hangs_up_mid_request_does_not_stop_the_server(server):
    import socket

    server.wait_ready()
    for payload in (b"", b'{"argv": ["x"'):  # nothing, and half a request
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(server.socket_path)
            s.sendall(payload)
    assert server.run([PY, "-c", "pass"], timeout=30).returncode == 0


def test_an_exit_that_arrives_with_the_pid_is_not_lost(tmp_path):
    """A quick child's "exit" line can reach the client in the same read as "pid"
    (seen in a CI run); a stand-in server sends both at once to make it certain."""
    import socket
    import threading

    path = str(tmp_path / "socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def answer_both_at_once():
        conn, _ = listener.accept()
        _, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        for fd in fds:
            os.close(fd)
        conn.sendall(b"pid 4242\nexit 5\n")
        conn.close()

    thread = threading.Thread(target=answer_both_at_once, daemon=True)
    thread.start()
    client = ForkServer.attach(f"{path}:{os.getpid()}")  # "alive": this process
    proc = client.popen([PY, "-c", "pass"])
    assert proc.pid == 4242
    assert proc.wait(5) == 5
    thread.join(5)
    listener.close()


def test_a_malformed_address_is_an_error_naming_it():
    for address in ("nonsense", "/tmp/socket:pid", ":12"):
        with pytest.raises(ForkServerError, match="SOCKET:PID"):
            ForkServer.attach(address)
