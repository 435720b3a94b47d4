"""A standalone Spark cluster on this machine, from the installed pyspark alone.

`start(directory, workers=N)` launches a Spark master and N workers, each its own
JVM (`spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`
from pyspark's package directory, which ships Spark's jars and scripts), all
bound to 127.0.0.1 on ports they pick themselves (port 0: no race with other
servers on the machine; the ports are read back from their logs). It returns
once the master's REST API (`<web UI>/json/`) lists every worker ALIVE.

Everything lives in `directory`: `logs/` (one log per JVM), `work/worker-N/`
(each worker's executors: their stdout/stderr per application), `local/`
(shuffle and spill files) and `cluster.json`, the state (pids, ports, URLs)
that `status` and `stop` read. `stop` ends exactly the pids `start` started,
TERM then KILL, and only if the process still carries this cluster's tag in its
command line (a pid reused by another program is left alone).

Any Beam Python program runs on the cluster with `Cluster.beam_flags()`:
`--runner=beam_spark.SparkRunner --spark_master=spark://127.0.0.1:PORT`.

A library: standard library only (pyspark is found, not imported for work).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from beam_spark.cluster_api import RestError, master_json
from beam_spark.cluster_process import alive, carries_tag, log_tail

STATE_FILE = "cluster.json"
# The Debian/Ubuntu package that gives Spark 3.5 a Java (scripts/java.sh installs it).
JAVA_PACKAGE = "openjdk-17-jre-headless"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
RUNNER = "beam_spark.SparkRunner"
# In every daemon's JVM command line (SPARK_DAEMON_JAVA_OPTS), naming the cluster's
# directory: `stop` signals a recorded pid only while it still carries it.
TAG_PROPERTY = "beam_spark.cluster"
MEMORY_RE = re.compile(r"^[1-9][0-9]*[mMgG]$")
DEFAULT_TIMEOUT_S = 180.0
STOP_GRACE_S = 15.0

_MASTER_URL_RE = re.compile(r"Starting Spark master at (spark://\S+)")
_SERVICE_RE = "Successfully started service '{}' on port (\\d+)"


class ClusterError(RuntimeError):
    """The cluster cannot start, answer or stop; the message says what and where."""


@dataclass(frozen=True)
class Daemon:
    """One JVM of the cluster."""

    name: str  # "master", "worker-1", ...
    pid: int
    port: int  # its RPC port (the master's is the one in spark://...)
    web_ui: str  # http://127.0.0.1:PORT
    log: str


@dataclass(frozen=True)
class Cluster:
    """What `start` started: the state file's content."""

    directory: str
    master_url: str
    web_ui: str
    master: Daemon
    workers: tuple[Daemon, ...]
    worker_cores: int
    worker_memory: str
    spark_home: str
    java: str
    started_at: float

    @property
    def daemons(self) -> tuple[Daemon, ...]:
        return (self.master, *self.workers)

    def beam_flags(self) -> tuple[str, ...]:
        """The flags with which any Beam Python program runs on this cluster."""
        return (f"--runner={RUNNER}", f"--spark_master={self.master_url}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        raw = json.loads(text)
        raw["master"] = Daemon(**raw["master"])
        raw["workers"] = tuple(Daemon(**w) for w in raw["workers"])
        return cls(**raw)


def spark_home() -> str:
    """pyspark's package directory: Spark's jars, `bin/spark-class` and its scripts."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise ClusterError(
            "pyspark is not installed in this Python environment "
            f"({sys.executable}): install the pinned pyspark (it is in requirements.lock)"
        )
    home = os.path.dirname(spec.origin)
    if not os.path.isfile(os.path.join(home, "bin", "spark-class")):
        raise ClusterError(f"pyspark at {home} has no bin/spark-class: reinstall pyspark")
    return home


def find_java(env: Mapping[str, str] = os.environ) -> str:
    """The `java` spark-class will run (JAVA_HOME's, else PATH's) and its version line.

    Raises ClusterError naming the package to install when there is none.
    """
    home = env.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java", path=env.get("PATH"))
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={home} has no bin/java" if home else "no `java` on PATH"
        raise ClusterError(
            f"Spark needs Java 17 and {where}: install it with `apt-get install -y "
            f"{JAVA_PACKAGE}` (or `sudo scripts/java.sh install`)"
        )
    try:
        done = subprocess.run(  # noqa: S603 - the java found on PATH or JAVA_HOME, no shell
            [java, "-version"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ClusterError(f"{java} -version failed ({e}): reinstall {JAVA_PACKAGE}") from None
    version = (done.stderr or done.stdout).strip().splitlines()
    if done.returncode != 0 or not version:
        raise ClusterError(f"{java} -version failed: reinstall {JAVA_PACKAGE}")
    return f"{java} ({version[0]})"


def load(directory: str | os.PathLike) -> Cluster | None:
    """The cluster `start` left in `directory`, or None if there is none."""
    path = Path(directory) / STATE_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return Cluster.from_json(text)
    except (ValueError, TypeError, KeyError) as e:
        raise ClusterError(f"{path} is not a cluster state file ({e}): remove it") from None


def start(
    directory: str | os.PathLike,
    workers: int = 2,
    *,
    cores: int = 1,
    memory: str = "2g",
    timeout: float = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> Cluster:
    """A master and `workers` workers (each `cores` cores, `memory` for executors) in
    `directory`; returns once every worker is registered (ClusterError otherwise,
    with the log tail, and nothing left running). `env`: added to the daemons'
    environment, which executors and their Python workers inherit."""
    _check_request(workers, cores, memory)
    directory = os.path.abspath(directory)
    _refuse_running(directory)
    home = spark_home()
    daemon_env = _daemon_env(directory, home, env or {})
    java = find_java(daemon_env)
    for sub in ("logs", "work", "local"):
        os.makedirs(os.path.join(directory, sub), exist_ok=True)
    started: list[Daemon] = []
    deadline = time.monotonic() + timeout
    try:
        master = _launch_master(directory, home, daemon_env, deadline)
        started.append(master)
        url = _wait_for(master, _MASTER_URL_RE, deadline)
        progress(f"master {url} (web UI {master.web_ui}), pid {master.pid}")
        pending = [
            _spawn(
                f"worker-{i}",
                directory,
                home,
                daemon_env,
                [
                    WORKER_CLASS,
                    *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
                    *("--cores", str(cores), "--memory", memory.lower()),
                    *("--work-dir", os.path.join(directory, "work", f"worker-{i}")),
                    url,
                ],
            )
            for i in range(1, workers + 1)
        ]
        started += pending
        members = tuple(_registered(w, deadline) for w in pending)
        started[1:] = members
        _wait_alive(master, members, deadline, progress)
    except BaseException:
        _end(started)
        raise
    cluster = Cluster(
        directory=directory,
        master_url=url,
        web_ui=master.web_ui,
        master=master,
        workers=members,
        worker_cores=cores,
        worker_memory=memory.lower(),
        spark_home=home,
        java=java,
        started_at=time.time(),
    )
    state = Path(directory) / STATE_FILE
    state.with_suffix(".tmp").write_text(cluster.to_json())
    os.replace(state.with_suffix(".tmp"), state)
    return cluster


def _check_request(workers: int, cores: int, memory: str) -> None:
    if workers < 1:
        raise ClusterError(f"a cluster needs at least 1 worker, got {workers}")
    if cores < 1:
        raise ClusterError(f"each worker needs at least 1 core, got {cores}")
    if not MEMORY_RE.match(memory):
        raise ClusterError(
            f"worker memory {memory!r} is not a size Spark reads: a number and m or g, "
            "e.g. 512m or 2g"
        )


def _refuse_running(directory: str) -> None:
    cluster = load(directory)
    if cluster is None:
        return
    running = [d for d in cluster.daemons if alive(d.pid) and carries_tag(d.pid, _tag(directory))]
    if running:
        raise ClusterError(
            f"a cluster already runs from {directory} (master {cluster.master_url}, "
            f"pids {' '.join(str(d.pid) for d in running)}): stop it first"
        )
    os.remove(os.path.join(directory, STATE_FILE))  # stale: its processes are gone


def _tag(directory: str) -> str:
    return f"-D{TAG_PROPERTY}={directory}"


def _daemon_env(directory: str, home: str, extra: Mapping[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env.update(
        SPARK_HOME=home,
        # Every socket of the daemons, executors and their block managers on loopback.
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=os.path.join(directory, "local"),
        # Quoted: Spark's launcher splits these options on spaces, a folder may hold some.
        SPARK_DAEMON_JAVA_OPTS=" ".join(
            filter(None, (env.get("SPARK_DAEMON_JAVA_OPTS"), f'"{_tag(directory)}"'))
        ),
    )
    # Executors start Python workers with the driver's choice of interpreter; this
    # one only serves a driver that names none.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


def _spawn(name: str, directory: str, home: str, env: Mapping[str, str], argv: list[str]) -> Daemon:
    log = os.path.join(directory, "logs", f"{name}.log")
    with open(log, "ab") as out:
        # spark-class execs java: the pid is the JVM's own. A session of its own:
        # the cluster outlives the command that started it and ignores its Ctrl-C.
        process = subprocess.Popen(  # noqa: S603 - pyspark's own spark-class, no shell
            [os.path.join(home, "bin", "spark-class"), *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=directory,
            start_new_session=True,
        )
    return Daemon(name=name, pid=process.pid, port=0, web_ui="", log=log)


def _launch_master(directory: str, home: str, env: Mapping[str, str], deadline: float) -> Daemon:
    argv = [MASTER_CLASS, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"]
    return _registered(
        _spawn("master", directory, home, env, argv), deadline, service="sparkMaster"
    )


def _registered(daemon: Daemon, deadline: float, service: str = "sparkWorker") -> Daemon:
    """`daemon` with its RPC and web UI ports, read from its log once it has bound them."""
    ui = "MasterUI" if service == "sparkMaster" else "WorkerUI"
    port = int(_wait_for(daemon, re.compile(_SERVICE_RE.format(service)), deadline))
    ui_port = int(_wait_for(daemon, re.compile(_SERVICE_RE.format(ui)), deadline))
    return Daemon(daemon.name, daemon.pid, port, f"http://127.0.0.1:{ui_port}", daemon.log)


def _wait_for(daemon: Daemon, pattern: re.Pattern[str], deadline: float) -> str:
    """The first group of `pattern`'s first match in the daemon's log, once it appears."""
    while True:
        with contextlib.suppress(FileNotFoundError):
            match = pattern.search(Path(daemon.log).read_text(errors="replace"))
            if match:
                return match.group(1)
        if not alive(daemon.pid):
            raise ClusterError(
                f"the Spark {daemon.name} (pid {daemon.pid}) exited while starting; "
                f"{daemon.log} ends:\n{log_tail(daemon.log)}"
            )
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the Spark {daemon.name} (pid {daemon.pid}) did not start in time "
                f"(waiting for {pattern.pattern!r}); {daemon.log} ends:\n{log_tail(daemon.log)}"
            )
        time.sleep(0.2)


def _wait_alive(
    master: Daemon,
    workers: tuple[Daemon, ...],
    deadline: float,
    progress: Callable[[str], None],
) -> None:
    """Until the master lists every one of `workers` ALIVE."""
    wanted = {w.port: w for w in workers}
    seen: set[int] = set()
    while True:
        try:
            listed = master_json(master.web_ui).get("workers", [])
        except RestError:
            listed = []
        for entry in listed:
            port = entry.get("port")
            if entry.get("state") == "ALIVE" and port in wanted and port not in seen:
                seen.add(port)
                w = wanted[port]
                progress(f"{w.name} registered (web UI {w.web_ui}), pid {w.pid}")
        if len(seen) == len(wanted):
            return
        for daemon in (master, *workers):
            if not alive(daemon.pid):
                raise ClusterError(
                    f"the Spark {daemon.name} (pid {daemon.pid}) exited before every worker "
                    f"registered; {daemon.log} ends:\n{log_tail(daemon.log)}"
                )
        if time.monotonic() > deadline:
            missing = [w for p, w in wanted.items() if p not in seen]
            tails = "\n".join(f"{w.log} ends:\n{log_tail(w.log)}" for w in missing)
            raise ClusterError(
                f"{', '.join(w.name for w in missing)} did not register with the master "
                f"{master.web_ui} in time;\n{tails}"
            )
        time.sleep(0.3)


@dataclass(frozen=True)
class Status:
    """A recorded cluster now: which of its JVMs run, and what its master says."""

    cluster: Cluster
    running: tuple[Daemon, ...]
    gone: tuple[Daemon, ...]
    master: dict | None  # the master's /json/ (workers, apps), None if it did not answer
    master_error: str | None

    def alive_workers(self) -> list[dict]:
        return [w for w in (self.master or {}).get("workers", []) if w.get("state") == "ALIVE"]


def status(directory: str | os.PathLike) -> Status | None:
    """The cluster recorded in `directory` as it is now, or None if none is recorded."""
    directory = os.path.abspath(directory)
    cluster = load(directory)
    if cluster is None:
        return None
    tag = _tag(directory)
    up = [d for d in cluster.daemons if alive(d.pid) and carries_tag(d.pid, tag)]
    try:
        answer, error = master_json(cluster.web_ui), None
    except RestError as e:
        answer, error = None, str(e)
    return Status(
        cluster=cluster,
        running=tuple(up),
        gone=tuple(d for d in cluster.daemons if d not in up),
        master=answer,
        master_error=error,
    )


def stop(directory: str | os.PathLike, grace: float = STOP_GRACE_S) -> list[Daemon]:
    """Ends the daemons `start` recorded in `directory` (workers first, TERM then KILL
    after `grace` seconds) and removes the state file; returns those that were running.
    Logs and work folders stay."""
    directory = os.path.abspath(directory)
    cluster = load(directory)
    if cluster is None:
        return []
    # Workers first: a master stopped first would have them retry and log for nothing.
    running = _end((*cluster.workers, cluster.master), grace=grace, tag=_tag(directory))
    os.remove(os.path.join(directory, STATE_FILE))
    return running


def _end(daemons, grace: float = STOP_GRACE_S, tag: str | None = None) -> list[Daemon]:
    """TERM, then KILL after `grace`, for those of `daemons` still running (and, with
    `tag`, still carrying it); returns them."""
    targets = [
        d
        for d in daemons
        if d.pid > 0 and alive(d.pid) and (tag is None or carries_tag(d.pid, tag))
    ]
    for d in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(d.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(alive(d.pid) for d in targets) and time.monotonic() < deadline:
        time.sleep(0.1)
    for d in targets:
        if alive(d.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(d.pid, signal.SIGKILL)
    # A KILLed process is gone at once unless stuck in the kernel; do not hang on one.
    deadline = time.monotonic() + 10
    while any(alive(d.pid) for d in targets) and time.monotonic() < deadline:
        time.sleep(0.05)
    return targets
