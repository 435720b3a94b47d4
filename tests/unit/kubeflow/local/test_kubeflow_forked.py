"""`run-local --runner forked`: tasks forked from a warm server behave as `python -m` would.

The server here preloads only `json` (the real one preloads TFX's entrypoints,
~10 s); the tasks are small modules written to a temporary folder on the
task environment's PYTHONPATH.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from kubeflow.local.forked_tasks import ForkServer
from runtime.forkserver import ForkServerError

pytestmark = pytest.mark.timeout(120)

TASK = """
import os, sys
import counter
counter.n += 1  # a module imported in one task must not carry state to the next
print("argv", sys.argv[1:], "cwd", os.getcwd(), "env", os.environ.get("TASK_ENV"), "n", counter.n)
print("stdin", repr(sys.stdin.read()))
if sys.argv[1:] == ["fail"]:
    raise RuntimeError("task failed on purpose")
if sys.argv[1:] == ["exit3"]:
    sys.exit(3)
"""


@pytest.fixture()
def server(tmp_path: Path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "task_mod.py").write_text(TASK)
    (code / "counter.py").write_text("n = 0\n")
    (code / "killer.py").write_text("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n")
    (tmp_path / "work").mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join([str(code), *sys.path]),
        "TASK_ENV": "from-the-image",
    }
    srv = ForkServer(env, str(tmp_path / "work"), str(tmp_path / "server.log"), ("json",))
    yield srv, tmp_path
    srv.close()


def test_a_task_runs_as_python_dash_m_in_the_servers_environment(server) -> None:
    srv, tmp = server
    log = tmp / "a.log"
    assert srv.run("task_mod", ["x", "--flag=1"], str(log), None) == 0
    text = log.read_text()
    assert f"argv ['x', '--flag=1'] cwd {tmp / 'work'} env from-the-image n 1" in text
    assert "stdin ''" in text  # not the server's protocol channel
    # A second task starts from the server's state, not the first task's.
    assert srv.run("task_mod", ["y"], str(tmp / "b.log"), None) == 0
    assert "n 1" in (tmp / "b.log").read_text()


def test_exit_codes_and_tracebacks_are_the_tasks(server) -> None:
    srv, tmp = server
    assert srv.run("task_mod", ["exit3"], str(tmp / "c.log"), None) == 3
    assert srv.run("task_mod", ["fail"], str(tmp / "d.log"), None) == 1
    text = (tmp / "d.log").read_text()
    assert "Traceback" in text and "RuntimeError: task failed on purpose" in text
    assert srv.run("no_such_module", [], str(tmp / "e.log"), None) == 1
    assert "No module named no_such_module" in (tmp / "e.log").read_text()
    # The server outlives its failed tasks.
    assert srv.run("task_mod", ["ok"], str(tmp / "f.log"), None) == 0


def test_verbose_streams_the_tasks_output(server) -> None:
    srv, tmp = server
    out = io.BytesIO()
    out.buffer = out  # what sys.stdout.buffer is to the handler
    assert srv.run("task_mod", ["z"], str(tmp / "g.log"), out) == 0
    assert b"argv ['z']" in out.getvalue()


def test_verbose_shows_what_a_task_wrote_before_its_start_returned(tmp_path) -> None:
    """A task quick enough to write before `popen` returns: its lines are streamed too
    (the tail starts at the log's size before the task, not after its start)."""
    from types import SimpleNamespace

    def popen(args, stdout, **_):
        stdout.write(b"early line\n")  # written before the caller gets the task
        stdout.flush()
        return SimpleNamespace(wait=lambda timeout: 0)

    srv = ForkServer({}, str(tmp_path), str(tmp_path / "server.log"), ())
    srv._live_server = lambda: SimpleNamespace(popen=popen)  # type: ignore[method-assign]
    (tmp_path / "t.log").write_bytes(b"an earlier task\n")
    out = io.BytesIO()
    assert srv.run("quick", [], str(tmp_path / "t.log"), out) == 0
    assert out.getvalue() == b"early line\n"


def test_a_dead_server_is_an_error_naming_its_log(server) -> None:
    srv, tmp = server
    assert srv.run("task_mod", ["x"], str(tmp / "h.log"), None) == 0
    srv._server._proc.kill()
    srv._server._proc.wait()
    # The next task starts a new server (a server that died between tasks is replaced).
    assert srv.run("task_mod", ["x"], str(tmp / "i.log"), None) == 0
    # One that dies during a task fails it, naming the server's log.
    with pytest.raises(ForkServerError, match="exited -9 during task killer.*server.log"):
        srv.run("killer", [], str(tmp / "j.log"), None)


def test_a_server_that_cannot_start_names_its_log(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join(sys.path)}
    srv = ForkServer(env, str(tmp_path), str(tmp_path / "s.log"), ("no_such_preload",))
    with pytest.raises(ForkServerError, match="s.log"):
        srv.run("json", [], None, None)
    srv.close()
    assert "No module named 'no_such_preload'" in (tmp_path / "s.log").read_text()


def test_a_task_whose_server_dies_is_a_failed_task_with_the_reason_in_its_log(server) -> None:
    from kfp.local import status

    from kubeflow.local.task_handler import ForkedTaskHandler

    srv, tmp = server
    log = tmp / "task.log"
    handler = ForkedTaskHandler(
        "img", ["python", "-m", "killer"], str(tmp), log_path=str(log), server=srv
    )
    handler.command = lambda: [sys.executable, "-m", "killer"]  # no image path mapping here
    assert handler.run() == status.Status.FAILURE and handler.returncode == -1
    assert "fork server exited -9 during task killer" in log.read_text()


def test_the_real_server_gives_its_tasks_tfxps_beam_caches(tmp_path: Path) -> None:
    """The default preload ends with the Beam plugin; a task sees the caches installed
    (the server here skips the TFX entrypoints: they are not what is tested)."""
    from kubeflow.local.forked_tasks import PRELOAD

    plugin = PRELOAD[-1]
    assert plugin == "runtime.beam_speedups_plugin"
    code = tmp_path / "code"
    code.mkdir()
    (code / "check_caches.py").write_text(
        "import sys\n"
        "from apache_beam.transforms import core, userstate\n"
        "from runtime import beam_speedups\n"
        "sys.exit(0 if userstate.get_dofn_specs is beam_speedups.cached_dofn_specs\n"
        "         and core.get_function_args_defaults is beam_speedups.cached_args_defaults\n"
        "         else 5)\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join([str(code), *sys.path])}
    srv = ForkServer(env, str(tmp_path), str(tmp_path / "server.log"), (plugin,))
    try:
        assert srv.run("check_caches", [], str(tmp_path / "task.log"), None) == 0
    finally:
        srv.close()


def test_a_task_exits_as_python_would_without_the_teardown(server) -> None:
    """Buffered output, atexit handlers and non-daemon threads all finish first;
    sys.exit("message") prints it and exits 1."""
    srv, tmp = server
    code = tmp / "code"
    (code / "exiting.py").write_text(
        "import atexit, sys, threading, time\n"
        "atexit.register(lambda: open(sys.argv[2], 'w').write('atexit ran'))\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        "    open(sys.argv[3], 'w').write('thread finished')\n"
        "threading.Thread(target=late).start()\n"
        "sys.stdout.write('no newline, still buffered')\n"
        "if sys.argv[1] == 'message':\n"
        "    sys.exit('stopped: a message')\n"
    )
    for how, expected in [("plain", 0), ("message", 1)]:
        log, marker, thread = tmp / f"{how}.log", tmp / f"{how}.atexit", tmp / f"{how}.thread"
        assert srv.run("exiting", [how, str(marker), str(thread)], str(log), None) == expected
        assert "no newline, still buffered" in log.read_text()
        assert marker.read_text() == "atexit ran"
        assert thread.read_text() == "thread finished"
    assert "stopped: a message" in (tmp / "message.log").read_text()
