"""beam_spark.cluster: a standalone Spark cluster from pyspark, its state, status and stop.

The fast tests check what is refused and why, and that `stop` never signals a pid that
is no longer the cluster's; the slow one starts a real 2-worker cluster (the session's
`spark_cluster`), runs a small Spark job on it and reads its executors' tasks back.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from beam_spark import cluster
from beam_spark.cluster_api import RestError, check_master, executor_runs, master_addresses
from beam_spark.cluster_process import alive, carries_tag, log_tail


@pytest.mark.parametrize(
    ("workers", "cores", "memory", "message"),
    [
        (0, 1, "1g", "at least 1 worker"),
        (1, 0, "1g", "at least 1 core"),
        (1, 1, "2 GB", "'2 GB' is not a size Spark reads"),
        (1, 1, "0g", "is not a size Spark reads"),
    ],
)
def test_a_request_spark_cannot_run_is_refused_before_anything_starts(
    tmp_path, workers, cores, memory, message
) -> None:
    with pytest.raises(cluster.ClusterError, match=message):
        cluster.start(tmp_path / "c", workers, cores=cores, memory=memory)
    assert not (tmp_path / "c").exists()


def test_a_missing_java_names_the_package_to_install(tmp_path) -> None:
    with pytest.raises(cluster.ClusterError, match="apt-get install -y openjdk-17-jre-headless"):
        cluster.find_java({"JAVA_HOME": str(tmp_path), "PATH": os.environ["PATH"]})
    with pytest.raises(cluster.ClusterError, match="no `java` on PATH"):
        cluster.find_java({"PATH": str(tmp_path)})


def test_spark_home_is_the_installed_pyspark() -> None:
    import pyspark

    assert cluster.spark_home() == os.path.dirname(pyspark.__file__)


def _record(directory, pid: int) -> cluster.Cluster:
    """A state file naming `pid` as the whole cluster, as `start` writes one."""
    daemon = cluster.Daemon("master", pid, 7077, "http://127.0.0.1:1", str(directory / "m.log"))
    recorded = cluster.Cluster(
        directory=str(directory),
        master_url="spark://127.0.0.1:7077",
        web_ui="http://127.0.0.1:1",
        master=daemon,
        workers=(),
        worker_cores=1,
        worker_memory="1g",
        spark_home="/nowhere",
        java="java",
        started_at=0.0,
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / cluster.STATE_FILE).write_text(recorded.to_json())
    return recorded


def test_the_state_file_round_trips(tmp_path) -> None:
    recorded = _record(tmp_path, 12345)
    assert cluster.load(tmp_path) == recorded
    assert recorded.beam_flags() == (
        "--runner=beam_spark.SparkRunner",
        "--spark_master=spark://127.0.0.1:7077",
    )
    (tmp_path / cluster.STATE_FILE).write_text("{not json")
    with pytest.raises(cluster.ClusterError, match="is not a cluster state file"):
        cluster.load(tmp_path)


def test_stop_leaves_alone_a_pid_that_is_no_longer_the_clusters(tmp_path) -> None:
    # The recorded pid now belongs to a process without the cluster's tag (reused).
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _record(tmp_path, other.pid)
        assert cluster.stop(tmp_path, grace=1) == []
        assert other.poll() is None, "stop signalled a process that is not the cluster's"
        assert cluster.load(tmp_path) is None
    finally:
        other.kill()
        other.wait()


def test_stop_ends_a_tagged_process_that_ignores_term_with_kill(tmp_path) -> None:
    tag = f"-D{cluster.TAG_PROPERTY}={tmp_path}"
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)",
            tag,
        ]
    )
    try:
        _record(tmp_path, stubborn.pid)
        # Until the child has set SIGTERM aside (and, on a busy machine, shows its arguments).
        deadline = time.monotonic() + 30
        while not _ignores_term(stubborn.pid):
            assert time.monotonic() < deadline, _status(stubborn.pid)
            time.sleep(0.05)
        assert carries_tag(stubborn.pid, tag)
        stopped = cluster.stop(tmp_path, grace=0.5)
        assert [d.pid for d in stopped] == [stubborn.pid]
        # (stop reaped it, so Popen cannot see its KILL status)
        assert not alive(stubborn.pid)
    finally:
        stubborn.kill()


def _status(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return f.read()
    except OSError:
        return ""


def _ignores_term(pid: int) -> bool:
    """Whether SIGTERM (15: bit 14 of the SigIgn mask) is ignored by `pid`."""
    line = next((x for x in _status(pid).splitlines() if x.startswith("SigIgn:")), "SigIgn: 0")
    return bool(int(line.split()[1], 16) & (1 << (15 - 1)))


def test_a_state_whose_processes_are_gone_is_replaced_not_refused(tmp_path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _record(tmp_path, gone.pid)
    status = cluster.status(tmp_path)
    assert status is not None and status.running == () and status.master_error
    cluster._refuse_running(str(tmp_path))
    assert cluster.load(tmp_path) is None


def test_master_urls_and_a_master_that_is_down() -> None:
    assert master_addresses("spark://h:7077") == [("h", 7077)]
    assert master_addresses("spark://a:1,b:2") == [("a", 1), ("b", 2)]
    assert master_addresses("local[2]") == []
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        master_addresses("spark://nohost")
    with socket.socket() as s:  # a port nothing listens on (bound, never listening)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(RestError, match=f"spark://127.0.0.1:{port} does not answer"):
            check_master(f"spark://127.0.0.1:{port}", timeout=2)
    check_master("local[2]")  # nothing to check


def test_executor_runs_are_read_from_the_workers_logs(tmp_path) -> None:
    for worker, executor, tasks in (("worker-1", "0", 3), ("worker-2", "1", 2)):
        log = tmp_path / worker / "app-1-0000" / executor / "stderr"
        log.parent.mkdir(parents=True)
        lines = [
            f"26/12/05 22:27:36 INFO Executor: Finished task {t}.0 in stage 0.0 (TID {t}). "
            "1410 bytes result sent to driver"
            for t in range(tasks)
        ]
        # The last line again after a garbled fragment, as a worker's copy of a stopped
        # executor's stderr can hold it: one task, counted once.
        garbled = [" 131, finish = 0", lines[-1]]
        log.write_text(
            "\n".join(["INFO Executor: Running task 9.0 in stage 0.0", *lines, *garbled])
        )
    runs = executor_runs(tmp_path)
    assert [(r.worker, r.executor_id, r.tasks) for r in runs] == [
        ("worker-1", "0", 3),
        ("worker-2", "1", 2),
    ]
    assert executor_runs(tmp_path, ["app-other"]) == []


def test_log_tail_is_the_last_lines_or_says_why_not(tmp_path) -> None:
    log = tmp_path / "x.log"
    log.write_text("\n".join(str(i) for i in range(100)))
    assert log_tail(str(log), 2) == "    98\n    99"
    assert "cannot read" in log_tail(str(tmp_path / "missing.log"))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_two_worker_cluster_runs_spark_tasks_on_both_workers(spark_cluster) -> None:
    status = cluster.status(spark_cluster.directory)
    assert status is not None
    assert {d.name for d in status.running} == {"master", "worker-1", "worker-2"}
    assert len(status.alive_workers()) == 2
    for daemon in spark_cluster.daemons:  # each its own JVM, listening on loopback only
        assert daemon.web_ui.startswith("http://127.0.0.1:")
        assert _listening(daemon.pid) == {"127.0.0.1"}, daemon

    app = _run_spark_job(spark_cluster.master_url)
    runs = executor_runs(os.path.join(spark_cluster.directory, "work"), [app])
    assert {r.worker for r in runs if r.tasks} == {"worker-1", "worker-2"}
    assert sum(r.tasks for r in runs) == 8
    finished = cluster.status(spark_cluster.directory).master["completedapps"]
    assert [a["state"] for a in finished if a["id"] == app] == ["FINISHED"]


def _listening(pid: int) -> set[str]:
    import psutil

    listening = psutil.Process(pid).net_connections(kind="inet")
    # A JVM's IPv4 sockets show as IPv4-mapped IPv6 (::ffff:127.0.0.1).
    return {c.laddr.ip.removeprefix("::ffff:") for c in listening if c.status == "LISTEN"}


def _run_spark_job(master: str) -> str:
    """A job of 8 tasks, in a process of its own (a SparkContext is one per process);
    its application id."""
    code = (
        "import sys\n"
        "from pyspark import SparkConf, SparkContext\n"
        "conf = SparkConf().setMaster(sys.argv[1]).setAppName('cluster-test')"
        ".set('spark.ui.enabled', 'false').set('spark.executor.memory', '512m')\n"
        "sc = SparkContext(conf=conf)\n"
        "sc.setLogLevel('ERROR')\n"
        "assert sc.parallelize(range(1000), 8).map(lambda x: x * 2).sum() == 999000\n"
        "print(sc.applicationId)\n"
        "sc.stop()\n"
    )
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    done = subprocess.run(
        [sys.executable, "-c", code, master], capture_output=True, text=True, env=env, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]
