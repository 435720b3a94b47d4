"""`tfxp engine start|status|stop` and how `tfxp run --beam spark` finds its cluster.

The fast tests use a recorded cluster whose "master" is a plain process carrying the
cluster's tag; the slow one starts a real one-worker cluster through the commands.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from beam_spark import cluster
from pipeline.beam import beam_args
from tfxp import engine
from tfxp.cli import build_parser, main
from tfxp.cli.common import beam_from_args, config_from_args


@pytest.fixture
def recorded_cluster(tmp_path, monkeypatch):
    """runs/engine/ holding a cluster whose master pid runs and carries the tag."""
    directory = tmp_path / "engine"
    directory.mkdir()
    tag = f"-D{cluster.TAG_PROPERTY}={directory}"
    master = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", tag])
    daemon = cluster.Daemon("master", master.pid, 7077, "http://127.0.0.1:9", "m.log")
    state = cluster.Cluster(
        directory=str(directory),
        master_url="spark://127.0.0.1:7077",
        web_ui="http://127.0.0.1:9",
        master=daemon,
        workers=(),
        worker_cores=1,
        worker_memory="3g",
        spark_home="",
        java="java",
        started_at=0.0,
    )
    (directory / cluster.STATE_FILE).write_text(state.to_json())
    monkeypatch.setattr(engine, "ENGINE_DIR", str(directory))
    yield state
    master.kill()
    master.wait()


def _config(*flags: str, run_dir) -> tuple[str, ...]:
    """The Beam arguments `tfxp run` would hand the run plan."""
    args = build_parser().parse_args(["run", "--run-dir", str(run_dir), *flags])
    options = beam_from_args(args, config_from_args(args))
    assert options is not None
    return beam_args(options)


def test_run_on_spark_uses_the_cluster_engine_start_left_running(recorded_cluster, tmp_path):
    args = _config("--beam", "spark", run_dir=tmp_path / "r")
    assert args[:2] == ("--runner=beam_spark.SparkRunner", "--spark_master=spark://127.0.0.1:7077")
    assert "--spark_executor_memory=3g" in args  # as large as the recorded workers offer
    # One application for the run, executors' workers forked with the TFX libraries loaded.
    assert "--spark_keep_context" in args
    assert any(a.startswith("--spark_preload=") and "tensorflow" in a for a in args)
    named = _config("--beam", "spark", "--spark-master", "local[2]", run_dir=tmp_path / "r")
    assert named[1] == "--spark_master=local[2]"
    # Threads in the component's process: no executors to size.
    assert not any(a.startswith("--spark_executor_memory=") for a in named)


def test_run_on_spark_without_a_cluster_says_how_to_start_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(engine, "ENGINE_DIR", str(tmp_path / "none"))
    assert main(["run", "--run-dir", str(tmp_path / "r"), "--beam", "spark"]) == 1
    err = capsys.readouterr().err
    assert "no Spark cluster is running from" in err
    assert "tfxp engine start spark --workers 2" in err
    assert not (tmp_path / "r").exists()


def test_a_recorded_master_that_died_is_named(recorded_cluster):
    import os
    import signal
    import time

    from beam_spark.cluster_process import alive

    os.kill(recorded_cluster.master.pid, signal.SIGKILL)
    while alive(recorded_cluster.master.pid):
        time.sleep(0.05)
    with pytest.raises(engine.EngineError, match=r"master spark://127.0.0.1:7077 .* not running"):
        engine.running_cluster()


def test_spark_master_is_only_for_the_spark_mode(tmp_path):
    with pytest.raises(ValueError, match="--spark-master is for --beam spark"):
        _config("--beam", "in-process", "--spark-master", "local[2]", run_dir=tmp_path)


def test_a_master_that_is_down_stops_the_run_before_any_component(tmp_path, capsys):
    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        url = f"spark://127.0.0.1:{s.getsockname()[1]}"
        code = main(
            ["run", "--run-dir", str(tmp_path / "r"), "--beam", "spark", "--spark-master", url]
        )
    assert code == 1
    err = capsys.readouterr().err
    assert f"the Spark master {url} does not answer" in err
    assert "tfxp engine start spark --workers 2" in err
    assert not (tmp_path / "r" / "pipeline_root").exists()


def test_status_and_stop_without_a_cluster(tmp_path, capsys):
    assert main(["engine", "status", "--dir", str(tmp_path)]) == 1
    assert "no Spark cluster recorded in" in capsys.readouterr().out
    assert main(["engine", "stop", "--dir", str(tmp_path)]) == 0
    assert "nothing to stop" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_start_status_stop(tmp_path, capsys):
    directory = tmp_path / "c"
    started = ["engine", "start", "spark", "--workers", "1", "--memory", "1g"]
    assert main([*started, "--dir", str(directory)]) == 0
    out = capsys.readouterr().out
    state = cluster.load(directory)
    try:
        assert state is not None and len(state.workers) == 1
        assert f"Spark cluster up: master {state.master_url}, web UI {state.web_ui}" in out
        assert "worker-1 registered" in out
        assert main(["engine", "status", "--dir", str(directory)]) == 0
        status = capsys.readouterr().out
        assert "worker-1" in status and "ALIVE, cores 0/1 used" in status
        assert f"--runner=beam_spark.SparkRunner --spark_master={state.master_url}" in status
    finally:
        assert main(["engine", "stop", "--dir", str(directory)]) == 0
    stopped = capsys.readouterr().out
    assert f"stopped worker-1 (pid {state.workers[0].pid})" in stopped
    assert f"stopped master (pid {state.master.pid})" in stopped
    assert cluster.load(directory) is None
    assert (directory / "logs" / "master.log").exists()
